// What the CLI prints of a stored thread: its history, one line a message, and its jobs, one line each.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "host.hpp"

namespace agentrt::cli {

void print_history(Host& host, std::FILE* out);

// One line a job: id, tool, status, progress, age, and its last word (message, result or error).
void print_jobs(Host& host, std::FILE* out);

// "2026-12-01 21:57", in the local time zone.
std::string local_time(int64_t ms);

}  // namespace agentrt::cli
