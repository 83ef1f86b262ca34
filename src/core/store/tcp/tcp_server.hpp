// The TCP store server: one thread, one epoll loop, any number of clients.
// It speaks PyTorch 1.x's and 2.x's TCPStore protocols and distc's; each
// connection's first message tells which.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/store/store.hpp"
#include "core/store/tcp/wire.hpp"
#include "core/util/socket.hpp"

namespace distc {

class TcpServer {
public:
    // Binds host:port (host "" = every interface, port 0 = a free port) and starts serving.
    TcpServer(const std::string &host, int port);
    ~TcpServer();
    TcpServer(const TcpServer &) = delete;
    TcpServer &operator=(const TcpServer &) = delete;

    int port() const { return port_; }
    size_t num_connections() const { return nconns_.load(); }

private:
    struct Conn;
    enum class Result { Done, Incomplete, Bad };

    void run() noexcept;
    void accept_all();
    void on_event(uint64_t id, uint32_t events);
    void process(Conn &c);
    Result handle(Conn &c, wire::Op op, wire::Reader &r);
    Result try_unblock(Conn &c);
    Result refuse(Conn &c, int code, const std::string &msg);  // an error reply, or drop the client
    static void reply_to(Conn &c, const wire::Writer &w);
    template <typename F>
    void contain(uint64_t id, F &&f) noexcept;
    void block(Conn &c, wire::Op op, std::vector<std::string> keys);
    void key_created(const std::string &key);
    void send_pending(Conn &c);
    void close_conn(uint64_t id);

    Fd listen_, epoll_, wake_;
    int port_ = 0;
    std::thread thread_;
    std::atomic<size_t> nconns_{0};

    // Owned by the server thread only.
    std::unordered_map<std::string, Bytes> data_;
    std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
    struct Waiter {
        uint64_t conn, gen;
    };
    std::unordered_map<std::string, std::vector<Waiter>> waiters_;
    std::vector<uint64_t> ready_;  // connections whose blocked request may now complete
    uint64_t next_id_ = 2;         // 0: listener, 1: wake-up eventfd
    bool accept_paused_ = false;
};

}  // namespace distc
