// The tests' S3 server: the s3rver that scripts/s3rver started for the ctest fixture (AGENTRT_TEST_S3_* in the
// environment), else one started for this process (the same script) and stopped when the process exits, so
// `agentrt_tests -ts=s3` also works by itself. A test that needs it FAILS when it cannot be had; none skips.
#pragma once

#include <string>

#include "store/s3_object_store.hpp"

namespace agentrt::testing {

struct S3TestServer {
  std::string endpoint;        // path-style: http://127.0.0.1:<port>
  std::string vhost_endpoint;  // virtual-hosted: http://s3.localhost:<port>
  std::string bucket;
  std::string region;
  std::string access_key;
  std::string secret_key;
  int port = 0;
};

// Thread-safe (started once).
const S3TestServer& s3_test_server();

// Options for a store on the test bucket under a fresh prefix of its own ("t-<random>/"), so tests never see
// one another's objects; path-style at `endpoint` (default: the server's), fast retries.
S3ObjectStoreOptions s3_test_options(const std::string& endpoint = {});

}  // namespace agentrt::testing
