// A cached prepared statement of a sqlite::Connection, and the one mapping of SQLite's errors to agentrt's.
#pragma once

#include <sqlite3.h>

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "agentrt/error.hpp"

namespace agentrt {
inline namespace v1 {
namespace sqlite {

// A constraint (a unique index, a primary key) is Error(conflict), anything else Error(io). No SQL text in
// the message: messages may reach clients.
[[noreturn]] inline void throw_sqlite(sqlite3* db, int rc, std::string_view what) {
  int ext = db ? sqlite3_extended_errcode(db) : rc;
  std::string msg = fmt::format("sqlite: {}: {} ({})", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), ext);
  if ((rc & 0xff) == SQLITE_CONSTRAINT) throw Error(ErrorCode::conflict, msg);
  throw Error(ErrorCode::io, msg);
}

// A cached prepared statement, reset and unbound when this handle goes out of scope. Used under the lock of
// the connection's owner only.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  ~Statement() {
    if (!s_) return;  // moved from
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& o) noexcept : db_(o.db_), s_(o.s_) { o.s_ = nullptr; }

  // Text the caller keeps alive until the statement is reset (this object's end): bound without a copy. A
  // statement's values are fields of the batch or arguments of the call, which outlive it.
  Statement& bind(int i, std::string_view v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC));
    return *this;
  }
  // A temporary (a JSON text made for this statement): SQLite copies it.
  Statement& bind(int i, std::string&& v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  // Bytes kept alive like a bound text's, stored as a BLOB.
  Statement& bind_blob(int i, std::string_view v) {
    check(sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC));
    return *this;
  }
  Statement& bind(int i, int64_t v) {
    check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  Statement& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Statement& bind(int i, bool v) { return bind(i, static_cast<int64_t>(v ? 1 : 0)); }
  Statement& bind(int i, double v) {
    check(sqlite3_bind_double(s_, i, v));
    return *this;
  }
  // true when a row is available
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite(db_, rc, "statement");
  }
  void run() {
    while (step()) {
    }
  }
  std::string text(int col) const { return std::string(bytes(col)); }
  const unsigned char* raw(int col) const { return sqlite3_column_text(s_, col); }
  bool is_blob(int col) const { return sqlite3_column_type(s_, col) == SQLITE_BLOB; }
  // A column's bytes as they are stored (a BLOB's, a TEXT's without the terminator, a number as its text, NULL as
  // ""), valid until the next step. Read as a blob: SQLite hands out the row's bytes where they lie, where asking
  // for text makes it copy them to add the terminator. UTF-8: the store refuses a database of another encoding.
  std::string_view bytes(int col) const {
    const void* p = sqlite3_column_blob(s_, col);
    return p ? std::string_view(static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, col)))
             : std::string_view();
  }
  sqlite3_stmt* get() const { return s_; }
  int64_t i64(int col) const { return sqlite3_column_int64(s_, col); }
  double f64(int col) const { return sqlite3_column_double(s_, col); }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw_sqlite(db_, rc, "bind");
  }
  sqlite3* db_;
  sqlite3_stmt* s_;
};

}  // namespace sqlite
}  // namespace v1
}  // namespace agentrt
