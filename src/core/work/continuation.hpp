// Where continuations run (distc_work_then): a pool of distc's own threads,
// never a group's worker, so a continuation may launch collectives, wait for
// them and block. A continuation queued while every pool thread is busy gets
// a new thread: a continuation blocked in a collective (or waiting for a
// later continuation's result) never holds up the others, also when the
// ranks of several groups share the process. Threads idle for a while leave.
#pragma once

#include <functional>
#include <memory>

#include "core/work/work.hpp"

namespace distc {

// Queues `fn` to run on a continuation thread.
void run_continuation(std::function<void()> fn);

// A future's then: once `src` completes (successfully or not), `fn(src)` runs
// on a continuation thread. The work returned completes with fn's outcome: an
// Error it throws fails it (`what` names the step in the message), nullptr
// completes it at once, a work it returns is followed (chained).
using Continuation = std::function<std::shared_ptr<Work>(Work &done)>;
std::shared_ptr<Work> then(Work &src, Continuation fn, const char *what = "a continuation");

}  // namespace distc
