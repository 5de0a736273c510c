// The history view (history_view.hpp).
#include "runtime/history_view.hpp"

#include "runtime/turn_runner.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "agentrt/records.hpp"
#include "agentrt/summary.hpp"
#include "runtime/context_builder.hpp"
#include "runtime/event_wire.hpp"
#include "util/crypto.hpp"
#include "util/json_fast.hpp"

namespace agentrt {
inline namespace v1 {

using namespace turn;

HistoryView::HistoryView(Runtime::Impl& rt) : rt_(rt) {}

std::vector<Message> HistoryView::history(std::string_view thread_id) {
  auto out = rt_.cfg.store->thread_messages(thread_id);
  for (auto& m : out) view(m);
  return out;
}

void HistoryView::view(Message& m) {
  if (m.role == Role::user) rt_.attachments.resign_parts(m);
  if (m.role == Role::tool) rt_.attachments.resign_media(m);
  if (m.role == Role::tool && m.metadata.is_object() && rt_.cfg.objects) {
    const std::string path = m.metadata.value("storage_path", "");
    const std::string sha = m.metadata.value("payload_sha256", "");
    // A payload stored with payload_has_ui=false has no card to show: the summary is the whole view. A
    // row without the flag (written before it existed) reads the payload as before.
    const auto has_ui = m.metadata.find("payload_has_ui");
    const bool no_ui = has_ui != m.metadata.end() && has_ui->is_boolean() && !has_ui->get<bool>();
    if (!path.empty() && !no_ui) {
      try {
        auto bytes = rt_.cfg.objects->get(path);
        if (bytes && crypto::sha256_hex(*bytes) == sha) {
          json payload = parse_json_or_discarded(*bytes);
          if (payload.is_object() && payload.contains("ui") && payload["ui"].is_object())
            m.metadata["ui"] = payload["ui"];
        } else {
          rt_.log(LogLevel::warn, "history",
                  fmt::format("tool payload {} is missing or does not match its sha256", path));
        }
      } catch (const std::exception& e) {
        rt_.log(LogLevel::warn, "history", fmt::format("tool payload {} unreadable: {}", path, e.what()));
      }
    }
  }
}

}  // namespace v1
}  // namespace agentrt
