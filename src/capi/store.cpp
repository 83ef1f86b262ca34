// C shims for distc/store.h and distc/sys/store.h: argument checks and translation only.
#include <cstddef>
#include <cstring>
#include <string>

#include "capi/args.hpp"
#include "capi/guard.hpp"
#include "capi/handles.hpp"
#include "capi/custom_store.hpp"
#include "core/store/file_store.hpp"
#include "core/store/hash_store.hpp"
#include "core/store/prefix_store.hpp"
#include "core/store/rendezvous.hpp"
#include "core/store/tcp/tcp_store.hpp"
#include "distc/store.h"
#include "distc/sys/store.h"

using namespace distc;
using distc::capi::clamp_ms;
using distc::capi::guard;
using distc::capi::require;
using distc::capi::require_ptr;

namespace {

distc_store *box(std::shared_ptr<Store> s) { return new distc_store{std::move(s)}; }

// Where each version of distc_tcp_store_options ends.
const std::initializer_list<size_t> kTcpEnds = {offsetof(distc_tcp_store_options, max_request_bytes),
                                                offsetof(distc_tcp_store_options, token)};

std::string key_arg(const char *key, const char *name = "key") {
    require_ptr(key, name);
    const size_t len = std::strlen(key);
    if (len > DISTC_STORE_MAX_VALUE_SIZE) fail(DISTC_ENOMEM, std::string(name) + " is longer than the 1 GiB limit");
    return std::string(key, len);
}

std::vector<std::string> keys_arg(const char *const *keys, size_t n) {
    require(n == 0 || keys != nullptr, "keys is NULL but n > 0");
    std::vector<std::string> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        if (!keys[i]) fail(DISTC_EINVAL, "keys[" + std::to_string(i) + "] is NULL");
        out.push_back(key_arg(keys[i], "a key"));
    }
    return out;
}

ByteView bytes_arg(const void *p, size_t len, const char *name) {
    if (p == nullptr && len > 0) fail(DISTC_EINVAL, std::string(name) + " is NULL but its length is > 0");
    if (len > DISTC_STORE_MAX_VALUE_SIZE) fail(DISTC_ENOMEM, std::string(name) + " is larger than the 1 GiB limit");
    return ByteView(p, len);
}

Store &store_arg(distc_store *s) {
    require_ptr(s, "store");
    return *s->impl;
}

Millis timeout_arg(int64_t ms, const Store &s) {
    if (ms == DISTC_TIMEOUT_DEFAULT) return s.timeout();
    if (ms < 0) fail(DISTC_EINVAL, "timeout_ms is negative (" + std::to_string(ms) + ")");
    return clamp_ms(ms);
}

void to_buf(distc_buf *out, const Bytes &b) {
    if (distc_buf_set(out, b.data(), b.size()) != 0) fail(DISTC_ENOMEM, "cannot allocate the value");
}

}  // namespace

extern "C" {

DISTC_EXTERN(int) distc_store_new_hash(distc_store **out) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = box(std::make_shared<HashStore>());
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_new_file(distc_store **out, const char *path, int32_t num_workers) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        require_ptr(path, "path");
        require(path[0] != '\0', "path is empty");
        *out = box(std::make_shared<FileStore>(path, num_workers));
        return 0;
    });
}

DISTC_EXTERN(int) distc_tcp_store_options_init(distc_tcp_store_options *opts, unsigned int version) {
    return guard(__func__, [&] {
        capi::init_options(opts, version, DISTC_TCP_STORE_OPTIONS_VERSION,
                           distc_tcp_store_options DISTC_TCP_STORE_OPTIONS_INIT, kTcpEnds);
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_new_tcp(distc_store **out, const distc_tcp_store_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        require_ptr(opts, "opts");
        capi::check_options_version(opts->version, DISTC_TCP_STORE_OPTIONS_VERSION);
        require(opts->port >= 0 && opts->port <= 65535, "opts->port is outside 0..65535");
        require(opts->port != 0 || opts->is_server,
                "opts->port is 0 but this is a client (only a server picks a port)");
        require(opts->is_server || (opts->host && opts->host[0]), "opts->host is NULL or empty for a client");
        require(opts->timeout_ms == -1 || opts->timeout_ms > 0, "opts->timeout_ms must be > 0 or -1");
        require(opts->world_size == -1 || opts->world_size > 0, "opts->world_size must be > 0 or -1");
        require(opts->connect_retries >= -1, "opts->connect_retries must be >= -1");
        require(opts->protocol >= DISTC_TCP_PROTOCOL_AUTO && opts->protocol <= DISTC_TCP_PROTOCOL_TORCH2,
                "opts->protocol is not a distc_tcp_protocol");
        TcpStoreOptions o;
        o.host = opts->host ? opts->host : "";
        o.port = opts->port;
        o.is_server = opts->is_server != 0;
        o.world_size = opts->world_size;
        o.wait_for_workers = opts->wait_for_workers != 0;
        o.timeout = clamp_ms(opts->timeout_ms == -1 ? Store::kDefaultTimeoutMs : opts->timeout_ms);
        o.connect_retries = opts->connect_retries;
        o.protocol = static_cast<distc_tcp_protocol>(opts->protocol);
        if (opts->version >= 2) {
            require(opts->max_request_bytes == -1 || opts->max_request_bytes >= 4096,
                    "opts->max_request_bytes must be >= 4096 or -1");
            require(opts->max_unread_reply_bytes == -1 || opts->max_unread_reply_bytes > 0,
                    "opts->max_unread_reply_bytes must be > 0 or -1");
            if (opts->max_request_bytes > 0) o.server.max_request_bytes = static_cast<size_t>(opts->max_request_bytes);
            if (opts->max_unread_reply_bytes > 0)
                o.server.max_unread_reply_bytes = static_cast<size_t>(opts->max_unread_reply_bytes);
        }
        if (opts->version >= 3) {
            if (opts->token) o.token = std::string(opts->token);
            require(opts->allow_torch_clients >= -1 && opts->allow_torch_clients <= 1,
                    "opts->allow_torch_clients must be -1, 0 or 1");
            o.server.allow_torch_clients = opts->allow_torch_clients;
            if (distc_store_log_fn fn = opts->server_log) {
                void *payload = opts->server_log_payload;
                o.server.log = [fn, payload](const std::string &line) { fn(payload, line.c_str()); };
            }
        }
        *out = box(std::make_shared<TcpStore>(o));
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_tcp_port(int32_t *out, const distc_store *store) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        require_ptr(store, "store");
        auto *tcp = dynamic_cast<TcpStore *>(store->impl.get());
        if (!tcp) fail(DISTC_EINVAL, "store is not a TCP store");
        *out = tcp->port();
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_new_prefix(distc_store **out, const char *prefix, distc_store *inner) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        std::string p = key_arg(prefix, "prefix");
        require_ptr(inner, "inner");
        *out = box(std::make_shared<PrefixStore>(p, inner->impl));
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_new_custom(distc_store **out, const distc_store_vtable *vtable, void *payload) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        require_ptr(vtable, "vtable");
        if (vtable->version != DISTC_STORE_VTABLE_VERSION)
            fail(DISTC_EINVAL, "vtable->version is " + std::to_string(vtable->version) + ", expected " +
                                   std::to_string(DISTC_STORE_VTABLE_VERSION));
        require(vtable->set && vtable->get && vtable->add, "vtable lacks set, get or add (all three are required)");
        *out = box(std::make_shared<CustomStore>(*vtable, payload));
        return 0;
    });
}

DISTC_EXTERN(void) distc_store_free(distc_store *store) { delete store; }

DISTC_EXTERN(int) distc_store_set(distc_store *store, const char *key, const void *value, size_t len) {
    return guard(__func__, [&] {
        Store &s = store_arg(store);
        s.set(key_arg(key), bytes_arg(value, len, "value"));
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_get(distc_buf *out, distc_store *store, const char *key) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        Store &s = store_arg(store);
        to_buf(out, s.get(key_arg(key), s.timeout()));
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_add(int64_t *out, distc_store *store, const char *key, int64_t delta) {
    return guard(__func__, [&] {
        Store &s = store_arg(store);
        int64_t v = s.add(key_arg(key), delta);
        if (out) *out = v;
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_compare_set(distc_buf *out, distc_store *store, const char *key, const void *expected,
                                          size_t expected_len, const void *desired, size_t desired_len) {
    return guard(__func__, [&] {
        Store &s = store_arg(store);
        Bytes r = s.compare_set(key_arg(key), bytes_arg(expected, expected_len, "expected"),
                                bytes_arg(desired, desired_len, "desired"));
        if (out) to_buf(out, r);
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_check(int32_t *out, distc_store *store, const char *const *keys, size_t n) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        Store &s = store_arg(store);
        *out = s.check(keys_arg(keys, n)) ? 1 : 0;
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_wait(distc_store *store, const char *const *keys, size_t n, int64_t timeout_ms) {
    return guard(__func__, [&] {
        Store &s = store_arg(store);
        auto k = keys_arg(keys, n);
        s.wait(k, timeout_arg(timeout_ms, s));
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_delete_key(int32_t *out, distc_store *store, const char *key) {
    return guard(__func__, [&] {
        Store &s = store_arg(store);
        bool d = s.delete_key(key_arg(key));
        if (out) *out = d ? 1 : 0;
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_num_keys(int64_t *out, distc_store *store) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = store_arg(store).num_keys();
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_append(distc_store *store, const char *key, const void *value, size_t len) {
    return guard(__func__, [&] {
        Store &s = store_arg(store);
        s.append(key_arg(key), bytes_arg(value, len, "value"));
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_multi_get(distc_buf *out, distc_store *store, const char *const *keys, size_t n) {
    return guard(__func__, [&] {
        require(n == 0 || out != nullptr, "out is NULL but n > 0");
        Store &s = store_arg(store);
        auto vals = s.multi_get(keys_arg(keys, n), s.timeout());
        size_t i = 0;
        try {
            for (; i < n; ++i) to_buf(&out[i], vals[i]);
        } catch (...) {
            for (size_t j = 0; j < i; ++j) distc_buf_dispose(&out[j]);
            throw;
        }
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_multi_set(distc_store *store, const char *const *keys, const void *const *values,
                                        const size_t *lens, size_t n) {
    return guard(__func__, [&] {
        Store &s = store_arg(store);
        auto k = keys_arg(keys, n);
        require(n == 0 || (values != nullptr && lens != nullptr), "values or lens is NULL but n > 0");
        std::vector<ByteView> v;
        v.reserve(n);
        for (size_t i = 0; i < n; ++i)
            v.push_back(bytes_arg(values[i], lens[i], ("values[" + std::to_string(i) + "]").c_str()));
        s.multi_set(k, v);
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_set_timeout(distc_store *store, int64_t timeout_ms) {
    return guard(__func__, [&] {
        Store &s = store_arg(store);
        require(timeout_ms > 0, "timeout_ms must be > 0");
        s.set_timeout(clamp_ms(timeout_ms));
        return 0;
    });
}

DISTC_EXTERN(int) distc_store_get_timeout(int64_t *out, const distc_store *store) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        require_ptr(store, "store");
        *out = store->impl->timeout().count();
        return 0;
    });
}

DISTC_EXTERN(int) distc_rendezvous_options_init(distc_rendezvous_options *opts, unsigned int version) {
    return guard(__func__, [&] {
        require_ptr(opts, "opts");
        if (version != DISTC_RENDEZVOUS_OPTIONS_VERSION)
            fail(DISTC_EINVAL, "unknown options version " + std::to_string(version));
        *opts = DISTC_RENDEZVOUS_OPTIONS_INIT;
        return 0;
    });
}

DISTC_EXTERN(int) distc_rendezvous(distc_store **out, int32_t *rank, int32_t *world_size, const char *url,
                                   const distc_rendezvous_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        RendezvousRequest req = capi::rendezvous_request(url, opts, "opts");
        require_ptr(rank, "rank");
        require_ptr(world_size, "world_size");
        RendezvousResult r = rendezvous(req);
        *out = box(std::move(r.store));
        *rank = r.rank;
        *world_size = r.world_size;
        return 0;
    });
}

}  // extern "C"

namespace distc::capi {

RendezvousRequest rendezvous_request(const char *url, const distc_rendezvous_options *opts, const std::string &name) {
    require_ptr(url, "url");
    RendezvousRequest req;
    req.url = url;
    if (!opts) return req;
    auto bad = [&](const char *what) { fail(DISTC_EINVAL, name + "->" + what); };
    if (opts->version != DISTC_RENDEZVOUS_OPTIONS_VERSION)
        fail(DISTC_EINVAL, name + "->version is " + std::to_string(opts->version) + ", expected " +
                               std::to_string(DISTC_RENDEZVOUS_OPTIONS_VERSION));
    if (!(opts->timeout_ms == -1 || opts->timeout_ms > 0)) bad("timeout_ms must be > 0 or -1");
    if (opts->rank < -1) bad("rank must be >= 0 or -1");
    if (!(opts->world_size == -1 || opts->world_size > 0)) bad("world_size must be > 0 or -1");
    req.timeout = clamp_ms(opts->timeout_ms == -1 ? Store::kDefaultTimeoutMs : opts->timeout_ms);
    req.rank = opts->rank;
    req.world_size = opts->world_size;
    return req;
}

}  // namespace distc::capi
