// c10d's PrefixStore: "prefix/" before every key, delegating to a shared inner store.
#pragma once

#include "core/store/store.hpp"

namespace distc {

class PrefixStore final : public Store {
public:
    PrefixStore(std::string prefix, std::shared_ptr<Store> inner);

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

    std::string local_address() override { return inner_->local_address(); }
    bool bounds_its_waits() const override { return inner_->bounds_its_waits(); }
    Bytes compare_set_within(const std::string &key, ByteView expected, ByteView desired, Millis timeout) override {
        return inner_->compare_set_within(k(key), expected, desired, timeout);
    }

    const std::shared_ptr<Store> &inner() const { return inner_; }

private:
    std::string k(const std::string &key) const { return prefix_ + key; }
    std::vector<std::string> ks(const std::vector<std::string> &keys) const;

    std::string prefix_;
    std::shared_ptr<Store> inner_;
};

}  // namespace distc
