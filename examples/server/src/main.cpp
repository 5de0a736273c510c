// agentrt-server: the agentrt runtime over HTTP (AG-UI 1.0 over SSE). See examples/server/README.md.
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <thread>

#include "agent_server.hpp"
#include "agentrt/error.hpp"

int main(int argc, char** argv) {
  using namespace agentrt::server;
  // Before SQLite is first used: no memory statistics, which SQLite keeps under one mutex of the whole process,
  // taken on each of its allocations (every connection's, the readers' and the committer's alike). Nothing here
  // reads them. (A process-wide setting: the program's to make, not the library's.)
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  ServerConfig config;
  try {
    if (!apply_server_flags(argc, argv, config)) {
      std::cout << server_usage();
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "agentrt-server: " << e.what() << "\n";
    return 2;
  }

  // Every connection is a descriptor: take the hard limit (raising the soft one needs no privilege).
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  // SIGINT/SIGTERM are taken by sigwait() below; every thread started from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that leaves mid-stream must not kill the server

  try {
    AgentServer server(config);
    std::exception_ptr failure;
    std::thread serving([&] {
      try {
        server.run();
      } catch (...) {
        failure = std::current_exception();
      }
      kill(getpid(), SIGTERM);  // wake the waiting main thread if serving ended on its own
    });
    std::cout << "agentrt-server listening on " << server.public_url() << " (port " << server.port() << ")"
              << std::endl;
    int sig = 0;
    sigwait(&signals, &sig);
    server.stop();
    serving.join();
    if (failure) std::rethrow_exception(failure);
    std::cerr << "agentrt-server: stopped\n";
  } catch (const std::exception& e) {
    std::cerr << "agentrt-server: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
