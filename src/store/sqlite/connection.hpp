// sqlite::Connection: one SQLite connection with its cached prepared statements, the one wrapper of a
// sqlite3 handle that the store's databases (the store's own, its checkpointer's, the document layout's
// pointer database) open.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace agentrt {
inline namespace v1 {
namespace sqlite {

class Statement;

// Not thread-safe: its owner's mutex guards it.
class Connection {
 public:
  // Opens `path` (created when it does not exist and `create` is set) through the VFS `vfs` ("": SQLite's
  // default) under the WAL write buffer (wal_buffer.hpp), waiting up to busy_timeout_ms for another
  // connection's lock. Error(io) when it cannot.
  Connection(const std::string& path, int busy_timeout_ms, bool create = true, const std::string& vfs = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs SQL text without results: Error(conflict) for a constraint it breaks, else Error(io).
  void exec(const char* sql);
  // `sql` prepared once and kept for the connection's life, found again by its address: a string literal.
  Statement stmt(const char* sql);
  void rollback() noexcept;
  // Rows the last INSERT, UPDATE or DELETE changed.
  int64_t changes() const;
  // Moves with every commit to the database, this connection's and others' (SQLITE_FCNTL_DATA_VERSION).
  unsigned data_version() const;
  // Brings the schema from the version the file has (PRAGMA user_version) to migrations.size(), applying
  // migrations[v] to go from v to v + 1, in one write transaction. Error(unsupported) naming `path` when the
  // file's schema is newer than that.
  void migrate(std::span<const char* const> migrations, const std::string& path);
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::map<const char*, sqlite3_stmt*> cache_;
};

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
