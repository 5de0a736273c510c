// MCP through the C ABI: a config's mcp_servers (tests/mcp/scripted_server.py over stdio) gives the model the
// server's tools; a call is approved and answered through the turn functions, an input request through a resume
// with a `response`; the servers and tools are listed, and approving an unchanged definition is refused.
#include <doctest/doctest.h>

#include <string>

#include "capi_fixture.hpp"

using namespace capi_test;

namespace {

json mcp_config(const TempDir& dir) {
  json c = test_config(dir);
  c["mcp_servers"] = {
      {"scripted",
       {{"command", json::array({"python3", std::string(AGENTRT_SOURCE_DIR) + "/tests/mcp/scripted_server.py"})},
        {"approval", {{"never", json::array({"ask"})}}}}}};
  return c;
}

json call_json(int32_t (*fn)(char**, agentrt_runtime*), agentrt_runtime* rt) {
  char* out = nullptr;
  REQUIRE_MESSAGE(fn(&out, rt) == AGENTRT_OK, last_error());
  return json::parse(take(out));
}

}  // namespace

TEST_CASE("an MCP server's tools through the C ABI: listed, approved, called; an input request answered") {
  TempDir dir;
  Runtime r(mcp_config(dir));
  json servers = call_json(agentrt_mcp_servers, r.rt);
  REQUIRE(servers.size() == 1);
  CHECK(servers[0]["name"] == "scripted");
  CHECK(servers[0]["state"] == "ready");
  CHECK(servers[0]["protocolVersion"] == "2025-11-25");
  json tools = call_json(agentrt_mcp_tools, r.rt);
  bool echo = false;
  for (const auto& t : tools) echo = echo || (t["name"] == "scripted__echo" && t["offered"] == true);
  CHECK(echo);

  // The demo model calls a tool the message names ("use <tool>"); an MCP tool needs approval by default.
  json t = r.start("t1", "please use scripted__echo");
  json paused = r.wait(t["turnId"]);
  REQUIRE(paused["status"] == "WAITING_APPROVAL");
  json resumed =
      r.resume(paused["id"], paused["approvalRequestId"],
               json{{"decisions", {{{"interruptId", paused["interrupts"][0]["id"]}, {"action", "approve"}}}}});
  json done = r.wait(resumed["turnId"]);
  CHECK(done["status"] == "COMPLETED");
  bool answered = false;
  for (const auto& m : r.history("t1"))
    answered = answered || (m["role"] == "tool" && m["content"].get<std::string>().rfind("echo: ", 0) == 0);
  CHECK(answered);

  // The server asks for input while the call runs: an input_required interrupt answered with a response.
  json a = r.start("t2", "use scripted__ask");
  json asked = r.wait(a["turnId"]);
  REQUIRE(asked["status"] == "WAITING_APPROVAL");
  CHECK(asked["interrupts"][0]["reason"] == "input_required");
  json again = r.resume(asked["id"], asked["approvalRequestId"],
                        json{{"decisions",
                              {{{"interruptId", asked["interrupts"][0]["id"]},
                                {"action", "approve"},
                                {"response", {{"colour", "red"}}}}}}});
  CHECK(r.wait(again["turnId"])["status"] == "COMPLETED");
  bool chose = false;
  for (const auto& m : r.history("t2")) chose = chose || (m["role"] == "tool" && m["content"] == "you chose red");
  CHECK(chose);

  char* out = nullptr;
  CHECK(agentrt_mcp_tool_approve(&out, r.rt, "scripted__echo") == AGENTRT_E_INVALID_STATE);
  CHECK(out == nullptr);
  CHECK(agentrt_mcp_tool_approve(&out, r.rt, "nope__x") == AGENTRT_E_NOT_FOUND);
  CHECK(agentrt_mcp_tool_approve(&out, r.rt, "") == AGENTRT_E_INVALID_ARGUMENT);
}

TEST_CASE("a runtime without MCP servers lists none") {
  Runtime r;
  CHECK(call_json(agentrt_mcp_servers, r.rt) == json::array());
  CHECK(call_json(agentrt_mcp_tools, r.rt) == json::array());
}
