// Where continuations run (distc_work_then): a pool of distc's own threads,
// never a group's worker, so a continuation may launch collectives, wait for
// them and block. A continuation queued while every pool thread is busy gets
// a new thread: a continuation blocked in a collective (or waiting for a
// later continuation's result) never holds up the others, also when the
// ranks of several groups share the process. Threads idle for a while leave.
#pragma once

#include <functional>

namespace distc {

// Queues `fn` to run on a continuation thread.
void run_continuation(std::function<void()> fn);

}  // namespace distc
