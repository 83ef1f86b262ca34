#include "core/store/tcp/tcp_store.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/util/error.hpp"

namespace distc {

namespace {
// PyTorch's TCPStore puts user keys under "/" and counts joined workers in
// "init/"; we do the same so the two libraries see one key space.
const std::string kUserPrefix = "/";
const std::string kInitKey = "init/";

std::string uk(const std::string &key) { return kUserPrefix + key; }

std::vector<std::string> uks(const std::vector<std::string> &keys) {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto &k : keys) out.push_back(uk(k));
    return out;
}

bool is_wildcard(const std::string &h) { return h.empty() || h == "0.0.0.0" || h == "::" || h == "*"; }

// A timed-out wait names the user's keys and the timeout, not the socket.
template <typename F>
auto with_wait_context(const std::vector<std::string> &keys, Millis timeout, F &&f) -> decltype(f()) {
    try {
        return f();
    } catch (const Error &e) {
        if (e.code() != DISTC_ETIMEOUT) throw;
        fail_wait_timeout(keys, timeout);
    }
}
}  // namespace

TcpStore::TcpStore(const TcpStoreOptions &o) {
    set_timeout(o.timeout);
    std::string host = o.host;
    std::string token;
    if (o.token) {
        token = *o.token;
    } else if (const char *e = std::getenv("DISTC_STORE_TOKEN")) {
        token = e;
    }
    if (o.is_server) {
        TcpServerOptions so = o.server;
        so.token = token;
        server_ = std::make_unique<TcpServer>(is_wildcard(host) || o.listen_everywhere ? "" : host, o.port, so);
        port_ = server_->port();
        if (is_wildcard(host)) host = "127.0.0.1";
    } else {
        port_ = o.port;
    }
    client_ = std::make_unique<TcpClient>(host, port_, o.protocol, o.connect_retries, o.timeout, token);
    if (o.world_size > 0) {
        client_->add(kInitKey, 1, o.timeout);
        if (o.is_server && o.wait_for_workers) wait_for_workers(o.world_size);
    }
}

TcpStore::~TcpStore() {
    client_.reset();
    server_.reset();
}

void TcpStore::wait_for_workers(int world_size) {
    wait_for_count([&] { return client_->add(kInitKey, 0, timeout()); }, world_size, timeout(),
                   "workers joined the store");
}

void TcpStore::set(const std::string &key, ByteView value) { client_->set(uk(key), value, timeout()); }

Bytes TcpStore::get(const std::string &key, Millis timeout) {
    return with_wait_context({key}, timeout, [&] { return client_->get(uk(key), timeout); });
}

int64_t TcpStore::add(const std::string &key, int64_t delta) { return client_->add(uk(key), delta, timeout()); }

Bytes TcpStore::compare_set(const std::string &key, ByteView expected, ByteView desired) {
    return client_->compare_set(uk(key), expected, desired, timeout());
}

Bytes TcpStore::compare_set_within(const std::string &key, ByteView expected, ByteView desired, Millis timeout) {
    return client_->compare_set(uk(key), expected, desired, std::min(timeout, this->timeout()));
}

bool TcpStore::check(const std::vector<std::string> &keys) { return client_->check(uks(keys), timeout()); }

void TcpStore::wait(const std::vector<std::string> &keys, Millis timeout) {
    with_wait_context(keys, timeout, [&] { client_->wait(uks(keys), timeout); });
}

bool TcpStore::delete_key(const std::string &key) { return client_->delete_key(uk(key), timeout()); }

int64_t TcpStore::num_keys() { return client_->num_keys(timeout()); }

void TcpStore::append(const std::string &key, ByteView value) {
    if (client_->has_append())
        client_->append(uk(key), value, timeout());
    else
        Store::append(key, value);  // PyTorch 1.x servers lack APPEND
}

std::vector<Bytes> TcpStore::multi_get(const std::vector<std::string> &keys, Millis timeout) {
    return with_wait_context(keys, timeout, [&] { return client_->multi_get(uks(keys), timeout); });
}

void TcpStore::multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) {
    client_->multi_set(uks(keys), values, timeout());
}

}  // namespace distc
