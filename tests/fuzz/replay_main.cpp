// Replays the fuzz corpora without libFuzzer: every file under corpus/<target>/ and regressions/<target>/ of
// the fuzz directory goes through its target once (a crash or a broken property aborts, and the ctest entry
// fuzz_replay fails). Built with the default compiler; each target's LLVMFuzzerTestOneInput is compiled under
// the name agentrt_fuzz_<target>.
// usage: agentrt_fuzz_replay FUZZ_DIR [TARGET...]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" {
int agentrt_fuzz_sse_parser(const uint8_t* data, size_t size);
int agentrt_fuzz_openai_stream(const uint8_t* data, size_t size);
int agentrt_fuzz_anthropic_stream(const uint8_t* data, size_t size);
int agentrt_fuzz_agui_input(const uint8_t* data, size_t size);
int agentrt_fuzz_json_parse(const uint8_t* data, size_t size);
int agentrt_fuzz_json_schema(const uint8_t* data, size_t size);
int agentrt_fuzz_signed_url(const uint8_t* data, size_t size);
int agentrt_fuzz_config(const uint8_t* data, size_t size);
int agentrt_fuzz_capi(const uint8_t* data, size_t size);
int agentrt_fuzz_lz_dict(const uint8_t* data, size_t size);
int agentrt_fuzz_message_body(const uint8_t* data, size_t size);
}

namespace {

struct Target {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};

constexpr Target kTargets[] = {
    {"sse_parser", agentrt_fuzz_sse_parser},
    {"openai_stream", agentrt_fuzz_openai_stream},
    {"anthropic_stream", agentrt_fuzz_anthropic_stream},
    {"agui_input", agentrt_fuzz_agui_input},
    {"json_parse", agentrt_fuzz_json_parse},
    {"json_schema", agentrt_fuzz_json_schema},
    {"signed_url", agentrt_fuzz_signed_url},
    {"config", agentrt_fuzz_config},
    {"capi", agentrt_fuzz_capi},
    {"lz_dict", agentrt_fuzz_lz_dict},
    {"message_body", agentrt_fuzz_message_body},
};

// The regular files under `dir` (none when it does not exist), sorted.
std::vector<std::filesystem::path> files_under(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

size_t replay(const Target& t, const std::vector<std::filesystem::path>& files) {
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "%s: cannot read %s\n", t.name, f.c_str());
      std::exit(2);
    }
    t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  return files.size();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FUZZ_DIR [TARGET...]\n", argv[0]);
    return 64;
  }
  const std::filesystem::path root = argv[1];
  std::vector<std::string> only(argv + 2, argv + argc);
  size_t total = 0;
  int failures = 0;
  for (const auto& t : kTargets) {
    if (!only.empty() && std::find(only.begin(), only.end(), t.name) == only.end()) continue;
    const auto corpus = files_under(root / "corpus" / t.name);
    if (corpus.empty()) {
      std::fprintf(stderr, "%s: no seed corpus in %s\n", t.name, (root / "corpus" / t.name).c_str());
      ++failures;
      continue;
    }
    const size_t seeds = replay(t, corpus);
    const size_t regressions = replay(t, files_under(root / "regressions" / t.name));
    std::printf("%-14s %5zu corpus inputs, %3zu regressions: clean\n", t.name, seeds, regressions);
    std::fflush(stdout);
    total += seeds + regressions;
  }
  std::printf("fuzz_replay: %zu inputs replayed\n", total);
  return failures == 0 ? 0 : 1;
}
