// Shared by the fuzz targets (tests/fuzz/fuzz_*.cpp): a private temporary directory, and the one way a target
// reports a broken property (an abort, which libFuzzer and the replay both treat as a crash).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace agentrt_fuzz {

// A directory created on first use and removed when the process exits normally.
class ScratchDir {
 public:
  explicit ScratchDir(const char* name) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/agentrt-fuzz-" + name + "-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// A property the target checks does not hold: say which, then crash.
[[noreturn]] inline void broken(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s: property broken: %s\n", target, what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline std::string_view text_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace agentrt_fuzz
