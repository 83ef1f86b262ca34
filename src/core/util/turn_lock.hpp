// A lock for work that one thread at a time does and two rarely try to: a
// group's collectives, which the launch path already runs one after another.
// Its release is a plain store, not the locked instruction of std::mutex's:
// that one would wait, right after a collective's last write to shared
// memory, for the line its peer polls to come over. A second thread yields,
// then naps, until the first is done.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace distc {

class TurnLock {
public:
    void lock() noexcept {
        for (unsigned waited = 0; busy_.exchange(true, std::memory_order_acquire);)
            while (busy_.load(std::memory_order_relaxed)) {
                if (++waited < 1000)
                    std::this_thread::yield();
                else
                    std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
    }
    void unlock() noexcept { busy_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> busy_{false};
};

}  // namespace distc
