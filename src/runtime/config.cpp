#include "agentrt/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "agentrt/json_limits.hpp"
#include "agentrt/json_reader.hpp"
#include "agentrt/model_config.hpp"
#include "agentrt/scripted_model.hpp"
#include "store/document_layout.hpp"
#include "store/fs_object_store.hpp"
#include "store/postgres/connection.hpp"
#include "store/postgres/document_pointers.hpp"
#include "store/postgres/postgres_store.hpp"
#include "store/s3_object_store.hpp"
#include "store/sqlite_store.hpp"
#include "util/crypto.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

// The config's own refusals read "config: <what>"; its objects' keys are checked by the shared JSON reader.
void only_keys(const json& j, std::initializer_list<std::string_view> keys, const char* where) {
  const std::string name = std::string_view(where) == "config" ? std::string(where) : fmt::format("config: {}", where);
  wire::JsonReader(j, name).only_keys(keys);
}

std::string str(const json& j, const char* key, std::string dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_string()) wire::refuse("config", fmt::format("'{}' must be a string", key));
  return it->get<std::string>();
}

int64_t num(const json& j, const char* key, int64_t dflt, int64_t lo, int64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_number_integer()) wire::refuse("config", fmt::format("'{}' must be an integer", key));
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) wire::refuse("config", fmt::format("'{}' must be between {} and {}, not {}", key, lo, hi, v));
  return v;
}

// The URL-signing key: created readable by its owner only from its first byte (O_EXCL, mode 0600), then moved
// into place, so no other user can read it even for a moment.
std::string load_or_create_secret(const std::filesystem::path& dir) {
  auto p = dir / "signing.key";
  std::ifstream in(p, std::ios::binary);
  if (in) {
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (s.size() >= 32) return s;
  }
  std::string secret = crypto::random_hex(32);
  const std::string tmp = (dir / fmt::format(".signing.key.{}.tmp", ::getpid())).string();
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(ErrorCode::io, fmt::format("config: cannot create the signing key in {}", dir.string()));
  bool ok = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size()) && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, p, ec);
  if (!ok || ec) {
    ::unlink(tmp.c_str());
    throw Error(ErrorCode::io, fmt::format("config: cannot write the signing key {}", p.string()));
  }
  return secret;
}

// The data directory holds every user's conversations: created for its owner only (0700).
void create_private_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) return;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::io, fmt::format("config: cannot create data_dir {}: {}", dir.string(), ec.message()));
  ::chmod(dir.c_str(), 0700);
}

// The value of the environment variable named by `key` (or `dflt` when the key is absent), which must be set.
std::string env_value(const wire::JsonReader& r, const json& objects, const char* key, const char* dflt,
                      std::string_view what) {
  const std::string name = str(objects, key, dflt);
  if (name.empty()) r.fail(fmt::format("'{}' must name an environment variable", key));
  const char* v = std::getenv(name.c_str());
  if (!v || !*v) r.fail(fmt::format("environment variable {} ({}) is not set", name, what));
  return v;
}

// The secret of this deployment's own signed URLs: shared by the processes of a deployment through
// signing_secret_env, else a random key kept in the data directory (one machine).
std::string url_signing_secret(const wire::JsonReader& r, const json& objects, const std::filesystem::path& data) {
  if (str(objects, "signing_secret_env", "").empty()) return load_or_create_secret(data);
  return env_value(r, objects, "signing_secret_env", "", "signing secret");
}

std::shared_ptr<ObjectStore> object_store_from_json(const json& objects, const std::filesystem::path& data) {
  const wire::JsonReader r(objects, "config: objects");
  const std::string type = str(objects, "type", "fs");
  if (type == "fs") {
    r.only_keys({"type", "root", "bucket", "signing_secret_env", "public_base_url", "fsync"});
    FsObjectStoreOptions o;
    o.root = str(objects, "root", (data / "objects").string());
    o.bucket = str(objects, "bucket", "agentrt");
    o.signing_secret = url_signing_secret(r, objects, data);
    o.public_base_url = str(objects, "public_base_url", "http://127.0.0.1:8080/api/v1/objects");
    o.fsync = r.optional_bool("fsync").value_or(false);
    return std::make_shared<FsObjectStore>(std::move(o));
  }
  if (type != "s3") r.fail(fmt::format("type '{}' is not available (fs, s3)", type));
  r.only_keys({"type", "endpoint", "region", "bucket", "prefix", "access_key_env", "secret_key_env",
               "session_token_env", "path_style", "url_signing", "signing_secret_env", "public_base_url",
               "conditional_writes", "max_attempts"});
  S3ObjectStoreOptions o;
  o.region = str(objects, "region", "us-east-1");
  o.endpoint = str(objects, "endpoint", fmt::format("https://s3.{}.amazonaws.com", o.region));
  o.bucket = r.required_string("bucket");
  o.prefix = str(objects, "prefix", "");
  o.access_key = env_value(r, objects, "access_key_env", "AWS_ACCESS_KEY_ID", "S3 access key");
  o.secret_key = env_value(r, objects, "secret_key_env", "AWS_SECRET_ACCESS_KEY", "S3 secret key");
  if (!str(objects, "session_token_env", "").empty())
    o.session_token = env_value(r, objects, "session_token_env", "", "S3 session token");
  o.path_style = r.optional_bool("path_style").value_or(false);
  const std::string signing = str(objects, "url_signing", "s3");
  if (signing != "s3" && signing != "server")
    r.wrong_value("url_signing", "\"s3\" or \"server\"", objects["url_signing"]);
  o.url_signing = signing == "s3" ? UrlSigning::s3 : UrlSigning::server;
  if (o.url_signing == UrlSigning::server) {
    o.signing_secret = url_signing_secret(r, objects, data);
    o.public_base_url = str(objects, "public_base_url", "http://127.0.0.1:8080/api/v1/objects");
  }
  const std::string conditional = str(objects, "conditional_writes", "probe");
  if (conditional != "probe" && conditional != "native" && conditional != "emulated")
    r.wrong_value("conditional_writes", "\"probe\", \"native\" or \"emulated\"", objects["conditional_writes"]);
  o.conditional_writes = conditional == "native"     ? ConditionalWrites::native
                         : conditional == "emulated" ? ConditionalWrites::emulated
                                                     : ConditionalWrites::probe;
  o.max_attempts = static_cast<int>(r.optional_integer("max_attempts", 1, 20).value_or(o.max_attempts));
  try {
    return std::make_shared<S3ObjectStore>(std::move(o));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) throw;
    r.fail(e.message());
  }
}

}  // namespace

RuntimeConfig runtime_config_from_json(const json& j) {
  // Before anything is copied out of it (a deep copy of a value nested too deep overflows the stack).
  check_json_depth(j, kDefaultMaxJsonDepth, "config");
  only_keys(j,
            {"data_dir",
             "store",
             "objects",
             "model",
             "stages",
             "workers",
             "max_steps",
             "approval_timeout_ms",
             "context_budget_chars",
             "flush_interval_ms",
             "sweep_interval_ms",
             "instance_lease_ms",
             "max_input_bytes",
             "summary_max_chars",
             "job_timeout_ms",
             "commit_retries",
             "commit_retry_backoff_ms",
             "max_json_depth",
             "max_input_parts",
             "max_input_messages",
             "max_context_entries",
             "max_context_bytes",
             "max_state_bytes",
             "max_client_tools",
             "max_client_tools_bytes",
             "mcp_servers",
             "mcp_pins_path",
             "budgets",
             "prices",
             "tracing"},
            "config");
  RuntimeConfig c;
  std::filesystem::path data = str(j, "data_dir", "agentrt-data");
  create_private_dir(data);

  json store = j.value("store", json::object());
  only_keys(store,
            {"type", "path", "synchronous", "url", "pool_size", "layout", "document_max_bytes", "document_index_path"},
            "store");
  const std::string store_type = str(store, "type", "sqlite");
  if (store_type != "sqlite" && store_type != "postgres")
    wire::refuse("config", fmt::format("store type '{}' is not available (sqlite, postgres)", store_type));
  // Each type's own keys; another type's are a mistake worth saying.
  static constexpr std::array<const char*, 2> kSqliteOnly{"path", "synchronous"}, kPostgresOnly{"url", "pool_size"};
  for (const char* key : store_type == "sqlite" ? kPostgresOnly : kSqliteOnly)
    if (store.contains(key))
      wire::refuse("config", fmt::format("store.{} is not a key of store type {}", key, store_type));
  const std::string db_path = str(store, "path", (data / "agentrt.db").string());
  const std::string sync = str(store, "synchronous", "NORMAL");
  const std::string layout = str(store, "layout", "rows");
  if (layout != "rows" && layout != "document")
    wire::refuse("config", fmt::format("store.layout must be \"rows\" or \"document\", not '{}'", layout));
  PostgresStoreOptions postgres;
  if (store_type == "postgres") {
    postgres.url = str(store, "url", "");
    pg::check_url(postgres.url, "config: store");
    postgres.pool_size = static_cast<int>(num(store, "pool_size", postgres.pool_size, 1, 64));
  }

  const json objects = j.contains("objects") ? j["objects"] : json::object();
  if (!objects.is_null()) c.objects = object_store_from_json(objects, data);

  std::unique_ptr<MessageLayout> messages;  // nullptr: the rows layout, the store's own messages table
  if (layout == "document") {
    // The conversation-document layout: a thread's messages as one JSON document in the object store.
    if (!c.objects)
      wire::refuse("config", "store.layout \"document\" keeps messages in the object store: objects must not be null");
    DocumentLayoutOptions d;
    d.path = str(store, "document_index_path", db_path == ":memory:" ? db_path : db_path + ".docs");
    d.synchronous = sync;
    if (store.contains("document_max_bytes")) {
      const json& v = store["document_max_bytes"];
      if (!v.is_number_integer() || v.get<int64_t>() <= 0)
        wire::refuse("config", "store.document_max_bytes must be a positive integer");
      d.max_document_bytes = v.get<uint64_t>();
    }
    // On PostgreSQL the pointer rows live in the store's database: every process on it shares them.
    if (store_type == "postgres") d.pointers = pg::document_pointers(postgres);
    messages = std::make_unique<DocumentLayout>(c.objects, d);
  }
  if (store_type == "postgres")
    c.store = std::make_shared<PostgresStore>(postgres, std::move(messages));
  else
    c.store = std::make_shared<SqliteStore>(SqliteStoreOptions{db_path, sync}, std::move(messages));

  json model = j.value("model", json::object());
  if (!model.is_object()) wire::refuse("config", "model must be an object");
  c.model = model_provider_from_json(model);

  if (j.contains("stages")) c.stages = j["stages"].get<StagePolicies>();
  c.workers = static_cast<int>(num(j, "workers", c.workers, 1, 256));
  c.max_steps = static_cast<int>(num(j, "max_steps", c.max_steps, 1, 1000));
  c.approval_timeout = std::chrono::milliseconds(
      num(j, "approval_timeout_ms", c.approval_timeout.count(), 1, int64_t{365} * 24 * 3600 * 1000));
  c.job_timeout =
      std::chrono::milliseconds(num(j, "job_timeout_ms", c.job_timeout.count(), 1, int64_t{365} * 24 * 3600 * 1000));
  c.context_budget_chars = static_cast<size_t>(
      num(j, "context_budget_chars", static_cast<int64_t>(c.context_budget_chars), 1000, int64_t{1} << 40));
  c.flush_interval = std::chrono::milliseconds(num(j, "flush_interval_ms", c.flush_interval.count(), 1, 10000));
  c.sweep_interval = std::chrono::milliseconds(num(j, "sweep_interval_ms", c.sweep_interval.count(), 1, 3600000));
  c.instance_lease = std::chrono::milliseconds(num(j, "instance_lease_ms", c.instance_lease.count(), 10, 3600000));
  c.max_input_bytes =
      static_cast<size_t>(num(j, "max_input_bytes", static_cast<int64_t>(c.max_input_bytes), 1, int64_t{1} << 32));
  c.commit_retries = static_cast<int>(num(j, "commit_retries", c.commit_retries, 0, 10));
  c.commit_retry_backoff =
      std::chrono::milliseconds(num(j, "commit_retry_backoff_ms", c.commit_retry_backoff.count(), 0, 10000));
  c.max_json_depth = static_cast<size_t>(num(j, "max_json_depth", static_cast<int64_t>(c.max_json_depth), 1,
                                             static_cast<int64_t>(kMaxConfigurableJsonDepth)));
  c.max_input_parts =
      static_cast<size_t>(num(j, "max_input_parts", static_cast<int64_t>(c.max_input_parts), 1, 100000));
  c.max_input_messages =
      static_cast<size_t>(num(j, "max_input_messages", static_cast<int64_t>(c.max_input_messages), 1, 1000000));
  c.max_context_entries =
      static_cast<size_t>(num(j, "max_context_entries", static_cast<int64_t>(c.max_context_entries), 0, 100000));
  c.max_context_bytes = static_cast<size_t>(
      num(j, "max_context_bytes", static_cast<int64_t>(c.max_context_bytes), 0, int64_t{64} * 1024 * 1024));
  c.max_state_bytes = static_cast<size_t>(
      num(j, "max_state_bytes", static_cast<int64_t>(c.max_state_bytes), 2, int64_t{64} * 1024 * 1024));
  c.max_client_tools =
      static_cast<size_t>(num(j, "max_client_tools", static_cast<int64_t>(c.max_client_tools), 0, 4096));
  c.max_client_tools_bytes = static_cast<size_t>(
      num(j, "max_client_tools_bytes", static_cast<int64_t>(c.max_client_tools_bytes), 0, int64_t{64} * 1024 * 1024));
  if (j.contains("mcp_servers")) c.mcp_servers = mcp_servers_from_json(j["mcp_servers"]);
  c.mcp_pins_path = str(j, "mcp_pins_path", (data / "mcp-pins.json").string());
  if (j.contains("budgets")) c.budgets = budgets_from_json(j["budgets"]);
  if (j.contains("prices")) c.prices = prices_from_json(j["prices"]);
  if (j.contains("tracing")) c.tracing = tracing_config_from_json(j["tracing"]);
  c.summarizer = std::make_shared<Summarizer>(static_cast<size_t>(num(j, "summary_max_chars", 280, 16, 100000)));
  return c;
}

bool uses_demo_model(const RuntimeConfig& config) { return config.model && config.model->name() == "scripted"; }

void log_demo_tool_execution(const ToolCallContext& call) {
  const char* path = std::getenv("AGENTRT_DEMO_TOOL_LOG");
  if (!path || !*path) return;
  const std::string line = fmt::format("{} {} {}\n", call.turn_id, call.tool_call_id, call.tool_name);
  const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(ErrorCode::io, fmt::format("demo tool log {}: cannot open it: {}", path, std::strerror(errno)));
  // One write of a short line with O_APPEND: lines of concurrent executions never interleave.
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int write_errno = errno;
  const bool synced = n == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  const int sync_errno = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size()))
    throw Error(ErrorCode::io, fmt::format("demo tool log {}: cannot append to it: {}", path,
                                           n < 0 ? std::strerror(write_errno) : "short write"));
  if (!synced) throw Error(ErrorCode::io, fmt::format("demo tool log {}: fsync: {}", path, std::strerror(sync_errno)));
}

void register_demo_tools(ToolRegistry& tools) {
  const json params = json::parse(R"({"type":"object","properties":{
    "room":{"type":"string","description":"Room name, e.g. A1","minLength":1,"maxLength":16},
    "day":{"type":"string","enum":["mon","tue","wed","thu","fri","sat","sun"]}},
    "required":["room","day"],"additionalProperties":false})");
  ToolSpec book;
  book.name = "book_room";
  book.description = "Book a hotel room for a day. Needs the person's approval.";
  book.parameters = params;
  book.approval = ApprovalPolicy::always();
  book.handler = sync_tool([](const ToolCallContext& c) {
    log_demo_tool_execution(c);
    ToolResult r;
    const std::string room = c.args.value("room", "");
    const std::string day = c.args.value("day", "");
    r.result = json{{"ok", true},
                    {"booking_id", "BK-" + c.thread_id},
                    {"room", room},
                    {"day", day},
                    {"summary", fmt::format("Booked room {} on {}", room, day)}};
    r.ui =
        UiSchema{"booking_confirmation", "v1", json{{"room", room}, {"day", day}, {"booking_id", "BK-" + c.thread_id}},
                 json::array({json{{"type", "button"}, {"label", "Cancel booking"}, {"action", "cancel_booking"}}})};
    // A thread with a shared state (an object) keeps its bookings there: the demo's STATE_DELTA.
    if (c.state.is_object() && !c.state.empty()) {
      const json booking = {{"room", room}, {"day", day}};
      auto it = c.state.find("bookings");
      r.state_delta = it != c.state.end() && it->is_array()
                          ? json::array({{{"op", "add"}, {"path", "/bookings/-"}, {"value", booking}}})
                          : json::array({{{"op", "add"}, {"path", "/bookings"}, {"value", json::array({booking})}}});
    }
    return r;
  });
  tools.add(std::move(book));
  ToolSpec check;
  check.name = "check_availability";
  check.description = "Check whether a room is free on a day.";
  check.parameters = params;
  check.idempotent = true;
  check.handler = sync_tool([](const ToolCallContext& c) {
    log_demo_tool_execution(c);
    ToolResult r;
    r.result = json{{"room", c.args.value("room", "")}, {"day", c.args.value("day", "")}, {"available", true}};
    r.ui = UiSchema{"availability", "v1", r.result, json::array()};
    return r;
  });
  tools.add(std::move(check));
}

}  // namespace v1
}  // namespace agentrt
