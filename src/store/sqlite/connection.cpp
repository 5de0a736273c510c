#include "store/sqlite/connection.hpp"

#include "store/sqlite/statement.hpp"
#include "store/sqlite/wal_buffer.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

Connection::Connection(const std::string& path, int busy_timeout_ms, bool create, const std::string& vfs) {
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, wal_buffer_vfs(vfs));
  if (rc != SQLITE_OK) {
    std::string msg = fmt::format("sqlite: cannot open '{}': {}", path, db_ ? sqlite3_errmsg(db_) : "?");
    sqlite3_close_v2(db_);
    throw Error(ErrorCode::io, msg);
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms);
}

Connection::~Connection() {
  for (auto& [sql, s] : cache_) sqlite3_finalize(s);
  sqlite3_close_v2(db_);
}

void Connection::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    if ((rc & 0xff) == SQLITE_CONSTRAINT) throw Error(ErrorCode::conflict, "sqlite: " + msg);
    throw Error(ErrorCode::io, fmt::format("sqlite: {}: {}", std::string_view(sql).substr(0, 60), msg));
  }
}

Statement Connection::stmt(const char* sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
    if (rc != SQLITE_OK) throw_sqlite(db_, rc, "prepare");
    it = cache_.emplace(sql, s).first;
  }
  return Statement(db_, it->second);
}

void Connection::rollback() noexcept { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

int64_t Connection::changes() const { return sqlite3_changes64(db_); }

unsigned Connection::data_version() const {
  unsigned v = 0;
  sqlite3_file_control(db_, "main", SQLITE_FCNTL_DATA_VERSION, &v);
  return v;
}

void Connection::migrate(std::span<const char* const> migrations, const std::string& path) {
  exec("BEGIN IMMEDIATE");
  try {
    int64_t version = 0;
    {
      auto s = stmt("PRAGMA user_version");
      if (s.step()) version = s.i64(0);
    }
    const auto known = static_cast<int64_t>(migrations.size());
    if (version > known)
      throw Error(
          ErrorCode::unsupported,
          fmt::format("sqlite: '{}' has schema version {}, newer than this agentrt knows ({})", path, version, known));
    for (int64_t v = version; v < known; ++v) exec(migrations[static_cast<size_t>(v)]);
    if (version != known) exec(fmt::format("PRAGMA user_version={}", known).c_str());
    exec("COMMIT");
  } catch (...) {
    rollback();
    throw;
  }
}

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
