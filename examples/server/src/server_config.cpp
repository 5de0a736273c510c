#include "server_config.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string_view>

#include <filesystem>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "agentrt/ids.hpp"

namespace agentrt::server {

namespace {

[[noreturn]] void bad(const std::string& message) {
  throw Error(ErrorCode::invalid_argument, "server config: " + message);
}

void only_keys(const json& j, std::initializer_list<std::string_view> keys, const char* where) {
  if (!j.is_object()) bad(fmt::format("{} must be an object", where));
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
      bad(fmt::format("{}: unknown key '{}'", where, it.key()));
}

int64_t integer(const json& j, const char* key, int64_t current, int64_t lo, int64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return current;
  if (!it->is_number_integer()) bad(fmt::format("'{}' must be an integer", key));
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) bad(fmt::format("'{}' must be between {} and {}, not {}", key, lo, hi, v));
  return v;
}

std::string string(const json& j, const char* key, const std::string& current) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return current;
  if (!it->is_string()) bad(fmt::format("'{}' must be a string", key));
  return it->get<std::string>();
}

// "server config: unknown log level '<s>' (expected one of: debug, info, warn, error, off)".
LogLevel parse_log_level(const std::string& s) {
  try {
    return log_level_from_string(s);
  } catch (const Error& e) {
    bad(e.message());
  }
}

int64_t parse_int(const std::string& flag, const std::string& value, int64_t lo, int64_t hi) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size() && v >= lo && v <= hi) return v;
  } catch (const std::exception&) {
  }
  bad(fmt::format("{} needs an integer between {} and {}, not '{}'", flag, lo, hi, value));
}

void add_token(ServerConfig& c, const std::string& spec) {
  const size_t colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size())
    bad(fmt::format("--token needs TOKEN:USER, not '{}'", spec.substr(0, 8) + "..."));
  c.tokens[spec.substr(0, colon)] = spec.substr(colon + 1);
}

}  // namespace

void parse_listen(const std::string& value, std::string& host, int& port) {
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos) bad(fmt::format("listen address '{}' needs host:port", value));
  std::string h = value.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  host = h.empty() ? "127.0.0.1" : h;
  port = static_cast<int>(parse_int("listen port", value.substr(colon + 1), 0, 65535));
}

ServerConfig server_config_from_json(const json& j) {
  only_keys(j,
            {"listen", "public_url", "tokens", "limits", "runtime", "asr", "demo_chunk_delay_ms", "demo_jobs_ms",
             "cors_origins", "mcp_approvers", "access_log", "cancel_on_disconnect", "log_level", "web_root"},
            "config");
  ServerConfig c;
  if (j.contains("listen")) parse_listen(string(j, "listen", ""), c.host, c.port);
  c.public_url = string(j, "public_url", c.public_url);
  if (auto t = j.find("tokens"); t != j.end() && !t->is_null()) {
    if (!t->is_object()) bad("'tokens' must be an object {token: user id}");
    for (auto it = t->begin(); it != t->end(); ++it) {
      if (!it->is_string()) bad("every token must map to a user id string");
      c.tokens[it.key()] = it->get<std::string>();
    }
  }
  if (auto l = j.find("limits"); l != j.end() && !l->is_null()) {
    only_keys(*l,
              {"max_body_bytes",
               "max_upload_bytes",
               "max_audio_bytes",
               "max_streams",
               "max_streams_per_user",
               "max_connections",
               "max_connections_per_client",
               "reserve_connections",
               "max_header_bytes",
               "max_header_fields",
               "header_timeout_ms",
               "idle_timeout_ms",
               "body_timeout_ms",
               "write_timeout_ms",
               "stream_buffer_bytes",
               "io_threads",
               "work_threads",
               "listen_backlog",
               "runs_per_minute",
               "run_burst",
               "keepalive_ms",
               "signed_url_ttl_ms",
               "shutdown_grace_ms"},
              "limits");
    auto& L = c.limits;
    L.max_body_bytes = static_cast<size_t>(
        integer(*l, "max_body_bytes", static_cast<int64_t>(L.max_body_bytes), 1024, int64_t{1} << 30));
    L.max_upload_bytes = static_cast<uint64_t>(
        integer(*l, "max_upload_bytes", static_cast<int64_t>(L.max_upload_bytes), 1, int64_t{1} << 32));
    L.max_audio_bytes = static_cast<uint64_t>(
        integer(*l, "max_audio_bytes", static_cast<int64_t>(L.max_audio_bytes), 1, int64_t{1} << 32));
    L.max_streams = static_cast<int>(integer(*l, "max_streams", L.max_streams, 1, 1000000));
    L.max_streams_per_user = static_cast<int>(integer(*l, "max_streams_per_user", L.max_streams_per_user, 1, 1000000));
    auto size = [&](const char* key, size_t current, int64_t lo, int64_t hi) {
      return static_cast<size_t>(integer(*l, key, static_cast<int64_t>(current), lo, hi));
    };
    auto ms = [&](const char* key, std::chrono::milliseconds current, int64_t lo, int64_t hi) {
      return std::chrono::milliseconds(integer(*l, key, current.count(), lo, hi));
    };
    L.max_connections = size("max_connections", L.max_connections, 16, 1000000);
    L.max_connections_per_client = size("max_connections_per_client", L.max_connections_per_client, 1, 1000000);
    L.reserve_connections = size("reserve_connections", L.reserve_connections, 0, 100000);
    L.max_header_bytes = size("max_header_bytes", L.max_header_bytes, 1024, 1 << 20);
    L.max_header_fields = size("max_header_fields", L.max_header_fields, 8, 10000);
    L.header_timeout = ms("header_timeout_ms", L.header_timeout, 100, 3600000);
    L.idle_timeout = ms("idle_timeout_ms", L.idle_timeout, 100, 3600000);
    L.body_timeout = ms("body_timeout_ms", L.body_timeout, 100, 3600000);
    L.write_timeout = ms("write_timeout_ms", L.write_timeout, 100, 3600000);
    L.stream_buffer_bytes = size("stream_buffer_bytes", L.stream_buffer_bytes, 4096, int64_t{1} << 30);
    L.io_threads = static_cast<int>(integer(*l, "io_threads", L.io_threads, 1, 64));
    L.work_threads = static_cast<int>(integer(*l, "work_threads", L.work_threads, 1, 256));
    L.listen_backlog = static_cast<int>(integer(*l, "listen_backlog", L.listen_backlog, 1, 65535));
    L.shutdown_grace = ms("shutdown_grace_ms", L.shutdown_grace, 0, 600000);
    if (auto r = l->find("runs_per_minute"); r != l->end() && !r->is_null()) {
      if (!r->is_number() || r->get<double>() < 0) bad("'runs_per_minute' must be a number >= 0");
      L.runs_per_minute = r->get<double>();
    }
    L.run_burst = static_cast<int>(integer(*l, "run_burst", L.run_burst, 1, 100000));
    L.keepalive = std::chrono::milliseconds(integer(*l, "keepalive_ms", L.keepalive.count(), 10, 3600000));
    L.signed_url_ttl =
        std::chrono::milliseconds(integer(*l, "signed_url_ttl_ms", L.signed_url_ttl.count(), 1000, int64_t{1} << 40));
  }
  if (auto r = j.find("runtime"); r != j.end() && !r->is_null()) {
    if (!r->is_object()) bad("'runtime' must be an object (runtime_config_from_json keys)");
    c.runtime = *r;
  }
  if (auto a = j.find("asr"); a != j.end()) {
    if (!a->is_null() && !a->is_object()) bad("'asr' must be an object or null");
    c.asr = *a;
  }
  c.demo_chunk_delay_ms = static_cast<int>(integer(j, "demo_chunk_delay_ms", 0, 0, 60000));
  c.demo_jobs_ms = static_cast<int>(integer(j, "demo_jobs_ms", 0, 0, 3600000));
  if (auto o = j.find("cors_origins"); o != j.end() && !o->is_null()) {
    if (!o->is_array()) bad("'cors_origins' must be an array of strings");
    for (const auto& s : *o) {
      if (!s.is_string()) bad("'cors_origins' must be an array of strings");
      c.cors_origins.push_back(s.get<std::string>());
    }
  }
  if (auto o = j.find("mcp_approvers"); o != j.end() && !o->is_null()) {
    if (!o->is_array()) bad("'mcp_approvers' must be an array of user ids");
    for (const auto& s : *o) {
      if (!s.is_string()) bad("'mcp_approvers' must be an array of user ids");
      c.mcp_approvers.push_back(s.get<std::string>());
    }
  }
  if (auto w = j.find("web_root"); w != j.end() && !w->is_null()) {
    if (!w->is_string()) bad("'web_root' must be a string (a folder)");
    c.web_root = w->get<std::string>();
  }
  if (auto a = j.find("access_log"); a != j.end() && !a->is_null()) {
    if (!a->is_boolean()) bad("'access_log' must be a boolean");
    c.access_log = a->get<bool>();
  }
  if (auto a = j.find("cancel_on_disconnect"); a != j.end() && !a->is_null()) {
    if (!a->is_boolean()) bad("'cancel_on_disconnect' must be a boolean");
    c.cancel_on_disconnect = a->get<bool>();
  }
  if (auto l = j.find("log_level"); l != j.end() && !l->is_null())
    c.log_level = parse_log_level(string(j, "log_level", ""));
  return c;
}

std::string server_usage() {
  return R"(usage: agentrt-server [options]
  --config FILE          JSON config file (see agentrt-server.example.json); flags override it
  --listen HOST:PORT     listen address (default 127.0.0.1:8080; port 0 picks a free port)
  --public-url URL       how clients reach this server (default http://HOST:PORT); signed object URLs use it
  --data DIR             data folder: SQLite store and object files (runtime.data_dir)
  --token TOKEN:USER     accept bearer TOKEN as user USER (repeatable)
  --model auto|demo|openai   the model (default auto: openai when OPENAI_API_KEY/OPENAI_BASE_URL is set)
  --keepalive-ms N       keep-alive comment after N ms of silence on a stream (default 15000)
  --runs-per-minute N    per-token limit on run starts (default 0: unlimited); --run-burst N
  --max-streams N        open SSE streams at once (default 10000); --max-streams-per-user N (default 100)
  --max-connections N    open connections (default 20000); --max-connections-per-client N (default 512)
  --max-body-bytes N     JSON request bodies (default 2 MiB); --max-upload-bytes N; --max-audio-bytes N
  --signed-url-ttl-ms N  lifetime of the object URLs handed out (default 3600000)
  --demo-delay-ms N      the demo model pauses N ms before each streamed chunk
  --demo-jobs MS         register the demo job tool render_preview (its jobs finish MS ms after they start);
                         with the demo model, "render beach" calls it ("render beach confirm" asks first)
  --log-level LEVEL      debug|info|warn|error|off (default info); --access-log
  --web-root DIR         serve the static files of DIR (a built web page) at / (GET, no token)
  --help
)";
}

bool apply_server_flags(int argc, char** argv, ServerConfig& c) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // The file first, so flags win wherever --config appears.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) bad("--config needs a file");
      std::ifstream in(args[i + 1]);
      if (!in) bad(fmt::format("cannot read config file '{}'", args[i + 1]));
      json j = json::parse(in, nullptr, false);
      if (j.is_discarded()) bad(fmt::format("config file '{}' is not valid JSON", args[i + 1]));
      c = server_config_from_json(j);
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) bad(fmt::format("{} needs a value\n{}", a, server_usage()));
      return args[++i];
    };
    if (a == "--help" || a == "-h") return false;
    if (a == "--config") {
      ++i;
    } else if (a == "--listen") {
      parse_listen(value(), c.host, c.port);
    } else if (a == "--public-url") {
      c.public_url = value();
    } else if (a == "--data") {
      c.runtime["data_dir"] = value();
    } else if (a == "--token") {
      add_token(c, value());
    } else if (a == "--model") {
      const std::string m = value();
      if (m != "auto" && m != "demo" && m != "openai")
        bad(fmt::format("--model must be auto, demo or openai, not '{}'", m));
      c.runtime["model"] = json{{"type", m}};
    } else if (a == "--keepalive-ms") {
      c.limits.keepalive = std::chrono::milliseconds(parse_int(a, value(), 10, 3600000));
    } else if (a == "--runs-per-minute") {
      c.limits.runs_per_minute = static_cast<double>(parse_int(a, value(), 0, 1000000));
    } else if (a == "--run-burst") {
      c.limits.run_burst = static_cast<int>(parse_int(a, value(), 1, 100000));
    } else if (a == "--max-streams") {
      c.limits.max_streams = static_cast<int>(parse_int(a, value(), 1, 1000000));
    } else if (a == "--max-streams-per-user") {
      c.limits.max_streams_per_user = static_cast<int>(parse_int(a, value(), 1, 1000000));
    } else if (a == "--max-connections") {
      c.limits.max_connections = static_cast<size_t>(parse_int(a, value(), 16, 1000000));
    } else if (a == "--max-connections-per-client") {
      c.limits.max_connections_per_client = static_cast<size_t>(parse_int(a, value(), 1, 1000000));
    } else if (a == "--max-body-bytes") {
      c.limits.max_body_bytes = static_cast<size_t>(parse_int(a, value(), 1024, int64_t{1} << 30));
    } else if (a == "--max-upload-bytes") {
      c.limits.max_upload_bytes = static_cast<uint64_t>(parse_int(a, value(), 1, int64_t{1} << 32));
    } else if (a == "--max-audio-bytes") {
      c.limits.max_audio_bytes = static_cast<uint64_t>(parse_int(a, value(), 1, int64_t{1} << 32));
    } else if (a == "--signed-url-ttl-ms") {
      c.limits.signed_url_ttl = std::chrono::milliseconds(parse_int(a, value(), 1000, int64_t{1} << 40));
    } else if (a == "--demo-delay-ms") {
      c.demo_chunk_delay_ms = static_cast<int>(parse_int(a, value(), 0, 60000));
    } else if (a == "--demo-jobs") {
      c.demo_jobs_ms = static_cast<int>(parse_int(a, value(), 0, 3600000));
    } else if (a == "--log-level") {
      c.log_level = parse_log_level(value());
    } else if (a == "--access-log") {
      c.access_log = true;
    } else if (a == "--web-root") {
      c.web_root = value();
    } else {
      bad(fmt::format("unknown option '{}'\n{}", a, server_usage()));
    }
  }
  return true;
}

void validate_server_config(const ServerConfig& c) {
  if (c.tokens.empty()) bad("no bearer tokens: pass --token TOKEN:USER (or 'tokens' in the config file)");
  for (const auto& [token, user] : c.tokens) {
    if (token.size() < 8) bad(fmt::format("token for user '{}' is shorter than 8 characters", user));
    if (const char* problem = id_problem(user))
      bad(fmt::format("user id '{}' {} (ids are 1-128 of A-Z a-z 0-9 _ - . : @, not starting with '.')",
                      user.substr(0, 140), problem));
  }
  if (!c.web_root.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(c.web_root, ec)) bad(fmt::format("web_root '{}' is not a folder", c.web_root));
  }
}

}  // namespace agentrt::server
