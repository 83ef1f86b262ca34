// A store whose waits give up as soon as a watched key appears. Group creation
// hands it to backends: a rank that fails to create its part of a group sets
// the key with its reason, and its peers, blocked in their backends'
// rendezvous (waiting for addresses that will never come), fail at once
// instead of waiting out the timeout. Once creation is over, stop_watching()
// makes it a plain pass-through.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/store/store.hpp"

namespace distc {

class WatchfulStore final : public Store {
public:
    // `what` says what gives up in messages ("creating group 'g'").
    WatchfulStore(std::shared_ptr<Store> inner, std::string watched, std::string what);

    void stop_watching() { watching_.store(false, std::memory_order_release); }

    void set(const std::string &key, ByteView value) override { inner_->set(key, value); }
    Bytes get(const std::string &key, Millis timeout) override;
    int64_t add(const std::string &key, int64_t delta) override { return inner_->add(key, delta); }
    Bytes compare_set(const std::string &key, ByteView expected, ByteView desired) override {
        return inner_->compare_set(key, expected, desired);
    }
    bool check(const std::vector<std::string> &keys) override { return inner_->check(keys); }
    void wait(const std::vector<std::string> &keys, Millis timeout) override;
    bool delete_key(const std::string &key) override { return inner_->delete_key(key); }
    int64_t num_keys() override { return inner_->num_keys(); }
    void append(const std::string &key, ByteView value) override { inner_->append(key, value); }
    std::vector<Bytes> multi_get(const std::vector<std::string> &keys, Millis timeout) override;
    void multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) override {
        inner_->multi_set(keys, values);
    }
    std::string local_address() override { return inner_->local_address(); }
    bool bounds_its_waits() const override { return inner_->bounds_its_waits(); }
    Bytes compare_set_within(const std::string &key, ByteView expected, ByteView desired, Millis timeout) override {
        return inner_->compare_set_within(key, expected, desired, timeout);
    }

private:
    // Waits for `keys` in slices, looking for the watched key between them.
    void wait_watching(const std::vector<std::string> &keys, Millis timeout);
    std::shared_ptr<Store> inner_;
    std::string watched_, what_;
    std::atomic<bool> watching_{true};
};

}  // namespace distc
