#include "core/store/store.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/util/error.hpp"

namespace distc {

void Store::append(const std::string &key, ByteView value) {
    // Optimistic loop on compare_set, as c10d's base Store does, for as long
    // as the store's timeout: a value that changes under every try (or a
    // compare_set that never takes) ends in an error, not a spin.
    const auto deadline = deadline_in(timeout());
    Bytes expected = check({key}) ? get(key, timeout()) : Bytes{};
    for (;;) {
        if (coarse_now() >= deadline)
            fail(DISTC_ETIMEOUT, "append to key '" + key + "': its compare_set did not take within " +
                                     std::to_string(timeout().count()) + " ms");
        check_append(key, expected.size(), value.size);
        Bytes desired = expected;
        desired.insert(desired.end(), value.data, value.data + value.size);
        Bytes now = compare_set(key, expected, desired);
        if (now == desired) return;
        // A key deleted meanwhile answers with `expected` itself: start from empty.
        expected = check({key}) ? std::move(now) : Bytes{};
    }
}

void check_append(const std::string &key, size_t have, size_t more) {
    if (!append_fits(have, more))
        fail(DISTC_ENOMEM, "appending " + std::to_string(more) + " bytes to key '" + key + "' (" +
                               std::to_string(have) + " bytes) would take it over the 1 GiB limit");
}

std::vector<Bytes> Store::multi_get(const std::vector<std::string> &keys, Millis timeout) {
    std::vector<Bytes> out;
    out.reserve(keys.size());
    for (const auto &k : keys) out.push_back(get(k, timeout));
    return out;
}

void Store::multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) {
    for (size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
}

int64_t parse_counter(const std::string &key, const Bytes &value) {
    std::string s(value.begin(), value.end());
    errno = 0;
    char *end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || errno != 0 || end != s.c_str() + s.size())
        fail(DISTC_EINVAL, "key '" + key + "' holds a value that is not a decimal integer");
    return v;
}

int64_t add_to_counter(const std::string &key, const Bytes *current, int64_t delta) {
    int64_t v = current ? parse_counter(key, *current) : 0;
    int64_t sum;
    if (__builtin_add_overflow(v, delta, &sum))
        fail(DISTC_EINVAL,
             "adding " + std::to_string(delta) + " to key '" + key + "' (" + std::to_string(v) + ") overflows int64");
    return sum;
}

Bytes counter_bytes(int64_t v) {
    std::string s = std::to_string(v);
    return Bytes(s.begin(), s.end());
}

std::string join_keys(const std::vector<std::string> &keys) {
    std::string s;
    for (size_t i = 0; i < keys.size(); ++i) {
        if (i) s += ", ";
        s += "'" + keys[i] + "'";
    }
    return s;
}

void fail_wait_timeout(const std::vector<std::string> &missing, Millis timeout) {
    fail(DISTC_ETIMEOUT, std::string(missing.size() == 1 ? "key " : "keys ") + join_keys(missing) + " not set within " +
                             std::to_string(timeout.count()) + " ms");
}

void wait_for_count(const std::function<int64_t()> &read, int64_t target, Millis timeout, const std::string &what) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto nap = std::chrono::microseconds(200);
    int64_t n;
    while ((n = read()) < target) {
        if (std::chrono::steady_clock::now() >= deadline)
            fail(DISTC_ETIMEOUT, "only " + std::to_string(n) + " of " + std::to_string(target) + " " + what +
                                     " within " + std::to_string(timeout.count()) + " ms");
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(10000));
    }
}

Bytes compare_set_value(Bytes *current, bool *created, ByteView expected, ByteView desired) {
    *created = false;
    if (current == nullptr) {
        // c10d: a missing key is set only when the expected value is empty.
        if (expected.size == 0) {
            *created = true;
            return desired.to_bytes();
        }
        return expected.to_bytes();
    }
    if (current->size() == expected.size &&
        (expected.size == 0 || std::memcmp(current->data(), expected.data, expected.size) == 0)) {
        *current = desired.to_bytes();
    }
    return *current;
}

}  // namespace distc
