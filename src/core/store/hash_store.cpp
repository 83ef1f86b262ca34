#include "core/store/hash_store.hpp"

namespace distc {

void HashStore::set(const std::string &key, ByteView value) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        map_[key] = value.to_bytes();
    }
    cv_.notify_all();
}

void HashStore::wait_locked(std::unique_lock<std::mutex> &lk, const std::vector<std::string> &keys, Millis timeout) {
    auto missing = [&] {
        std::vector<std::string> m;
        for (const auto &k : keys)
            if (!map_.count(k)) m.push_back(k);
        return m;
    };
    if (!cv_.wait_for(lk, timeout, [&] { return missing().empty(); })) fail_wait_timeout(missing(), timeout);
}

Bytes HashStore::get(const std::string &key, Millis timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    wait_locked(lk, {key}, timeout);
    return map_[key];
}

int64_t HashStore::add(const std::string &key, int64_t delta) {
    int64_t v;
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = map_.find(key);
        v = add_to_counter(key, it == map_.end() ? nullptr : &it->second, delta);
        map_[key] = counter_bytes(v);
    }
    cv_.notify_all();
    return v;
}

Bytes HashStore::compare_set(const std::string &key, ByteView expected, ByteView desired) {
    Bytes result;
    bool created;
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = map_.find(key);
        result = compare_set_value(it == map_.end() ? nullptr : &it->second, &created, expected, desired);
        if (created) map_[key] = result;
    }
    cv_.notify_all();
    return result;
}

bool HashStore::check(const std::vector<std::string> &keys) {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto &k : keys)
        if (!map_.count(k)) return false;
    return true;
}

void HashStore::wait(const std::vector<std::string> &keys, Millis timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    wait_locked(lk, keys, timeout);
}

bool HashStore::delete_key(const std::string &key) {
    std::lock_guard<std::mutex> lk(mu_);
    return map_.erase(key) > 0;
}

int64_t HashStore::num_keys() {
    std::lock_guard<std::mutex> lk(mu_);
    return static_cast<int64_t>(map_.size());
}

void HashStore::append(const std::string &key, ByteView value) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = map_.find(key);
        check_append(key, it == map_.end() ? 0 : it->second.size(), value.size);  // before the key exists
        auto &v = map_[key];
        v.insert(v.end(), value.data, value.data + value.size);
    }
    cv_.notify_all();
}

std::vector<Bytes> HashStore::multi_get(const std::vector<std::string> &keys, Millis timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    wait_locked(lk, keys, timeout);
    std::vector<Bytes> out;
    out.reserve(keys.size());
    for (const auto &k : keys) out.push_back(map_[k]);
    return out;
}

void HashStore::multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (size_t i = 0; i < keys.size(); ++i) map_[keys[i]] = values[i].to_bytes();
    }
    cv_.notify_all();
}

}  // namespace distc
