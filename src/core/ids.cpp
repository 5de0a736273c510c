#include "core/ids.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>

#include <fmt/format.h>

#include "agentrt/clock.hpp"
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

void require_id(std::string_view id, std::string_view what) { require_id(id, what, kMaxIdBytes); }

void require_id(std::string_view id, std::string_view what, size_t max_bytes) {
  max_bytes = std::min(max_bytes, kMaxIdBytes);
  std::string too_long;
  const char* problem = nullptr;
  if (id.size() > max_bytes) {  // the length first, as id_problem() looks at it
    too_long = fmt::format("is longer than {} bytes", max_bytes);
    problem = too_long.c_str();
  } else {
    problem = id_problem(id);
  }
  if (problem)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{} '{}' {} (ids are 1-{} of A-Z a-z 0-9 _ - . : @, not starting with '.')", what,
                            printable(id, 140), problem, max_bytes));
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
  // 64 letters in ASCII order, so the ids' byte order is their numeric order.
  static constexpr char digits[] = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
  static_assert(sizeof(digits) == 65);
  std::string out;
  out.reserve(prefix.size() + 1 + 8 + kNewIdRandomDigits);
  out.append(prefix);
  out += '_';
  const uint64_t ms = static_cast<uint64_t>(now_ms());
  for (int shift = 42; shift >= 0; shift -= 6) out += digits[(ms >> shift) & 63];
  uint64_t a = rng(), b = rng();
  for (size_t i = 0; i < kNewIdRandomDigits; ++i) {
    out += digits[a & 63];
    a = (a >> 6) | (b << 58);  // 14 digits take 84 bits of the two draws
    b >>= 6;
  }
  return out;
}

}  // namespace v1
}  // namespace agentrt
