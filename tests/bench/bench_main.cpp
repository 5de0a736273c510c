// agentrt-bench: W1 (approval loop), W2 (tool loop) and W3 (history read) of
// tests/bench/peers/WORKLOAD.md against the real runtime on a SQLite file (WAL, synchronous=NORMAL), or with
// STORE=postgres on a fresh database of the PostgreSQL server at PG_URL (a URL naming its `postgres` database:
// scripts/bench STORE=postgres starts a throwaway cluster), measured as tests/bench/peers/pg_bench.mjs measures
// the peers (the tables' bytes with TOAST and indexes, the WAL written during the timed phases).
// Env: T (200), K (5), WARMUP (100), WL = w1 | w2 | all | w2-tracing (W2 untraced and traced in one process, in
//      alternating blocks of BLOCK (100) runs: see run_w2_tracing; AA=1 runs both untraced, the measurement's own
//      spread), DB_DIR (/tmp/agentrt-bench), SYNC (NORMAL),
//      IDEMPOTENT (1: check_availability is declared idempotent, as a read-only check is),
//      MODE = async (start_turn/resume return at once, runs on a worker, the caller waits: the default)
//           | sync (run_turn/resume_turn run on the calling thread),
//      TRACING = off (the default) | on (spans exported as OTLP/HTTP JSON to a collector in this process: its cost is
//           measured with the runtime's) | an http:// URL (an OTLP collector's /v1/traces).
// Prints one JSON line like the peer scripts.
#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "agentrt/runtime.hpp"
#include "agentrt/scripted_model.hpp"
#include "bench/null_collector.hpp"
#include "store/postgres/postgres_store.hpp"
#include "store/sqlite_store.hpp"

using namespace agentrt;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kSystem = "You are a hotel booking assistant.";
const std::string kFinal =
    "Your booking is confirmed: room A1 on Monday. Check-in opens at 15:00 and check-out is at 11:00. "
    "Breakfast is served 7:00-10:00 on the ground floor. Simply reply here to change or cancel your booking.";

// The workload's model does not stream (WORKLOAD.md §1): whole text, whole tool calls.
const ScriptedModelOptions kNoStreaming{0, std::chrono::milliseconds(0), false};

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return std::atoi(v);
}
std::string env_str(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}

bool sync_mode() {
  static const bool sync = env_str("MODE", "async") == "sync";
  return sync;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
double r3(double x) { return std::round(x * 1000) / 1000; }

json summarize(int runs, double wall_ms, std::vector<double> lat) {
  std::vector<double> s = lat;
  std::sort(s.begin(), s.end());
  auto pct = [&](double p) {
    if (s.empty()) return 0.0;
    size_t i = static_cast<size_t>(std::min<double>(s.size() - 1, std::max(0.0, std::ceil(p / 100 * s.size()) - 1)));
    return s[i];
  };
  json dec = json::array();
  for (int d = 0; d < 10; ++d) {
    size_t a = d * lat.size() / 10, b = (d + 1) * lat.size() / 10;
    if (b > a) {
      double sum = 0;
      for (size_t i = a; i < b; ++i) sum += lat[i];
      dec.push_back(r3(sum / (b - a)));
    }
  }
  return json{{"runs", runs},
              {"wall_s", r3(wall_ms / 1000)},
              {"runs_per_s", r3(runs / (wall_ms / 1000))},
              {"mean_ms_per_run", r3(wall_ms / runs)},
              {"p50_ms", r3(pct(50))},
              {"p99_ms", r3(pct(99))},
              {"max_ms", r3(s.empty() ? 0 : s.back())},
              {"deciles_mean_ms", dec}};
}

int64_t file_size(const std::string& p) {
  std::error_code ec;
  auto n = std::filesystem::file_size(p, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

std::string fresh_db(const std::string& dir, const std::string& name) {
  std::filesystem::create_directories(dir);
  std::string p = dir + "/" + name;
  for (const char* suf : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(p + suf);
  return p;
}

json sqlite_db_stats(const std::string& path, SqliteStore& store, int T, int64_t txns) {
  json out;
  out["db_plus_wal_bytes_at_end"] = file_size(path) + file_size(path + "-wal");
  store.checkpoint();
  out["db_bytes_after_checkpoint"] = file_size(path);
  out["db_bytes_per_run"] = r3(static_cast<double>(file_size(path)) / T);
  out["write_transactions_per_run"] = r3(static_cast<double>(txns) / T);
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  int64_t rows = 0, bytes = 0;
  for (const char* q :
       {"SELECT count(*), coalesce(sum(length(body)),0) FROM events",
        "SELECT count(*), coalesce(sum(length(body)),0) FROM messages",
        "SELECT count(*), coalesce(sum(length(arguments)+length(output)+length(decision)),0) FROM ledger",
        "SELECT count(*), coalesce(sum(length(usage)),0) + (SELECT coalesce(sum(length(interrupts)),0) FROM "
        "turn_waits) "
        "FROM turns"}) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, q, -1, &s, nullptr) != SQLITE_OK) {
      std::fprintf(stderr, "bench: %s: %s\n", q, sqlite3_errmsg(db));
      std::exit(1);
    }
    if (sqlite3_step(s) == SQLITE_ROW) {
      rows += sqlite3_column_int64(s, 0);
      bytes += sqlite3_column_int64(s, 1);
      std::string table = std::string(q).substr(std::string(q).rfind(' ') + 1);
      out["rows"][table] = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  out["rows_per_run"] = r3(static_cast<double>(rows) / T);
  out["payload_bytes_per_run"] = r3(static_cast<double>(bytes) / T);
  return out;
}

SqliteStoreOptions store_options(const std::string& path) {
  SqliteStoreOptions o;
  o.path = path;
  o.synchronous = env_str("SYNC", "NORMAL");
  o.wal_autocheckpoint = env_int("WAL_AUTOCHECKPOINT", 1000);  // SQLite's default, as the peers run
  return o;
}

bool on_postgres() {
  static const bool pg = env_str("STORE", "sqlite") == "postgres";
  return pg;
}

// One statement on a PostgreSQL connection; its first value, or "" (Error(io) with the server's message).
std::string pg_value(const std::string& url, const std::string& sql) {
  PGconn* c = PQconnectdb(url.c_str());
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);  // "does not exist, skipping"
  std::string out, error;
  if (PQstatus(c) != CONNECTION_OK) {
    error = PQerrorMessage(c);
  } else {
    PGresult* r = PQexec(c, sql.c_str());
    const auto st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
      error = PQresultErrorMessage(r);
    else if (PQntuples(r) > 0 && PQnfields(r) > 0)
      out = PQgetvalue(r, 0, 0);
    PQclear(r);
  }
  PQfinish(c);
  if (!error.empty()) throw Error(ErrorCode::io, "bench: " + sql + ": " + error);
  return out;
}

std::string pg_admin_url() {
  const std::string url = env_str("PG_URL", "");
  if (url.find("/postgres") == std::string::npos)
    throw Error(ErrorCode::invalid_argument, "STORE=postgres needs PG_URL naming the server's postgres database");
  return url;
}

std::string pg_db_name(const std::string& name) {
  std::string db = name;
  for (char& ch : db)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) ch = '_';
  return db;
}

std::string pg_db_url(const std::string& name) {
  std::string url = pg_admin_url();
  return url.replace(url.find("/postgres"), 9, "/" + pg_db_name(name));
}

// The store of one measured (or warm-up) workload: a fresh SQLite file or a fresh PostgreSQL database.
struct BenchStore {
  std::shared_ptr<Store> store;
  std::shared_ptr<SqliteStore> sqlite;  // null on PostgreSQL
  std::string path;                     // the SQLite file, or the database's URL
  std::string wal_start;                // PostgreSQL: the WAL position when the timed phases began

  static BenchStore open(const std::string& dir, const std::string& name) {
    BenchStore b;
    if (on_postgres()) {
      pg_value(pg_admin_url(), "DROP DATABASE IF EXISTS " + pg_db_name(name));
      pg_value(pg_admin_url(), "CREATE DATABASE " + pg_db_name(name));
      PostgresStoreOptions o;
      o.url = b.path = pg_db_url(name);
      b.store = std::make_shared<PostgresStore>(o);
    } else {
      b.path = fresh_db(dir, name);
      b.sqlite = std::make_shared<SqliteStore>(store_options(b.path));
      b.store = b.sqlite;
    }
    return b;
  }

  void start_timing() {
    if (on_postgres()) wal_start = pg_value(pg_admin_url(), "SELECT pg_current_wal_insert_lsn()::text");
  }
  int64_t wal_bytes() const {
    if (!on_postgres()) return 0;
    return std::stoll(
        pg_value(pg_admin_url(), "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '" + wal_start + "')::bigint"));
  }

  json stats(int T, int64_t txns, int64_t wal) {
    if (sqlite) return sqlite_db_stats(path, *sqlite, T, txns);
    json out;
    const int64_t bytes = std::stoll(
        pg_value(path,
                 "SELECT coalesce(sum(pg_total_relation_size(c.oid)),0)::bigint FROM pg_class c JOIN pg_namespace n ON "
                 "n.oid=c.relnamespace WHERE n.nspname='public' AND c.relkind='r'"));
    out["store"] = "postgres";
    out["table_bytes"] = bytes;
    out["db_bytes_after_checkpoint"] = bytes;  // the column scripts/bench reads: the tables' bytes here
    out["db_bytes_per_run"] = r3(static_cast<double>(bytes) / T);
    out["wal_bytes_per_run"] = r3(static_cast<double>(wal) / T);
    out["write_transactions_per_run"] = r3(static_cast<double>(txns) / T);
    for (const char* table : {"events", "messages", "ledger", "turns", "threads"})
      out["rows"][table] = std::stoll(pg_value(path, std::string("SELECT count(*) FROM ") + table));
    return out;
  }
};

// A collector in this process, started once: it reads each request whole and answers 200 (bench/null_collector).
bench::NullCollector& in_process_collector() {
  static bench::NullCollector collector;  // until the process exits
  return collector;
}

// Where spans go (TRACING): "" = tracing off.
std::string tracing_endpoint() {
  static const std::string endpoint = [] {
    const std::string t = env_str("TRACING", "off");
    if (t == "off" || t == "0" || t.empty()) return std::string();
    if (t.rfind("http", 0) == 0) return t;
    return in_process_collector().endpoint();
  }();
  return endpoint;
}

RuntimeConfig bench_config(std::shared_ptr<Store> store, std::shared_ptr<ModelProvider> model,
                           const std::string& tracing) {
  RuntimeConfig c;
  c.tracing.otlp_endpoint = tracing;
  c.store = std::move(store);
  c.model = std::move(model);
  c.workers = 1;  // one run in flight at a time (WORKLOAD.md §1)
  // The pipeline matches the workload: one model call per agent step, no intent/organization calls.
  c.stages.intent.call_model = false;
  c.stages.organization.call_model = false;
  c.stages.execution.system_prompt = kSystem;
  return c;
}

ModelResult w1_script(const ModelRequest& req) {
  if (tool_results_since_last_user(req) < 1)
    return tool_call_result("call_1", "book_room", R"({"room":"A1","day":"mon"})");
  return text_result(kFinal);
}

json params_schema(bool with_step) {
  json p = {{"type", "object"},
            {"properties", {{"room", {{"type", "string"}}}, {"day", {{"type", "string"}}}}},
            {"required", {"room", "day"}}};
  if (with_step) p["properties"]["step"] = {{"type", "number"}};
  return p;
}

struct W1Result {
  json w1, w3;
};

W1Result run_w1(std::vector<std::string>& failures, int T, const std::string& dir, const std::string& name) {
  BenchStore bs = BenchStore::open(dir, name);
  auto& store = bs.store;
  auto model = std::make_shared<ScriptedModel>(w1_script, kNoStreaming);
  Runtime rt(bench_config(store, model, tracing_endpoint()));
  std::atomic<int> tool_exec{0};
  ToolSpec book;
  book.name = "book_room";
  book.description = "Book a room";
  book.parameters = params_schema(false);
  book.approval = ApprovalPolicy::always();
  book.handler = sync_tool([&](const ToolCallContext& c) {
    ++tool_exec;
    return ToolResult{json{{"ok", true}, {"booking_id", "BK-" + c.thread_id}, {"room", "A1"}, {"day", "mon"}},
                      std::nullopt, nullptr};
  });
  rt.tools().add(book);

  std::vector<double> lat_start(T), lat_resume(T), lat(T);
  std::vector<TurnRecord> paused(T);
  int interrupts = 0, completed = 0;
  const int64_t tx0 = store->write_transactions();
  bs.start_timing();
  auto t0 = Clock::now();
  for (int i = 0; i < T; ++i) {
    auto s = Clock::now();
    TurnInput in;
    in.thread_id = "w1-" + std::to_string(i);
    in.user_id = "bench";
    in.message.content = "book a room";
    if (sync_mode()) {
      paused[i] = rt.run_turn(in);
    } else {
      auto h = rt.start_turn(in);
      paused[i] = rt.wait(h.turn_id, std::chrono::seconds(30));
    }
    lat_start[i] = ms_since(s);
    if (paused[i].status == TurnStatus::waiting_approval)
      interrupts += static_cast<int>(paused[i].interrupts.size());
    else
      failures.push_back("w1-" + std::to_string(i) + ": not paused");
  }
  double phase_a = ms_since(t0);
  // Untimed check: every paused run is committed.
  int in_db = static_cast<int>(store->turns_in_status(TurnStatus::waiting_approval).size());
  if (in_db != T) failures.push_back("w1 paused turns in db " + std::to_string(in_db));
  auto t1 = Clock::now();
  for (int i = 0; i < T; ++i) {
    auto s = Clock::now();
    // A separate call: the resume reads the paused state from the store, not from this process's memory.
    auto t = rt.turn(paused[i].id);
    std::vector<Decision> approve = {
        Decision{t->interrupts.at(0).at("id").get<std::string>(), Decision::Action::approve, std::nullopt, ""}};
    TurnRecord done;
    if (sync_mode()) {
      done = rt.resume_turn(t->id, t->approval_request_id, approve);
    } else {
      rt.resume(t->id, t->approval_request_id, approve);
      done = rt.wait(t->id, std::chrono::seconds(30));
    }
    lat_resume[i] = ms_since(s);
    if (done.status == TurnStatus::completed) ++completed;
  }
  double phase_b = ms_since(t1);
  const int64_t txns = store->write_transactions() - tx0;
  const int64_t wal = bs.wal_bytes();
  for (int i = 0; i < T; ++i) lat[i] = lat_start[i] + lat_resume[i];

  // W3: read every thread's history back.
  std::vector<double> read_lat(T);
  int64_t msgs = 0;
  int ok_threads = 0;
  auto t3 = Clock::now();
  for (int i = 0; i < T; ++i) {
    auto s = Clock::now();
    auto h = rt.history("w1-" + std::to_string(i));
    read_lat[i] = ms_since(s);
    msgs += static_cast<int64_t>(h.size());
    if (h.size() == 4 && h[0].role == Role::user && h[0].content == "book a room" && h[1].role == Role::assistant &&
        h[1].tool_calls.size() == 1 && h[1].tool_calls[0].name == "book_room" && h[2].role == Role::tool &&
        h[3].role == Role::assistant && h[3].content == kFinal)
      ++ok_threads;
  }
  double w3_ms = ms_since(t3);

  W1Result r;
  r.w1 = summarize(T, phase_a + phase_b, lat);
  r.w1["start_phase"] = summarize(T, phase_a, lat_start);
  r.w1["resume_phase"] = summarize(T, phase_b, lat_resume);
  r.w1["counters"] = {{"model_calls", model->calls()},
                      {"tool_exec", tool_exec.load()},
                      {"starts", T},
                      {"interrupts", interrupts},
                      {"resumes", T},
                      {"completed_with_final", completed},
                      {"paused_threads_in_db", in_db}};
  r.w3 = summarize(T, w3_ms, read_lat);
  r.w3["messages_read"] = msgs;
  r.w3["threads_ok"] = ok_threads;
  if (tool_exec != T) failures.push_back("w1 tool_exec " + std::to_string(tool_exec.load()));
  if (interrupts != T) failures.push_back("w1 interrupts " + std::to_string(interrupts));
  if (completed != T) failures.push_back("w1 completed " + std::to_string(completed));
  if (model->calls() != 2 * T) failures.push_back("w1 model_calls " + std::to_string(model->calls()));
  if (ok_threads != T || msgs != 4 * T) failures.push_back("w3 threads_ok " + std::to_string(ok_threads));
  r.w1["db"] = bs.stats(T, txns, wal);
  return r;
}

// W2's setup: a scripted model that calls check_availability K times, then answers; one thread per run.
class W2 {
 public:
  W2(const std::string& dir, const std::string& name, int K, const std::string& tracing)
      : bs_(BenchStore::open(dir, name)), K_(K) {
    model_ = std::make_shared<ScriptedModel>(
        [K](const ModelRequest& req) {
          size_t n = tool_results_since_last_user(req);
          if (n < static_cast<size_t>(K)) {
            int k = static_cast<int>(n) + 1;
            return tool_call_result("call_" + std::to_string(k), "check_availability",
                                    json{{"room", "A1"}, {"day", "mon"}, {"step", k}}.dump());
          }
          return text_result(kFinal);
        },
        kNoStreaming);
    rt_ = std::make_unique<Runtime>(bench_config(bs_.store, model_, tracing));
    ToolSpec check;
    check.name = "check_availability";
    check.description = "Check availability";
    check.parameters = params_schema(true);
    check.idempotent = idempotent_ = env_int("IDEMPOTENT", 1) != 0;
    check.handler = sync_tool([this](const ToolCallContext& c) {
      ++tool_exec_;
      return ToolResult{json{{"room", "A1"}, {"day", "mon"}, {"step", c.args["step"]}, {"available", true}},
                        std::nullopt, nullptr};
    });
    rt_->tools().add(check);
  }

  BenchStore& store() { return bs_; }
  Runtime& runtime() { return *rt_; }

  // One run on a thread of its own; its latency in ms.
  double run_one() {
    auto s = Clock::now();
    TurnInput in;
    in.thread_id = "w2-" + std::to_string(runs_++);
    in.user_id = "bench";
    in.message.content = "check availability";
    TurnRecord done;
    if (sync_mode()) {
      done = rt_->run_turn(in);
    } else {
      auto h = rt_->start_turn(in);
      done = rt_->wait(h.turn_id, std::chrono::seconds(30));
    }
    if (done.status == TurnStatus::completed) ++completed_;
    return ms_since(s);
  }

  // Checks the counters and that every run's 2K+2 history items are committed; adds them to `out`.
  void check(std::vector<std::string>& failures, json& out, const std::string& label) {
    const int T = runs_;
    out["K"] = K_;
    out["idempotent_tool"] = idempotent_;
    out["counters"] = {
        {"model_calls", model_->calls()}, {"tool_exec", tool_exec_.load()}, {"completed_with_final", completed_}};
    if (tool_exec_ != K_ * T) failures.push_back(label + " tool_exec " + std::to_string(tool_exec_.load()));
    if (model_->calls() != (K_ + 1) * T) failures.push_back(label + " model_calls " + std::to_string(model_->calls()));
    if (completed_ != T) failures.push_back(label + " completed " + std::to_string(completed_));
    int64_t items = 0;
    for (int i = 0; i < T; ++i) items += static_cast<int64_t>(bs_.store->messages("w2-" + std::to_string(i)).size());
    if (items != (2 * K_ + 2) * T) failures.push_back(label + " persisted items " + std::to_string(items));
    const RuntimeStats st = rt_->stats();
    out["tracing"] = {{"on", rt_->config().tracing.otlp_endpoint != ""},
                      {"spans_exported", st.spans_exported},
                      {"spans_dropped", st.spans_dropped}};
  }

 private:
  BenchStore bs_;
  int K_;
  bool idempotent_ = true;
  std::shared_ptr<ScriptedModel> model_;
  std::unique_ptr<Runtime> rt_;
  std::atomic<int> tool_exec_{0};
  int runs_ = 0, completed_ = 0;
};

json run_w2(std::vector<std::string>& failures, int T, int K, const std::string& dir, const std::string& name) {
  W2 w(dir, name, K, tracing_endpoint());
  std::vector<double> lat(T);
  const int64_t tx0 = w.store().store->write_transactions();
  w.store().start_timing();
  auto t0 = Clock::now();
  for (int i = 0; i < T; ++i) lat[i] = w.run_one();
  double wall = ms_since(t0);
  const int64_t txns = w.store().store->write_transactions() - tx0;
  const int64_t wal = w.store().wal_bytes();
  json w2 = summarize(T, wall, lat);
  w.check(failures, w2, "w2");
  w2["db"] = w.store().stats(T, txns, wal);
  return w2;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double cpu_ms(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
double process_cpu_ms() { return cpu_ms(CLOCK_PROCESS_CPUTIME_ID); }
double thread_cpu_ms() { return cpu_ms(CLOCK_THREAD_CPUTIME_ID); }

// W2 with tracing off and on, in one process: two runtimes (a store each) take turns in blocks of BLOCK runs, and
// which one goes first alternates, so both meet the same machine moment by moment (a shared machine's noise is
// larger than the difference measured). A traced block ends when its spans are flushed to the collector, so its
// time includes sending its last spans rather than leaving that to overlap the next block; the collector runs in
// this process and its work is counted too. Reports both, and the overhead as the median of the blocks' ratios
// and as the ratio of the totals.
json run_w2_tracing(std::vector<std::string>& failures, int T, int K, int warmup, const std::string& dir) {
  const std::string endpoint = tracing_endpoint().empty() ? in_process_collector().endpoint() : tracing_endpoint();
  W2 off(dir, "agentrt_w2_off.db", K, ""), on(dir, "agentrt_w2_on.db", K, env_int("AA", 0) ? "" : endpoint);
  for (int i = 0; i < warmup; ++i) {
    off.run_one();
    on.run_one();
  }
  if (!on.runtime().flush_traces()) failures.push_back("w2-tracing: the warm-up's spans were not flushed");
  const int block = std::max(1, env_int("BLOCK", 100));
  const int rounds = std::max(1, T / block);
  // Wall time, the CPU time of the process (every thread: the runtime's, the exporter's, the collector's) and of this
  // thread (which runs the turns: MODE=sync).
  double off_total = 0, on_total = 0, off_cpu = 0, on_cpu = 0, flush_total = 0;
  std::vector<double> ratios, cpu_ratios, run_thread_ratios, before_flush_ratios;
  for (int r = 0; r < rounds; ++r) {
    double ms[2] = {0, 0}, cpu[2] = {0, 0}, thread_cpu[2] = {0, 0}, flush_ms = 0;
    for (int k = 0; k < 2; ++k) {
      const bool traced = (k == 0) == (r % 2 == 1);
      const double c0 = process_cpu_ms(), tc0 = thread_cpu_ms();
      auto t0 = Clock::now();
      for (int i = 0; i < block; ++i) (traced ? on : off).run_one();
      const auto f0 = Clock::now();
      if (traced && !on.runtime().flush_traces()) failures.push_back("w2-tracing: spans not flushed");
      if (traced) flush_ms = ms_since(f0);
      ms[traced] = ms_since(t0);
      cpu[traced] = process_cpu_ms() - c0;
      thread_cpu[traced] = thread_cpu_ms() - tc0;
    }
    flush_total += flush_ms;
    off_total += ms[0];
    on_total += ms[1];
    before_flush_ratios.push_back((ms[1] - flush_ms) / ms[0]);
    off_cpu += cpu[0];
    on_cpu += cpu[1];
    ratios.push_back(ms[1] / ms[0]);
    cpu_ratios.push_back(cpu[1] / cpu[0]);
    run_thread_ratios.push_back(thread_cpu[1] / thread_cpu[0]);
  }
  const int runs = rounds * block;
  json out = {{"runs_each", runs},
              {"block", block},
              {"off_ms_per_run", r3(off_total / runs)},
              {"on_ms_per_run", r3(on_total / runs)},
              {"overhead_pct_median_of_blocks", r3(100 * (median_of(ratios) - 1))},
              {"overhead_pct_total", r3(100 * (on_total / off_total - 1))},
              {"off_cpu_ms_per_run", r3(off_cpu / runs)},
              {"on_cpu_ms_per_run", r3(on_cpu / runs)},
              {"cpu_overhead_pct_median_of_blocks", r3(100 * (median_of(cpu_ratios) - 1))},
              {"run_thread_cpu_overhead_pct_median_of_blocks", r3(100 * (median_of(run_thread_ratios) - 1))},
              {"flush_ms_per_block", r3(flush_total / rounds)},
              // The same without the wait for the collector's answers at a traced block's end (what a run never waits
              // for): how much of the overhead is that wait, which smaller blocks pay more often.
              {"overhead_pct_median_of_blocks_before_flush", r3(100 * (median_of(before_flush_ratios) - 1))}};
  json off_check, on_check;
  off.check(failures, off_check, "w2-tracing off");
  on.check(failures, on_check, "w2-tracing on");
  out["spans_exported"] = on_check["tracing"]["spans_exported"];
  if (tracing_endpoint().empty() && in_process_collector().requests() > 0) {
    out["collector"] = {{"requests", in_process_collector().requests()},
                        {"body_bytes", in_process_collector().body_bytes()},
                        {"malformed", in_process_collector().malformed()}};
    if (in_process_collector().malformed() != 0) failures.push_back("w2-tracing: malformed export requests");
  }
  out["spans_dropped"] = on_check["tracing"]["spans_dropped"];
  const int64_t spans = on.runtime().config().tracing.otlp_endpoint.empty() ? 0 : (2 * K + 2) * (runs + warmup);
  if (out["spans_dropped"] != 0) failures.push_back("w2-tracing: spans dropped");
  if (out["spans_exported"] != spans) failures.push_back("w2-tracing: spans exported " + out["spans_exported"].dump());
  return out;
}

}  // namespace

int main() {
  const int T = env_int("T", 200), K = env_int("K", 5), WARMUP = env_int("WARMUP", 100);
  const std::string WL = env_str("WL", "all");
  const std::string dir = env_str("DB_DIR", "/tmp/agentrt-bench");
  std::vector<std::string> failures;
  json out = {{"framework", "agentrt"},
              {"versions", {{"agentrt", "0.1.0"}, {"sqlite", sqlite3_libversion()}}},
              {"params",
               {{"T", T},
                {"K", K},
                {"WARMUP", WARMUP},
                {"WL", WL},
                {"sync", env_str("SYNC", "NORMAL")},
                {"store", env_str("STORE", "sqlite")},
                {"mode", env_str("MODE", "async")},
                {"tracing", env_str("TRACING", "off")}}}};
  try {
    auto cleanup = [&](const std::string& n) {
      if (on_postgres()) {
        pg_value(pg_admin_url(), "DROP DATABASE IF EXISTS " + pg_db_name(n));
        return;
      }
      for (const char* suf : {"", "-wal", "-shm"}) std::filesystem::remove(dir + "/" + n + suf);
    };
    if (WL == "w1" || WL == "all") {
      if (WARMUP > 0) {
        std::vector<std::string> wf;
        run_w1(wf, WARMUP, dir, "agentrt_w1_warmup.db");
        for (auto& f : wf) failures.push_back("warmup: " + f);
        cleanup("agentrt_w1_warmup.db");
      }
      auto r = run_w1(failures, T, dir, "agentrt_w1.db");
      out["w1"] = r.w1;
      out["w3"] = r.w3;
    }
    if (WL == "w2" || WL == "all") {
      if (WARMUP > 0) {
        std::vector<std::string> wf;
        run_w2(wf, WARMUP, K, dir, "agentrt_w2_warmup.db");
        for (auto& f : wf) failures.push_back("warmup: " + f);
        cleanup("agentrt_w2_warmup.db");
      }
      out["w2"] = run_w2(failures, T, K, dir, "agentrt_w2.db");
    }
    if (WL == "w2-tracing") {
      out["w2_tracing"] = run_w2_tracing(failures, T, K, WARMUP, dir);
      for (const char* n : {"agentrt_w2_off.db", "agentrt_w2_on.db"}) cleanup(n);
    }
  } catch (const std::exception& e) {
    failures.push_back(std::string("exception: ") + e.what());
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  out["memory"] = {{"peak_rss_mb", r3(ru.ru_maxrss / 1024.0)}};
  out["ok"] = failures.empty();
  out["failures"] = failures;
  std::cout << out.dump() << std::endl;
  return failures.empty() ? 0 : 1;
}
