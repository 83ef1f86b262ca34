#include "core/util/tick_clock.hpp"

#include <pthread.h>
#include <time.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>

#include "support/sigpipe.hpp"

namespace distc {

int64_t real_now_us() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

namespace tick {

std::atomic<int64_t> now{0};
std::atomic<bool> ticking{false}, used{false};

namespace {

constexpr auto kTick = std::chrono::milliseconds(2);

// The ticker's thread, and how the first reader after a pause wakes it.
// Never destroyed: readers may come from threads that outlive static
// destructors.
struct Ticker {
    std::mutex mu;
    std::condition_variable cv;
    bool started = false;  // under mu: the thread exists (not after a fork)

    void run() {
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
            cv.wait(lk, [] { return ticking.load(); });
            lk.unlock();
            used.store(true, std::memory_order_relaxed);  // the waker's own read
            do {
                now.store(real_now_us(), std::memory_order_relaxed);
                std::this_thread::sleep_for(kTick);
            } while (used.exchange(false, std::memory_order_relaxed));
            // A reader between the exchange and this store gets a value at
            // most a tick old; every later one wakes us again.
            ticking.store(false);
            lk.lock();
        }
    }
};

Ticker &ticker() {
    static Ticker *t = new Ticker();
    // A fork's child has no ticker thread: its first reader starts one.
    static const bool at_fork = (pthread_atfork(nullptr, nullptr,
                                                [] {
                                                    Ticker &k = ticker();
                                                    new (&k.mu) std::mutex();
                                                    new (&k.cv) std::condition_variable();
                                                    k.started = false;
                                                    ticking.store(false);
                                                }),
                                 true);
    (void)at_fork;
    return *t;
}

}  // namespace

int64_t wake() {
    int64_t t = real_now_us();
    if (!ticking.exchange(true)) {
        now.store(t, std::memory_order_relaxed);
        Ticker &k = ticker();
        std::lock_guard<std::mutex> lk(k.mu);
        if (!k.started) {
            k.started = true;
            start_thread([&k] { k.run(); }).detach();  // SIGPIPE blocked, as every thread of distc's
        }
        k.cv.notify_one();
    }
    return t;
}

}  // namespace tick
}  // namespace distc
