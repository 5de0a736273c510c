// The filesystem object store's metadata sidecars (fs_object_meta.hpp).
#include "store/fs_object_meta.hpp"

#include "agentrt/json.hpp"
#include "store/fs_files.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr std::string_view kLegacyMagic = "AGENTRT-OBJECT/1\n";

json meta_json(const ObjectMeta& m) {
  return json{{"content_type", m.content_type}, {"sha256", m.sha256}, {"size", m.size}, {"mtime_ns", m.mtime_ns}};
}

std::optional<ObjectMeta> meta_of(const json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto type = j.find("content_type");
  const auto sha = j.find("sha256");
  const auto size = j.find("size");
  const auto mtime = j.find("mtime_ns");
  if (type == j.end() || !type->is_string() || sha == j.end() || !sha->is_string() || size == j.end() ||
      !size->is_number_unsigned() || mtime == j.end() || !mtime->is_number_integer()) {
    return std::nullopt;
  }
  return ObjectMeta{type->get<std::string>(), sha->get<std::string>(), size->get<uint64_t>(), mtime->get<int64_t>()};
}

bool fits(const ObjectMeta& m, const struct stat& st) {
  return m.size == static_cast<uint64_t>(st.st_size) && m.mtime_ns == fsfiles::mtime_ns(st);
}

}  // namespace

std::string encode_sidecar(const Sidecar& sidecar) {
  json j = meta_json(sidecar.current);
  if (sidecar.previous) j["previous"] = meta_json(*sidecar.previous);
  return j.dump() + "\n";
}

std::optional<Sidecar> decode_sidecar(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  auto current = meta_of(j);
  if (!current) return std::nullopt;
  Sidecar out{std::move(*current), std::nullopt};
  if (const auto prev = j.find("previous"); prev != j.end()) {
    out.previous = meta_of(*prev);
    if (!out.previous) return std::nullopt;
  }
  return out;
}

SidecarMatch match_sidecar(const Sidecar& sidecar, const struct stat& st) {
  const bool current = fits(sidecar.current, st);
  const bool previous = sidecar.previous && fits(*sidecar.previous, st);
  if (current != previous) return SidecarMatch{current ? sidecar.current : *sidecar.previous, false};
  return SidecarMatch{std::nullopt, true};
}

std::optional<ObjectMeta> match_sidecar_by_hash(const Sidecar& sidecar, uint64_t size, std::string_view sha256) {
  if (sidecar.current.size == size && sidecar.current.sha256 == sha256) return sidecar.current;
  if (sidecar.previous && sidecar.previous->size == size && sidecar.previous->sha256 == sha256) return sidecar.previous;
  return std::nullopt;
}

std::optional<LegacyHeader> parse_legacy_header(std::string_view prefix, uint64_t file_size) {
  if (prefix.substr(0, kLegacyMagic.size()) != kLegacyMagic) return std::nullopt;
  const size_t end = prefix.find('\n', kLegacyMagic.size());
  if (end == std::string_view::npos) return std::nullopt;
  json meta = json::parse(prefix.substr(kLegacyMagic.size(), end - kLegacyMagic.size()), nullptr, false);
  if (!meta.is_object()) return std::nullopt;
  meta["mtime_ns"] = 0;
  auto parsed = meta_of(meta);
  if (!parsed || end + 1 + parsed->size != file_size) return std::nullopt;
  return LegacyHeader{std::move(*parsed), end + 1};
}

}  // namespace v1
}  // namespace agentrt
