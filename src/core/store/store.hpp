// The internal store interface. Every store (hash, file, TCP, prefix, custom)
// implements it; the C shims in capi/store.cpp only validate and translate.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/util/clock.hpp"
#include "distc/store.h"

namespace distc {

using Bytes = std::vector<uint8_t>;

// A borrowed byte range: values arrive from C callers without a copy.
struct ByteView {
    const uint8_t *data = nullptr;
    size_t size = 0;
    ByteView() = default;
    ByteView(const void *d, size_t n) : data(static_cast<const uint8_t *>(d)), size(n) {}
    ByteView(const Bytes &b) : data(b.data()), size(b.size()) {}  // NOLINT: implicit on purpose
    Bytes to_bytes() const { return Bytes(data, data + size); }
};

class Store {
public:
    static constexpr int64_t kDefaultTimeoutMs = 300000;

    virtual ~Store() = default;

    virtual void set(const std::string &key, ByteView value) = 0;
    // Waits up to `timeout` for the key; throws DISTC_ETIMEOUT naming it.
    virtual Bytes get(const std::string &key, Millis timeout) = 0;
    virtual int64_t add(const std::string &key, int64_t delta) = 0;
    virtual Bytes compare_set(const std::string &key, ByteView expected, ByteView desired) = 0;
    // The same, giving up after `timeout` where the store can (a TCP
    // store): for reports of a failure, which must not wait long for a
    // store that may be what failed.
    virtual Bytes compare_set_within(const std::string &key, ByteView expected, ByteView desired, Millis timeout) {
        (void)timeout;
        return compare_set(key, expected, desired);
    }
    // Whether get and compare_set_within give up at their timeouts whatever
    // the store's state: a custom store's callbacks may wait as they like.
    virtual bool bounds_its_waits() const { return true; }
    virtual bool check(const std::vector<std::string> &keys) = 0;
    virtual void wait(const std::vector<std::string> &keys, Millis timeout) = 0;
    virtual bool delete_key(const std::string &key) = 0;
    virtual int64_t num_keys() = 0;

    // c10d's Store base emulates these; stores with native support override.
    virtual void append(const std::string &key, ByteView value);
    virtual std::vector<Bytes> multi_get(const std::vector<std::string> &keys, Millis timeout);
    virtual void multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values);

    // The numeric address this process reaches the store's server from
    // ("" for stores that are not on the network): what the kernel chose to
    // route to MASTER_ADDR, so an address that the store's peers reach.
    virtual std::string local_address() { return {}; }

    void set_timeout(Millis t) { timeout_ms_.store(t.count()); }
    Millis timeout() const { return Millis(timeout_ms_.load()); }

protected:
    std::atomic<int64_t> timeout_ms_{kDefaultTimeoutMs};
};

// Helpers shared by the stores.
int64_t parse_counter(const std::string &key, const Bytes &value);
// The counter after adding `delta` to `current` (nullptr: missing, counts as 0);
// DISTC_EINVAL when the value is not an integer or the sum overflows int64.
int64_t add_to_counter(const std::string &key, const Bytes *current, int64_t delta);
Bytes counter_bytes(int64_t v);
// Whether appending `more` bytes to a value of `have` keeps it within
// DISTC_STORE_MAX_VALUE_SIZE, past which every store and client refuses a value;
// check_append throws DISTC_ENOMEM naming the key where it does not.
inline bool append_fits(size_t have, size_t more) {
    return have <= DISTC_STORE_MAX_VALUE_SIZE && more <= DISTC_STORE_MAX_VALUE_SIZE - have;
}
void check_append(const std::string &key, size_t have, size_t more);
std::string join_keys(const std::vector<std::string> &keys);
[[noreturn]] void fail_wait_timeout(const std::vector<std::string> &missing, Millis timeout);
// Polls `read` (a counter) with backoff until it reaches `target`; DISTC_ETIMEOUT
// says "only N of TARGET <what> within T ms".
void wait_for_count(const std::function<int64_t()> &read, int64_t target, Millis timeout, const std::string &what);
// c10d's compare_set, on an in-memory value (nullptr = missing); returns the result.
Bytes compare_set_value(Bytes *current, bool *created, ByteView expected, ByteView desired);

}  // namespace distc
