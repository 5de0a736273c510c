// agentrt-bench-commits: concurrent commits to one SQLite store, with the group commit and without it (each
// batch in a transaction of its own), alternating in one process; prints one JSON line with the medians.
//   agentrt-bench-commits [THREADS=8] [COMMITS_PER_THREAD=2000] [REPS=5] [SYNCHRONOUS=NORMAL|FULL]
//                         [DIR=/tmp/agentrt-bench-commits]
// Each commit is a turn's worth of rows on a thread of its committer's: 5 events and 2 messages.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/sqlite_store.hpp"

using namespace agentrt;

namespace {

struct Sample {
  double ms_per_commit;
  int64_t transactions;
};

Sample run(const std::string& dir, const std::string& synchronous, bool group, int threads, int commits) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  SqliteStoreOptions o{dir + "/commits.db", synchronous};
  o.group_commit = group;
  SqliteStore store(o);
  const int64_t before = store.write_transactions();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> committers;
  for (int t = 0; t < threads; ++t)
    committers.emplace_back([&, t] {
      for (int i = 0; i < commits; ++i) {
        CommitBatch c;
        c.thread_id = "thread-" + std::to_string(t) + "-" + std::to_string(i / 10);
        for (int e = 0; e < 5; ++e)
          c.events.push_back(StoredEvent{
              0, "run_1", R"({"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1","delta":"a streamed piece of text"})"});
        for (int m = 0; m < 2; ++m) {
          Message msg;
          msg.role = Role::user;
          msg.content = "a message of some length to store";
          c.messages.push_back(MessageRecord{c.thread_id, 0, "turn_1", "run_1", msg});
        }
        store.commit(c);
      }
    });
  for (auto& c : committers) c.join();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Sample{ms / (threads * commits), store.write_transactions() - before};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 8;
  const int commits = argc > 2 ? std::atoi(argv[2]) : 2000;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const std::string synchronous = argc > 4 ? argv[4] : "NORMAL";
  const std::string dir = argc > 5 ? argv[5] : "/tmp/agentrt-bench-commits";
  if (threads < 1 || threads > 256 || commits < 1 || commits > 1000000 || reps < 1 || reps > 99) {
    std::fprintf(stderr,
                 "usage: agentrt-bench-commits [THREADS 1..256] [COMMITS_PER_THREAD] [REPS 1..99] "
                 "[SYNCHRONOUS NORMAL|FULL] [DIR]\n");
    return 64;
  }
  std::vector<double> grouped, alone, grouped_txns;
  for (int r = 0; r < reps; ++r) {
    const Sample a = run(dir, synchronous, false, threads, commits);
    const Sample g = run(dir, synchronous, true, threads, commits);
    alone.push_back(a.ms_per_commit);
    grouped.push_back(g.ms_per_commit);
    grouped_txns.push_back(static_cast<double>(g.transactions));
  }
  std::filesystem::remove_all(dir);
  const double a = median(alone), g = median(grouped);
  nlohmann::json out = {{"threads", threads},
                        {"synchronous", synchronous},
                        {"commits", threads * commits},
                        {"reps", reps},
                        {"ms_per_commit_alone", alone},
                        {"ms_per_commit_grouped", grouped},
                        {"median_alone", a},
                        {"median_grouped", g},
                        {"speedup", a / g},
                        {"transactions_grouped_median", median(grouped_txns)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
