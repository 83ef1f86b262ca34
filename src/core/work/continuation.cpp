#include "core/work/continuation.hpp"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>

#include "core/util/error.hpp"
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

namespace {
// Runs `fn` and completes `next` with its outcome. `fn` (and what it
// captured) is gone before `next` completes: a waiter woken by `next` may
// end the program, and nothing of the continuation should be left to
// release on this thread then.
void follow(const std::shared_ptr<Work> &done, const std::shared_ptr<Work> &next, Continuation fn, const char *what) {
    std::shared_ptr<Work> then;
    int code = 0;
    std::string message;
    try {
        then = fn(*done);
    } catch (const Error &e) {
        code = e.code();
        message = std::string(what) + " failed: " + e.what();
    } catch (const std::exception &e) {
        code = DISTC_EINTERNAL;
        message = std::string(what) + " failed: " + e.what();
    }
    fn = nullptr;
    if (code != 0) {
        next->complete(code, message);
        return;
    }
    if (!then) {
        next->complete(0, std::string());
        return;
    }
    if (then == next) {
        next->complete(DISTC_EINVAL, std::string(what) + " handed back the work that waits for it");
        return;
    }
    then->add_continuation([next](Work &w) { next->complete(w.status(), w.message(), w.source_rank()); });
}
}  // namespace

std::shared_ptr<Work> then(Work &src, Continuation fn, const char *what) {
    auto next = std::make_shared<Work>(0, "continuation");
    next->start();
    src.add_continuation([next, fn = std::move(fn), what](Work &done) mutable {
        // The completing thread holds a reference; the continuation takes its own.
        std::shared_ptr<Work> sp = done.weak_from_this().lock();
        if (!sp) {  // completed by an owner without a shared reference: a copy of its outcome
            sp = Work::promise(done.kind());
            sp->complete(done.status(), done.message(), done.source_rank());
        }
        // `fn` moves to the pool thread, and its captures go there: released on
        // the completing thread (a group's worker) they could hold the last
        // reference to that very group, whose end joins its worker.
        run_continuation([sp, next, fn = std::move(fn), what]() mutable { follow(sp, next, std::move(fn), what); });
    });
    return next;
}

}  // namespace distc
