// The one face of an operation that a backend sees through its distc_work
// handle (distc/sys/backend.h): an async operation's Work, or the BlockingCall
// a thread lends for each of its blocking calls. The C shims complete either
// through this, without asking which it is.
#pragma once

#include <cstdint>
#include <functional>

namespace distc {

class Completion {
public:
    using StreamWait = std::function<int(void *stream)>;

    // Once, on any thread: code 0, or a negative distc code with the backend's
    // message. False, changing nothing, when it was completed already.
    virtual bool complete_by_backend(int code, const char *message, int32_t source_rank) = 0;
    // How a stream waits for it and what to release when it goes; once, before
    // completion. False, changing nothing, when set before or completed.
    virtual bool set_backend_hooks(StreamWait wait_stream, std::function<void()> release) = 0;

protected:
    ~Completion() = default;
};

}  // namespace distc
