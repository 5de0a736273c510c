// The attachment flow: user attachments through a turn. On the way in each media part is validated (its kind,
// size and source: inline data becomes an upload, a URL is accepted only when it is this deployment's own
// signed URL for the same user and thread, never fetched) and stored as bucket/path/mime; history shows them
// with fresh signed URLs; the model gets the bytes (or a signed URL) and a text naming the ref, never the
// path; tools get the attachments their arguments name. Thread-safe: no state of its own.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/attachments.hpp"
#include "agentrt/content.hpp"
#include "agentrt/runtime.hpp"
#include "agentrt/storage.hpp"

namespace agentrt {
inline namespace v1 {

class AttachmentFlow {
 public:
  explicit AttachmentFlow(Runtime::Impl& rt);

  // Validates the input's media parts and stores each as bucket/path/mime (inline data becomes an upload).
  // `written`: the keys of the objects it stored (removed again if it throws; the caller removes them when
  // the turn that carries them is not stored).
  Message store_input_parts(const std::string& user_id, const std::string& thread_id, Message msg,
                            std::vector<std::string>& written);
  Upload upload(std::string_view user_id, std::string_view thread_id, std::string_view bytes,
                std::string_view mime_type);
  // History view of stored parts: a fresh signed URL in place of the path.
  void resign_parts(Message& m) const;
  // Model view of stored parts: the bytes (or a signed URL) and a text naming the ref, never the path.
  void media_for_model(std::vector<Message>& messages, std::map<std::string, std::string>& cache) const;
  // Stores the files a tool produced as uploads of the thread; the tool message's metadata.media: [{type, mimeType,
  // ref, storage_bucket, storage_path}] (a file that cannot be stored: {type, mimeType, error}). `written`: keys.
  json store_tool_media(const std::string& user_id, const std::string& thread_id, std::vector<ToolMedia> media,
                        std::vector<std::string>& written);
  // History view of a tool message's metadata.media: a fresh signed url for each stored file.
  void resign_media(Message& m) const;
  // The attachments of the thread that a tool call's arguments name by ref.
  std::vector<AttachmentRef> attachments_named(const json& args, const std::vector<MessageRecord>& history) const;

 private:
  Message store_parts(const std::string& user_id, const std::string& thread_id, Message msg,
                      std::vector<std::string>& written);
  Runtime::Impl& rt_;
};

}  // namespace v1
}  // namespace agentrt
