#include "core/ids.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <random>

#include <fmt/format.h>

#include "agentrt/error.hpp"
#include "util/printable.hpp"

namespace agentrt {
inline namespace v1 {

namespace {

bool id_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':' || c == '@';
}

// A forked child inherits the generator's state: ids would repeat across processes. Reseed after fork.
std::atomic<uint64_t> g_fork_generation{0};
const bool g_atfork_installed = [] {
  pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
  return true;
}();

}  // namespace

const char* id_problem(std::string_view id) noexcept {
  if (id.empty()) return "is empty";
  if (id.size() > kMaxIdBytes) return "is longer than 128 bytes";
  if (id.front() == '.') return "starts with '.'";
  for (char c : id)
    if (!id_char(c)) return "holds a character other than A-Z a-z 0-9 _ - . : @";
  return nullptr;
}

void require_id(std::string_view id, std::string_view what) {
  if (const char* problem = id_problem(id))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{} '{}' {} (ids are 1-128 of A-Z a-z 0-9 _ - . : @, not starting with '.')", what,
                            printable(id, 140), problem));
}

std::string new_id(std::string_view prefix) {
  (void)g_atfork_installed;
  thread_local uint64_t generation = ~uint64_t{0};
  thread_local std::mt19937_64 rng;
  if (generation != g_fork_generation.load(std::memory_order_relaxed)) {
    generation = g_fork_generation.load(std::memory_order_relaxed);
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), static_cast<unsigned>(getpid())};
    rng.seed(seq);
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(prefix);
  out += '_';
  for (int k = 0; k < 2; ++k) {
    uint64_t v = rng();
    for (int i = 0; i < 16; ++i) {
      out += hex[v & 15];
      v >>= 4;
    }
  }
  return out;
}

}  // namespace v1
}  // namespace agentrt
