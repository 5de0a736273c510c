// Tracing: spans of runs, model calls, tool calls, approval waits and jobs (GenAI conventions), exported as OTLP/HTTP
// JSON to an in-process collector; trace context from the host and to the model server; sampling; a collector that
// is down or hung; the bounded queue; content only when asked for.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "agentrt/openai.hpp"
#include "agentrt/tracing.hpp"
#include "support/fault_vfs.hpp"
#include "support/mock_openai_server.hpp"
#include "support/otlp_receiver.hpp"
#include "support/runtime_fixture.hpp"
#include "tracing/otlp_json.hpp"
#include "tracing/run_spans.hpp"
#include "tracing/span_record.hpp"
#include "tracing/tracer.hpp"

using namespace agentrt;
using namespace agentrt::testing;
using namespace std::chrono_literals;

namespace {

constexpr const char* kHostTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr const char* kHostSpan = "00f067aa0ba902b7";

std::function<void(RuntimeConfig&)> traced(const OtlpReceiver& rx, std::function<void(TracingConfig&)> tweak = {}) {
  return [endpoint = rx.endpoint(), tweak](RuntimeConfig& c) {
    c.tracing.otlp_endpoint = endpoint;
    c.tracing.export_interval = 10ms;
    if (tweak) tweak(c.tracing);
  };
}

// A tracer's config exporting to `rx`, a request at least every `interval`.
TracingConfig exporting_to(const OtlpReceiver& rx, std::chrono::milliseconds interval) {
  TracingConfig cfg;
  cfg.otlp_endpoint = rx.endpoint();
  cfg.export_interval = interval;
  return cfg;
}

std::vector<json> named(const std::vector<json>& spans, const std::string& prefix) {
  std::vector<json> out;
  for (const auto& s : spans)
    if (s.value("name", "").rfind(prefix, 0) == 0) out.push_back(s);
  return out;
}

std::string parent_of(const json& span) { return span.value("parentSpanId", ""); }
std::string id_of(const json& span) { return span.value("spanId", ""); }

// A run with book_room that needs no approval: intent, a tool call, the answer.
void run_booking(Harness& h, const std::string& thread, const std::string& traceparent = {}) {
  h.add_book_room(ApprovalPolicy::never());
  TurnInput in = turn_input(thread, user_message("book A1 for monday"));
  in.traceparent = traceparent;
  h.threads.insert(thread);
  REQUIRE(h.rt->run_turn(in).status == TurnStatus::completed);
}

}  // namespace

TEST_SUITE("tracing") {
  TEST_CASE("traceparent: version 00 is parsed and formatted back; invalid ones are refused") {
    const std::string tp = std::string("00-") + kHostTrace + "-" + kHostSpan + "-01";
    auto c = trace::parse_traceparent(tp);
    REQUIRE(c.has_value());
    CHECK(c->sampled);
    CHECK(c->trace_id_hex() == kHostTrace);
    CHECK(c->span_id_hex() == kHostSpan);
    CHECK(trace::format_traceparent(*c) == tp);
    CHECK(trace::parse_traceparent(std::string("00-") + kHostTrace + "-" + kHostSpan + "-00")->sampled == false);
    // A later version's first fields are taken; version ff, upper case, zero ids, bad lengths are not.
    CHECK(trace::parse_traceparent(std::string("01-") + kHostTrace + "-" + kHostSpan + "-01-extra").has_value());
    for (std::string bad : {std::string("ff-") + kHostTrace + "-" + kHostSpan + "-01",
                            std::string("00-") + "4BF92F3577B34DA6A3CE929D0E0E4736" + "-" + kHostSpan + "-01",
                            std::string("00-00000000000000000000000000000000-") + kHostSpan + "-01",
                            std::string("00-") + kHostTrace + "-0000000000000000-01",
                            std::string("00-") + kHostTrace + "-" + kHostSpan + "-01-extra",
                            std::string("00-") + kHostTrace + "-" + kHostSpan, std::string("garbage"), std::string()})
      CHECK_MESSAGE(!trace::parse_traceparent(bad).has_value(), bad);
  }

  TEST_CASE("the root sampling decision follows the trace id and the ratio") {
    std::array<uint8_t, 16> low{}, high{};
    low[15] = 1;
    high.fill(0xff);
    CHECK(trace::sample_trace(low, 0.5));
    CHECK_FALSE(trace::sample_trace(high, 0.5));
    CHECK_FALSE(trace::sample_trace(low, 0.0));
    CHECK(trace::sample_trace(high, 1.0));
  }

  TEST_CASE("tracing_config_from_json takes its keys and refuses unknown keys and wrong types") {
    TracingConfig c = tracing_config_from_json(json::parse(R"({"otlp_endpoint":"http://127.0.0.1:4318/v1/traces",
      "headers":{"Authorization":"Bearer x"},"service_name":"svc","sample_ratio":0.25,"capture_content":true,
      "max_queue_spans":10,"max_batch_spans":5,"export_interval_ms":100,"export_timeout_ms":200})"));
    CHECK(c.otlp_endpoint == "http://127.0.0.1:4318/v1/traces");
    CHECK(c.headers == std::vector<std::pair<std::string, std::string>>{{"Authorization", "Bearer x"}});
    CHECK(c.service_name == "svc");
    CHECK(c.sample_ratio == 0.25);
    CHECK(c.capture_content);
    CHECK(c.max_queue_spans == 10);
    CHECK(c.export_timeout == 200ms);
    for (const char* bad :
         {R"({"endpoint":"x"})", R"({"sample_ratio":"1"})", R"({"sample_ratio":2})", R"({"capture_content":1})",
          R"({"headers":{"a":1}})", R"({"otlp_endpoint":"ftp://x"})", R"({"max_queue_spans":0})", R"([])"}) {
      auto [code, message] = error_of([&] { tracing_config_from_json(json::parse(bad)); });
      CHECK_MESSAGE(code == ErrorCode::invalid_argument, bad);
    }
  }

  TEST_CASE("span attributes: packed in order, set replaces (moving to the end), every type read back") {
    trace::Attributes a;
    a.add_string("s", "x");
    a.add_int("i", -42);
    a.add_real("d", 0.25);
    a.add_bool("b", true);
    a.add_list("l", {"stop", "", std::string(70000, 'z')});
    a.add_string(std::string(70000, 'k'), "long key");  // cut to 65535 bytes
    a.add_string("empty", "");
    CHECK(a.size() == 7);
    std::vector<std::string> keys;
    a.for_each([&](const trace::Attributes::View& v) { keys.push_back(std::string(v.key.substr(0, 5))); });
    CHECK(keys == std::vector<std::string>{"s", "i", "d", "b", "l", "kkkkk", "empty"});
    CHECK(a.find("s")->payload == "x");
    CHECK(a.find("i")->as_int() == -42);
    CHECK(a.find("d")->as_real() == 0.25);
    CHECK(a.find("b")->as_bool());
    CHECK(a.find(std::string(65535, 'k'))->payload == "long key");
    CHECK(a.find("empty")->payload.empty());
    std::vector<std::string> items;
    a.find("l")->for_each_item([&](std::string_view item) { items.emplace_back(item); });
    CHECK(items == std::vector<std::string>{"stop", "", std::string(70000, 'z')});
    CHECK_FALSE(a.find("missing"));
    // Span::set is remove + add: the value changes, the attribute moves to the end, no duplicate is left.
    a.remove("i");
    a.add_int("i", 7);
    CHECK(a.size() == 7);
    CHECK(a.find("i")->as_int() == 7);
    keys.clear();
    a.for_each([&](const trace::Attributes::View& v) { keys.push_back(std::string(v.key.substr(0, 5))); });
    CHECK(keys == std::vector<std::string>{"s", "d", "b", "l", "kkkkk", "empty", "i"});
    a.add_string("s", "y");  // add() does not look: two now, and remove takes both
    a.remove("s");
    CHECK_FALSE(a.find("s"));
    CHECK(a.size() == 6);
    a.clear();
    CHECK(a.empty());
    int seen = 0;
    a.for_each([&](const trace::Attributes::View&) { ++seen; });
    CHECK(seen == 0);
  }

  TEST_CASE("OTLP JSON: hex ids, times and int values as strings, kind and status as numbers") {
    trace::SpanData s;
    s.context = *trace::parse_traceparent(std::string("00-") + kHostTrace + "-" + kHostSpan + "-01");
    s.parent_span_id = {1, 2, 3, 4, 5, 6, 7, 8};
    s.name = "chat m";
    s.kind = trace::SpanKind::client;
    s.start_ns = 1700000000000000001;
    s.end_ns = 1700000000000000002;
    s.attributes = {
        {"i", int64_t{42}}, {"d", 0.5}, {"b", true}, {"s", std::string("x")}, {"a", std::vector<std::string>{"stop"}}};
    s.error = true;
    s.status_message = "boom";
    std::vector<std::unique_ptr<trace::SpanData>> batch;
    batch.push_back(std::make_unique<trace::SpanData>(s));
    const json body = json::parse(trace::otlp_json(batch, "svc"));
    const json& rs = body["resourceSpans"][0];
    CHECK(rs["resource"]["attributes"][0] == json::parse(R"({"key":"service.name","value":{"stringValue":"svc"}})"));
    CHECK(rs["scopeSpans"][0]["scope"]["name"] == "agentrt");
    const json& j = rs["scopeSpans"][0]["spans"][0];
    CHECK(j["traceId"] == kHostTrace);
    CHECK(j["spanId"] == kHostSpan);
    CHECK(j["parentSpanId"] == "0102030405060708");
    CHECK(j["kind"] == 3);
    CHECK(j["startTimeUnixNano"] == "1700000000000000001");
    CHECK(j["endTimeUnixNano"] == "1700000000000000002");
    CHECK(j["attributes"][0]["value"] == json::parse(R"({"intValue":"42"})"));
    CHECK(j["attributes"][1]["value"] == json::parse(R"({"doubleValue":0.5})"));
    CHECK(j["attributes"][2]["value"] == json::parse(R"({"boolValue":true})"));
    CHECK(j["attributes"][4]["value"] == json::parse(R"({"arrayValue":{"values":[{"stringValue":"stop"}]}})"));
    CHECK(j["status"] == json::parse(R"({"code":2,"message":"boom"})"));
  }

  TEST_CASE("a span packed for the export queue is unpacked whole: every field, its events and links, in order") {
    trace::SpanData full;
    full.context = *trace::parse_traceparent(std::string("00-") + kHostTrace + "-" + kHostSpan + "-01");
    full.parent_span_id = {1, 2, 3, 4, 5, 6, 7, 8};
    full.name = std::string("execute_tool \0book", 17);
    full.kind = trace::SpanKind::producer;
    full.start_ns = 1700000000000000001;
    full.end_ns = 1700000000000000002;
    full.attributes = {{"i", int64_t{-42}},
                       {"d", 0.25},
                       {"b", false},
                       {"s", std::string(3000, 'x')},
                       {"a", std::vector<std::string>{"stop", "", "length"}}};
    full.events.push_back({"first", 5, {{"k", std::string("v")}}});
    full.events.push_back({"", 6, {}});
    full.links.push_back(full.context);
    full.links.push_back({});
    full.error = true;
    full.status_message = "boom";
    trace::SpanData bare;  // no name, attributes, events or links
    bare.end_ns = 9;

    std::string queue;
    trace::pack_span(full, queue);
    const size_t first = queue.size();
    trace::pack_span(bare, queue);
    trace::pack_span(full, queue);
    // Unpacked into one SpanData in turn (as the export thread does): each the same span again, byte for byte in
    // its OTLP form, and nothing of the one before left in it.
    auto otlp = [](const trace::SpanData& s) {
      std::string out;
      trace::append_span_json(out, s);
      return out;
    };
    trace::SpanData into;
    size_t at = 0;
    for (const trace::SpanData* want : {&full, &bare, &full}) {
      const size_t took = trace::unpack_span(std::string_view(queue).substr(at), into);
      CHECK(took == (want == &full ? first : queue.size() - 2 * first));
      at += took;
      CHECK(otlp(into) == otlp(*want));
      CHECK(into.name == want->name);
      CHECK(into.attributes.size() == want->attributes.size());
      CHECK(into.events.size() == want->events.size());
      CHECK(into.links == want->links);
      CHECK(into.status_message == want->status_message);
    }
    CHECK(at == queue.size());
    CHECK(into.events[0].attributes.find("k")->payload == "v");
  }

  TEST_CASE("OTLP JSON: every byte at every place in a string is escaped or replaced as JSON requires") {
    // The encoder copies strings that need nothing as they are, deciding eight bytes at a time: each byte value is
    // tried at each place of a 17-byte string (two words and a tail), in the name, a key, a value and the status.
    for (int b = 0; b < 256; ++b) {
      for (size_t at = 0; at < 17; ++at) {
        std::string text(17, 'a');
        text[at] = static_cast<char>(b);
        trace::SpanData s;
        s.name = text;
        s.attributes = {{std::string_view("k"), text}, {std::string_view("list"), std::vector<std::string>{text}}};
        s.error = true;
        s.status_message = text;
        std::string encoded = "[prefix]";  // appended after what the string holds
        trace::append_span_json(encoded, s);
        REQUIRE(encoded.rfind("[prefix]{", 0) == 0);
        encoded.erase(0, 8);
        const json j = json::parse(encoded, nullptr, false);
        REQUIRE_FALSE(j.is_discarded());
        // A byte above 0x7f alone is not UTF-8: it becomes U+FFFD, the rest stays.
        std::string expected = text;
        if (b >= 0x80) expected.replace(at, 1, "\xEF\xBF\xBD");
        CHECK(j["name"] == expected);
        CHECK(j["attributes"][0]["value"]["stringValue"] == expected);
        CHECK(j["attributes"][1]["value"]["arrayValue"]["values"][0]["stringValue"] == expected);
        CHECK(j["status"]["message"] == expected);
      }
    }
    // Long, all of it escaped; non-finite doubles as OTLP's strings.
    trace::SpanData big;
    big.name = std::string(40000, '\n');
    big.attributes = {{std::string_view("nan"), std::nan("")},
                      {std::string_view("inf"), -std::numeric_limits<double>::infinity()}};
    big.events.push_back({std::string(5000, '"'), 7, {{std::string_view("e"), int64_t{-9}}}});
    big.links.push_back(*trace::parse_traceparent(std::string("00-") + kHostTrace + "-" + kHostSpan + "-01"));
    std::string text;
    trace::append_span_json(text, big);
    const json j = json::parse(text);
    CHECK(j["name"] == big.name);
    CHECK(j["attributes"][0]["value"]["doubleValue"] == "NaN");
    CHECK(j["attributes"][1]["value"]["doubleValue"] == "-Infinity");
    CHECK(j["events"][0]["name"] == big.events[0].name);
    CHECK(j["events"][0]["timeUnixNano"] == "7");
    CHECK(j["events"][0]["attributes"][0]["value"]["intValue"] == "-9");
    CHECK(j["links"][0]["traceId"] == kHostTrace);
  }

  TEST_CASE("a run exports invoke_agent with its chat and execute_tool spans as children, GenAI attributes on each") {
    OtlpReceiver rx;
    {
      Harness h(booking_script, traced(rx));
      run_booking(h, "t-spans");
    }  // the runtime flushes its spans when destroyed
    const auto spans = rx.spans();
    auto run = find_span(spans, "invoke_agent agentrt");
    REQUIRE(run.has_value());
    CHECK((*run)["kind"] == 1);
    CHECK(parent_of(*run).empty());
    CHECK(span_attr(*run, "gen_ai.operation.name") == "invoke_agent");
    CHECK(span_attr(*run, "gen_ai.agent.name") == "agentrt");
    CHECK(span_attr(*run, "gen_ai.conversation.id") == "t-spans");
    CHECK(span_attr(*run, "agentrt.outcome") == "success");
    CHECK(span_attr(*run, "agentrt.turn.id").is_string());
    CHECK(span_attr(*run, "agentrt.run.id").is_string());
    const auto chats = named(spans, "chat");
    REQUIRE(chats.size() == 3);  // intent, the tool call, the answer
    for (const auto& c : chats) {
      CHECK(c["kind"] == 3);
      CHECK(c["traceId"] == (*run)["traceId"]);
      CHECK(parent_of(c) == id_of(*run));
      CHECK(span_attr(c, "gen_ai.operation.name") == "chat");
      CHECK(span_attr(c, "gen_ai.provider.name") == "scripted");
      CHECK(span_attr(c, "gen_ai.response.finish_reasons").is_array());
      CHECK(span_attr(c, "agentrt.stage").is_string());
      CHECK(span_attr(c, "gen_ai.input.messages").is_null());  // no content unless asked for
    }
    auto tool = find_span(spans, "execute_tool book_room");
    REQUIRE(tool.has_value());
    CHECK((*tool)["traceId"] == (*run)["traceId"]);
    CHECK(parent_of(*tool) == id_of(*run));
    CHECK(span_attr(*tool, "gen_ai.operation.name") == "execute_tool");
    CHECK(span_attr(*tool, "gen_ai.tool.name") == "book_room");
    CHECK(span_attr(*tool, "gen_ai.tool.call.id") == "call_1");
    CHECK(span_attr(*tool, "gen_ai.tool.type") == "extension");
    CHECK(span_attr(*tool, "gen_ai.tool.call.arguments").is_null());
    CHECK(rx.requests().front().body["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"] ==
          "agentrt");
  }

  TEST_CASE("a host traceparent is the run span's parent; an invalid one starts a trace of its own") {
    OtlpReceiver rx;
    {
      Harness h(booking_script, traced(rx));
      run_booking(h, "t-host", std::string("00-") + kHostTrace + "-" + kHostSpan + "-01");
      TurnInput in = turn_input("t-bad", user_message("book it"));
      in.traceparent = "00-not-a-trace-01";
      h.threads.insert("t-bad");
      REQUIRE(h.rt->run_turn(in).status == TurnStatus::completed);
    }
    std::vector<json> runs = named(rx.spans(), "invoke_agent");
    REQUIRE(runs.size() == 2);
    const json& host = span_attr(runs[0], "gen_ai.conversation.id") == "t-host" ? runs[0] : runs[1];
    const json& own = &host == &runs[0] ? runs[1] : runs[0];
    CHECK(host["traceId"] == kHostTrace);
    CHECK(parent_of(host) == kHostSpan);
    CHECK(own["traceId"] != kHostTrace);
    CHECK(parent_of(own).empty());
  }

  TEST_CASE("the model server receives the chat span's context as its traceparent header") {
    MockOpenAIServer server;
    server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"wants ", "nothing"})));
    server.push_chat(MockResponse::stream(MockOpenAIServer::text_stream({"Hello"})));
    OpenAIConfig oc;
    oc.base_url = server.base_url();
    oc.api_key = "sk-trace-test-000111";
    oc.model = "mock-model";
    OtlpReceiver rx;
    {
      TempDir dir;
      auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{dir.file("agentrt.db")});
      RuntimeConfig c = test_config(store, make_openai_provider(oc));
      traced(rx)(c);
      Runtime rt(c);
      TurnInput in = turn_input("t-model", user_message("hi"));
      in.traceparent = std::string("00-") + kHostTrace + "-" + kHostSpan + "-01";
      REQUIRE(rt.run_turn(in).status == TurnStatus::completed);
    }
    const auto chats = named(rx.spans(), "chat");
    const auto requests = server.requests();
    REQUIRE(chats.size() == 2);
    REQUIRE(requests.size() == 2);
    std::set<std::string> sent, spans;
    for (const auto& r : requests) sent.insert(r.header("traceparent").value_or(""));
    for (const auto& s : chats) {
      spans.insert("00-" + s["traceId"].get<std::string>() + "-" + s["spanId"].get<std::string>() + "-01");
      CHECK(s["traceId"] == kHostTrace);
      CHECK(span_attr(s, "gen_ai.provider.name") == "openai");
      CHECK(span_attr(s, "gen_ai.usage.input_tokens") == 7);
      CHECK(span_attr(s, "gen_ai.usage.output_tokens") == 5);
    }
    CHECK(sent == spans);
  }

  TEST_CASE("sampling ratio 0 exports nothing, but a sampled host parent still is followed") {
    OtlpReceiver rx;
    {
      Harness h(booking_script, traced(rx, [](TracingConfig& t) { t.sample_ratio = 0; }));
      run_booking(h, "t-unsampled");
    }
    CHECK(rx.requests().empty());
    {
      Harness h(booking_script, traced(rx, [](TracingConfig& t) { t.sample_ratio = 0; }));
      run_booking(h, "t-parent", std::string("00-") + kHostTrace + "-" + kHostSpan + "-01");
    }
    const auto spans = rx.spans();
    CHECK(named(spans, "invoke_agent").size() == 1);
    for (const auto& s : spans) CHECK(s["traceId"] == kHostTrace);
  }

  TEST_CASE("with the collector down or hung, the turn completes with the same events, promptly") {
    auto events_with = [](std::function<void(RuntimeConfig&)> tweak, std::chrono::milliseconds& took) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::string> types;
      {
        Harness h(booking_script, std::move(tweak));
        run_booking(h, "t-down");
        types = types_of(h.events("t-down"));
      }
      took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
      return types;
    };
    std::chrono::milliseconds off_took{}, refused_took{}, hung_took{};
    const auto off = events_with({}, off_took);
    // Connection refused: a port nothing listens on (the receiver's, once it is gone).
    std::string closed;
    {
      OtlpReceiver gone;
      closed = gone.endpoint();
    }
    const auto refused = events_with(
        [&](RuntimeConfig& c) {
          c.tracing.otlp_endpoint = closed;
          c.tracing.export_interval = 5ms;
        },
        refused_took);
    OtlpReceiver hung;
    hung.never_answer();
    const auto stuck = events_with(traced(hung, [](TracingConfig& t) { t.export_timeout = 300ms; }), hung_took);
    CHECK(refused == off);
    CHECK(stuck == off);
    // Bounded: the run never waits for the collector; the runtime's end waits export_timeout at most.
    CHECK(refused_took < off_took + 2s);
    CHECK(hung_took < off_took + 2s);
    CHECK(hung.wait_requests(1, kLongWait));
  }

  TEST_CASE("a full queue drops spans and counts them; what was queued is flushed at shutdown") {
    OtlpReceiver rx;
    TracingConfig cfg = exporting_to(rx, 60s);  // nothing leaves before the shutdown
    cfg.max_queue_spans = 4;
    cfg.max_batch_spans = 100;
    trace::Tracer tracer(cfg, {});
    for (int i = 0; i < 10; ++i)
      tracer.start("s" + std::to_string(i), {}, trace::SpanKind::internal, std::nullopt).end();
    CHECK(tracer.stats().dropped_full == 6);
    tracer.shutdown();
    CHECK(rx.spans().size() == 4);
    CHECK(tracer.stats().exported == 4);
  }

  TEST_CASE("a request filled by spans queued while the exporter was busy goes at once, not at its interval") {
    OtlpReceiver rx;
    TracingConfig cfg = exporting_to(rx, 60s);  // only full requests and flushes leave
    cfg.max_batch_spans = 3;
    cfg.export_timeout = 60s;  // the held answer is waited for
    trace::Tracer tracer(cfg, {});
    auto end_spans = [&](int from, int to) {
      for (int i = from; i < to; ++i)
        tracer.start("s" + std::to_string(i), {}, trace::SpanKind::internal, std::nullopt).end();
    };
    rx.hold_answers();
    end_spans(0, 3);  // a full request: the exporter sends it and waits for the answer
    REQUIRE(rx.wait_spans(3, kLongWait));
    end_spans(3, 8);  // five queued meanwhile: one more full request, and two that start the next
    rx.release_answers();
    REQUIRE(rx.wait_spans(6, kLongWait));
    end_spans(8, 9);  // the two carried and this one fill a request: it goes now, not 60 s on
    REQUIRE(rx.wait_spans(9, kLongWait / 4));
    std::vector<size_t> sizes;
    for (const auto& r : rx.requests()) sizes.push_back(r.body["resourceSpans"][0]["scopeSpans"][0]["spans"].size());
    CHECK(sizes == std::vector<size_t>{3, 3, 3});
    CHECK(tracer.flush(kLongWait));  // the last answer counted (the receiver records a request before answering it)
    CHECK(tracer.stats().exported == 9);
  }

  TEST_CASE("spans go in requests of max_batch_spans; a flush sends the rest at once and waits for the answers") {
    OtlpReceiver rx;
    TracingConfig cfg = exporting_to(rx, 60s);  // only full batches and flushes leave
    cfg.max_batch_spans = 3;
    trace::Tracer tracer(cfg, {});
    for (int i = 0; i < 7; ++i)
      tracer.start("s" + std::to_string(i), {}, trace::SpanKind::internal, std::nullopt).end();
    REQUIRE(rx.wait_spans(6, kLongWait));
    CHECK(tracer.flush(kLongWait));
    // Answered: nothing is still on its way, and every span arrived once, in order, in requests of 3, 3 and 1.
    CHECK(tracer.stats().exported == 7);
    const auto requests = rx.requests();
    REQUIRE(requests.size() == 3);
    std::vector<size_t> sizes;
    for (const auto& r : requests) sizes.push_back(r.body["resourceSpans"][0]["scopeSpans"][0]["spans"].size());
    CHECK(sizes == std::vector<size_t>{3, 3, 1});
    std::vector<std::string> names;
    for (const auto& s : rx.spans()) names.push_back(s["name"]);
    CHECK(names == std::vector<std::string>{"s0", "s1", "s2", "s3", "s4", "s5", "s6"});
    CHECK(tracer.flush(10ms));  // nothing queued: true at once
  }

  TEST_CASE("a span that ends in its thread's exit, after the thread's span pool is gone, is exported") {
    OtlpReceiver rx;
    TracingConfig cfg = exporting_to(rx, 60s);
    trace::Tracer tracer(cfg, {});
    std::thread([&] {
      struct Late {
        trace::Span span;
        ~Late() { span.end(); }
      };
      thread_local Late late;  // made first, so destroyed last: after the pool the next spans make
      late.span = tracer.start("late", {}, trace::SpanKind::internal, std::nullopt);
      tracer.start("early", {}, trace::SpanKind::internal, std::nullopt).end();
    }).join();
    REQUIRE(tracer.flush(kLongWait));
    std::vector<std::string> names;
    for (const auto& sp : rx.spans()) names.push_back(sp["name"]);
    CHECK(names == std::vector<std::string>{"early", "late"});
  }

  TEST_CASE("a span waits export_interval, counted from its end, before a request that is not full takes it") {
    OtlpReceiver rx;
    TracingConfig cfg = exporting_to(rx, 1s);
    trace::Tracer tracer(cfg, {});
    tracer.start("first", {}, trace::SpanKind::internal, std::nullopt).end();
    REQUIRE(rx.wait_spans(1, kLongWait));  // the export thread waits again, from before the next span ends
    const auto t0 = std::chrono::steady_clock::now();
    tracer.start("second", {}, trace::SpanKind::internal, std::nullopt).end();
    REQUIRE(rx.wait_spans(2, kLongWait));
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= 950ms);
    CHECK(took < 1700ms);  // not a second interval after the export thread first saw it
  }

  TEST_CASE("Runtime::flush_traces: the run's spans reach the collector before it returns; a hung one times out") {
    OtlpReceiver rx;
    {
      Harness h(booking_script, traced(rx, [](TracingConfig& t) { t.export_interval = 60s; }));
      run_booking(h, "t-flush");
      CHECK(rx.spans().empty());
      CHECK(h.rt->flush_traces(kLongWait));
      CHECK(find_span(rx.spans(), "invoke_agent agentrt").has_value());
      CHECK(h.rt->stats().spans_exported == static_cast<int64_t>(rx.spans().size()));
    }
    OtlpReceiver hung;
    hung.never_answer();
    Harness h(booking_script, traced(hung, [](TracingConfig& t) {
                t.export_interval = 60s;
                t.export_timeout = 1s;  // the post hangs past the flush, not past the test
              }));
    run_booking(h, "t-flush-hung");
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(h.rt->flush_traces(100ms));
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
    CHECK(hung.wait_requests(1, kLongWait));
    Harness off(booking_script);
    CHECK(off.rt->flush_traces(0ms));  // tracing off: nothing to wait for
  }

  TEST_CASE("an export answered 503 is tried once more; errors beyond drop the batch and count it") {
    OtlpReceiver rx;
    rx.answer_status(503, 1);
    TracingConfig cfg = exporting_to(rx, 5ms);
    {
      trace::Tracer tracer(cfg, {});
      tracer.start("once", {}, trace::SpanKind::internal, std::nullopt).end();
      REQUIRE(rx.wait_requests(2, kLongWait));
      tracer.shutdown();
      CHECK(tracer.stats().exported == 1);
    }
    OtlpReceiver bad;
    bad.answer_status(400);
    cfg.otlp_endpoint = bad.endpoint();
    std::vector<std::string> logged;
    trace::Tracer tracer(cfg, [&](LogLevel, std::string_view m) { logged.emplace_back(m); });
    tracer.start("lost", {}, trace::SpanKind::internal, std::nullopt).end();
    tracer.shutdown();
    CHECK(bad.requests().size() == 1);  // no retry of a 400
    CHECK(tracer.stats().dropped_failed == 1);
    REQUIRE(logged.size() == 1);
    CHECK(logged[0].find("HTTP 400") != std::string::npos);
  }

  TEST_CASE("message content is recorded only when capture_content is on") {
    OtlpReceiver rx;
    {
      Harness h(booking_script, traced(rx, [](TracingConfig& t) { t.capture_content = true; }));
      run_booking(h, "t-content");
    }
    const auto spans = rx.spans();
    bool saw_input = false;
    for (const auto& c : named(spans, "chat")) {
      const json in = json::parse(span_attr(c, "gen_ai.input.messages").get<std::string>());
      for (const auto& m : in)
        if (m["role"] == "user" && m["parts"][0]["content"] == "book A1 for monday") saw_input = true;
      const json out = json::parse(span_attr(c, "gen_ai.output.messages").get<std::string>());
      CHECK(out[0]["role"] == "assistant");
    }
    CHECK(saw_input);
    auto tool = find_span(spans, "execute_tool book_room");
    REQUIRE(tool.has_value());
    CHECK(json::parse(span_attr(*tool, "gen_ai.tool.call.arguments").get<std::string>()) ==
          json::parse(R"({"room":"A1","day":"mon"})"));
    CHECK(json::parse(span_attr(*tool, "gen_ai.tool.call.result").get<std::string>())["ok"] == true);
  }

  TEST_CASE("an approval wait spans the pause to the decision; the resumed run follows it in the same trace") {
    OtlpReceiver rx;
    {
      Harness h(booking_script, traced(rx));
      h.add_book_room(ApprovalPolicy::always());
      h.threads.insert("t-wait");
      TurnRecord paused = h.rt->run_turn(turn_input("t-wait", user_message("book A1")));
      REQUIRE(paused.status == TurnStatus::waiting_approval);
      auto ledger = h.rt->tool_calls(paused.id);
      REQUIRE(ledger.size() == 1);
      TurnRecord done = h.rt->resume_turn(paused.id, paused.approval_request_id,
                                          {Decision(ledger[0].tool_call_id, Decision::Action::approve)});
      REQUIRE(done.status == TurnStatus::completed);
    }
    const auto spans = rx.spans();
    const auto runs = named(spans, "invoke_agent");
    REQUIRE(runs.size() == 2);
    auto wait = find_span(spans, "agentrt.approval_wait");
    REQUIRE(wait.has_value());
    const json& first = span_attr(runs[0], "agentrt.outcome") == "interrupt" ? runs[0] : runs[1];
    const json& second = &first == &runs[0] ? runs[1] : runs[0];
    CHECK(span_attr(second, "agentrt.outcome") == "success");
    CHECK(parent_of(*wait) == id_of(first));
    CHECK(span_attr(*wait, "agentrt.approval.outcome") == "decided");
    CHECK(parent_of(second) == id_of(*wait));
    CHECK(second["traceId"] == first["traceId"]);
    CHECK(std::stoll((*wait)["endTimeUnixNano"].get<std::string>()) <=
          std::stoll(second["startTimeUnixNano"].get<std::string>()));
    auto tool = find_span(spans, "execute_tool book_room");
    REQUIRE(tool.has_value());
    CHECK(parent_of(*tool) == id_of(second));
  }

  TEST_CASE("a resume whose decision does not commit leaves the wait open: the resume that commits ends it, once") {
    for (const bool inline_run : {true, false}) {
      CAPTURE(inline_run);
      OtlpReceiver rx;
      TempDir dir;
      FaultVfs::instance().reset();
      {
        Harness h(booking_script, [&](RuntimeConfig& c) {
          traced(rx)(c);
          SqliteStoreOptions o{dir.file("faulty.db")};
          o.vfs = FaultVfs::kName;
          c.store = std::make_shared<SqliteStore>(o);
        });
        h.add_book_room(ApprovalPolicy::always());
        TurnRecord paused = h.rt->run_turn(turn_input("t-lost", user_message("book A1")));
        REQUIRE(paused.status == TurnStatus::waiting_approval);
        auto ledger = h.rt->tool_calls(paused.id);
        REQUIRE(ledger.size() == 1);
        const std::vector<Decision> approve{Decision(ledger[0].tool_call_id, Decision::Action::approve)};
        auto resume = [&] {
          if (inline_run) return h.rt->resume_turn(paused.id, paused.approval_request_id, approve).status;
          h.rt->resume(paused.id, paused.approval_request_id, approve);
          return h.rt->wait(paused.id, kLongWait).status;
        };
        FaultVfs::instance().set_disk_full(true);  // the decision's commit fails
        CHECK_THROWS_AS(resume(), Error);
        FaultVfs::instance().set_disk_full(false);
        REQUIRE(h.rt->flush_traces(kLongWait));
        CHECK(named(rx.spans(), "agentrt.approval_wait").empty());  // not decided: nothing says it was
        CHECK(h.rt->turn(paused.id)->status == TurnStatus::waiting_approval);
        CHECK(resume() == TurnStatus::completed);
        REQUIRE(h.rt->flush_traces(kLongWait));
      }
      const auto spans = rx.spans();
      const auto waits = named(spans, "agentrt.approval_wait");
      REQUIRE(waits.size() == 1);
      CHECK(span_attr(waits[0], "agentrt.approval.outcome") == "decided");
      const auto runs = named(spans, "invoke_agent");
      const auto paused_run = std::find_if(
          runs.begin(), runs.end(), [](const json& r) { return span_attr(r, "agentrt.outcome") == "interrupt"; });
      const auto done_run = std::find_if(runs.begin(), runs.end(),
                                         [](const json& r) { return span_attr(r, "agentrt.outcome") == "success"; });
      REQUIRE(paused_run != runs.end());
      REQUIRE(done_run != runs.end());
      CHECK(parent_of(waits[0]) == id_of(*paused_run));  // the wait the pause began, not one begun again
      CHECK(parent_of(*done_run) == id_of(waits[0]));
    }
  }

  TEST_CASE("an approval wait ended by its deadline or by a cancel says so") {
    for (const std::string how : {"expired", "cancelled"}) {
      CAPTURE(how);
      OtlpReceiver rx;
      std::string paused_run_span;
      {
        Harness h(booking_script, [&](RuntimeConfig& c) {
          traced(rx)(c);
          if (how == "expired") c.approval_timeout = 300ms;
        });
        h.add_book_room(ApprovalPolicy::always());
        h.threads.insert("t-" + how);
        TurnRecord paused = h.rt->run_turn(turn_input("t-" + how, user_message("book A1")));
        REQUIRE(paused.status == TurnStatus::waiting_approval);
        if (how == "cancelled") h.rt->cancel(paused.id);
        const TurnStatus want = how == "expired" ? TurnStatus::expired : TurnStatus::cancelled;
        REQUIRE(wait_on_thread(*h.rt, "t-" + how, [&] { return h.rt->turn(paused.id)->status == want; }));
      }
      const auto spans = rx.spans();
      auto wait = find_span(spans, "agentrt.approval_wait");
      REQUIRE(wait.has_value());
      CHECK(span_attr(*wait, "agentrt.approval.outcome") == how);
      const auto runs = named(spans, "invoke_agent");
      REQUIRE(runs.size() >= 1);
      CHECK(parent_of(*wait) == id_of(runs[0]));
      CHECK(named(spans, "execute_tool").empty());
    }
  }

  // Pauses t-moved in h's runtime (traced or not), then puts another runtime on the same store in its place (the
  // first one's held wait is never exported) and resumes the turn there, approved. Returns the turn as stored at
  // the pause.
  TurnRecord pause_then_resume_elsewhere(Harness & h, OtlpReceiver & rx) {
    h.add_book_room(ApprovalPolicy::always());
    h.threads.insert("t-moved");
    TurnRecord paused = h.rt->run_turn(turn_input("t-moved", user_message("book A1")));
    REQUIRE(paused.status == TurnStatus::waiting_approval);
    paused = *h.rt->turn(paused.id);  // as stored
    h.rt.reset();
    RuntimeConfig c = test_config(h.used_store, h.model);
    traced(rx)(c);
    h.rt = std::make_unique<Runtime>(c);
    h.add_book_room(ApprovalPolicy::always());
    auto ledger = h.rt->tool_calls(paused.id);
    REQUIRE(ledger.size() == 1);
    REQUIRE(h.rt->resume_turn(paused.id, paused.approval_request_id,
                              {Decision(ledger[0].tool_call_id, Decision::Action::approve)})
                .status == TurnStatus::completed);
    CHECK(h.rt->turn(paused.id)->trace.empty());  // a turn that no longer waits keeps no wait
    return paused;
  }

  TEST_CASE("a turn paused by one runtime and resumed by another continues its trace: the wait is the pause's span") {
    OtlpReceiver rx;
    TurnRecord paused;
    {
      Harness h(booking_script, traced(rx));
      paused = pause_then_resume_elsewhere(h, rx);
      // The pause's event carries what the turn stored, for any process to continue.
      bool seen = false;
      for (const auto& e : h.rt->events_page("t-moved", "u1", 0, kMaxEventsPage)) {
        const json event = json::parse(e.json);
        if (event["type"] == "RUN_FINISHED" && e.run_id == paused.run_id) {
          CHECK(event["metadata"]["agentrt"]["turn"]["trace"] == paused.trace);
          seen = true;
        }
      }
      CHECK(seen);
    }
    const auto stored = trace::parse_stored_span(paused.trace);
    REQUIRE(stored.has_value());
    const auto spans = rx.spans();
    const auto runs = named(spans, "invoke_agent");
    REQUIRE(runs.size() == 2);
    const json& first = span_attr(runs[0], "agentrt.outcome") == "interrupt" ? runs[0] : runs[1];
    const json& resumed = &first == &runs[0] ? runs[1] : runs[0];
    const auto waits = named(spans, "agentrt.approval_wait");
    REQUIRE(waits.size() == 1);
    const json& wait = waits[0];
    CHECK(span_attr(wait, "agentrt.approval.outcome") == "decided");
    CHECK(span_attr(wait, "agentrt.turn.id") == paused.id);
    // The span the first runtime began at the pause: its ids, its parent (the paused run), its start.
    CHECK(wait["traceId"] == stored->context.trace_id_hex());
    CHECK(id_of(wait) == stored->context.span_id_hex());
    CHECK(wait["traceId"] == first["traceId"]);
    CHECK(parent_of(wait) == id_of(first));
    CHECK(std::stoll(wait["startTimeUnixNano"].get<std::string>()) == stored->start_ns);
    CHECK(stored->start_ns <= paused.updated_at * 1000000 + 999999);
    CHECK(parent_of(resumed) == id_of(wait));
    CHECK(resumed["traceId"] == first["traceId"]);
    auto tool = find_span(spans, "execute_tool book_room");
    REQUIRE(tool.has_value());
    CHECK(parent_of(*tool) == id_of(resumed));
  }

  TEST_CASE("a turn paused untraced and resumed by a traced runtime: the wait begins at the pause's commit") {
    OtlpReceiver rx;
    TurnRecord paused;
    {
      Harness h(booking_script);  // tracing off: the pause stores no trace
      paused = pause_then_resume_elsewhere(h, rx);
    }
    CHECK(paused.trace.empty());
    const auto spans = rx.spans();
    const auto waits = named(spans, "agentrt.approval_wait");
    REQUIRE(waits.size() == 1);
    const json& wait = waits[0];
    CHECK(span_attr(wait, "agentrt.approval.outcome") == "decided");
    CHECK(std::stoll(wait["startTimeUnixNano"].get<std::string>()) == paused.updated_at * 1000000);
    CHECK_FALSE(wait.contains("parentSpanId"));  // a trace of its own (no traceparent came with the resume)
    const auto runs = named(spans, "invoke_agent");
    REQUIRE(runs.size() == 1);
    CHECK(parent_of(runs[0]) == id_of(wait));
    CHECK(runs[0]["traceId"] == wait["traceId"]);
  }

  TEST_CASE("a stored wait span is written and read back; anything else is refused") {
    const auto ctx = *trace::parse_traceparent(std::string("00-") + kHostTrace + "-" + kHostSpan + "-01");
    const std::array<uint8_t, 8> parent{1, 2, 3, 4, 5, 6, 7, 8};
    const std::string text = trace::format_stored_span(ctx, parent, 1700000000000000001);
    CHECK(text == std::string("00-") + kHostTrace + "-" + kHostSpan + "-01 0102030405060708 1700000000000000001");
    const auto back = trace::parse_stored_span(text);
    REQUIRE(back.has_value());
    CHECK(back->context.trace_id == ctx.trace_id);
    CHECK(back->context.span_id == ctx.span_id);
    CHECK(back->context.sampled);
    CHECK(back->parent_span_id == parent);
    CHECK(back->start_ns == 1700000000000000001);
    CHECK(trace::format_stored_span(trace::SpanContext{}, parent, 1).empty());
    for (const std::string& bad :
         {std::string(), text + "x", text.substr(0, text.size() - 1) + "-", text.substr(0, 73),
          text.substr(0, 55) + "-" + text.substr(56), text.substr(0, 56) + "010203040506070G" + text.substr(72),
          text.substr(0, 73) + "0", text.substr(0, 73) + "-5", text.substr(0, 73) + "99999999999999999999",
          std::string("00-") + std::string(32, '0') + "-" + kHostSpan + "-01 0102030405060708 5"})
      CHECK_MESSAGE(!trace::parse_stored_span(bad).has_value(), bad);
  }

  TEST_CASE("a failed model call marks its chat span and the run span with error.type and status ERROR") {
    OtlpReceiver rx;
    {
      Harness h([](const ModelRequest&) -> ModelResult { throw Error(ErrorCode::model, "the model is down"); },
                traced(rx));
      h.threads.insert("t-fail");
      REQUIRE(h.rt->run_turn(turn_input("t-fail", user_message("hi"))).status == TurnStatus::failed);
    }
    const auto spans = rx.spans();
    auto run = find_span(spans, "invoke_agent agentrt");
    auto chat = named(spans, "chat");
    REQUIRE(run.has_value());
    REQUIRE(chat.size() == 1);
    CHECK(span_attr(chat[0], "error.type") == "model");
    CHECK(chat[0]["status"]["code"] == 2);
    CHECK(span_attr(*run, "error.type") == "model_error");
    CHECK((*run)["status"]["code"] == 2);
    CHECK(span_attr(*run, "agentrt.outcome") == "error");
  }

  TEST_CASE("a job's span runs from its start to its end, a child of the tool call that started it") {
    OtlpReceiver rx;
    std::string job_id;
    {
      Harness h(
          [](const ModelRequest& req) {
            if (req.stage != "execution") return text_result("ok");
            if (tool_results_since_last_user(req) == 0) return tool_call_result("call_r", "render", "{}");
            return text_result("started");
          },
          traced(rx));
      ToolSpec render;
      render.name = "render";
      render.description = "Render a scene";
      render.handler = [](const ToolCallContext&, ToolCompletion done) { done.start_job(JobStart{}); };
      h.rt->tools().add(std::move(render));
      h.threads.insert("t-job");
      REQUIRE(h.rt->run_turn(turn_input("t-job", user_message("render"))).status == TurnStatus::completed);
      auto jobs = h.rt->jobs("t-job");
      REQUIRE(jobs.size() == 1);
      job_id = jobs[0].id;
      CHECK(h.rt->complete_job(job_id, JobResult{json{{"frames", 40}}, json::array(), "done"}).status ==
            JobStatus::succeeded);
    }
    const auto spans = rx.spans();
    auto job = find_span(spans, "agentrt.job render");
    auto tool = find_span(spans, "execute_tool render");
    REQUIRE(job.has_value());
    REQUIRE(tool.has_value());
    CHECK(parent_of(*job) == id_of(*tool));
    CHECK((*job)["traceId"] == (*tool)["traceId"]);
    CHECK(span_attr(*job, "agentrt.job.id") == job_id);
    CHECK(span_attr(*job, "agentrt.job.status") == "succeeded");
    CHECK(std::stoll((*job)["endTimeUnixNano"].get<std::string>()) >=
          std::stoll((*tool)["endTimeUnixNano"].get<std::string>()));
  }
}
