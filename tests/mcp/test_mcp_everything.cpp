// The MCP client against the reference server from npm, @modelcontextprotocol/server-everything (tests/mcp's
// package-lock.json), over stdio and over streamable HTTP: its tools listed (the ones it registers after initialize
// too), calls with text, structured, image and error results, progress, a long-running call cancelled on its
// timeout. ctest's mcp_everything runs these with AGENTRT_MCP_EVERYTHING naming the server's dist/index.js (after
// mcp_npm_ci); without it they fail.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "agentrt/config.hpp"
#include "agentrt/scripted_model.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

std::string everything() {
  const char* p = std::getenv("AGENTRT_MCP_EVERYTHING");
  REQUIRE_MESSAGE(p, "AGENTRT_MCP_EVERYTHING must name server-everything's dist/index.js (ctest mcp_everything)");
  return p;
}

ModelResult call_script(const ModelRequest& req) {
  if (req.stage == "intent") return text_result("mcp");
  if (req.stage == "organization") return text_result("organized");
  const Message* user = last_user_message(req);
  const std::string text = user ? user->text() : std::string();
  if (last_tool_result_since_last_user(req)) return text_result("done");
  auto space = text.find(' ', 5);
  return tool_call_result("call_1", text.substr(5, space - 5), text.substr(space + 1));
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// server-everything's streamable HTTP transport on a free loopback port, for the test's life.
struct HttpEverything {
  int port = free_port();
  pid_t pid = -1;
  HttpEverything() {
    const std::string script = everything();
    const std::string port_env = "PORT=" + std::to_string(port);
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::putenv(const_cast<char*>(port_env.c_str()));
      int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::execlp("node", "node", script.c_str(), "streamableHttp", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!accepts(port)) {
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "server-everything did not listen on " << port);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~HttpEverything() {
    ::kill(-pid, SIGTERM);
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/mcp"; }
};

json server_of(const std::string& transport, const std::string& url = {}) {
  json s = transport == "stdio" ? json{{"command", json::array({"node", everything(), "stdio"})}} : json{{"url", url}};
  s["approval"] = "never";
  s["timeout_ms"] = 1500;
  return s;
}

std::unique_ptr<Harness> harness(json server) {
  return std::make_unique<Harness>(call_script, [server](RuntimeConfig& c) {
    c.mcp_servers = mcp_servers_from_json(json{{"everything", server}});
  });
}

json outcome(Harness& h, const std::string& thread, const std::string& tool, const json& args) {
  h.threads.insert(thread);
  auto t = h.rt->run_turn(turn_input(thread, user_message("call everything__" + tool + " " + args.dump())));
  REQUIRE(t.status == TurnStatus::completed);
  auto ledger = h.rt->tool_calls(t.id);
  REQUIRE(ledger.size() == 1);
  return json::parse(ledger[0].output);
}

void exercise(Harness& h, const std::string& transport) {
  CAPTURE(transport);
  auto servers = h.rt->mcp_servers();
  REQUIRE(servers.size() == 1);
  CHECK(servers[0].state == "ready");
  CHECK(servers[0].transport == transport);
  CHECK(servers[0].protocol_version == "2025-11-25");
  CHECK(servers[0].server_name == "mcp-servers/everything");
  auto offered = [&](const std::string& name) { return h.rt->tools().find("everything__" + name) != nullptr; };
  for (const char* t : {"echo", "get-sum", "get-structured-content", "get-tiny-image", "trigger-long-running-operation",
                        "gzip-file-as-resource"})
    CHECK_MESSAGE(offered(t), t);
  // Registered by the server once it knows the client (after initialize): announced with tools/list_changed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!offered("simulate-research-query") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(offered("simulate-research-query"));

  json echo = outcome(h, transport + "-echo", "echo", {{"message", "hello mcp"}});
  CHECK(echo["status"] == "succeeded");
  CHECK(echo["result"]["content"][0]["text"] == "Echo: hello mcp");
  CHECK(echo["result_summary"] == "Echo: hello mcp");

  json sum = outcome(h, transport + "-sum", "get-sum", {{"a", 2}, {"b", 40}});
  CHECK(sum["status"] == "succeeded");
  CHECK(sum["result"]["content"][0]["text"].get<std::string>().find("42") != std::string::npos);

  json weather = outcome(h, transport + "-structured", "get-structured-content", {{"location", "New York"}});
  CHECK(weather["status"] == "succeeded");
  CHECK(weather["result"]["structuredContent"].contains("temperature"));

  json image = outcome(h, transport + "-image", "get-tiny-image", json::object());
  CHECK(image["status"] == "succeeded");
  bool has_image = false;
  for (const auto& part : image["result"]["content"])
    has_image = has_image || (part["type"] == "image" && part["mimeType"] == "image/png" && part.contains("data"));
  CHECK(has_image);  // without an object store the file cannot be stored: its bytes stay in the result

  json error = outcome(h, transport + "-error", "gzip-file-as-resource",
                       {{"name", "x.gz"}, {"data", "ftp://example.com/file"}, {"outputType", "resource"}});
  CHECK(error["status"] == "failed");
  CHECK(error["error"]["code"] == "tool_error");
  CHECK(error["error"]["message"].get<std::string>().find("Unsupported URL protocol") != std::string::npos);

  // Progress while it runs (duration and steps in the server's units: seconds).
  h.threads.insert(transport + "-progress");
  auto t = h.rt->run_turn(
      turn_input(transport + "-progress",
                 user_message(R"(call everything__trigger-long-running-operation {"duration":0.6,"steps":3})")));
  CHECK(t.status == TurnStatus::completed);
  auto evs = h.events(transport + "-progress", 1, 0);
  std::vector<json> reports;
  for (const auto& e : evs)
    if (e["type"] == "CUSTOM" && e["name"] == "agentrt.tool_progress") reports.push_back(e["value"]);
  REQUIRE(!reports.empty());
  CHECK(reports.back()["total"] == 3);
  CHECK(reports.back()["toolCallId"] == "call_1");

  // Past its timeout (1.5 s) the call fails and is cancelled on the server.
  json slow = outcome(h, transport + "-slow", "trigger-long-running-operation", {{"duration", 30}, {"steps", 2}});
  CHECK(slow["status"] == "failed");
  CHECK(slow["error"]["code"] == "timeout");
  // The server goes on answering.
  CHECK(outcome(h, transport + "-after", "echo", {{"message", "still"}})["status"] == "succeeded");

  // An elicitation while the call runs: the turn waits with an input_required interrupt; the answer goes back.
  REQUIRE(offered("trigger-elicitation-request"));
  const std::string thread = transport + "-elicit";
  h.threads.insert(thread);
  auto paused = h.rt->run_turn(turn_input(thread, user_message("call everything__trigger-elicitation-request {}")));
  REQUIRE(paused.status == TurnStatus::waiting_approval);
  const json& i = paused.interrupts.at(0);
  CHECK(i["reason"] == "input_required");
  CHECK(i["responseSchema"]["required"] == json::array({"name"}));
  auto done = h.rt->resume_turn(paused.id, paused.approval_request_id,
                                {Decision{i["id"].get<std::string>(), Decision::Action::approve, std::nullopt, "",
                                          json{{"name", "Ada Lovelace"}, {"check", true}}}});
  REQUIRE(done.status == TurnStatus::completed);
  auto ledger = h.rt->tool_calls(done.id);
  REQUIRE(ledger.size() == 1);
  json out = json::parse(ledger[0].output);
  CHECK(out["status"] == "succeeded");
  CHECK(out["result"].dump().find("Ada Lovelace") != std::string::npos);
}

}  // namespace

TEST_SUITE("mcp_everything") {
  TEST_CASE("server-everything over stdio") {
    auto h = harness(server_of("stdio"));
    exercise(*h, "stdio");
  }

  TEST_CASE("server-everything over streamable HTTP") {
    HttpEverything server;
    auto h = harness(server_of("http", server.url()));
    exercise(*h, "http");
  }
}
