// The TCP store as users see it: a client, plus the server when this process hosts it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/store/store.hpp"
#include "core/store/tcp/tcp_client.hpp"
#include "core/store/tcp/tcp_server.hpp"

namespace distc {

struct TcpStoreOptions {
    std::string host;
    int port = 0;
    bool is_server = false;
    // The server listens on every interface, whatever `host` (which its own
    // client connects to): a host name that resolves to 127.0.1.1 here, as
    // Debian's does, still serves the other machines.
    bool listen_everywhere = false;
    int world_size = -1;
    bool wait_for_workers = true;
    Millis timeout{Store::kDefaultTimeoutMs};
    int connect_retries = -1;
    distc_tcp_protocol protocol = DISTC_TCP_PROTOCOL_AUTO;
    std::optional<std::string> token;  // the client's and the server's; none: $DISTC_STORE_TOKEN
    TcpServerOptions server;           // its token is set from `token`
};

class TcpStore final : public Store {
public:
    explicit TcpStore(const TcpStoreOptions &opts);
    ~TcpStore() override;

    int port() const { return port_; }
    distc_tcp_protocol protocol() const { return client_->protocol(); }

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
    std::string local_address() override { return client_->local_address(); }
    Bytes compare_set_within(const std::string &key, ByteView expected, ByteView desired, Millis timeout) override;

private:
    void wait_for_workers(int world_size);

    std::unique_ptr<TcpServer> server_;
    std::unique_ptr<TcpClient> client_;
    int port_ = 0;
};

}  // namespace distc
