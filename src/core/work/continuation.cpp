#include "core/work/continuation.hpp"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>

#include "support/sigpipe.hpp"

namespace distc {

namespace {

// A thread that has waited this long for work leaves.
constexpr auto kIdleExit = std::chrono::seconds(5);

// Never destroyed: continuations may finish after static destructors ran.
struct Pool {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    int idle = 0;  // threads waiting for work

    void run() {
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
            while (queue.empty()) {
                ++idle;
                bool woke = cv.wait_for(lk, kIdleExit, [this] { return !queue.empty(); });
                --idle;
                if (!woke) return;
            }
            std::function<void()> fn = std::move(queue.front());
            queue.pop_front();
            lk.unlock();
            fn();
            fn = nullptr;  // its captures go before the lock is taken again
            lk.lock();
        }
    }
};

Pool &pool() {
    static Pool *p = new Pool();
    // A fork's child has none of the parent's threads; what the parent had
    // queued is the parent's to run.
    static const bool at_fork = (pthread_atfork(nullptr, nullptr,
                                                [] {
                                                    Pool &q = pool();
                                                    new (&q.mu) std::mutex();
                                                    new (&q.cv) std::condition_variable();
                                                    new (&q.queue) std::deque<std::function<void()>>();
                                                    q.idle = 0;
                                                }),
                                 true);
    (void)at_fork;
    return *p;
}

}  // namespace

void run_continuation(std::function<void()> fn) {
    Pool &p = pool();
    std::lock_guard<std::mutex> lk(p.mu);
    p.queue.push_back(std::move(fn));
    if (p.idle > static_cast<int>(p.queue.size()) - 1) {
        p.cv.notify_one();
        return;
    }
    start_thread([&p] { p.run(); }).detach();  // SIGPIPE blocked, as every thread of distc's
}

}  // namespace distc
