// SIGPIPE and the sockets distc does not write itself.
//
// distc's own sockets send with MSG_NOSIGNAL, but Gloo's pairs (and Open
// MPI's TCP transport) write with writev, which raises SIGPIPE on the writing
// thread once a peer has died. Left at its default, that kills the whole
// process before the write can report EPIPE and the collective its error.
// Changing the process's disposition is the program's business, not a
// library's; so SIGPIPE is blocked per thread instead:
// - every thread distc starts (start_thread, and Gloo's loop threads, born of
//   a thread that blocks it) blocks SIGPIPE for life; one raised there stays
//   pending, harmlessly;
// - a caller's thread blocks it only while it runs such code (SigpipeBlocked),
//   and takes back one raised meanwhile before restoring its mask.
// Header-only: the plugins use it too.
#pragma once

#include <pthread.h>

#include <cerrno>
#include <csignal>
#include <ctime>
#include <thread>
#include <utility>

namespace distc {

inline sigset_t sigpipe_set() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    return s;
}

class SigpipeBlocked {
public:
    SigpipeBlocked() noexcept {
        sigset_t s = sigpipe_set(), old;
        pthread_sigmask(SIG_BLOCK, &s, &old);
        was_blocked_ = sigismember(&old, SIGPIPE) == 1;
    }
    ~SigpipeBlocked() {
        if (was_blocked_) return;  // the caller blocks it itself: what is pending is its own
        int saved = errno;
        sigset_t s = sigpipe_set(), pending;
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
            timespec zero{0, 0};
            while (sigtimedwait(&s, nullptr, &zero) < 0 && errno == EINTR) {}
        }
        pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
        errno = saved;
    }
    SigpipeBlocked(const SigpipeBlocked &) = delete;
    SigpipeBlocked &operator=(const SigpipeBlocked &) = delete;

private:
    bool was_blocked_;
};

// Starts a thread of distc's own, SIGPIPE blocked from its first instruction
// (a new thread inherits its creator's mask).
template <typename F>
std::thread start_thread(F &&f) {
    SigpipeBlocked b;
    return std::thread(std::forward<F>(f));
}

}  // namespace distc
