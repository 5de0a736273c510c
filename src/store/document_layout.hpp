// DocumentLayout: the conversation-document message layout. A thread's history messages live as one JSON
// document in an ObjectStore, named by a pointer row in a database of the layout's own; the store it belongs
// to (internal) keeps everything else.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/storage.hpp"
#include "store/message_layout.hpp"

namespace agentrt {
inline namespace v1 {

// The object-key prefix this layout owns. Nothing else may write under it: uploads live under
// "agent-inputs/", tool payloads under "agent-outputs/", and signed URLs only ever grant GET, so no client
// can write (or overwrite) a conversation document.
inline constexpr std::string_view kConversationPrefix = "agent-conversations/";

// "agent-conversations/{thread_id}/v{version}.json". Throws Error(invalid_argument) for a thread id that is
// not 1-128 characters of A-Z a-z 0-9 _ - . : or that is "." / ".." or starts with ".agentrt-" (a key
// built from it could leave the prefix or collide with an object store's temporary files).
std::string conversation_document_key(std::string_view thread_id, int64_t version);

// The pointer row of a thread: which document holds its messages.
struct ConversationDocument {
  std::string thread_id;
  std::string key;         // the current document's object key
  int64_t version = 0;     // bumped by every document write; compare-and-set key
  uint64_t bytes = 0;      // the document's size
  int64_t messages = 0;    // messages in it
  int64_t updated_at = 0;  // ms
};

// The pointer rows of the layout (one per thread, naming its current document) and the one write lock every
// commit of every thread holds, across threads and processes. Not thread-safe: the layout's mutexes guard each.
class DocumentPointers {
 public:
  virtual ~DocumentPointers() = default;
  // Takes the write lock (a transaction that holds it until commit() or rollback()).
  virtual void begin() = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  // The thread's pointer row, or nullopt.
  virtual std::optional<ConversationDocument> pointer(std::string_view thread_id) = 0;
  // The compare-and-set: `d` becomes the thread's pointer only if its version is still `expected` (0: no row
  // yet). Error(conflict) otherwise.
  virtual void swap_pointer(const ConversationDocument& d, int64_t expected) = 0;
};

struct DocumentLayoutOptions {
  // The pointer database (SQLite, WAL): one row per thread naming its current document. Its own file, next
  // to the store's (e.g. "<data>/agentrt.db.docs"); ":memory:" only for single-instance tests.
  std::string path;
  // Pointer rows elsewhere instead (the PostgreSQL store's own database, so that processes on several
  // machines share them): called once for the writer's and once for the reader's connection. `path` and
  // `synchronous` are then unused.
  std::function<std::unique_ptr<DocumentPointers>(bool writer)> pointers;
  // Largest document written or read. A write that would make a thread's document larger is refused with
  // Error(too_large) and changes nothing; a larger document already stored (the cap was lowered) is refused
  // on read with Error(too_large) naming its size. A document of exactly this size is fine.
  uint64_t max_document_bytes = 2 * 1024 * 1024;
  std::string synchronous = "NORMAL";  // NORMAL | FULL | OFF, as SqliteStoreOptions::synchronous
  int busy_timeout_ms = 10000;         // how long a writer waits for another process's commit
};

// Messages go to versioned documents in `objects`, everything else to the store (whose own messages table
// stays empty). A commit is all-or-nothing as seen through the store:
//  1. Under the pointer database's write lock (BEGIN IMMEDIATE: one committer at a time across threads and
//     processes; the process-local mutex in front of it keeps threads from spinning on SQLite's busy
//     handler), it reads the thread's pointer (version N), the document, and appends the batch's messages.
//  2. It writes the new document under the fresh key v{N+1} with put_if_absent. The document names the
//     rest of the batch (a "commit proof": a digest of its events at the sequence numbers they will get, or
//     the turn version / approval / ledger rows it writes).
//  3. It commits the batch without its messages in the store's transaction. This is the commit point.
//  4. It moves the pointer to v{N+1} (compare-and-set on version N) and commits the pointer database; then
//     it removes v{N}.
// Reads go through the pointer only, so a document without a pointer to it is never visible. If the
// process dies (or the pointer commit fails) between 3 and 4, v{N+1} is left without a pointer; the next
// commit or messages() read of the thread finds it (one head() of v{N+1}, under the lock) and checks its
// proof against the store: a batch that committed gets its pointer (roll forward), one that did not has its
// document removed. The proof is exact because every commit of the thread runs this check first, so
// nothing else can have touched the thread in between. Dying before 3 leaves garbage only. Dying after 4
// leaves v{N} behind: never read again, just space.
// The proof is, by what the batch holds besides its messages: its events (sha256 of their JSON at the
// sequence numbers predicted under the lock), else its turn's new version, else its approval, else its
// ledger rows' values. A batch of messages alone needs none: its commit point is the pointer commit. A
// batch of messages and only a thread creation has none: recovery drops it (the runtime never makes one).
//
// Every commit of every thread holds the same lock, also across processes; SQLite serialises the store's
// writers anyway, so this costs one object write per message batch inside the lock, not parallelism. With
// synchronous=NORMAL a power loss (not a process crash) may lose the last transaction of either database
// independently; use FULL for both where that matters.
//
// Thread-safe. Several layouts (in stores of several threads or processes) may share the same pointer
// database, store database and object store.
class DocumentLayout final : public MessageLayout {
 public:
  // Throws Error(invalid_argument) for a null object store, a zero cap or a bad synchronous value,
  // Error(io) when the pointer database cannot be opened, Error(unsupported) when its schema is newer than
  // this build.
  DocumentLayout(std::shared_ptr<ObjectStore> objects, DocumentLayoutOptions options);
  ~DocumentLayout() override;
  DocumentLayout(const DocumentLayout&) = delete;
  DocumentLayout& operator=(const DocumentLayout&) = delete;

  static constexpr int kSchemaVersion = 1;

  // Besides what Store::commit throws: Error(too_large) when the thread's document would pass the cap
  // (nothing is written), Error(invalid_argument) for messages on a thread id no document key can be made
  // of.
  void commit(Store& store, CommitBatch& batch, const std::function<void(CommitBatch&)>& transact) override;
  // The thread's document. Error(too_large) when it is larger than the cap, Error(io) when it is missing
  // or damaged. A soft-deleted thread's document is kept and still read.
  std::vector<MessageRecord> messages(Store& store, std::string_view thread_id) override;
  // The pointer commits.
  int64_t write_transactions() const override;

  // The thread's pointer row (after finishing any interrupted commit of it), or nullopt when the thread has
  // no messages yet.
  std::optional<ConversationDocument> document(Store& store, std::string_view thread_id);
  const DocumentLayoutOptions& options() const { return options_; }

 private:
  class Pointers;
  class WriteTxn;

  ConversationDocument recover_locked(Store& store, std::string_view thread_id, ConversationDocument cur,
                                      std::vector<std::string>& obsolete);
  void recover_thread(Store& store, std::string_view thread_id);
  static bool batch_committed(Store& store, std::string_view thread_id, const json& proof);

  std::shared_ptr<ObjectStore> objects_;
  DocumentLayoutOptions options_;
  std::mutex write_mutex_;  // guards writer_; held for a whole commit
  std::unique_ptr<DocumentPointers> writer_;
  std::mutex read_mutex_;  // guards reader_ (WAL: reads see the last committed pointers, never wait)
  std::unique_ptr<DocumentPointers> reader_;
  std::atomic<int64_t> write_txns_{0};
};

}  // namespace v1
}  // namespace agentrt
