// agentrt-bench-provider: what the OpenAI provider adds per streamed token and to time-to-first-token,
// against a raw libcurl read of the same SSE stream from the in-process mock server.
// Prints one JSON line (medians over the runs). Usage: agentrt-bench-provider [tokens] [runs] [ttft_runs]
// Per-token figures come from long streams, time-to-first-token from short ones (3 tokens), each run
// alternating provider and raw reads over warm connections.
#include <curl/curl.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agentrt/json.hpp"
#include "agentrt/openai.hpp"
#include "support/mock_openai_server.hpp"

using agentrt::json;
using agentrt::testing::MockOpenAIServer;
using agentrt::testing::MockResponse;
using Clock = std::chrono::steady_clock;

namespace {

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Sample {
  double total_us = 0;  // request start to end of stream
  double ttft_us = 0;   // request start to the first token (provider) / first body byte (raw)
  double cpu_us = 0;    // CPU time of the calling thread
  size_t tokens = 0;
};

struct CountingSink : agentrt::ModelStreamSink {
  Clock::time_point first{};
  size_t tokens = 0;
  void on_text(std::string_view) override {
    if (tokens++ == 0) first = Clock::now();
  }
  void on_reasoning(std::string_view) override {}
  void on_tool_call_start(int, std::string_view, std::string_view) override {}
  void on_tool_call_args(int, std::string_view) override {}
};

struct RawRead {
  Clock::time_point first{};
  size_t bytes = 0;
};

size_t raw_write(char*, size_t size, size_t n, void* user) {
  auto* r = static_cast<RawRead*>(user);
  if (r->bytes == 0) r->first = Clock::now();
  r->bytes += size * n;
  return size * n;
}

}  // namespace

int main(int argc, char** argv) {
  const int tokens = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 9;
  const int ttft_runs = argc > 3 ? std::atoi(argv[3]) : 31;
  std::vector<std::string> pieces;
  for (int i = 0; i < tokens; ++i) pieces.push_back(" tok" + std::to_string(i));
  const std::vector<std::string> long_stream = MockOpenAIServer::text_stream(pieces);
  const std::vector<std::string> short_stream = MockOpenAIServer::text_stream({" a", " b", " c"});

  MockOpenAIServer server;
  agentrt::OpenAIConfig config;
  config.base_url = server.base_url();
  config.api_key = "sk-bench";
  config.model = "mock-model";
  auto provider = agentrt::make_openai_provider(config);
  agentrt::ModelRequest request;
  agentrt::Message user;
  user.role = agentrt::Role::user;
  user.content = "stream please";
  request.messages = {user};

  // The raw reader sends the same body over one reused handle, and only counts bytes.
  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURL* easy = curl_easy_init();
  const std::string url = server.base_url() + "/chat/completions";
  const std::string body = json{{"model", "mock-model"},
                                {"messages", json::array({{{"role", "user"}, {"content", "stream please"}}})},
                                {"stream", true},
                                {"stream_options", {{"include_usage", true}}}}
                               .dump();
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Authorization: Bearer sk-bench");
  headers = curl_slist_append(headers, "Accept: text/event-stream");

  auto run_provider = [&](const std::vector<std::string>& stream) {
    server.push_chat(MockResponse::stream(stream));
    CountingSink sink;
    const double cpu0 = thread_cpu_us();
    const auto t0 = Clock::now();
    provider->complete(request, sink, {});
    const auto t1 = Clock::now();
    return Sample{us_between(t0, t1), us_between(t0, sink.first), thread_cpu_us() - cpu0, sink.tokens};
  };
  auto run_raw = [&](const std::vector<std::string>& stream) {
    server.push_chat(MockResponse::stream(stream));
    RawRead read;
    const double cpu0 = thread_cpu_us();
    const auto t0 = Clock::now();
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &raw_write);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &read);
    const CURLcode rc = curl_easy_perform(easy);
    const auto t1 = Clock::now();
    if (rc != CURLE_OK) {
      std::fprintf(stderr, "raw read failed: %s\n", curl_easy_strerror(rc));
      std::exit(1);
    }
    return Sample{us_between(t0, t1), us_between(t0, read.first), thread_cpu_us() - cpu0, read.bytes};
  };

  // Warm both connections up, then alternate so that machine noise hits both sides alike.
  run_provider(long_stream);
  run_raw(long_stream);
  std::vector<double> p_total, p_cpu, r_total, r_cpu, p_ttft, r_ttft;
  size_t streamed_tokens = 0, stream_bytes = 0;
  for (int i = 0; i < runs; ++i) {
    Sample p = run_provider(long_stream);
    Sample r = run_raw(long_stream);
    p_total.push_back(p.total_us);
    p_cpu.push_back(p.cpu_us);
    r_total.push_back(r.total_us);
    r_cpu.push_back(r.cpu_us);
    streamed_tokens = p.tokens;
    stream_bytes = r.tokens;
  }
  for (int i = 0; i < ttft_runs; ++i) {
    p_ttft.push_back(run_provider(short_stream).ttft_us);
    r_ttft.push_back(run_raw(short_stream).ttft_us);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(easy);

  const double n = static_cast<double>(tokens);
  json out{{"bench", "provider"},
           {"tokens", tokens},
           {"runs", runs},
           {"ttft_runs", ttft_runs},
           {"tokens_seen_by_sink", streamed_tokens},
           {"stream_bytes", stream_bytes},
           {"raw_total_ms", median(r_total) / 1000},
           {"provider_total_ms", median(p_total) / 1000},
           {"raw_per_token_us", median(r_total) / n},
           {"provider_per_token_us", median(p_total) / n},
           {"overhead_per_token_us", (median(p_total) - median(r_total)) / n},
           {"raw_cpu_per_token_us", median(r_cpu) / n},
           {"provider_cpu_per_token_us", median(p_cpu) / n},
           {"cpu_overhead_per_token_us", (median(p_cpu) - median(r_cpu)) / n},
           {"raw_ttft_us", median(r_ttft)},
           {"provider_ttft_us", median(p_ttft)},
           {"ttft_overhead_us", median(p_ttft) - median(r_ttft)}};
  std::printf("%s\n", out.dump().c_str());
  return streamed_tokens == static_cast<size_t>(tokens) ? 0 : 1;
}
