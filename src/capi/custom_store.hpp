// A store whose operations are C callbacks supplied by the caller (distc/sys/store.h).
#pragma once

#include "core/store/store.hpp"
#include "distc/sys/store.h"

namespace distc {

class CustomStore final : public Store {
public:
    CustomStore(const distc_store_vtable &vt, void *payload) : vt_(vt), payload_(payload) {}
    ~CustomStore() override;

    void set(const std::string &key, ByteView value) override;
    Bytes get(const std::string &key, Millis timeout) override;
    int64_t add(const std::string &key, int64_t delta) override;
    Bytes compare_set(const std::string &key, ByteView expected, ByteView desired) override;
    bool bounds_its_waits() const override { return false; }  // the callbacks take what they take
    bool check(const std::vector<std::string> &keys) override;
    void wait(const std::vector<std::string> &keys, Millis timeout) override;
    bool delete_key(const std::string &key) override;
    int64_t num_keys() override;
    void append(const std::string &key, ByteView value) override;
    std::vector<Bytes> multi_get(const std::vector<std::string> &keys, Millis timeout) override;
    void multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) override;

private:
    distc_store_vtable vt_;
    void *payload_;
};

}  // namespace distc
