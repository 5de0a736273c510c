// `agentrt chat`: the interactive session on one thread (new or earlier), with approvals asked at the terminal
// and whatever arrives on the thread (job outcomes, other processes' turns) shown while the prompt waits.
#pragma once

#include "host.hpp"

namespace agentrt::cli {

// Returns the exit status: kExitOk at /quit or the end of the input, kExitWaiting when the person leaves a
// turn waiting for approval.
int cmd_chat(Host& host);

}  // namespace agentrt::cli
