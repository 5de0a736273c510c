// The MCP client against tests/mcp/scripted_server.py over stdio: tools listed (paginated) and offered as
// SERVER__TOOL, calls validated before they are sent, results mapped to the storage contracts, approval, timeouts
// and cancels sent as notifications/cancelled, progress streamed, a server that crashes started again, hostile
// output ending the call (never the process), changed definitions held back until approved, the configuration.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agentrt/config.hpp"
#include "agentrt/scripted_model.hpp"
#include "store/fs_object_store.hpp"
#include "support/condition.hpp"
#include "support/otlp_receiver.hpp"
#include "support/runtime_fixture.hpp"

using namespace agentrt;
using namespace agentrt::testing;

namespace {

const std::string kServer = std::string(AGENTRT_SOURCE_DIR) + "/tests/mcp/scripted_server.py";

// The images the model was shown (mime type and base64 length), from the last request that had any.
std::mutex g_seen_mutex;
std::vector<std::string> g_seen_images;

void note_images(const ModelRequest& req) {
  std::vector<std::string> seen;
  for (const auto& m : req.messages)
    for (const auto& p : m.parts)
      if (p.type == "image" && p.source && p.source->type == "data") seen.push_back(p.source->mime_type);
  std::lock_guard<std::mutex> lock(g_seen_mutex);
  if (!seen.empty()) g_seen_images = std::move(seen);
}

// "call NAME ARGS" calls NAME with ARGS (JSON text) once; then answers with what the tool message says.
ModelResult call_script(const ModelRequest& req) {
  note_images(req);
  if (req.stage == "intent") return text_result("mcp");
  if (req.stage == "organization") return text_result("organized");
  const Message* user = last_user_message(req);
  const std::string text = user ? user->text() : std::string();
  if (const Message* tool = last_tool_result_since_last_user(req)) return text_result("Tool said: " + tool->content);
  if (text.rfind("call ", 0) != 0) return text_result("nothing to call");
  auto space = text.find(' ', 5);
  std::string name = text.substr(5, space == std::string::npos ? std::string::npos : space - 5);
  std::string args = space == std::string::npos ? "{}" : text.substr(space + 1);
  return tool_call_result("call_1", name, args);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count_lines_starting(const std::string& text, const std::string& prefix) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) ++n;
  return n;
}

struct McpHarness {
  TempDir dir;
  std::string log_file = dir.file("calls.log");
  std::mutex log_mutex;
  std::vector<std::string> logged;
  std::unique_ptr<Harness> h;

  std::string otlp_endpoint;  // tracing on when set (open() reads it)

  std::shared_ptr<ObjectStore> objects =
      std::make_shared<FsObjectStore>(FsObjectStoreOptions{dir.file("objects"), "agentrt", "s3cret", "http://x/o"});

  explicit McpHarness(json server = {}, std::map<std::string, std::string> env = {}) { open(std::move(server), env); }

  void open(json server, std::map<std::string, std::string> env = {}) {
    h.reset();
    json cfg = {{"command", json::array({"python3", kServer})}, {"approval", "never"}};
    for (auto& [k, v] : server.items()) {
      if (v.is_null())
        cfg.erase(k);
      else
        cfg[k] = v;
    }
    if (cfg.contains("command")) {
      cfg["env"]["MCP_TEST_LOG"] = log_file;
      for (auto& [k, v] : env) cfg["env"][k] = v;
    }
    const std::string pins = dir.file("pins.json");
    h = std::make_unique<Harness>(call_script, [&, cfg, pins](RuntimeConfig& c) {
      c.mcp_servers = mcp_servers_from_json(json{{"scripted", cfg}});
      c.mcp_pins_path = pins;
      c.objects = objects;
      c.tracing.otlp_endpoint = otlp_endpoint;
      c.log_level = LogLevel::debug;
      c.log = [this](LogLevel, std::string_view component, std::string_view message) {
        std::lock_guard<std::mutex> lock(log_mutex);
        logged.push_back(std::string(component) + ": " + std::string(message));
      };
    });
  }
  Runtime& rt() { return *h->rt; }

  TurnRecord call(const std::string& thread, const std::string& tool, const std::string& args) {
    h->threads.insert(thread);
    return rt().run_turn(turn_input(thread, user_message("call " + tool + " " + args)));
  }
  // The outcome of the turn's one call (the ToolAgentOutput the ledger holds).
  json outcome(const TurnRecord& t) {
    auto ledger = rt().tool_calls(t.id);
    REQUIRE(ledger.size() == 1);
    REQUIRE(ledger[0].has_output());
    return json::parse(ledger[0].output);
  }
  std::string calls() { return read_file(log_file); }
  // A new runtime on the same store and MCP configuration (a restart: the old one and its servers stop first).
  void restart() {
    RuntimeConfig c = test_config(h->used_store, h->model);
    c.mcp_servers = h->rt->config().mcp_servers;
    c.mcp_pins_path = h->rt->config().mcp_pins_path;
    c.objects = objects;
    h->rt.reset();
    h->rt = std::make_unique<Runtime>(c);
  }
  bool log_has(const std::string& needle) {
    std::lock_guard<std::mutex> lock(log_mutex);
    for (const auto& l : logged)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
  std::optional<McpToolInfo> tool(const std::string& name) {
    for (auto& t : rt().mcp_tools())
      if (t.name == name) return t;
    return std::nullopt;
  }
};

}  // namespace

TEST_SUITE("mcp") {
  TEST_CASE("an MCP server's tools: listed over pages, offered as SERVER__TOOL, called once with checked arguments") {
    McpHarness m;
    auto servers = m.rt().mcp_servers();
    REQUIRE(servers.size() == 1);
    CHECK(servers[0].name == "scripted");
    CHECK(servers[0].transport == "stdio");
    CHECK(servers[0].state == "ready");
    CHECK(servers[0].protocol_version == "2025-11-25");
    CHECK(servers[0].server_name == "scripted");
    CHECK(servers[0].server_version == "1.0");
    CHECK(servers[0].tools == 15);  // 16 listed on 6 pages of 3; dotted.name cannot be a tool name here
    auto echo = m.tool("scripted__echo");
    REQUIRE(echo);
    CHECK(echo->offered);
    CHECK(echo->description == "Echoes the text");
    CHECK(echo->hash.size() == 64);
    auto dotted = m.tool("scripted__dotted.name");
    REQUIRE(dotted);
    CHECK_FALSE(dotted->offered);
    CHECK(dotted->problem.find("name") != std::string::npos);
    auto entry = m.rt().tools().find("scripted__echo");
    REQUIRE(entry);
    CHECK(entry->spec.parameters["required"] == json::array({"text"}));
    CHECK_FALSE(entry->spec.idempotent);
    CHECK(entry->spec.approval.mode == ApprovalPolicy::Mode::never);

    auto t = m.call("t1", "scripted__echo", R"({"text":"hi"})");
    CHECK(t.status == TurnStatus::completed);
    json out = m.outcome(t);
    CHECK(out["status"] == "succeeded");
    CHECK(out["result"]["content"][0]["text"] == "echo: hi");
    auto history = m.rt().history("t1");
    REQUIRE(history.size() >= 3);
    CHECK(history[2].role == Role::tool);
    CHECK(history[2].content == "echo: hi");
    CHECK(history.back().content.find("echo: hi") != std::string::npos);  // the whole result, this turn
    CHECK(count_lines_starting(m.calls(), "echo ") == 1);

    // Arguments that fail the inputSchema are refused before anything is sent.
    auto bad = m.call("t2", "scripted__echo", R"({"txt":"hi"})");
    CHECK(bad.status == TurnStatus::completed);
    CHECK(m.outcome(bad)["status"] == "failed");
    CHECK(count_lines_starting(m.calls(), "echo ") == 1);
  }

  TEST_CASE("a traced tools/call carries its execute_tool span's traceparent in _meta") {
    OtlpReceiver collector;
    McpHarness m;
    m.otlp_endpoint = collector.endpoint();
    m.open(json::object());
    auto t = m.call("t-tp", "scripted__echo", R"({"text":"hi"})");
    CHECK(t.status == TurnStatus::completed);
    std::string sent;
    {
      std::istringstream in(m.calls());
      for (std::string line; std::getline(in, line);)
        if (line.rfind("traceparent ", 0) == 0) sent = line.substr(12);
    }
    REQUIRE(sent.size() == 55);
    m.h->rt.reset();  // flushes the spans
    REQUIRE(collector.wait_spans(1, std::chrono::seconds(10)));
    auto tool = find_span(collector.spans(), "execute_tool scripted__echo");
    REQUIRE(tool);
    CHECK(sent == "00-" + (*tool)["traceId"].get<std::string>() + "-" + (*tool)["spanId"].get<std::string>() + "-01");
  }

  TEST_CASE("tools/call results: structured content checked against the output schema, cards, reported errors") {
    McpHarness m;
    json add = m.outcome(m.call("t1", "scripted__add", R"({"a":2,"b":3})"));
    CHECK(add["status"] == "succeeded");
    CHECK(add["result"]["structuredContent"] == json{{"sum", 5}});

    json bad = m.outcome(m.call("t2", "scripted__badstruct", "{}"));
    CHECK(bad["status"] == "failed");
    CHECK(bad["error"]["code"] == "invalid_result");
    CHECK(bad["error"]["message"].get<std::string>().find("outputSchema at '/sum'") != std::string::npos);

    json fail = m.outcome(m.call("t3", "scripted__fail", "{}"));
    CHECK(fail["status"] == "failed");
    CHECK(fail["error"] == json{{"code", "tool_error"}, {"message", "the printer is on fire"}});
    auto history = m.rt().history("t3");
    CHECK(history[2].content == "scripted__fail failed: the printer is on fire");

    auto card = m.call("t4", "scripted__card", R"({"city":"Bergen"})");
    json out = m.outcome(card);
    CHECK(out["ui"]["type"] == "weather_card");
    CHECK(out["ui"]["data"] == json{{"city", "Bergen"}, {"temperature", 3}});
    CHECK(out["ui"]["actions"][0] ==
          json{{"type", "call"}, {"label", "Refresh tools"}, {"endpoint", "/mcp/tools"}, {"method", "GET"}});
    auto evs = m.h->events("t4", 1, 0);
    const json* result = find_event(evs, "TOOL_CALL_RESULT");
    REQUIRE(result);
    CHECK((*result)["content"] == "Bergen: 3 degrees");
    CHECK((*result)["metadata"]["ui"]["type"] == "weather_card");
  }

  TEST_CASE("an image in a result is a file of the thread: stored, listed with a signed url, shown to the model") {
    McpHarness m;
    auto t = m.call("t1", "scripted__image", "{}");
    REQUIRE(t.status == TurnStatus::completed);
    json out = m.outcome(t);
    CHECK(out["status"] == "succeeded");
    CHECK(out["result"]["content"][1] ==
          json{{"type", "image"}, {"mimeType", "image/png"}, {"ref", out["result"]["content"][1].value("ref", "?")}});
    CHECK(out["result"]["content"][1]["ref"].get<std::string>().rfind("img_", 0) == 0);
    auto history = m.rt().history("t1");
    REQUIRE(history.size() >= 3);
    const Message& tool = history[2];
    CHECK(tool.content == "a red dot");
    REQUIRE(tool.metadata["media"].size() == 1);
    const json& media = tool.metadata["media"][0];
    CHECK(media["type"] == "image");
    CHECK(media["mimeType"] == "image/png");
    CHECK(media["ref"].get<std::string>().rfind("img_", 0) == 0);
    CHECK(media["url"].get<std::string>().rfind("http://x/o/", 0) == 0);
    auto bytes = m.objects->get(media["storage_path"].get<std::string>());
    REQUIRE(bytes);
    CHECK(bytes->substr(1, 3) == "PNG");
    std::lock_guard<std::mutex> lock(g_seen_mutex);
    CHECK(g_seen_images == std::vector<std::string>{"image/png"});  // the model's next request showed it
  }

  TEST_CASE("an MCP tool needs approval unless its server's configuration says otherwise") {
    McpHarness m(json{{"approval", json{{"never", json::array({"add"})}}}});
    CHECK(m.rt().tools().find("scripted__echo")->spec.approval.mode == ApprovalPolicy::Mode::always);
    CHECK(m.rt().tools().find("scripted__add")->spec.approval.mode == ApprovalPolicy::Mode::never);
    auto t = m.call("t1", "scripted__echo", R"({"text":"hi"})");
    CHECK(t.status == TurnStatus::waiting_approval);
    CHECK(count_lines_starting(m.calls(), "echo ") == 0);  // nothing sent before the person decides
    auto done = m.rt().resume_turn(
        t.id, t.approval_request_id,
        {Decision{t.interrupts.at(0).at("id").get<std::string>(), Decision::Action::approve, std::nullopt, ""}});
    CHECK(done.status == TurnStatus::completed);
    CHECK(count_lines_starting(m.calls(), "echo ") == 1);
    CHECK(m.call("t2", "scripted__add", R"({"a":1,"b":1})").status == TurnStatus::completed);

    McpHarness always;
    always.open(json{{"approval", "always"}, {"idempotent", json::array({"echo"})}});
    CHECK(always.rt().tools().find("scripted__add")->spec.approval.mode == ApprovalPolicy::Mode::always);
    CHECK(always.rt().tools().find("scripted__echo")->spec.idempotent);
  }

  TEST_CASE("a call past its timeout, or whose turn is cancelled, is cancelled on the server") {
    McpHarness m(json{{"timeout_ms", 300}});
    auto t = m.call("t1", "scripted__slow", R"({"seconds":30})");
    json out = m.outcome(t);
    CHECK(out["status"] == "failed");
    CHECK(out["error"]["code"] == "timeout");
    CHECK(eventually([&] {
      return m.calls().find("cancelled 1") != std::string::npos || count_lines_starting(m.calls(), "cancelled ") == 1;
    }));
    CHECK(m.calls().find("the call timed out") != std::string::npos);

    McpHarness c(json{{"timeout_ms", 60000}});
    c.h->threads.insert("t2");
    auto handle = c.rt().start_turn(turn_input("t2", user_message(R"(call scripted__slow {"seconds":30})")));
    REQUIRE(eventually([&] { return count_lines_starting(c.calls(), "slow ") == 1; }));
    c.rt().cancel(handle.turn_id);
    auto ended = c.h->wait(handle.turn_id);
    CHECK(ended.status == TurnStatus::cancelled);
    CHECK(eventually([&] { return c.calls().find("the turn was cancelled") != std::string::npos; }));
    auto ledger = c.rt().tool_calls(handle.turn_id);
    REQUIRE(ledger.size() == 1);
    CHECK(ledger[0].status == LedgerStatus::interrupted);
  }

  TEST_CASE("progress notifications stream as agentrt.tool_progress while the call runs") {
    McpHarness m;
    auto t = m.call("t1", "scripted__progress", "{}");
    CHECK(t.status == TurnStatus::completed);
    auto evs = m.h->events("t1", 1, 0);
    check_agui(evs);
    std::vector<json> reports;
    for (const auto& e : evs)
      if (e["type"] == "CUSTOM" && e["name"] == "agentrt.tool_progress") reports.push_back(e["value"]);
    REQUIRE(!reports.empty());  // reports that come faster than they are streamed are coalesced
    CHECK(reports.back() == json{{"toolCallId", "call_1"}, {"progress", 3}, {"total", 3}, {"message", "step 3"}});
    for (size_t i = 1; i < reports.size(); ++i) CHECK(reports[i]["progress"] > reports[i - 1]["progress"]);
    // In the stream: after the call's start, before its result.
    size_t start = 0, progress = 0, result = 0;
    for (size_t i = 0; i < evs.size(); ++i) {
      if (evs[i]["type"] == "TOOL_CALL_END") start = i;
      if (evs[i]["type"] == "CUSTOM" && evs[i]["name"] == "agentrt.tool_progress" && !progress) progress = i;
      if (evs[i]["type"] == "TOOL_CALL_RESULT") result = i;
    }
    CHECK(start < progress);
    CHECK(progress < result);
  }

  TEST_CASE("hostile output (huge, deep, not JSON, another id) ends the call with a clear error; the server goes on") {
    McpHarness m(json{{"max_message_bytes", 65536}});
    struct Case {
      const char* tool;
      const char* says;
    } cases[] = {{"huge", "a message of more than 65536 bytes"},
                 {"deep", "it sent a message that is nested deeper than"},
                 {"garbage", "it sent a message that is not valid JSON"},
                 {"wrongid", "which it was not asked"}};
    int n = 0;
    for (const auto& c : cases) {
      CAPTURE(std::string(c.tool));
      CAPTURE(std::string(c.says));
      auto t = m.call("t" + std::to_string(++n), std::string("scripted__") + c.tool, "{}");
      CHECK(t.status == TurnStatus::completed);
      json out = m.outcome(t);
      CHECK(out["status"] == "failed");
      CHECK(out["error"]["code"] == "mcp_protocol");
      CHECK_MESSAGE(out["error"]["message"].get<std::string>().find(c.says) != std::string::npos, out.dump());
      auto after = m.call("ok" + std::to_string(n), "scripted__echo", R"({"text":"still here"})");
      CHECK(m.outcome(after)["result"]["content"][0]["text"] == "echo: still here");
    }
    CHECK(m.rt().mcp_servers()[0].restarts == 0);
  }

  TEST_CASE("a server that exits mid-call: the call fails (its outcome unknown), the server is started again") {
    McpHarness m;
    auto t = m.call("t1", "scripted__crash", "{}");
    json out = m.outcome(t);
    CHECK(out["status"] == "failed");
    CHECK(out["error"]["code"] == "mcp_unavailable");
    CHECK(out["error"]["message"].get<std::string>().find("exited with status 3") != std::string::npos);
    CHECK(out["error"]["message"].get<std::string>().find("outcome is unknown") != std::string::npos);
    REQUIRE(eventually([&] {
      auto s = m.rt().mcp_servers()[0];
      return s.restarts == 1 && s.state == "ready";
    }));
    auto again = m.call("t2", "scripted__echo", R"({"text":"back"})");
    CHECK(m.outcome(again)["result"]["content"][0]["text"] == "echo: back");
    CHECK(count_lines_starting(m.calls(), "crash ") == 1);  // never sent again
  }

  TEST_CASE("a changed definition is held back until approved; pins survive a restart") {
    McpHarness m;
    auto first = m.tool("scripted__echo");
    REQUIRE(first);
    const auto add_entry = m.rt().tools().find("scripted__add");
    CHECK(m.call("t1", "scripted__change", "{}").status == TurnStatus::completed);
    REQUIRE(eventually([&] { return !m.tool("scripted__echo")->changed_hash.empty(); }));
    CHECK(m.rt().tools().find("scripted__add") == add_entry);  // a tool the re-listing did not change stays as it was
    auto changed = *m.tool("scripted__echo");
    CHECK_FALSE(changed.offered);
    CHECK(changed.hash == first->hash);
    CHECK(changed.description == "Echoes the text");
    CHECK(changed.changed_definition["description"] == "Echoes the text, and sends it elsewhere too");
    CHECK(m.rt().tools().find("scripted__echo") == nullptr);
    CHECK(m.log_has("changed the definition of echo"));

    // A run in its stage says so, and the model is not offered it.
    auto t = m.call("t2", "scripted__echo", R"({"text":"x"})");
    json out = m.outcome(t);
    CHECK(out["error"]["code"] == "unknown_tool");
    auto evs = m.h->events("t2", 1, 0);
    const json* notice = nullptr;
    for (const auto& e : evs)
      if (e["type"] == "CUSTOM" && e["name"] == "agentrt.mcp_tool_changed") notice = &e;
    REQUIRE(notice);
    CHECK((*notice)["value"]["name"] == "scripted__echo");
    CHECK((*notice)["value"]["approvedHash"] == first->hash);
    CHECK((*notice)["value"]["hash"] == changed.changed_hash);

    CHECK(error_of([&] { m.rt().approve_mcp_tool("scripted__add"); }).first == ErrorCode::invalid_state);
    CHECK(error_of([&] { m.rt().approve_mcp_tool("nope__x"); }).first == ErrorCode::not_found);
    auto approved = m.rt().approve_mcp_tool("scripted__echo");
    CHECK(approved.offered);
    CHECK(approved.hash == changed.changed_hash);
    CHECK(m.rt().tools().find("scripted__echo")->spec.description == "Echoes the text, and sends it elsewhere too");

    // A new runtime on the same pins, the server listing the original definition: that one is now the change.
    m.open({});
    CHECK_FALSE(m.tool("scripted__echo")->offered);
    CHECK(m.tool("scripted__echo")->changed_hash == first->hash);
    // And listing the approved one, it is offered.
    m.open({}, {{"MCP_TEST_ECHO_DESC", "Echoes the text, and sends it elsewhere too"}});
    CHECK(m.tool("scripted__echo")->offered);
  }

  TEST_CASE("a server that cannot start: the runtime runs without its tools and says why; stderr goes to the log") {
    McpHarness m(json{{"command", json::array({"/nonexistent/mcp-server"})}});
    auto s = m.rt().mcp_servers()[0];
    CHECK(s.state != "ready");
    CHECK(s.error.find("cannot start /nonexistent/mcp-server") != std::string::npos);
    CHECK(m.rt().mcp_tools().empty());

    // A server that never answers: the runtime starts without it after startup_timeout_ms, and stops at once.
    const auto began = std::chrono::steady_clock::now();
    McpHarness silent(json{{"startup_timeout_ms", 400}}, {{"MCP_TEST_SILENT", "1"}});
    CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(10));
    CHECK(silent.rt().mcp_servers()[0].error.find("did not answer initialize within 400 ms") != std::string::npos);
    const auto stopping = std::chrono::steady_clock::now();
    silent.h->rt.reset();
    CHECK(std::chrono::steady_clock::now() - stopping < std::chrono::seconds(5));

    McpHarness e({}, {{"MCP_TEST_STDERR", "hello from stderr"}});
    CHECK(eventually([&] { return e.log_has("MCP server scripted: hello from stderr"); }));
    // What a server writes reaches the log sink without control characters: no terminal commands, one line.
    McpHarness evil({}, {{"MCP_TEST_STDERR", "set \x1b]0;title\x07 clear \x1b[2J \xc2\x9b caf\xc3\xa9"}});
    CHECK(eventually([&] {
      return evil.log_has("MCP server scripted: set \\x1b]0;title\\x07 clear \\x1b[2J \\xc2\\x9b caf\xc3\xa9");
    }));
  }

  TEST_CASE(
      "a server asking for input mid-call (2025-11-25 elicitation): an input interrupt; the answer goes back on "
      "the open call") {
    McpHarness m;
    CHECK(m.calls().find(R"(initialize {"elicitation": {"form": {}}})") != std::string::npos);
    const json colour = json::parse(R"({"type":"object","properties":{"colour":{"type":"string",
      "enum":["red","blue"]}},"required":["colour"]})");
    auto t = m.call("t1", "scripted__ask", "{}");
    REQUIRE(t.status == TurnStatus::waiting_approval);
    REQUIRE(t.interrupts.size() == 1);
    const json& i = t.interrupts[0];
    CHECK(i["reason"] == "input_required");
    CHECK(i["message"] == "Which colour?");
    CHECK(i["toolCallId"] == "call_1");
    CHECK(i["responseSchema"] == colour);
    CHECK(i["metadata"]["toolName"] == "scripted__ask");
    CHECK(i["metadata"]["inputState"]["server"] == "scripted");
    auto ledger = m.rt().tool_calls(t.id);
    REQUIRE(ledger.size() == 1);
    CHECK(ledger[0].status == LedgerStatus::requested);
    const std::string id = i["id"].get<std::string>();

    // An answer its schema refuses, or edited arguments, are refused; nothing is sent.
    auto refused = error_of([&] {
      m.rt().resume(t.id, t.approval_request_id,
                    {Decision{id, Decision::Action::approve, std::nullopt, "", json{{"colour", "green"}}}});
    });
    CHECK(refused.first == ErrorCode::invalid_argument);
    CHECK(refused.second.find("the response to interrupt") != std::string::npos);
    CHECK(error_of([&] {
            m.rt().resume(t.id, t.approval_request_id,
                          {Decision{id, Decision::Action::approve, json::object(), "", std::nullopt}});
          }).first == ErrorCode::invalid_argument);

    auto done =
        m.rt().resume_turn(t.id, t.approval_request_id,
                           {Decision{id, Decision::Action::approve, std::nullopt, "", json{{"colour", "blue"}}}});
    CHECK(done.status == TurnStatus::completed);
    json out = m.outcome(done);
    CHECK(out["status"] == "succeeded");
    CHECK(out["result"]["content"][0]["text"] == "you chose blue");
    CHECK(count_lines_starting(m.calls(), "ask ") == 1);  // one call, answered on the way
    auto evs = m.h->events("t1", 2, 0);
    check_agui(evs);

    // Declined: the tool hears it and finishes.
    auto d = m.call("t2", "scripted__ask", "{}");
    REQUIRE(d.status == TurnStatus::waiting_approval);
    auto declined = m.rt().resume_turn(
        d.id, d.approval_request_id,
        {Decision{d.interrupts[0]["id"].get<std::string>(), Decision::Action::reject, std::nullopt, "", std::nullopt}});
    REQUIRE_MESSAGE(declined.status == TurnStatus::completed, to_string(declined.status) << " " << declined.error);
    CHECK(m.outcome(declined)["result"]["content"][0]["text"] == "decline");
  }

  TEST_CASE("an answer that comes after a restart: the session that asked is gone, the call fails clearly") {
    McpHarness m;
    auto t = m.call("t1", "scripted__ask", "{}");
    REQUIRE(t.status == TurnStatus::waiting_approval);
    m.restart();
    auto done = m.rt().resume_turn(t.id, t.approval_request_id,
                                   {Decision{t.interrupts[0]["id"].get<std::string>(), Decision::Action::approve,
                                             std::nullopt, "", json{{"colour", "red"}}}});
    CHECK(done.status == TurnStatus::completed);
    json out = m.outcome(done);
    CHECK(out["status"] == "failed");
    CHECK(out["error"]["code"] == "mcp_session_gone");
    CHECK(count_lines_starting(m.calls(), "ask ") == 1);  // never sent again
  }

  TEST_CASE(
      "the stateless protocol (2026-07-28): server/discover, _meta on every request, input_required answered "
      "by calling again, across a restart") {
    McpHarness m(json::object(), {{"MCP_TEST_PROTOCOL", "2026-07-28"}});
    auto s = m.rt().mcp_servers()[0];
    CHECK(s.state == "ready");
    CHECK(s.protocol_version == "2026-07-28");
    CHECK(s.server_name == "scripted-stateless");
    CHECK(count_lines_starting(m.calls(), "initialize") == 0);
    CHECK(m.calls().find(R"("io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}})") !=
          std::string::npos);
    CHECK(m.outcome(m.call("t0", "scripted__echo", R"({"text":"x"})"))["result"]["content"][0]["text"] == "echo: x");

    auto t = m.call("t1", "scripted__ask", "{}");
    REQUIRE(t.status == TurnStatus::waiting_approval);
    const json& i = t.interrupts[0];
    CHECK(i["reason"] == "input_required");
    CHECK(i["message"] == "Which colour?");
    CHECK(i["metadata"]["inputState"]["inputKey"] == "colour");
    CHECK(i["metadata"]["inputState"]["requestState"].get<std::string>().rfind("state-", 0) == 0);
    m.restart();  // nothing of the call lives in the process: the answer still reaches the server
    auto done = m.rt().resume_turn(
        t.id, t.approval_request_id,
        {Decision{i["id"].get<std::string>(), Decision::Action::approve, std::nullopt, "", json{{"colour", "blue"}}}});
    CHECK(done.status == TurnStatus::completed);
    CHECK(m.outcome(done)["result"]["content"][0]["text"] == "you chose blue");
    CHECK(count_lines_starting(m.calls(), "ask {}") == 2);  // asked, then called again with the answer
  }

  TEST_CASE("mcp_servers configuration: what it takes and what it refuses") {
    auto c = mcp_servers_from_json(json::parse(R"({"files":{"command":["npx","-y","srv"],"args":["/tmp"],
      "env":{"A":"1"},"cwd":"/","approval":{"never":["read"]},"stages":["execution","organization"],
      "timeout_ms":5000,"tools":{"include":["read","list"],"exclude":["list"]},"idempotent":["read"]},
      "web":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer x"},"approval":"never"}})"));
    REQUIRE(c.size() == 2);
    CHECK(c[0].name == "files");
    CHECK(c[0].command == std::vector<std::string>{"npx", "-y", "srv", "/tmp"});
    CHECK(c[0].env.at("A") == "1");
    CHECK(c[0].approval_always);
    CHECK(c[0].approval_exempt == std::set<std::string>{"read"});
    CHECK(c[0].stages == std::vector<std::string>{"execution", "organization"});
    CHECK(c[0].timeout == std::chrono::milliseconds(5000));
    CHECK(*c[0].include == std::set<std::string>{"list", "read"});
    CHECK(c[0].exclude == std::set<std::string>{"list"});
    CHECK(c[1].url == "http://127.0.0.1:9/mcp");
    CHECK_FALSE(c[1].approval_always);

    auto refused = [](const char* text) { return error_of([&] { mcp_servers_from_json(json::parse(text)); }); };
    CHECK(refused(R"([])").second == "mcp_servers: must be an object {NAME: {...}}");
    CHECK(refused(R"({"a__b":{"command":["x"]}})").first == ErrorCode::invalid_argument);
    CHECK(refused(R"({"a":{}})").second == "mcp_servers.a: give either a command (stdio) or a url (streamable HTTP)");
    CHECK(refused(R"({"a":{"command":["x"],"url":"http://h"}})").first == ErrorCode::invalid_argument);
    CHECK(refused(R"({"a":{"url":"ftp://h"}})").first == ErrorCode::invalid_argument);
    CHECK(refused(R"({"a":{"command":["x"],"approval":"sometimes"}})").first == ErrorCode::invalid_argument);
    CHECK(refused(R"({"a":{"command":["x"],"stages":["planning"]}})").first == ErrorCode::invalid_argument);
    CHECK(refused(R"({"a":{"command":["x"],"timeout_ms":0}})").first == ErrorCode::invalid_argument);
    CHECK(refused(R"({"a":{"command":["x"],"colour":"red"}})").second.find("unknown key 'colour'") !=
          std::string::npos);
    CHECK(refused(R"({"a":{"command":["x"],"protocol_version":"1999-01-01"}})").first == ErrorCode::invalid_argument);
    // Through the runtime config too.
    TempDir dir;
    CHECK(error_of([&] {
            runtime_config_from_json(json{{"data_dir", dir.path.string()},
                                          {"model", {{"type", "demo"}}},
                                          {"mcp_servers", {{"x", {{"command", 7}}}}}});
          }).first == ErrorCode::invalid_argument);
  }
}

namespace {

// tests/mcp/scripted_http_server.py on a free port, for the test's life.
struct HttpScripted {
  TempDir dir;
  std::string port_file = dir.file("port"), log_file = dir.file("http.log");
  pid_t pid = -1;
  int port = 0;
  HttpScripted() {
    const std::string script = std::string(AGENTRT_SOURCE_DIR) + "/tests/mcp/scripted_http_server.py";
    pid = ::fork();
    if (pid == 0) {
      ::execlp("python3", "python3", script.c_str(), port_file.c_str(), log_file.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    REQUIRE(eventually([&] { return std::filesystem::exists(port_file); }));
    port = std::stoi(read_file(port_file));
  }
  ~HttpScripted() {
    ::kill(pid, SIGTERM);
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/mcp"; }
  std::string log() const { return read_file(log_file); }
};

}  // namespace

TEST_SUITE("mcp") {
  TEST_CASE(
      "streamable HTTP: SSE answers, a cut stream resumed with Last-Event-ID, broken answers, a session that "
      "ends") {
    HttpScripted server;
    McpHarness m(json{{"command", nullptr}, {"url", server.url()}, {"max_message_bytes", 65536}});
    auto s = m.rt().mcp_servers()[0];
    REQUIRE(s.state == "ready");
    CHECK(s.transport == "http");
    CHECK(s.server_name == "scripted-http");
    auto text = [&](const std::string& thread, const std::string& tool) {
      return m.outcome(m.call(thread, "scripted__" + tool, "{}"));
    };
    CHECK(text("t1", "echo")["result"]["content"][0]["text"] == "echoed over SSE");
    CHECK(text("t2", "cut")["result"]["content"][0]["text"] == "answered after a resume");
    CHECK(server.log().find("resume cut-1") != std::string::npos);

    json huge = text("t3", "huge");
    CHECK(huge["error"]["code"] == "mcp_protocol");
    CHECK(huge["error"]["message"].get<std::string>().find("65536") != std::string::npos);
    json garbage = text("t4", "garbage");
    CHECK(garbage["error"]["code"] == "mcp_protocol");
    CHECK(garbage["error"]["message"].get<std::string>().find("not valid JSON") != std::string::npos);
    json fire = text("t5", "fail500");
    CHECK(fire["error"]["code"] == "mcp_unavailable");
    CHECK(fire["error"]["message"].get<std::string>().find("answered HTTP 500: the server is on fire") !=
          std::string::npos);

    // The server ends the session: the call fails, the client initializes a new one, and goes on.
    json expired = text("t6", "expire");
    CHECK(expired["error"]["code"] == "mcp_unavailable");
    REQUIRE(eventually([&] {
      auto now = m.rt().mcp_servers()[0];
      return now.state == "ready" && now.restarts == 1;
    }));
    CHECK(text("t7", "echo")["result"]["content"][0]["text"] == "echoed over SSE");
    CHECK(count_lines_starting(server.log(), "initialize") == 2);
    m.h->rt.reset();  // the runtime ends its session
    CHECK(count_lines_starting(server.log(), "delete") >= 1);
  }
}

TEST_SUITE("mcp") {
  TEST_CASE("a process killed during an MCP call: the call is recorded interrupted and never sent again") {
    TempDir dir;
    const std::string log_file = dir.file("calls.log");
    auto config = [&] {
      RuntimeConfig c = test_config(std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")}),
                                    std::make_shared<ScriptedModel>(call_script));
      c.mcp_servers = mcp_servers_from_json(json{{"scripted",
                                                  {{"command", json::array({"python3", kServer})},
                                                   {"approval", "never"},
                                                   {"env", {{"MCP_TEST_LOG", log_file}}}}}});
      c.mcp_pins_path = dir.file("pins.json");
      return c;
    };
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        Runtime rt(config());
        rt.start_turn(turn_input("t-crash", user_message(R"(call scripted__slow {"seconds":60})")));
        ::pause();
      } catch (...) {
      }
      ::_exit(5);
    }
    REQUIRE(eventually([&] { return count_lines_starting(read_file(log_file), "slow ") == 1; }));
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);

    Runtime rt(config());  // the next process: the dead one's turn fails once its lease runs out
    auto store = SqliteStore(SqliteStoreOptions{dir.file("agentrt.db")});
    auto turn = store.last_turn("t-crash");
    REQUIRE(turn);
    auto ended = rt.wait(turn->id, kLongWait);
    CHECK(ended.status == TurnStatus::failed);
    auto ledger = rt.tool_calls(turn->id);
    REQUIRE(ledger.size() == 1);
    CHECK(ledger[0].status == LedgerStatus::interrupted);
    CHECK(count_lines_starting(read_file(log_file), "slow ") == 1);  // never sent again
  }
}
