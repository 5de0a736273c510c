// DocumentStore: the conversation-document message layout. A Store whose history messages live as one JSON
// document per thread in an ObjectStore; everything else (thread metadata, turns, events, ledger, approvals,
// heartbeats) lives in an inner Store (internal).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/storage.hpp"

struct sqlite3;

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

struct DocumentStoreOptions {
  // The pointer database (SQLite, WAL): one row per thread naming its current document. Its own file, next
  // to the inner store's (e.g. "<data>/agentrt.db.docs"); ":memory:" only for single-instance tests.
  std::string path;
  // Largest document written or read. A write that would make a thread's document larger is refused with
  // Error(too_large) and changes nothing; a larger document already stored (the cap was lowered) is refused
  // on read with Error(too_large) naming its size. A document of exactly this size is fine.
  uint64_t max_document_bytes = 2 * 1024 * 1024;
  std::string synchronous = "NORMAL";  // NORMAL | FULL | OFF, as SqliteStoreOptions::synchronous
  int busy_timeout_ms = 10000;         // how long a writer waits for another process's commit
};

// The pointer row of a thread: which document holds its messages.
struct ConversationDocument {
  std::string thread_id;
  std::string key;         // the current document's object key
  int64_t version = 0;     // bumped by every document write; compare-and-set key
  uint64_t bytes = 0;      // the document's size
  int64_t messages = 0;    // messages in it
  int64_t updated_at = 0;  // ms
};

// Messages go to versioned documents in `objects`, everything else to `inner` (whose own messages stay
// empty). commit() is all-or-nothing as seen through this store:
//  1. Under the pointer database's write lock (BEGIN IMMEDIATE: one committer at a time across threads and
//     processes; the process-local mutex in front of it keeps threads from spinning on SQLite's busy
//     handler), it reads the thread's pointer (version N), the document, and appends the batch's messages.
//  2. It writes the new document under the fresh key v{N+1} with put_if_absent. The document names the
//     rest of the batch (a "commit proof": a digest of its events at the sequence numbers they will get, or
//     the turn version / approval / ledger rows it writes).
//  3. It commits the batch without its messages to `inner`. This is the commit point.
//  4. It moves the pointer to v{N+1} (compare-and-set on version N) and commits the pointer database; then
//     it removes v{N}.
// Reads go through the pointer only, so a document without a pointer to it is never visible. If the
// process dies (or the pointer commit fails) between 3 and 4, v{N+1} is left without a pointer; the next
// commit or messages() read of the thread finds it (one head() of v{N+1}, under the lock) and checks its
// proof against `inner`: a batch that committed gets its pointer (roll forward), one that did not has its
// document removed. The proof is exact because every commit of the thread runs this check first, so
// nothing else can have touched the thread in between. Dying before 3 leaves garbage only. Dying after 4
// leaves v{N} behind: never read again, just space.
// The proof is, by what the batch holds besides its messages: its events (sha256 of their JSON at the
// sequence numbers predicted under the lock), else its turn's new version, else its approval, else its
// ledger rows' values. A batch of messages alone needs none: its commit point is the pointer commit. A
// batch of messages and only a thread creation has none: recovery drops it (the runtime never makes one).
//
// Every commit of every thread holds the same lock, also across processes; SQLite serialises the inner
// store's writers anyway, so this costs one object write per message batch inside the lock, not
// parallelism. With synchronous=NORMAL a power loss (not a process crash) may lose the last transaction of
// either database independently; use FULL for both where that matters.
//
// Thread-safe. Several DocumentStores (threads or processes) may share the same pointer database, inner
// database and object store.
class DocumentStore final : public Store {
 public:
  // Throws Error(invalid_argument) for null stores, a zero cap or a bad synchronous value, Error(io) when
  // the pointer database cannot be opened, Error(unsupported) when its schema is newer than this build.
  DocumentStore(std::shared_ptr<Store> inner, std::shared_ptr<ObjectStore> objects, DocumentStoreOptions options);
  ~DocumentStore() override;
  DocumentStore(const DocumentStore&) = delete;
  DocumentStore& operator=(const DocumentStore&) = delete;

  static constexpr int kSchemaVersion = 1;

  // As Store::commit; besides, Error(too_large) when the thread's document would pass the cap (nothing is
  // written), Error(invalid_argument) for messages on a thread id no document key can be made of.
  void commit(CommitBatch& batch) override;
  std::optional<ThreadRecord> get_thread(std::string_view thread_id) override;
  std::vector<ThreadRecord> list_threads(std::string_view user_id, bool include_deleted) override;
  void set_thread_title(std::string_view thread_id, std::string_view title) override;
  // Marks the thread row; the document is kept (and still read by messages()).
  void soft_delete_thread(std::string_view thread_id) override;
  std::optional<TurnRecord> get_turn(std::string_view turn_id) override;
  std::optional<TurnRecord> find_turn_by_client_message(std::string_view thread_id,
                                                        std::string_view client_message_id) override;
  std::optional<TurnRecord> active_turn(std::string_view thread_id) override;
  std::optional<TurnRecord> last_turn(std::string_view thread_id) override;
  std::vector<TurnRecord> turns_in_status(TurnStatus status) override;
  std::vector<TurnRecord> turns_expired(int64_t now_ms) override { return inner_->turns_expired(now_ms); }
  // The thread's document. Error(too_large) when it is larger than the cap, Error(io) when it is missing
  // or damaged.
  std::vector<MessageRecord> messages(std::string_view thread_id) override;
  std::vector<StoredEvent> events_after(std::string_view thread_id, int64_t after_seq, size_t limit) override;
  std::vector<LedgerEntry> ledger(std::string_view turn_id) override;
  std::optional<ApprovalRecord> get_approval(std::string_view approval_request_id) override;
  std::optional<JobRecord> get_job(std::string_view job_id) override;
  std::vector<JobRecord> thread_jobs(std::string_view thread_id) override;
  std::vector<JobRecord> jobs_due(int64_t now_ms) override;
  void heartbeat(std::string_view instance_id, int64_t now_ms) override;
  void remove_instance(std::string_view instance_id) override;
  std::optional<int64_t> instance_heartbeat(std::string_view instance_id) override;
  // The inner store's write transactions plus this store's pointer commits.
  int64_t write_transactions() const override;
  int64_t external_version() override { return inner_->external_version(); }  // events live in the inner store

  // The thread's pointer row (after finishing any interrupted commit of it), or nullopt when the thread has
  // no messages yet.
  std::optional<ConversationDocument> document(std::string_view thread_id);
  Store& inner() { return *inner_; }
  const DocumentStoreOptions& options() const { return options_; }

 private:
  class Connection;

  ConversationDocument recover_locked(Connection& db, std::string_view thread_id, ConversationDocument cur,
                                      std::vector<std::string>& obsolete);
  void recover_thread(std::string_view thread_id);
  bool batch_committed(std::string_view thread_id, const json& proof);

  std::shared_ptr<Store> inner_;
  std::shared_ptr<ObjectStore> objects_;
  DocumentStoreOptions options_;
  std::mutex write_mutex_;  // guards writer_; held for a whole commit
  std::unique_ptr<Connection> writer_;
  std::mutex read_mutex_;  // guards reader_ (WAL: reads see the last committed pointers, never wait)
  std::unique_ptr<Connection> reader_;
  std::atomic<int64_t> write_txns_{0};
};

// The messages one turn added to a thread (all of its runs, an ERROR system message of a failed run
// included), in order: what a repeated start with the same client message id answers as `deltaMessages`.
// Works on any Store.
std::vector<MessageRecord> messages_of_turn(Store& store, std::string_view thread_id, std::string_view turn_id);

}  // namespace v1
}  // namespace agentrt
