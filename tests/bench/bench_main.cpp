// agentrt-bench: W1 (approval loop), W2 (tool loop) and W3 (history read) of
// tests/bench/peers/WORKLOAD.md against the real runtime on a SQLite file (WAL, synchronous=NORMAL), or with
// STORE=postgres on a fresh database of the PostgreSQL server at PG_URL (a URL naming its `postgres` database:
// scripts/bench STORE=postgres starts a throwaway cluster), measured as tests/bench/peers/pg_bench.mjs measures
// the peers (the tables' bytes with TOAST and indexes, the WAL written during the timed phases).
// Env: T (200), K (5), WARMUP (100), WL = w1 | w2 | all, DB_DIR (/tmp/agentrt-bench), SYNC (NORMAL),
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
#include "store/postgres/postgres_store.hpp"
#include "store/sqlite_store.hpp"
#include "support/otlp_receiver.hpp"

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
        "SELECT count(*), coalesce(sum(length(interrupts)+length(usage)),0) FROM turns"}) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db, q, -1, &s, nullptr);
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

// Where spans go (TRACING): "" = tracing off.
std::string tracing_endpoint() {
  static const std::string endpoint = [] {
    const std::string t = env_str("TRACING", "off");
    if (t == "off" || t == "0" || t.empty()) return std::string();
    if (t.rfind("http", 0) == 0) return t;
    static testing::OtlpReceiver receiver(false);  // until the process exits; it counts requests only
    return receiver.endpoint();
  }();
  return endpoint;
}

RuntimeConfig bench_config(std::shared_ptr<Store> store, std::shared_ptr<ModelProvider> model) {
  RuntimeConfig c;
  c.tracing.otlp_endpoint = tracing_endpoint();
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
  Runtime rt(bench_config(store, model));
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

json run_w2(std::vector<std::string>& failures, int T, int K, const std::string& dir, const std::string& name) {
  BenchStore bs = BenchStore::open(dir, name);
  auto& store = bs.store;
  auto model = std::make_shared<ScriptedModel>(
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
  Runtime rt(bench_config(store, model));
  std::atomic<int> tool_exec{0};
  ToolSpec check;
  check.name = "check_availability";
  check.description = "Check availability";
  check.parameters = params_schema(true);
  check.idempotent = env_int("IDEMPOTENT", 1) != 0;
  check.handler = sync_tool([&](const ToolCallContext& c) {
    ++tool_exec;
    return ToolResult{json{{"room", "A1"}, {"day", "mon"}, {"step", c.args["step"]}, {"available", true}}, std::nullopt,
                      nullptr};
  });
  rt.tools().add(check);
  std::vector<double> lat(T);
  int completed = 0;
  const int64_t tx0 = store->write_transactions();
  bs.start_timing();
  auto t0 = Clock::now();
  for (int i = 0; i < T; ++i) {
    auto s = Clock::now();
    TurnInput in;
    in.thread_id = "w2-" + std::to_string(i);
    in.user_id = "bench";
    in.message.content = "check availability";
    TurnRecord done;
    if (sync_mode()) {
      done = rt.run_turn(in);
    } else {
      auto h = rt.start_turn(in);
      done = rt.wait(h.turn_id, std::chrono::seconds(30));
    }
    lat[i] = ms_since(s);
    if (done.status == TurnStatus::completed) ++completed;
  }
  double wall = ms_since(t0);
  const int64_t txns = store->write_transactions() - tx0;
  const int64_t wal = bs.wal_bytes();
  json w2 = summarize(T, wall, lat);
  w2["K"] = K;
  w2["idempotent_tool"] = check.idempotent;
  w2["counters"] = {
      {"model_calls", model->calls()}, {"tool_exec", tool_exec.load()}, {"completed_with_final", completed}};
  if (tool_exec != K * T) failures.push_back("w2 tool_exec " + std::to_string(tool_exec.load()));
  if (model->calls() != (K + 1) * T) failures.push_back("w2 model_calls " + std::to_string(model->calls()));
  if (completed != T) failures.push_back("w2 completed " + std::to_string(completed));
  // Every run's 2K+2 history items are committed.
  int64_t items = 0;
  for (int i = 0; i < T; ++i) items += static_cast<int64_t>(store->messages("w2-" + std::to_string(i)).size());
  if (items != (2 * K + 2) * T) failures.push_back("w2 persisted items " + std::to_string(items));
  w2["db"] = bs.stats(T, txns, wal);
  const RuntimeStats st = rt.stats();
  w2["tracing"] = {
      {"on", !tracing_endpoint().empty()}, {"spans_exported", st.spans_exported}, {"spans_dropped", st.spans_dropped}};
  return w2;
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
