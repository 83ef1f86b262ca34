#include "capi/custom_store.hpp"

#include <thread>

#include "core/util/error.hpp"

namespace distc {

namespace {

// A callback's failure becomes an Error carrying the message it set, if any.
// `op` may name the keys (get, wait, multi_get promise to name them on a timeout).
void check_rc(int rc, const std::string &op) {
    if (rc == 0) return;
    if (!is_status(rc))
        fail(DISTC_EINTERNAL, "custom store " + op + " returned " + std::to_string(rc) +
                                  (rc > 0 ? ", a positive code" : ", which is not a distc_status"));
    std::string msg = distc_error_last_code() == rc && distc_error_last()[0] ? distc_error_last() : distc_strerror(rc);
    fail(rc, "custom store " + op + ": " + msg);
}

[[noreturn]] void unsupported(const char *op) {
    fail(DISTC_ENOTSUP, std::string("custom store does not implement ") + op);
}

// Takes ownership of a distc_buf filled by a callback; `fault` says what is
// wrong with one that was set by hand rather than by distc_buf_set (empty: nothing).
Bytes take(distc_buf &b, std::string &fault) {
    Bytes out;
    if (!b.data && b.size)
        fault = "handed back " + std::to_string(b.size) + " bytes at NULL";
    else if (b.size > DISTC_STORE_MAX_VALUE_SIZE)
        fault = "handed back " + std::to_string(b.size) + " bytes, over the 1 GiB limit";
    else
        out.assign(b.data, b.data + b.size);
    distc_buf_dispose(&b);
    return out;
}

// The same, throwing DISTC_EINTERNAL naming `op` for such a buffer.
Bytes take_checked(distc_buf &b, const char *op) {
    std::string fault;
    Bytes out = take(b, fault);
    if (!fault.empty()) fail(DISTC_EINTERNAL, std::string("custom store ") + op + " " + fault);
    return out;
}

std::vector<const char *> cstrs(const std::vector<std::string> &keys) {
    std::vector<const char *> v;
    v.reserve(keys.size());
    for (const auto &k : keys) v.push_back(k.c_str());
    return v;
}

}  // namespace

CustomStore::~CustomStore() {
    if (vt_.free) vt_.free(payload_);
}

void CustomStore::set(const std::string &key, ByteView value) {
    distc_error_clear();
    check_rc(vt_.set(payload_, key.c_str(), value.data, value.size), "set");
}

Bytes CustomStore::get(const std::string &key, Millis timeout) {
    distc_error_clear();
    distc_buf b{nullptr, 0};
    int rc = vt_.get(payload_, key.c_str(), timeout.count(), &b);
    if (rc != 0) distc_buf_dispose(&b);
    check_rc(rc, "get of " + join_keys({key}));
    return take_checked(b, "get");
}

int64_t CustomStore::add(const std::string &key, int64_t delta) {
    distc_error_clear();
    int64_t v = 0;
    check_rc(vt_.add(payload_, key.c_str(), delta, &v), "add");
    return v;
}

Bytes CustomStore::compare_set(const std::string &key, ByteView expected, ByteView desired) {
    if (!vt_.compare_set) unsupported("compare_set");
    distc_error_clear();
    distc_buf b{nullptr, 0};
    int rc = vt_.compare_set(payload_, key.c_str(), expected.data, expected.size, desired.data, desired.size, &b);
    if (rc != 0) distc_buf_dispose(&b);
    check_rc(rc, "compare_set");
    return take_checked(b, "compare_set");
}

bool CustomStore::check(const std::vector<std::string> &keys) {
    if (!vt_.check) unsupported("check");
    distc_error_clear();
    auto k = cstrs(keys);
    int32_t ready = 0;
    check_rc(vt_.check(payload_, k.data(), k.size(), &ready), "check");
    return ready != 0;
}

void CustomStore::wait(const std::vector<std::string> &keys, Millis timeout) {
    if (vt_.wait) {
        distc_error_clear();
        auto k = cstrs(keys);
        check_rc(vt_.wait(payload_, k.data(), k.size(), timeout.count()), "wait for " + join_keys(keys));
        return;
    }
    if (!vt_.check) unsupported("wait (nor check to emulate it)");
    // Poll check with a growing interval, capped so a late key is seen soon.
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto nap = Millis(1);
    while (!check(keys)) {
        if (std::chrono::steady_clock::now() >= deadline) fail_wait_timeout(keys, timeout);
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, Millis(50));
    }
}

bool CustomStore::delete_key(const std::string &key) {
    if (!vt_.delete_key) unsupported("delete_key");
    distc_error_clear();
    int32_t d = 0;
    check_rc(vt_.delete_key(payload_, key.c_str(), &d), "delete_key");
    return d != 0;
}

int64_t CustomStore::num_keys() {
    if (!vt_.num_keys) unsupported("num_keys");
    distc_error_clear();
    int64_t n = 0;
    check_rc(vt_.num_keys(payload_, &n), "num_keys");
    return n;
}

void CustomStore::append(const std::string &key, ByteView value) {
    if (vt_.append) {
        distc_error_clear();
        check_rc(vt_.append(payload_, key.c_str(), value.data, value.size), "append");
        return;
    }
    if (!vt_.compare_set || !vt_.check) unsupported("append (nor compare_set and check to emulate it)");
    Store::append(key, value);
}

std::vector<Bytes> CustomStore::multi_get(const std::vector<std::string> &keys, Millis timeout) {
    if (!vt_.multi_get) return Store::multi_get(keys, timeout);
    distc_error_clear();
    auto k = cstrs(keys);
    std::vector<distc_buf> bufs(keys.size(), distc_buf{nullptr, 0});
    int rc = vt_.multi_get(payload_, k.data(), k.size(), timeout.count(), bufs.data());
    std::vector<Bytes> out;
    out.reserve(keys.size());
    std::string fault;
    for (auto &b : bufs) out.push_back(take(b, fault));  // also frees partial results on failure
    check_rc(rc, "multi_get of " + join_keys(keys));
    if (!fault.empty()) fail(DISTC_EINTERNAL, "custom store multi_get " + fault);
    return out;
}

void CustomStore::multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) {
    if (!vt_.multi_set) return Store::multi_set(keys, values);
    distc_error_clear();
    auto k = cstrs(keys);
    std::vector<const void *> v;
    std::vector<size_t> lens;
    for (const auto &x : values) {
        v.push_back(x.data);
        lens.push_back(x.size);
    }
    check_rc(vt_.multi_set(payload_, k.data(), v.data(), lens.data(), k.size()), "multi_set");
}

}  // namespace distc
