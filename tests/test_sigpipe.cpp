// SIGPIPE kept off (src/support/sigpipe.hpp): a write to a socket whose
// peer is gone reports EPIPE instead of killing the process, the caller's
// mask comes back as it was with nothing left pending, a caller that blocks
// SIGPIPE itself keeps what is pending, and start_thread's threads block it.
#include <cstdarg>
#include <cstddef>
#include <csetjmp>
#include <cstdint>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "support/sigpipe.hpp"

using distc::SigpipeBlocked;

namespace {

bool pipe_blocked() {
    sigset_t m;
    pthread_sigmask(SIG_BLOCK, nullptr, &m);
    return sigismember(&m, SIGPIPE) == 1;
}

bool pipe_pending() {
    sigset_t p;
    sigpending(&p);
    return sigismember(&p, SIGPIPE) == 1;
}

// Writes to a Unix stream socket whose peer was closed: the kernel raises
// SIGPIPE with EPIPE. Returns the write's errno.
int write_to_closed_peer() {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    char c = 'x';
    ssize_t w = write(sv[0], &c, 1);
    int err = w < 0 ? errno : 0;
    close(sv[0]);
    return err;
}

void test_write_to_dead_peer_reports_epipe(void **) {
    assert_false(pipe_blocked());
    {
        SigpipeBlocked b;
        assert_true(pipe_blocked());
        assert_int_equal(write_to_closed_peer(), EPIPE);  // without the block, the process dies here
        assert_true(pipe_pending());
    }
    assert_false(pipe_blocked());
    assert_false(pipe_pending());
    // Again: nothing left over from the first time.
    {
        SigpipeBlocked b;
        assert_int_equal(write_to_closed_peer(), EPIPE);
    }
    assert_false(pipe_blocked());
}

void test_caller_block_is_left_alone(void **) {
    sigset_t s = distc::sigpipe_set();
    pthread_sigmask(SIG_BLOCK, &s, nullptr);
    {
        SigpipeBlocked b;
        assert_int_equal(write_to_closed_peer(), EPIPE);
    }
    // Still blocked, and the caller's pending signal is still the caller's.
    assert_true(pipe_blocked());
    assert_true(pipe_pending());
    timespec zero{0, 0};
    assert_int_equal(sigtimedwait(&s, nullptr, &zero), SIGPIPE);
    pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
}

void test_started_threads_block_it(void **) {
    bool in_thread = false;
    std::thread t = distc::start_thread([&] {
        in_thread = pipe_blocked();
        write_to_closed_peer();  // pends on that thread, harmlessly
    });
    t.join();
    assert_true(in_thread);
    assert_false(pipe_blocked());  // the creator's mask is as it was
    assert_false(pipe_pending());
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_to_dead_peer_reports_epipe),
        cmocka_unit_test(test_caller_block_is_left_alone),
        cmocka_unit_test(test_started_threads_block_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
