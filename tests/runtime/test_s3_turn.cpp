// A whole turn on S3ObjectStore (s3rver): the image attachment and the tool payload live in the bucket, history
// reads the payload back checking its sha256 and re-signs the attachment as a presigned GET URL.
#include <doctest/doctest.h>

#include "agentrt/attachments.hpp"
#include "agentrt/clock.hpp"
#include "agentrt/config.hpp"
#include "net/http_client.hpp"
#include "store/s3_object_store.hpp"
#include "support/runtime_fixture.hpp"
#include "support/s3_server.hpp"
#include "util/crypto.hpp"

using namespace agentrt;
using namespace agentrt::testing;

TEST_SUITE("s3") {
  TEST_CASE("a turn on S3: an image attachment and a tool payload stored in the bucket, history checks and re-signs") {
    auto objects = std::make_shared<S3ObjectStore>(s3_test_options());
    std::mutex m;
    std::vector<ModelRequest> seen;
    Harness h(
        [&](const ModelRequest& req) -> ModelResult {
          {
            std::lock_guard<std::mutex> lock(m);
            seen.push_back(req);
          }
          if (req.stage == "intent") return text_result("look and book");
          if (tool_results_since_last_user(req) == 0)
            return tool_call_result("call_1", "book_room", R"({"room":"A1","day":"mon"})");
          return text_result("booked");
        },
        [&](RuntimeConfig& c) { c.objects = objects; });
    h.add_book_room(ApprovalPolicy::never());
    h.threads.insert("t-s3");

    const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(3000, '\x05');
    Message msg;
    msg.role = Role::user;
    msg.parts = {ContentPart::make_text("book the room in this picture")};
    ContentPart img;
    img.type = "image";
    img.source = PartSource{"data", crypto::base64_encode(png), "image/png", ""};
    msg.parts.push_back(img);
    const auto t = h.rt->run_turn(turn_input("t-s3", msg, "u1"));
    REQUIRE(t.status == TurnStatus::completed);
    CHECK(h.tool_runs == 1);

    // The attachment: an object in the bucket, the message holding bucket, key and mime only.
    const auto stored = h.store->messages("t-s3");
    REQUIRE(stored.size() == 4);
    const ContentPart& part = stored[0].message.parts[1];
    REQUIRE(part.source);
    CHECK(part.source->type == "file");
    const std::string key = part.source->value;
    CHECK(key_belongs_to(key, "u1", "t-s3"));
    CHECK(part.metadata["storage_bucket"] == "agentrt-test");
    CHECK(objects->get(key) == png);
    CHECK(objects->head(key)->content_type == "image/png");
    CHECK(objects->head(key)->sha256 == crypto::sha256_hex(png));
    {
      // The model saw the image's bytes, read back from the bucket.
      std::lock_guard<std::mutex> lock(m);
      const Message* user = last_user_message(seen.back());
      REQUIRE(user);
      REQUIRE(user->parts.size() == 3);
      CHECK(user->parts[2].source->value == crypto::base64_encode(png));
    }

    // The tool payload: written to the bucket first, its sha256 in the index and in the object's metadata.
    const Message& tool = stored[2].message;
    REQUIRE(tool.role == Role::tool);
    const std::string path = tool.metadata["storage_path"];
    CHECK(tool.metadata["storage_bucket"] == "agentrt-test");
    const auto payload_bytes = objects->get(path);
    REQUIRE(payload_bytes);
    CHECK(crypto::sha256_hex(*payload_bytes) == tool.metadata["payload_sha256"]);
    CHECK(objects->head(path)->sha256 == tool.metadata["payload_sha256"]);
    const json payload = json::parse(*payload_bytes);

    // History: the payload's ui back (its sha256 checked), the attachment as a presigned GET URL.
    auto hist = h.rt->history("t-s3");
    REQUIRE(hist.size() == 4);
    CHECK(hist[2].metadata["ui"] == payload["ui"]);
    REQUIRE(hist[0].parts[1].source);
    CHECK(hist[0].parts[1].source->type == "url");
    const std::string url = hist[0].parts[1].source->value;
    CHECK(url.find("X-Amz-Signature=") != std::string::npos);
    CHECK(objects->verify_url(url, now_ms()) == key);
    net::HttpClient http;
    net::HttpRequest get;
    get.url = url;
    CHECK(http.send(get).body == png);

    // The re-signed URL is accepted as input on the same user's thread; tampered or another user's is not.
    Message again;
    again.role = Role::user;
    ContentPart by_url;
    by_url.type = "image";
    by_url.source = PartSource{"url", url, "", ""};
    again.parts = {ContentPart::make_text("and this one?"), by_url};
    CHECK(h.rt->run_turn(turn_input("t-s3", again, "u1")).status == TurnStatus::completed);
    std::string tampered = url;
    tampered.back() = tampered.back() == '0' ? '1' : '0';
    again.parts[1].source->value = tampered;
    CHECK_THROWS_AS(h.rt->run_turn(turn_input("t-s3", again, "u1")), Error);
    again.parts[1].source->value = url;
    try {
      h.rt->run_turn(turn_input("t-s3-other", again, "u2"));
      FAIL("another user's thread took the URL");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
    }

    // A payload changed in the bucket fails its sha256: history gives the summary alone.
    objects->put(path, R"({"ui":{"type":"forged"}})", "application/json");
    hist = h.rt->history("t-s3");
    CHECK_FALSE(hist[2].metadata.contains("ui"));
    CHECK(hist[2].content == tool.content);
  }
}

TEST_SUITE("s3") {
  TEST_CASE("runtime_config_from_json opens an S3 object store (the keys the C ABI, the CLI and the server read)") {
    const S3TestServer& s = s3_test_server();
    TempDir dir;
    ::setenv("AGENTRT_TEST_CFG_S3_KEY", s.access_key.c_str(), 1);
    ::setenv("AGENTRT_TEST_CFG_S3_SECRET", s.secret_key.c_str(), 1);
    ::setenv("AGENTRT_TEST_CFG_URL_SECRET", "shared-url-secret", 1);
    const std::string prefix = "cfg-" + crypto::random_hex(4) + "/";
    auto config = [&](const std::string& signing) {
      return json{{"data_dir", dir.file("data")},
                  {"model", {{"type", "demo"}}},
                  {"objects",
                   {{"type", "s3"},
                    {"endpoint", s.vhost_endpoint},
                    {"region", s.region},
                    {"bucket", s.bucket},
                    {"prefix", prefix},
                    {"path_style", false},
                    {"access_key_env", "AGENTRT_TEST_CFG_S3_KEY"},
                    {"secret_key_env", "AGENTRT_TEST_CFG_S3_SECRET"},
                    {"url_signing", signing},
                    {"signing_secret_env", "AGENTRT_TEST_CFG_URL_SECRET"},
                    {"public_base_url", "http://127.0.0.1:8080/api/v1/objects"},
                    {"conditional_writes", "emulated"},
                    {"max_attempts", 2}}}};
    };
    {
      Runtime rt(runtime_config_from_json(config("s3")));
      const auto up = rt.upload("u1", "t-cfg", "hello", "text/plain");
      CHECK(up.url.rfind("http://agentrt-test.s3.localhost:", 0) == 0);
      CHECK(up.url.find("/" + prefix + "agent-inputs/u1/t-cfg/uploads/") != std::string::npos);
      net::HttpClient http;
      net::HttpRequest get;
      get.url = up.url;
      CHECK(http.send(get).body == "hello");
    }
    Runtime rt(runtime_config_from_json(config("server")));
    const auto up = rt.upload("u1", "t-cfg", "hello again", "text/plain");
    CHECK(up.url.rfind("http://127.0.0.1:8080/api/v1/objects/agentrt-test/agent-inputs/u1/t-cfg/uploads/", 0) == 0);
    CHECK(rt.config().objects->verify_url(up.url, now_ms()) == up.key);
    CHECK(rt.config().objects->get(up.key) == "hello again");
  }
}
