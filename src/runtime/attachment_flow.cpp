// The attachment flow (attachment_flow.hpp).
#include "runtime/attachment_flow.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "agentrt/attachments.hpp"
#include "runtime/runtime_impl.hpp"
#include "util/crypto.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr const char* kStoredProvider = "agentrt";

bool is_stored(const ContentPart& p) {
  return p.is_media() && p.source && p.source->type == "file" && p.source->provider == kStoredProvider;
}

// The stored form of a media part: bucket, path and mime only.
ContentPart stored_part(const ContentPart& in, const std::string& bucket, const std::string& key,
                        const std::string& mime) {
  ContentPart p;
  p.type = in.type;
  p.id = in.id;
  p.source = PartSource{"file", key, mime, kStoredProvider};
  json meta = in.metadata.is_object() ? in.metadata : json::object();
  meta["storage_bucket"] = bucket;
  meta["storage_path"] = key;
  meta["ref"] = image_ref_id(bucket, key);
  p.metadata = std::move(meta);
  return p;
}

std::string media_type_of(const std::string& mime) {
  if (mime.rfind("image/", 0) == 0) return "image";
  if (mime.rfind("audio/", 0) == 0) return "audio";
  if (mime.rfind("video/", 0) == 0) return "video";
  return "document";
}

}  // namespace

AttachmentFlow::AttachmentFlow(Runtime::Impl& rt) : rt_(rt) {}

Upload AttachmentFlow::upload(std::string_view user_id, std::string_view thread_id, std::string_view bytes,
                              std::string_view mime_type) {
  if (!rt_.cfg.objects) throw Error(ErrorCode::unsupported, "uploads need an object store (config: objects)");
  require_id(user_id, "user id");
  require_id(thread_id, "thread id");
  if (auto t = rt_.cfg.store->get_thread(thread_id); t && (t->user_id != user_id || t->deleted))
    throw Error(ErrorCode::not_found, fmt::format("thread {} not found", thread_id));
  const std::string mime = normalize_mime(mime_type);
  check_attachment(mime, bytes.size(), rt_.cfg.attachment_limits);
  Upload u;
  u.id = new_id("up");
  u.bucket = rt_.cfg.objects->bucket();
  u.key = upload_key(user_id, thread_id, u.id);  // validates both ids as key segments
  rt_.cfg.objects->put(u.key, bytes, mime);
  u.mime_type = mime;
  u.size = bytes.size();
  u.expires_at = now_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(rt_.cfg.signed_url_ttl).count();
  u.url = rt_.cfg.objects->sign_url(u.key, u.expires_at);
  u.ref = image_ref_id(u.bucket, u.key);
  return u;
}

Message AttachmentFlow::store_input_parts(const std::string& user_id, const std::string& thread_id, Message msg,
                                          std::vector<std::string>& written) {
  try {
    return store_parts(user_id, thread_id, std::move(msg), written);
  } catch (...) {
    // A part further on was refused: the inline data stored for the parts before it goes again.
    for (const auto& key : written) {
      try {
        rt_.cfg.objects->remove(key);
      } catch (const std::exception& e) {
        rt_.log(LogLevel::warn, "objects", fmt::format("upload {} not removed: {}", key, e.what()));
      }
    }
    written.clear();
    throw;
  }
}

Message AttachmentFlow::store_parts(const std::string& user_id, const std::string& thread_id, Message msg,
                                    std::vector<std::string>& written) {
  size_t media = 0;
  for (auto& part : msg.parts) {
    if (!part.is_media()) continue;
    if (++media > rt_.cfg.max_attachments)
      throw Error(ErrorCode::too_large,
                  fmt::format("a message may carry at most {} attachments", rt_.cfg.max_attachments));
    if (!rt_.cfg.objects) throw Error(ErrorCode::unsupported, "attachments need an object store (config: objects)");
    if (!part.source) throw Error(ErrorCode::invalid_argument, fmt::format("{} part without a source", part.type));
    const PartSource& src = *part.source;
    const std::string bucket = rt_.cfg.objects->bucket();
    if (src.type == "data") {
      std::string bytes;
      try {
        bytes = crypto::base64_decode(src.value);
      } catch (const Error&) {
        throw Error(ErrorCode::invalid_argument, fmt::format("{} part: data is not valid base64", part.type));
      }
      Upload u = upload(user_id, thread_id, bytes, src.mime_type);
      written.push_back(u.key);
      part = stored_part(part, bucket, u.key, u.mime_type);
      part.type = media_type_of(u.mime_type);
    } else if (src.type == "url") {
      // Only this deployment's own signed URL for this user's thread: anything else is never fetched.
      std::string key;
      try {
        key = rt_.cfg.objects->verify_url(src.value, now_ms());
      } catch (const Error& e) {
        throw Error(ErrorCode::invalid_argument,
                    fmt::format("{} part: the url is not an accepted attachment URL ({})", part.type, e.what()));
      }
      if (!key_belongs_to(key, user_id, thread_id))
        throw Error(ErrorCode::invalid_argument,
                    fmt::format("{} part: the url does not belong to this user's thread", part.type));
      auto info = rt_.cfg.objects->head(key);
      if (!info)
        throw Error(ErrorCode::invalid_argument, fmt::format("{} part: the attachment no longer exists", part.type));
      const std::string mime = normalize_mime(info->content_type);
      check_attachment(mime, info->size, rt_.cfg.attachment_limits);
      part = stored_part(part, bucket, key, mime);
    } else {  // "file": an upload id of this thread
      require_id(src.value, fmt::format("{} part: upload id", part.type));
      const std::string key = upload_key(user_id, thread_id, src.value);
      auto info = rt_.cfg.objects->head(key);
      if (!info)
        throw Error(ErrorCode::invalid_argument, fmt::format("{} part: upload '{}' not found", part.type, src.value));
      const std::string mime = normalize_mime(info->content_type);
      check_attachment(mime, info->size, rt_.cfg.attachment_limits);
      part = stored_part(part, bucket, key, mime);
    }
  }
  return msg;
}

void AttachmentFlow::resign_parts(Message& m) const {
  if (!rt_.cfg.objects) return;
  const int64_t expires =
      now_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(rt_.cfg.signed_url_ttl).count();
  for (auto& p : m.parts) {
    if (!is_stored(p)) continue;
    p.source = PartSource{"url", rt_.cfg.objects->sign_url(p.source->value, expires), p.source->mime_type, ""};
  }
}

json AttachmentFlow::store_tool_media(const std::string& user_id, const std::string& thread_id,
                                      std::vector<ToolMedia> media, std::vector<std::string>& written) {
  json out = json::array();
  for (size_t i = 0; i < media.size(); ++i) {
    auto& f = media[i];
    const std::string mime = normalize_mime(f.mime_type);
    json entry = {{"type", media_type_of(mime)}, {"mimeType", mime}};
    if (i >= rt_.cfg.max_attachments) {
      entry["error"] = fmt::format("a tool result may carry at most {} files", rt_.cfg.max_attachments);
    } else {
      try {
        Upload u = upload(user_id, thread_id, f.bytes, mime);
        written.push_back(u.key);
        entry["ref"] = u.ref;
        entry["storage_bucket"] = u.bucket;
        entry["storage_path"] = u.key;
      } catch (const Error& e) {
        entry["error"] = e.message();
      }
    }
    if (entry.contains("error"))
      rt_.log(LogLevel::warn, "objects",
              fmt::format("a tool's {} file was not stored: {}", mime, entry["error"].get<std::string>()));
    out.push_back(std::move(entry));
    std::string().swap(f.bytes);
  }
  return out;
}

void AttachmentFlow::resign_media(Message& m) const {
  if (!rt_.cfg.objects || m.role != Role::tool || !m.metadata.is_object() || !m.metadata.contains("media")) return;
  const int64_t expires =
      now_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(rt_.cfg.signed_url_ttl).count();
  for (auto& e : m.metadata["media"])
    if (e.is_object() && e.contains("storage_path") && e["storage_path"].is_string()) {
      e["url"] = rt_.cfg.objects->sign_url(e["storage_path"].get<std::string>(), expires);
      e["expiresAt"] = expires;
    }
}

namespace {

// Whether a tool message lists files of its tool's result (metadata.media).
bool has_tool_media(const Message& m) {
  return m.role == Role::tool && m.metadata.is_object() && m.metadata.contains("media") &&
         m.metadata["media"].is_array();
}

// The images of tool results, for the model: after each run of tool messages, a user message that shows them (a
// tool message carries text only, and nothing may come between the tool messages of one answer).
void show_tool_media(std::vector<Message>& messages) {
  // Most requests have none: their messages stay where they are (the stage reuses them for its next request).
  if (std::none_of(messages.begin(), messages.end(), has_tool_media)) return;
  std::vector<Message> out;
  out.reserve(messages.size());
  std::vector<ContentPart> pending;
  auto flush = [&] {
    if (pending.empty()) return;
    Message m;
    m.id = new_id("msg");
    m.role = Role::user;
    m.parts.push_back(ContentPart::make_text("Files from the tool results above:"));
    for (auto& p : pending) m.parts.push_back(std::move(p));
    pending.clear();
    out.push_back(std::move(m));
  };
  for (auto& m : messages) {
    if (m.role != Role::tool) flush();
    if (has_tool_media(m)) {
      const std::string tool = m.metadata.value("tool_name", "");
      for (const auto& e : m.metadata["media"]) {
        if (!e.is_object() || !e.contains("storage_path") || e.value("type", "") != "image") continue;
        ContentPart p;
        p.type = "image";
        p.source =
            PartSource{"file", e.value("storage_path", ""), e.value("mimeType", ""), std::string(kStoredProvider)};
        p.metadata = json{{"ref", e.value("ref", "") + (tool.empty() ? "" : " from " + tool)}};
        pending.push_back(std::move(p));
      }
    }
    out.push_back(std::move(m));
  }
  flush();
  messages = std::move(out);
}

}  // namespace

void AttachmentFlow::media_for_model(std::vector<Message>& messages, std::map<std::string, std::string>& cache) const {
  if (rt_.cfg.objects) show_tool_media(messages);
  for (auto& m : messages) {
    if (m.parts.empty()) continue;
    std::vector<ContentPart> out;
    for (auto& p : m.parts) {
      if (!is_stored(p)) {
        out.push_back(std::move(p));
        continue;
      }
      const std::string key = p.source->value;
      const std::string ref = p.metadata.is_object() ? p.metadata.value("ref", "") : "";
      out.push_back(ContentPart::make_text(fmt::format("[{} {}]", p.type, ref)));
      ContentPart media;
      media.type = p.type;
      if (rt_.cfg.model_images_as_urls && p.type == "image") {
        const int64_t expires =
            now_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(rt_.cfg.signed_url_ttl).count();
        media.source = PartSource{"url", rt_.cfg.objects->sign_url(key, expires), p.source->mime_type, ""};
      } else {
        auto it = cache.find(key);
        if (it == cache.end()) {
          auto bytes = rt_.cfg.objects ? rt_.cfg.objects->get(key) : std::nullopt;
          if (!bytes) {
            out.back().text += " (the file is no longer available)";
            continue;
          }
          it = cache.emplace(key, crypto::base64_encode(*bytes)).first;
        }
        media.source = PartSource{"data", it->second, p.source->mime_type, ""};
      }
      out.push_back(std::move(media));
    }
    m.parts = std::move(out);
  }
}

std::vector<AttachmentRef> AttachmentFlow::attachments_named(const json& args,
                                                             const std::vector<MessageRecord>& history) const {
  std::vector<AttachmentRef> out;
  if (!rt_.cfg.objects) return out;
  std::vector<std::string> named;
  auto scan = [&](const json& j, auto&& self) -> void {
    if (j.is_string()) {
      const auto& s = j.get_ref<const std::string&>();
      for (size_t pos = s.find("img_"); pos != std::string::npos; pos = s.find("img_", pos + 4))
        named.push_back(s.substr(pos, 20));
    } else if (j.is_structured()) {
      for (const auto& v : j) self(v, self);
    }
  };
  scan(args, scan);
  if (named.empty()) return out;
  const int64_t expires =
      now_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(rt_.cfg.signed_url_ttl).count();
  for (const auto& rec : history) {
    if (rec.message.role != Role::user) continue;
    for (const auto& p : rec.message.parts) {
      if (!is_stored(p) || !p.metadata.is_object()) continue;
      const std::string ref = p.metadata.value("ref", "");
      if (std::find(named.begin(), named.end(), ref) == named.end()) continue;
      bool seen = false;
      for (const auto& a : out) seen = seen || a.ref == ref;
      if (seen) continue;
      out.push_back(AttachmentRef{ref, p.metadata.value("storage_bucket", ""), p.source->value, p.source->mime_type,
                                  rt_.cfg.objects->sign_url(p.source->value, expires)});
    }
  }
  return out;
}

Upload Runtime::upload(std::string_view user_id, std::string_view thread_id, std::string_view bytes,
                       std::string_view mime_type) {
  return impl_->attachments.upload(user_id, thread_id, bytes, mime_type);
}

}  // namespace v1
}  // namespace agentrt
