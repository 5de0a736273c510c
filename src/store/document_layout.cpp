#include "store/document_layout.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "agentrt/clock.hpp"
#include "agentrt/error.hpp"
#include "agentrt/ids.hpp"
#include "store/sqlite/connection.hpp"
#include "store/sqlite/statement.hpp"
#include "util/crypto.hpp"
#include "util/json_fast.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

constexpr std::string_view kFormat = "agentrt.conversation/1";

// sha256 over each event's JSON followed by a newline: what commit_proof records and recovery recomputes.
std::string events_digest(const std::vector<StoredEvent>& events) {
  std::string all;
  for (const auto& e : events) {
    all += e.json;
    all += '\n';
  }
  return crypto::sha256_hex(all);
}

// What the batch (without its messages) writes to the store, in a form recovery can check there.
// `after_seq`: the thread's last event sequence number before this commit (read under the lock).
json commit_proof(const CommitBatch& b, int64_t after_seq) {
  if (b.empty()) return json{{"kind", "none"}};
  if (!b.events.empty())
    return json{
        {"kind", "events"}, {"after_seq", after_seq}, {"count", b.events.size()}, {"sha256", events_digest(b.events)}};
  if (b.turn)
    return json{
        {"kind", "turn"}, {"turn_id", b.turn->id}, {"version", b.expected_version < 0 ? 0 : b.expected_version + 1}};
  if (b.approval) return json{{"kind", "approval"}, {"id", b.approval->approval_request_id}};
  if (!b.ledger.empty()) {
    json rows = json::array();
    for (const auto& l : b.ledger)
      rows.push_back(json{{"turn_id", l.turn_id},
                          {"tool_call_id", l.tool_call_id},
                          {"status", to_string(l.status)},
                          {"output_sha256", crypto::sha256_hex(l.output)},
                          {"arguments_sha256", crypto::sha256_hex(l.arguments)}});
    return json{{"kind", "ledger"}, {"rows", std::move(rows)}};
  }
  if (!b.jobs.empty()) {
    const JobWrite& w = b.jobs.front();
    return json{{"kind", "job"}, {"id", w.job.id}, {"version", w.expected_version < 0 ? 0 : w.expected_version + 1}};
  }
  return json{{"kind", "unprovable"}};
}

json record_json(const MessageRecord& m) {
  return json{{"index", m.index}, {"turn_id", m.turn_id}, {"run_id", m.run_id}, {"message", m.message}};
}

json empty_document(std::string_view thread_id) {
  return json{{"format", kFormat}, {"thread_id", thread_id}, {"version", 0}, {"messages", json::array()}};
}

// Parses a stored document; Error(io) naming the key when it is not one of ours for this thread.
json parse_document(std::string_view thread_id, std::string_view key, const std::string& bytes) {
  json doc = parse_json_or_discarded(bytes);  // deeper than kMaxStoredJsonDepth: damaged, never built
  if (!doc.is_object() || doc.value("format", "") != kFormat || doc.value("thread_id", "") != thread_id ||
      !doc.contains("messages") || !doc["messages"].is_array() || !doc.contains("version") ||
      !doc["version"].is_number_integer())
    throw Error(ErrorCode::io, fmt::format("conversation document {} is damaged (not a {} document of thread {})", key,
                                           kFormat, thread_id));
  return doc;
}

std::string too_large_message(std::string_view thread_id, uint64_t size, uint64_t cap, bool write) {
  return write ? fmt::format("thread {}: its conversation document would be {} bytes; the limit is {}", thread_id, size,
                             cap)
               : fmt::format("thread {}: its conversation document is {} bytes; the limit is {}", thread_id, size, cap);
}

}  // namespace

std::string conversation_document_key(std::string_view thread_id, int64_t version) {
  require_id(thread_id, "thread id");
  return fmt::format("{}{}/v{}.json", kConversationPrefix, thread_id, version);
}

// The pointer database of the SQLite layout: its connection and the pointer rows; BEGIN IMMEDIATE is the lock.
class DocumentLayout::Pointers final : public DocumentPointers {
 public:
  Pointers(const DocumentLayoutOptions& o, bool writer) : db_(o.path, o.busy_timeout_ms) {
    if (writer) {
      db_.exec("PRAGMA journal_mode=WAL");
      db_.migrate(kMigrations, o.path);
    }
    db_.exec(fmt::format("PRAGMA synchronous={}", o.synchronous).c_str());
  }

  void begin() override { db_.exec("BEGIN IMMEDIATE"); }
  void commit() override { db_.exec("COMMIT"); }
  void rollback() noexcept override { db_.rollback(); }

  std::optional<ConversationDocument> pointer(std::string_view thread_id) override {
    auto s = db_.stmt("SELECT doc_key,version,bytes,messages,updated_at FROM thread_documents WHERE thread_id=?");
    s.bind(1, thread_id);
    if (!s.step()) return std::nullopt;
    return ConversationDocument{std::string(thread_id),          s.text(0), s.i64(1),
                                static_cast<uint64_t>(s.i64(2)), s.i64(3),  s.i64(4)};
  }

  void swap_pointer(const ConversationDocument& d, int64_t expected) override {
    if (expected == 0) {
      auto s = db_.stmt(
          "INSERT INTO thread_documents(thread_id,doc_key,version,bytes,messages,updated_at) VALUES(?,?,?,?,?,?)");
      s.bind(1, d.thread_id).bind(2, d.key).bind(3, d.version).bind(4, static_cast<int64_t>(d.bytes));
      s.bind(5, d.messages).bind(6, d.updated_at);
      s.run();  // a row that exists already: SQLITE_CONSTRAINT -> Error(conflict)
      return;
    }
    auto s = db_.stmt(
        "UPDATE thread_documents SET doc_key=?,version=?,bytes=?,messages=?,updated_at=? "
        "WHERE thread_id=? AND version=?");
    s.bind(1, d.key).bind(2, d.version).bind(3, static_cast<int64_t>(d.bytes)).bind(4, d.messages);
    s.bind(5, d.updated_at).bind(6, d.thread_id).bind(7, expected);
    s.run();
    if (db_.changes() == 0)
      throw Error(ErrorCode::conflict, fmt::format("thread {}: its conversation document changed concurrently "
                                                   "(expected version {})",
                                                   d.thread_id, expected));
  }

 private:
  static constexpr const char* kMigrations[] = {
      "CREATE TABLE thread_documents(thread_id TEXT PRIMARY KEY, doc_key TEXT NOT NULL, "
      "version INTEGER NOT NULL, bytes INTEGER NOT NULL, messages INTEGER NOT NULL, "
      "updated_at INTEGER NOT NULL) WITHOUT ROWID",
  };
  static_assert(static_cast<int>(std::size(kMigrations)) == kSchemaVersion);

  sqlite::Connection db_;
};

// The write lock of a commit, held until commit() or destruction (rollback).
class DocumentLayout::WriteTxn {
 public:
  WriteTxn(DocumentPointers& p, std::atomic<int64_t>& counter) : p_(p), counter_(counter) { p_.begin(); }
  ~WriteTxn() {
    if (open_) p_.rollback();
  }
  WriteTxn(const WriteTxn&) = delete;
  WriteTxn& operator=(const WriteTxn&) = delete;
  void commit() {
    p_.commit();
    open_ = false;
    counter_.fetch_add(1, std::memory_order_relaxed);
  }
  void rollback() noexcept {
    if (open_) p_.rollback();
    open_ = false;
  }

 private:
  DocumentPointers& p_;
  std::atomic<int64_t>& counter_;
  bool open_ = true;
};

namespace {

void remove_quietly(ObjectStore& objects, const std::string& key) noexcept {
  try {
    objects.remove(key);
  } catch (...) {
    // Garbage left behind: never read, since reads go through the pointer.
  }
}

}  // namespace

DocumentLayout::DocumentLayout(std::shared_ptr<ObjectStore> objects, DocumentLayoutOptions options)
    : objects_(std::move(objects)), options_(std::move(options)) {
  if (!objects_) throw Error(ErrorCode::invalid_argument, "documents: an object store is required");
  if (options_.max_document_bytes == 0)
    throw Error(ErrorCode::invalid_argument, "documents: max_document_bytes must be greater than 0");
  if (options_.synchronous != "NORMAL" && options_.synchronous != "FULL" && options_.synchronous != "OFF")
    throw Error(ErrorCode::invalid_argument,
                fmt::format("documents: synchronous must be NORMAL, FULL or OFF, not '{}'", options_.synchronous));
  if (options_.pointers) {
    writer_ = options_.pointers(true);
    reader_ = options_.pointers(false);
    if (!writer_ || !reader_) throw Error(ErrorCode::invalid_argument, "documents: the pointer factory gave nothing");
    return;
  }
  if (options_.path.empty()) throw Error(ErrorCode::invalid_argument, "documents: the pointer database path is empty");
  writer_ = std::make_unique<Pointers>(options_, true);
  // ":memory:" is a database per connection: the reader must share the writer's.
  if (options_.path != ":memory:") reader_ = std::make_unique<Pointers>(options_, false);
}

DocumentLayout::~DocumentLayout() = default;

ConversationDocument DocumentLayout::recover_locked(Store& store, std::string_view thread_id, ConversationDocument cur,
                                                    std::vector<std::string>& obsolete) {
  if (!is_valid_id(thread_id)) return cur;
  // Under the write lock no commit is in flight, so a document one version past the pointer was left by a
  // commit that stopped between writing it and committing its pointer.
  const std::string next = conversation_document_key(thread_id, cur.version + 1);
  if (!objects_->head(next)) return cur;
  auto bytes = objects_->get(next);
  if (!bytes) return cur;
  json doc = parse_json_or_discarded(*bytes);
  bool committed = false;
  if (doc.is_object() && doc.value("format", "") == kFormat && doc.value("thread_id", "") == thread_id &&
      doc.value("version", int64_t{-1}) == cur.version + 1 && doc.contains("messages") && doc["messages"].is_array() &&
      doc.contains("commit") && doc["commit"].is_object())
    committed = batch_committed(store, thread_id, doc["commit"]);
  if (!committed) {
    // Its batch never reached the store: the document is garbage. It must go, or the next commit
    // could not take its key; a failure to remove it fails the caller.
    objects_->remove(next);
    return cur;
  }
  // Its batch did commit: roll the pointer forward to it.
  ConversationDocument d{std::string(thread_id),
                         next,
                         cur.version + 1,
                         bytes->size(),
                         static_cast<int64_t>(doc["messages"].size()),
                         now_ms()};
  writer_->swap_pointer(d, cur.version);
  if (!cur.key.empty()) obsolete.push_back(cur.key);
  return d;
}

bool DocumentLayout::batch_committed(Store& store, std::string_view thread_id, const json& proof) {
  const std::string kind = proof.value("kind", "");
  if (kind == "events") {
    const int64_t after = proof.value("after_seq", int64_t{-1});
    const size_t count = proof.value("count", size_t{0});
    if (after < 0 || count == 0) return false;
    auto evs = store.events_after(thread_id, after, count);
    return evs.size() == count && evs.front().seq == after + 1 && events_digest(evs) == proof.value("sha256", "");
  }
  if (kind == "turn") {
    auto t = store.get_turn(proof.value("turn_id", ""));
    return t && t->thread_id == thread_id && t->version == proof.value("version", int64_t{-1});
  }
  if (kind == "approval") return store.get_approval(proof.value("id", "")).has_value();
  if (kind == "job") {
    // A later change of the job bumps its version past the proof's: the batch committed then too.
    auto j = store.get_job(proof.value("id", ""));
    return j && j->thread_id == thread_id && j->version >= proof.value("version", int64_t{-1});
  }
  if (kind == "ledger") {
    const json& rows = proof.contains("rows") ? proof["rows"] : json::array();
    if (!rows.is_array() || rows.empty()) return false;
    for (const auto& r : rows) {
      if (!r.is_object()) return false;
      auto entries = store.ledger(r.value("turn_id", ""));
      auto it = std::find_if(entries.begin(), entries.end(),
                             [&](const LedgerEntry& l) { return l.tool_call_id == r.value("tool_call_id", ""); });
      if (it == entries.end() || to_string(it->status) != r.value("status", "") ||
          crypto::sha256_hex(it->output) != r.value("output_sha256", "") ||
          crypto::sha256_hex(it->arguments) != r.value("arguments_sha256", ""))
        return false;
    }
    return true;
  }
  return false;  // "none": the pointer commit was the commit point and did not happen; "unprovable"
}

void DocumentLayout::recover_thread(Store& store, std::string_view thread_id) {
  std::vector<std::string> obsolete;
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    WriteTxn tx(*writer_, write_txns_);
    ConversationDocument cur =
        writer_->pointer(thread_id).value_or(ConversationDocument{std::string(thread_id), "", 0, 0, 0, 0});
    const int64_t before = cur.version;
    cur = recover_locked(store, thread_id, std::move(cur), obsolete);
    if (cur.version != before)
      tx.commit();
    else
      tx.rollback();
  }
  for (const auto& k : obsolete) remove_quietly(*objects_, k);
}

void DocumentLayout::commit(Store& store, CommitBatch& b, const std::function<void(CommitBatch&)>& transact) {
  const std::string thread_id = b.thread_id;
  const bool has_messages = !b.messages.empty();
  if (has_messages) (void)conversation_document_key(thread_id, 1);  // a thread id no key can be made of

  std::vector<std::string> obsolete;
  {
    std::lock_guard<std::mutex> lock(write_mutex_);
    WriteTxn tx(*writer_, write_txns_);
    ConversationDocument cur = writer_->pointer(thread_id).value_or(ConversationDocument{thread_id, "", 0, 0, 0, 0});
    // Every commit of the thread first finishes an interrupted one: that is what makes the proofs exact.
    const int64_t found = cur.version;
    cur = recover_locked(store, thread_id, std::move(cur), obsolete);

    if (!has_messages) {
      transact(b);
      if (cur.version != found)
        tx.commit();
      else
        tx.rollback();
    } else {
      // Read the current document (through the pointer) and append.
      json doc;
      if (cur.key.empty()) {
        doc = empty_document(thread_id);
      } else {
        if (cur.bytes > options_.max_document_bytes)
          throw Error(ErrorCode::too_large,
                      too_large_message(thread_id, cur.bytes, options_.max_document_bytes, false));
        auto bytes = objects_->get(cur.key);
        if (!bytes)
          throw Error(ErrorCode::io, fmt::format("thread {}: conversation document {} is missing", thread_id, cur.key));
        doc = parse_document(thread_id, cur.key, *bytes);
      }
      json& arr = doc["messages"];
      int64_t index = static_cast<int64_t>(arr.size());
      for (auto& m : b.messages) {
        m.index = index++;
        m.thread_id = thread_id;
        arr.push_back(record_json(m));
      }
      // The rest of the batch goes to the store's transaction; the messages wait here (moved, not copied).
      std::vector<MessageRecord> messages = std::move(b.messages);
      b.messages.clear();
      struct Restore {
        CommitBatch& b;
        std::vector<MessageRecord>& m;
        ~Restore() { b.messages = std::move(m); }
      } restore{b, messages};

      int64_t after_seq = 0;
      if (!b.events.empty())
        if (auto t = store.get_thread(thread_id)) after_seq = t->last_seq;
      const int64_t version = cur.version + 1;
      doc["version"] = version;
      doc["updated_at"] = now_ms();
      doc["commit"] = commit_proof(b, after_seq);
      const std::string bytes = doc.dump();
      if (bytes.size() > options_.max_document_bytes)
        throw Error(ErrorCode::too_large,
                    too_large_message(thread_id, bytes.size(), options_.max_document_bytes, true));

      const std::string key = conversation_document_key(thread_id, version);
      // Step 2: the new version under a fresh key. Taken already: recovery just ran under the lock, so
      // this is not ours to touch (a foreign writer under our prefix); refuse rather than overwrite.
      if (!objects_->put_if_absent(key, bytes, "application/json"))
        throw Error(ErrorCode::io, fmt::format("thread {}: conversation document {} exists already", thread_id, key));
      // Step 4's compare-and-set, staged before the commit point so that a lost one changes nothing.
      try {
        writer_->swap_pointer(
            ConversationDocument{thread_id, key, version, bytes.size(), static_cast<int64_t>(arr.size()), now_ms()},
            cur.version);
        // Step 3, the commit point. Dying before it: the new document is garbage, removed by recovery.
        transact(b);
      } catch (...) {
        // Removed while the lock is held, so no recovery ever judges a document whose writer is alive.
        remove_quietly(*objects_, key);
        throw;  // the pointer transaction rolls back
      }
      // Dying here (or failing to commit the pointer) leaves v{N+1} without a pointer; its proof now holds,
      // so the next commit or read of the thread rolls the pointer forward. The batch is committed: report
      // success either way.
      try {
        tx.commit();
        if (!cur.key.empty()) obsolete.push_back(cur.key);
      } catch (const std::exception&) {
        tx.rollback();
      }
    }
  }
  for (const auto& k : obsolete) remove_quietly(*objects_, k);
}

std::optional<ConversationDocument> DocumentLayout::document(Store& store, std::string_view thread_id) {
  for (int attempt = 0;; ++attempt) {
    std::optional<ConversationDocument> ptr;
    if (reader_) {
      std::lock_guard<std::mutex> lock(read_mutex_);
      ptr = reader_->pointer(thread_id);
    } else {
      std::lock_guard<std::mutex> lock(write_mutex_);
      ptr = writer_->pointer(thread_id);
    }
    // One version past the pointer: a commit in flight (the recovery waits for it and finds nothing) or
    // one that stopped half-way (the recovery finishes it).
    if (attempt == 0 && is_valid_id(thread_id) &&
        objects_->head(conversation_document_key(thread_id, (ptr ? ptr->version : 0) + 1))) {
      recover_thread(store, thread_id);
      continue;
    }
    return ptr;
  }
}

std::vector<MessageRecord> DocumentLayout::messages(Store& store, std::string_view thread_id) {
  for (int attempt = 0;; ++attempt) {
    auto ptr = document(store, thread_id);
    if (!ptr) return {};
    if (ptr->bytes > options_.max_document_bytes)
      throw Error(ErrorCode::too_large, too_large_message(thread_id, ptr->bytes, options_.max_document_bytes, false));
    auto bytes = objects_->get(ptr->key);
    if (!bytes) {
      // A commit moved the pointer on and removed this version between our two reads: read again.
      if (attempt < 8) continue;
      throw Error(ErrorCode::io, fmt::format("thread {}: conversation document {} is missing", thread_id, ptr->key));
    }
    if (bytes->size() > options_.max_document_bytes)
      throw Error(ErrorCode::too_large,
                  too_large_message(thread_id, bytes->size(), options_.max_document_bytes, false));
    json doc = parse_document(thread_id, ptr->key, *bytes);
    std::vector<MessageRecord> out;
    out.reserve(doc["messages"].size());
    try {
      for (auto& r : doc["messages"]) {
        MessageRecord m;
        m.thread_id = std::string(thread_id);
        m.index = r.at("index").get<int64_t>();
        m.turn_id = r.at("turn_id").get<std::string>();
        m.run_id = r.at("run_id").get<std::string>();
        m.message = message_from_json(r.at("message"), kMaxStoredJsonDepth);
        out.push_back(std::move(m));
      }
    } catch (const std::exception& e) {
      throw Error(ErrorCode::io, fmt::format("conversation document {} is damaged: {}", ptr->key, e.what()));
    }
    return out;
  }
}

int64_t DocumentLayout::write_transactions() const { return write_txns_.load(std::memory_order_relaxed); }

}  // namespace v1
}  // namespace agentrt
