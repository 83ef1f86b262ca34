#include "core/store/prefix_store.hpp"

namespace distc {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> inner) :
    prefix_(std::move(prefix) + "/"), inner_(std::move(inner)) {
    set_timeout(inner_->timeout());
}

std::vector<std::string> PrefixStore::ks(const std::vector<std::string> &keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto &key : keys) out.push_back(k(key));
    return out;
}

void PrefixStore::set(const std::string &key, ByteView value) { inner_->set(k(key), value); }

Bytes PrefixStore::get(const std::string &key, Millis timeout) { return inner_->get(k(key), timeout); }

int64_t PrefixStore::add(const std::string &key, int64_t delta) { return inner_->add(k(key), delta); }

Bytes PrefixStore::compare_set(const std::string &key, ByteView expected, ByteView desired) {
    return inner_->compare_set(k(key), expected, desired);
}

bool PrefixStore::check(const std::vector<std::string> &keys) { return inner_->check(ks(keys)); }

void PrefixStore::wait(const std::vector<std::string> &keys, Millis timeout) { inner_->wait(ks(keys), timeout); }

bool PrefixStore::delete_key(const std::string &key) { return inner_->delete_key(k(key)); }

int64_t PrefixStore::num_keys() { return inner_->num_keys(); }

void PrefixStore::append(const std::string &key, ByteView value) { inner_->append(k(key), value); }

std::vector<Bytes> PrefixStore::multi_get(const std::vector<std::string> &keys, Millis timeout) {
    return inner_->multi_get(ks(keys), timeout);
}

void PrefixStore::multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) {
    inner_->multi_set(ks(keys), values);
}

}  // namespace distc
