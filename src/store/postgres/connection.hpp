// pg::Connection: one libpq connection with its prepared statements, the parameters and results of a statement,
// and the one mapping of PostgreSQL's errors to agentrt's.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agentrt/error.hpp"

struct pg_conn;
struct pg_result;

namespace agentrt {
inline namespace v1 {
namespace pg {

// Where a store connects, for messages: "postgresql://user@host:port/dbname", never the password.
std::string describe_target(const std::string& url);
// Error(invalid_argument) unless `url` is a postgresql:// (or postgres://) URL libpq can read. The message
// names neither the URL nor its password.
void check_url(const std::string& url, std::string_view where);

// An error of the server or the connection, as agentrt's: a unique or exclusion constraint is conflict, a value
// the database cannot hold (bad encoding, a NUL) invalid_argument, anything else io. `lost`: the connection is
// gone (the server stopped, restarted or ended the session), so nothing more can be sent on it. Thread-safe once
// thrown (not changed after).
class DbError : public Error {
 public:
  DbError(ErrorCode code, std::string message, std::string sqlstate, bool lost)
      : Error(code, std::move(message)), sqlstate_(std::move(sqlstate)), lost_(lost) {}
  const std::string& sqlstate() const { return sqlstate_; }
  bool lost() const { return lost_; }
  std::string constraint;  // the constraint a conflict broke, when the server named one

 private:
  std::string sqlstate_;
  bool lost_;
};

// A statement's parameters. Strings go in binary form (their bytes, no copy, no terminator); numbers and flags
// as text. Borrowed strings must outlive the statement's execution. Not thread-safe (one statement's, on one
// thread).
class Params {
 public:
  Params() = default;
  Params(const Params&) = delete;  // a copy's pointers would be the original's
  Params& operator=(const Params&) = delete;
  Params& add(std::string_view v);
  Params& add(const char* v) { return add(std::string_view(v)); }
  Params& add(const std::string& v) { return add(std::string_view(v)); }
  Params& add(std::string&& v);  // a temporary (JSON made for the statement): kept here
  Params& add(int64_t v);
  Params& add(int v) { return add(static_cast<int64_t>(v)); }
  Params& add(bool v);
  Params& add(double v);
  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  Params& own(std::string v, int format);
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
  std::deque<std::string> owned_;  // stable addresses
};

// One row of a Result, with the accessors store_rows' readers use. Valid while its Result lives; reads only.
class Row {
 public:
  Row(const pg_result* r, int row) : r_(r), row_(row) {}
  std::string text(int col) const;
  const unsigned char* raw(int col) const;  // NUL-terminated text; "" for NULL
  size_t size(int col) const;
  int64_t i64(int col) const;
  double f64(int col) const;
  bool flag(int col) const;  // a boolean column
  bool null(int col) const;

 private:
  const pg_result* r_;
  int row_;
};

// A statement's result (text format). Move-only; frees the libpq result. Not thread-safe (its caller's).
class Result {
 public:
  explicit Result(pg_result* r = nullptr) : r_(r) {}
  ~Result();
  Result(Result&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Result& operator=(Result&& o) noexcept;
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  int rows() const;
  Row row(int i) const { return Row(r_, i); }
  int64_t affected() const;  // rows an INSERT, UPDATE or DELETE changed

 private:
  pg_result* r_;
};

// A row's plain columns, for store_rows::read_fields.
void read_column(const Row& r, int i, std::string& v);
void read_column(const Row& r, int i, int64_t& v);
void read_column(const Row& r, int i, int& v);
void read_column(const Row& r, int i, bool& v);
void read_column(const Row& r, int i, double& v);

// Every row of the result, each read by `read`.
template <class Read>
auto read_rows(const Result& res, Read read) {
  std::vector<decltype(read(res.row(0)))> out;
  out.reserve(static_cast<size_t>(res.rows()));
  for (int i = 0; i < res.rows(); ++i) out.push_back(read(res.row(i)));
  return out;
}

// One libpq connection and the statements prepared on it. Not thread-safe: its pool lends it to one caller at a
// time.
class Connection {
 public:
  // Connects (waiting at most connect_timeout_s). Error(io) naming `target` and libpq's reason when it cannot.
  Connection(const std::string& url, const std::string& target, int connect_timeout_s);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `sql`, prepared on this connection the first time it is used and found again by its address (a string
  // literal). `what` names the operation in error messages (no SQL text: messages may reach clients).
  // Throws DbError.
  Result exec(const char* sql, const Params& params, std::string_view what);
  Result exec(const char* sql, std::string_view what) { return exec(sql, Params(), what); }
  // Runs SQL text without parameters (one or several statements, not prepared): BEGIN, COMMIT, migrations.
  void run(const char* sql, std::string_view what);
  // Rolls an open transaction back; a connection that cannot is marked broken.
  void rollback() noexcept;
  // The connection is unusable (lost, or left inside a transaction): its pool drops it instead of lending it again.
  bool broken() const;
  int backend_pid() const { return pid_; }
  const std::string& target() const { return target_; }
  pg_conn* get() const { return conn_; }

 private:
  friend class Pipeline;
  [[noreturn]] void fail(pg_result* res, std::string_view what);
  // The name `sql` is prepared under; `fresh` when it is not yet (the caller prepares it, and erases it from
  // prepared_ when that fails).
  const std::string& statement(const char* sql, bool& fresh);
  pg_conn* conn_ = nullptr;
  std::string target_;
  int pid_ = 0;
  std::map<const char*, std::string> prepared_;
  int64_t next_statement_ = 0;  // names are never reused (a failed prepare's name may exist on the server)
  bool poisoned_ = false;       // a pipeline was left unfinished: the protocol's state is unknown
};

// Statements sent one after the other without waiting, and answered together: one round trip for all of them
// (libpq's pipeline mode). They run in order, in the connection's transaction; after the first error the rest are
// skipped. A long pipeline is sent in parts (so neither side waits on a full socket buffer). Not thread-safe (its
// connection's).
class Pipeline {
 public:
  using Check = std::function<void(const Result&)>;
  explicit Pipeline(Connection& c);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Queues `sql` (prepared as Connection::exec prepares it) with its parameters, copied at once (`params` may end
  // after this call). `check`, when given, is called with the statement's result once every statement has run
  // without error (in the order they were added; it may throw, and may use the connection).
  void add(const char* sql, const Params& params, std::string_view what, Check check = nullptr);
  // Sends what is queued, waits for every answer, then runs the checks. Throws the first statement's error as
  // Connection::exec does (DbError), or what a check throws. The pipeline is empty after, whatever happened.
  void run();

 private:
  struct Sent {
    const char* sql;  // a prepare of it, when `prepare`
    bool prepare;
    std::string what;
    Check check;
  };
  void send_part();  // sends a sync for what is queued and reads every answer up to it
  Connection& c_;
  std::vector<Sent> sent_;                      // the part on its way
  std::vector<std::pair<Check, Result>> done_;  // checks with their results, from parts already answered
  pg_result* error_ = nullptr;                  // the first error (kept to be thrown once the answers are read)
  std::string error_what_;
  bool lost_ = false;  // a part went unanswered (the connection failed): nothing more is sent
};

// A compare-and-set, queued on `p`: `sql` is an UPDATE of the row `id` WHERE its version is `expected` that bumps
// it. Once the pipeline has run, `version` is expected + 1, or the check throws Error(conflict) "<kind> <id>
// changed concurrently (expected version N)" when the row had another version (or none).
void swap_version(Pipeline& p, const char* sql, const Params& params, std::string_view kind, std::string_view id,
                  int64_t expected, int64_t& version);

}  // namespace pg
}  // namespace v1
}  // namespace agentrt
