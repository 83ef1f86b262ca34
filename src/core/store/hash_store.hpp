// In-process store: a map under a mutex; waiters sleep on a condition variable.
#pragma once

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "core/store/store.hpp"

namespace distc {

class HashStore final : public Store {
public:
    void set(const std::string &key, ByteView value) override;
    Bytes get(const std::string &key, Millis timeout) override;
    int64_t add(const std::string &key, int64_t delta) override;
    Bytes compare_set(const std::string &key, ByteView expected, ByteView desired) override;
    bool check(const std::vector<std::string> &keys) override;
    void wait(const std::vector<std::string> &keys, Millis timeout) override;
    bool delete_key(const std::string &key) override;
    int64_t num_keys() override;
    void append(const std::string &key, ByteView value) override;
    std::vector<Bytes> multi_get(const std::vector<std::string> &keys, Millis timeout) override;
    void multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) override;

private:
    void wait_locked(std::unique_lock<std::mutex> &lk, const std::vector<std::string> &keys, Millis timeout);

    std::mutex mu_;
    std::condition_variable cv_;
    std::unordered_map<std::string, Bytes> map_;
};

}  // namespace distc
