#include "support/s3_server.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>

#include "util/crypto.hpp"

namespace agentrt::testing {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A server started by this process, stopped at exit.
struct OwnServer {
  std::filesystem::path state;
  ~OwnServer() {
    const std::string cmd =
        std::string(AGENTRT_SOURCE_DIR) + "/scripts/s3rver stop '" + state.string() + "' >/dev/null 2>&1";
    (void)std::system(cmd.c_str());
    std::error_code ec;
    std::filesystem::remove_all(state, ec);
  }
};

// Reads the AGENTRT_TEST_S3_* lines scripts/s3rver wrote and exports them into this process.
void load_env_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  const std::regex line_re("^export (AGENTRT_TEST_S3_[A-Z_]+)=(.*)$");
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, line_re)) ::setenv(m[1].str().c_str(), m[2].str().c_str(), 1);
  }
}

std::optional<S3TestServer> start() {
  if (env("AGENTRT_TEST_S3_ENDPOINT").empty()) {
    static OwnServer own{std::filesystem::temp_directory_path() / ("agentrt-s3rver-" + crypto::random_hex(6))};
    const std::filesystem::path log = own.state.string() + ".log";
    const std::string cmd = std::string(AGENTRT_SOURCE_DIR) + "/scripts/s3rver start '" + own.state.string() + "' >'" +
                            log.string() + "' 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream in(log);
      std::stringstream ss;
      ss << in.rdbuf();
      FAIL_CHECK("the S3 tests need s3rver and scripts/s3rver could not start it:\n" << ss.str());
      return std::nullopt;
    }
    load_env_file(own.state / "env");
  }
  S3TestServer s;
  s.endpoint = env("AGENTRT_TEST_S3_ENDPOINT");
  s.vhost_endpoint = env("AGENTRT_TEST_S3_VHOST_ENDPOINT");
  s.bucket = env("AGENTRT_TEST_S3_BUCKET");
  s.region = env("AGENTRT_TEST_S3_REGION");
  s.access_key = env("AGENTRT_TEST_S3_ACCESS_KEY");
  s.secret_key = env("AGENTRT_TEST_S3_SECRET_KEY");
  const size_t colon = s.endpoint.rfind(':');
  s.port = colon == std::string::npos ? 0 : std::atoi(s.endpoint.c_str() + colon + 1);
  return s;
}

}  // namespace

const S3TestServer& s3_test_server() {
  static std::mutex mutex;
  static std::optional<S3TestServer> server;
  std::lock_guard<std::mutex> lock(mutex);
  if (!server) server = start();
  REQUIRE_MESSAGE(server, "no S3 server for the S3 tests (see the failure above)");
  REQUIRE_MESSAGE(server->port > 0, "AGENTRT_TEST_S3_ENDPOINT has no port: '" << server->endpoint << "'");
  return *server;
}

S3ObjectStoreOptions s3_test_options(const std::string& endpoint) {
  const S3TestServer& s = s3_test_server();
  S3ObjectStoreOptions o;
  o.endpoint = endpoint.empty() ? s.endpoint : endpoint;
  o.region = s.region;
  o.bucket = s.bucket;
  o.prefix = "t-" + crypto::random_hex(6) + "/";
  o.access_key = s.access_key;
  o.secret_key = s.secret_key;
  o.path_style = true;
  o.retry_base = std::chrono::milliseconds(5);
  o.retry_cap = std::chrono::milliseconds(40);
  return o;
}

}  // namespace agentrt::testing
