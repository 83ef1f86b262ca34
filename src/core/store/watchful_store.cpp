#include "core/store/watchful_store.hpp"

#include <algorithm>

#include "core/util/error.hpp"

namespace distc {

WatchfulStore::WatchfulStore(std::shared_ptr<Store> inner, std::string watched, std::string what) :
    inner_(std::move(inner)), watched_(std::move(watched)), what_(std::move(what)) {
    set_timeout(inner_->timeout());
}

void WatchfulStore::wait_watching(const std::vector<std::string> &keys, Millis timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    // Short slices first (peers usually arrive at once), then longer ones:
    // each slice costs the store two requests per waiting rank.
    Millis slice(10);
    for (;;) {
        auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
        try {
            inner_->wait(keys, std::max(Millis(0), std::min(slice, left)));
            return;
        } catch (const Error &e) {
            if (e.code() != DISTC_ETIMEOUT) throw;
            if (inner_->check({watched_})) {
                Bytes why = inner_->get(watched_, Millis(1000));
                fail(DISTC_EREMOTE, what_ + " gave up: " + std::string(why.begin(), why.end()));
            }
            if (left <= slice) fail_wait_timeout(keys, timeout);
        }
        slice = std::min(slice * 2, Millis(200));
    }
}

Bytes WatchfulStore::get(const std::string &key, Millis timeout) {
    if (watching_.load(std::memory_order_acquire)) wait_watching({key}, timeout);
    return inner_->get(key, timeout);
}

void WatchfulStore::wait(const std::vector<std::string> &keys, Millis timeout) {
    if (watching_.load(std::memory_order_acquire)) return wait_watching(keys, timeout);
    inner_->wait(keys, timeout);
}

std::vector<Bytes> WatchfulStore::multi_get(const std::vector<std::string> &keys, Millis timeout) {
    if (watching_.load(std::memory_order_acquire)) wait_watching(keys, timeout);
    return inner_->multi_get(keys, timeout);
}

}  // namespace distc
