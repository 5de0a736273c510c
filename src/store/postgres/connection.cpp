#include "store/postgres/connection.hpp"

#include <libpq-fe.h>

#include <charconv>
#include <cstdlib>
#include <memory>
#include <utility>

#include <fmt/format.h>

namespace agentrt {
inline namespace v1 {
namespace pg {

namespace {

// libpq's messages span lines ("...failed: Connection refused\n\tIs the server running..."): one line.
std::string one_line(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\r') {
      if (!out.empty() && out.back() != ' ') out += "; ";
    } else if (c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out;
}

// The first line, without libpq's "FATAL:  " prefix.
std::string first_line(std::string_view s) {
  s = s.substr(0, s.find('\n'));
  for (std::string_view prefix : {"FATAL:  ", "ERROR:  "})
    if (s.starts_with(prefix)) s.remove_prefix(prefix.size());
  return one_line(s);
}

using Options = std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)>;

// The URL's connection options, or nullptr (and libpq's reason, which may quote the URL) when it is not one.
Options parse(const std::string& url) {
  char* err = nullptr;
  Options o(PQconninfoParse(url.c_str(), &err), &PQconninfoFree);
  if (err) PQfreemem(err);
  return o;
}

bool is_url(std::string_view url) { return url.starts_with("postgresql://") || url.starts_with("postgres://"); }

const char* field(const PGresult* r, int code) {
  const char* v = r ? PQresultErrorField(r, code) : nullptr;
  return v ? v : "";
}

}  // namespace

void check_url(const std::string& url, std::string_view where) {
  if (url.empty())
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: url is required (postgresql://user@host:port/db)", where));
  if (!is_url(url))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: url must start with postgresql:// (postgresql://user@host:port/db)", where));
  if (!parse(url))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: url is not a valid PostgreSQL connection URL (postgresql://user@host:port/db; "
                            "percent-encode special characters)",
                            where));
}

std::string describe_target(const std::string& url) {
  auto o = parse(url);
  if (!o) return "postgresql://(invalid url)";
  std::string user, host, port, db;
  for (auto* p = o.get(); p->keyword; ++p) {
    if (!p->val) continue;
    std::string_view k = p->keyword;
    if (k == "user") user = p->val;
    if (k == "host" || (k == "hostaddr" && host.empty())) host = p->val;
    if (k == "port") port = p->val;
    if (k == "dbname") db = p->val;
  }
  return fmt::format("postgresql://{}{}{}{}/{}", user.empty() ? "" : user + "@", host, port.empty() ? "" : ":", port,
                     db);
}

// ------------------------------------------------------------------------------------------------- params

Params& Params::add(std::string_view v) {
  values_.push_back(v.data() ? v.data() : "");  // a null pointer would be SQL NULL
  lengths_.push_back(static_cast<int>(v.size()));
  formats_.push_back(1);
  return *this;
}

Params& Params::own(std::string v, int format) {
  owned_.push_back(std::move(v));
  values_.push_back(owned_.back().c_str());
  lengths_.push_back(static_cast<int>(owned_.back().size()));
  formats_.push_back(format);
  return *this;
}

Params& Params::add(std::string&& v) { return own(std::move(v), 1); }
Params& Params::add(int64_t v) { return own(std::to_string(v), 0); }
Params& Params::add(bool v) { return own(v ? "t" : "f", 0); }
Params& Params::add(double v) { return own(fmt::format("{:.17g}", v), 0); }

// ------------------------------------------------------------------------------------------------- results

std::string Row::text(int col) const {
  return std::string(PQgetvalue(r_, row_, col), static_cast<size_t>(PQgetlength(r_, row_, col)));
}
const unsigned char* Row::raw(int col) const {
  return reinterpret_cast<const unsigned char*>(PQgetvalue(r_, row_, col));
}
size_t Row::size(int col) const { return static_cast<size_t>(PQgetlength(r_, row_, col)); }
int64_t Row::i64(int col) const {
  const char* v = PQgetvalue(r_, row_, col);
  int64_t out = 0;
  std::from_chars(v, v + PQgetlength(r_, row_, col), out);
  return out;
}
double Row::f64(int col) const { return std::strtod(PQgetvalue(r_, row_, col), nullptr); }
bool Row::flag(int col) const { return PQgetvalue(r_, row_, col)[0] == 't'; }
bool Row::null(int col) const { return PQgetisnull(r_, row_, col) != 0; }

Result::~Result() { PQclear(r_); }
Result& Result::operator=(Result&& o) noexcept {
  if (this != &o) {
    PQclear(r_);
    r_ = o.r_;
    o.r_ = nullptr;
  }
  return *this;
}
int Result::rows() const { return r_ ? PQntuples(r_) : 0; }
int64_t Result::affected() const {
  const char* n = r_ ? PQcmdTuples(r_) : "";
  int64_t out = 0;
  std::from_chars(n, n + std::char_traits<char>::length(n), out);
  return out;
}

void read_column(const Row& r, int i, std::string& v) { v = r.text(i); }
void read_column(const Row& r, int i, int64_t& v) { v = r.i64(i); }
void read_column(const Row& r, int i, int& v) { v = static_cast<int>(r.i64(i)); }
void read_column(const Row& r, int i, bool& v) { v = r.flag(i); }
void read_column(const Row& r, int i, double& v) { v = r.f64(i); }

// ------------------------------------------------------------------------------------------------- connection

Connection::Connection(const std::string& url, const std::string& target, int connect_timeout_s) : target_(target) {
  const std::string timeout = std::to_string(connect_timeout_s);
  // Ours first, the URL's after (they override), the encoding last (the store's text is UTF-8).
  const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", "client_encoding", nullptr};
  const char* values[] = {timeout.c_str(), "agentrt", url.c_str(), "UTF8", nullptr};
  conn_ = PQconnectdbParams(keys, values, 1);
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    std::string why = conn_ ? one_line(PQerrorMessage(conn_)) : "out of memory";
    PQfinish(conn_);
    conn_ = nullptr;
    throw DbError(ErrorCode::io, fmt::format("postgres: cannot connect to {}: {}", target_, why), "08001", true);
  }
  pid_ = PQbackendPID(conn_);
}

Connection::~Connection() { PQfinish(conn_); }

void Connection::fail(PGresult* res, std::string_view what) {
  const std::string state = field(res, PG_DIAG_SQLSTATE);
  std::string primary = one_line(field(res, PG_DIAG_MESSAGE_PRIMARY));
  const std::string constraint = field(res, PG_DIAG_CONSTRAINT_NAME);
  // Without a result, libpq's own message: its first line says what happened ("server closed the connection
  // unexpectedly", "terminating connection due to administrator command"); the rest is advice.
  if (primary.empty()) primary = first_line(PQerrorMessage(conn_));
  PQclear(res);
  const bool lost = PQstatus(conn_) != CONNECTION_OK || state.starts_with("08") || state == "57P01" ||
                    state == "57P02" || state == "57P03";
  ErrorCode code = ErrorCode::io;
  std::string msg;
  if (lost) {
    msg = fmt::format("postgres: {}: the connection to {} was lost: {}", what, target_, primary);
  } else if (state == "25006") {
    msg = fmt::format("postgres: {}: {} is read-only (default_transaction_read_only, or a standby): {}", what, target_,
                      primary);
  } else {
    if (state == "23505" || state == "23P01") code = ErrorCode::conflict;
    if (state == "22021" || state == "22P05") code = ErrorCode::invalid_argument;
    msg = fmt::format("postgres: {}: {} (SQLSTATE {})", what, primary, state.empty() ? "none" : state);
  }
  DbError e(code, std::move(msg), state, lost);
  e.constraint = constraint;
  throw e;
}

const std::string& Connection::statement(const char* sql, bool& fresh) {
  auto it = prepared_.find(sql);
  fresh = it == prepared_.end();
  if (fresh) it = prepared_.emplace(sql, "agentrt_" + std::to_string(next_statement_++)).first;
  return it->second;
}

Result Connection::exec(const char* sql, const Params& p, std::string_view what) {
  bool fresh = false;
  const std::string& name = statement(sql, fresh);
  if (fresh) {
    PGresult* r = PQprepare(conn_, name.c_str(), sql, 0, nullptr);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      prepared_.erase(sql);
      fail(r, what);
    }
    PQclear(r);
  }
  PGresult* r = PQexecPrepared(conn_, name.c_str(), p.size(), p.values(), p.lengths(), p.formats(), 0);
  const auto st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) fail(r, what);
  return Result(r);
}

void Connection::run(const char* sql, std::string_view what) {
  PGresult* r = PQexec(conn_, sql);
  const auto st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) fail(r, what);
  PQclear(r);
}

void Connection::rollback() noexcept {
  if (PQstatus(conn_) != CONNECTION_OK || PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
  PQclear(PQexec(conn_, "ROLLBACK"));
}

bool Connection::broken() const {
  return poisoned_ || PQstatus(conn_) != CONNECTION_OK || PQtransactionStatus(conn_) != PQTRANS_IDLE;
}

// ------------------------------------------------------------------------------------------------- pipeline

namespace {
// Statements sent before their answers are read. Each answer is a few dozen bytes: a part's answers fit in the
// socket's buffer, so the server never waits for this side to read while this side waits to send.
constexpr size_t kPartStatements = 128;
}  // namespace

Pipeline::Pipeline(Connection& c) : c_(c) {}

Pipeline::~Pipeline() {
  PQclear(error_);
  // Left with statements unsent or unanswered (an exception between add and run): the connection is not reused.
  if (!sent_.empty() || PQpipelineStatus(c_.conn_) != PQ_PIPELINE_OFF) c_.poisoned_ = true;
}

void Pipeline::add(const char* sql, const Params& p, std::string_view what, Check check) {
  if (error_ || lost_) return;  // run() throws what ended it; the transaction is rolled back
  pg_conn* conn = c_.conn_;
  if (PQpipelineStatus(conn) == PQ_PIPELINE_OFF && PQenterPipelineMode(conn) != 1) c_.fail(nullptr, what);
  bool fresh = false;
  const std::string& name = c_.statement(sql, fresh);
  if (fresh) {
    sent_.push_back(Sent{sql, true, std::string(what), nullptr});
    if (PQsendPrepare(conn, name.c_str(), sql, 0, nullptr) != 1) {
      c_.poisoned_ = true;
      c_.fail(nullptr, what);
    }
  }
  sent_.push_back(Sent{sql, false, std::string(what), std::move(check)});
  if (PQsendQueryPrepared(conn, name.c_str(), p.size(), p.values(), p.lengths(), p.formats(), 0) != 1) {
    c_.poisoned_ = true;
    c_.fail(nullptr, what);
  }
  if (sent_.size() >= kPartStatements) send_part();
}

void Pipeline::send_part() {
  if (sent_.empty()) return;
  pg_conn* conn = c_.conn_;
  std::vector<Sent> part = std::move(sent_);
  sent_.clear();
  bool synced = false;
  if (PQpipelineSync(conn) == 1) {
    // Each statement's answer is a result and then a null; the sync's is PGRES_PIPELINE_SYNC (no null after).
    size_t i = 0;
    while (i <= part.size()) {
      PGresult* r = PQgetResult(conn);
      if (!r) {
        if (PQstatus(conn) != CONNECTION_OK) break;
        ++i;
        continue;
      }
      const auto st = PQresultStatus(r);
      if (st == PGRES_PIPELINE_SYNC) {
        PQclear(r);
        synced = true;
        break;
      }
      if (i >= part.size()) {  // more than was asked: the protocol's state is not what this side thinks
        PQclear(r);
        break;
      }
      Sent& s = part[i];
      if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        if (s.check && !error_) {
          done_.emplace_back(std::move(s.check), Result(r));
          r = nullptr;
        }
        PQclear(r);
        continue;
      }
      if (s.prepare) c_.prepared_.erase(s.sql);  // not prepared: failed, or skipped after an error
      if (st != PGRES_PIPELINE_ABORTED && !error_) {
        error_ = r;
        error_what_ = s.what;
      } else {
        PQclear(r);
      }
    }
  }
  if (synced && PQexitPipelineMode(conn) == 1) return;
  c_.poisoned_ = true;
  lost_ = true;
  if (!error_) error_what_ = part.back().what;
}

void Pipeline::run() {
  send_part();
  auto done = std::move(done_);
  done_.clear();
  if (error_) c_.fail(std::exchange(error_, nullptr), error_what_);
  if (lost_) c_.fail(nullptr, error_what_);
  for (auto& [check, res] : done) check(res);
}

int64_t swap_version(Connection& c, const char* sql, const Params& params, std::string_view kind, std::string_view id,
                     int64_t expected) {
  if (c.exec(sql, params, fmt::format("update a {}", kind)).affected() == 0)
    throw Error(ErrorCode::conflict,
                fmt::format("{} {} changed concurrently (expected version {})", kind, id, expected));
  return expected + 1;
}

void swap_version(Pipeline& p, const char* sql, const Params& params, std::string_view kind, std::string_view id,
                  int64_t expected, int64_t& version) {
  p.add(sql, params, fmt::format("update a {}", kind),
        [kind = std::string(kind), id = std::string(id), expected, &version](const Result& r) {
          if (r.affected() == 0)
            throw Error(ErrorCode::conflict,
                        fmt::format("{} {} changed concurrently (expected version {})", kind, id, expected));
          version = expected + 1;
        });
}

}  // namespace pg
}  // namespace v1
}  // namespace agentrt
