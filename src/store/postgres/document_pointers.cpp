#include "store/postgres/document_pointers.hpp"

#include <fmt/format.h>

#include "store/postgres/connection.hpp"

namespace agentrt {
inline namespace v1 {
namespace pg {

namespace {

// Held for a pointer transaction: the document layout's write lock (kMigrationLock's neighbour).
constexpr const char* kPointerLock = "SELECT pg_advisory_xact_lock(4107321902)";

class PgDocumentPointers final : public DocumentPointers {
 public:
  explicit PgDocumentPointers(const PostgresStoreOptions& o)
      : url_(o.url), target_(describe_target(o.url)), connect_timeout_s_(o.connect_timeout_s) {}

  void begin() override {
    Connection& c = conn();
    c.run("BEGIN", "begin a document pointer transaction");
    in_transaction_ = true;
    try {
      c.exec(kPointerLock, "lock the document pointers");
    } catch (...) {
      rollback();
      throw;
    }
  }
  void commit() override {
    in_transaction_ = false;  // a failed COMMIT leaves the connection broken: the next begin() replaces it
    conn_->run("COMMIT", "commit a document pointer");
  }
  void rollback() noexcept override {
    in_transaction_ = false;
    if (conn_) conn_->rollback();
  }

  std::optional<ConversationDocument> pointer(std::string_view thread_id) override {
    Result r = conn().exec("SELECT doc_key,version,bytes,messages,updated_at FROM thread_documents WHERE thread_id=$1",
                           Params().add(thread_id), "read a document pointer");
    if (r.rows() == 0) return std::nullopt;
    const Row row = r.row(0);
    return ConversationDocument{
        std::string(thread_id), row.text(0), row.i64(1), static_cast<uint64_t>(row.i64(2)), row.i64(3), row.i64(4)};
  }

  void swap_pointer(const ConversationDocument& d, int64_t expected) override {
    Params p;
    p.add(d.thread_id).add(d.key).add(d.version).add(static_cast<int64_t>(d.bytes)).add(d.messages).add(d.updated_at);
    if (expected == 0) {  // a row that exists already: the primary key's unique violation is Error(conflict)
      conn().exec(
          "INSERT INTO thread_documents(thread_id,doc_key,version,bytes,messages,updated_at) "
          "VALUES($1,$2,$3,$4,$5,$6)",
          p, "create a document pointer");
      return;
    }
    p.add(expected);
    Result r = conn().exec(
        "UPDATE thread_documents SET doc_key=$2,version=$3,bytes=$4,messages=$5,updated_at=$6 "
        "WHERE thread_id=$1 AND version=$7",
        p, "move a document pointer");
    if (r.affected() == 0)
      throw Error(ErrorCode::conflict, fmt::format("thread {}: its conversation document changed concurrently "
                                                   "(expected version {})",
                                                   d.thread_id, expected));
  }

 private:
  // The connection; outside a transaction, opened again when it was lost or left unusable. Inside one it is
  // never replaced (what a lost connection held is gone: its statements fail, the transaction rolls back).
  Connection& conn() {
    if (!conn_ || (!in_transaction_ && conn_->broken()))
      conn_ = std::make_unique<Connection>(url_, target_, connect_timeout_s_);
    return *conn_;
  }

  const std::string url_;
  const std::string target_;
  const int connect_timeout_s_;
  std::unique_ptr<Connection> conn_;
  bool in_transaction_ = false;
};

}  // namespace

std::function<std::unique_ptr<DocumentPointers>(bool writer)> document_pointers(const PostgresStoreOptions& options) {
  return [options](bool) -> std::unique_ptr<DocumentPointers> { return std::make_unique<PgDocumentPointers>(options); };
}

}  // namespace pg
}  // namespace v1
}  // namespace agentrt
