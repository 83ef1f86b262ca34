// The TCP store server: one thread, one epoll loop, any number of clients.
// It speaks PyTorch 1.x's and 2.x's TCPStore protocols and distc's; each
// connection's first message tells which. tcp_server.cpp holds the loop and
// the connections' I/O, tcp_server_requests.cpp what each request does.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/store/store.hpp"
#include "core/store/tcp/wire.hpp"
#include "core/util/socket.hpp"

namespace distc {

// distc_tcp_store_options documents these.
struct TcpServerOptions {
    static constexpr size_t kDefaultMaxRequestBytes = DISTC_STORE_MAX_VALUE_SIZE + (1u << 20);
    static constexpr size_t kDefaultMaxUnreadReplyBytes = 4u << 20;
    size_t max_request_bytes = kDefaultMaxRequestBytes;
    size_t max_unread_reply_bytes = kDefaultMaxUnreadReplyBytes;
    std::string token;                             // "": clients need none
    int allow_torch_clients = -1;                  // 1, 0, or -1: only without a token
    std::function<void(const std::string &)> log;  // a line for each client refused or dropped
};

class TcpServer {
public:
    // Binds host:port (host "" = every interface, port 0 = a free port) and starts serving.
    TcpServer(const std::string &host, int port, const TcpServerOptions &opts = {});
    ~TcpServer();
    TcpServer(const TcpServer &) = delete;
    TcpServer &operator=(const TcpServer &) = delete;

    int port() const { return port_; }
    size_t num_connections() const { return nconns_.load(); }
    // Blocked requests registered as waiting for a key (at most one per connection).
    size_t num_waiters() const { return nwaiters_.load(); }
    // Bytes held by the connections' input, output and blocked-request buffers.
    size_t buffered_bytes() const { return buffered_.load(); }

private:
    struct Conn;
    enum class Result { Done, Incomplete, Bad };
    enum class Stop { Input, Blocked, Output, Closed };  // why process() stopped

    void run() noexcept;
    void drain() noexcept;  // stopping: answer what was already sent
    template <typename F>
    void contain(uint64_t id, F &&f) noexcept;
    void accept_all();
    void on_event(uint64_t id, uint32_t events);
    bool read_some(Conn &c);  // true: the peer closed
    void serve(Conn &c);      // process, send and set the connection's epoll interest
    Stop process(Conn &c);
    bool send_pending(Conn &c);  // false: the connection was closed
    void close_conn(uint64_t id);
    bool serving(const Conn &c) const;  // its requests are being served, not held back
    size_t read_limit(const Conn &c) const;
    bool reading(const Conn &c) const;
    void drop(Conn &c, const std::string &why, const char *verb = "dropped");  // logs why, then closes
    void log(const std::string &what) noexcept;

    // tcp_server_requests.cpp
    Result handle(Conn &c, wire::Op op, wire::Reader &r);
    Result hello(Conn &c, wire::Reader &r);
    Result auth(Conn &c, wire::Reader &r);
    void block(Conn &c, wire::Op op, uint64_t count, ByteView keys);
    Result try_unblock(Conn &c);
    void end_block(Conn &c);
    size_t first_missing(const Conn &c, size_t from, size_t to) const;
    void wait_for(Conn &c, std::string key);
    void stop_waiting(Conn &c);
    void key_created(const std::string &key);
    Result refuse(Conn &c, int code, const std::string &msg);  // an error reply, or drop the client
    static void reply_to(Conn &c, const wire::Writer &w);

    const TcpServerOptions opts_;
    const bool torch_allowed_;
    Fd listen_, epoll_, wake_;
    Fd spare_;  // kept open to be closed when descriptors run out (see accept_all)
    int port_ = 0;
    std::thread thread_;
    std::atomic<size_t> nconns_{0}, nwaiters_{0}, buffered_{0};

    // Owned by the server thread only.
    std::unordered_map<std::string, Bytes> data_;
    std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
    std::unordered_map<std::string, std::unordered_set<uint64_t>> waiters_;  // key -> blocked connections
    std::vector<uint64_t> ready_;    // connections whose blocked request may now complete
    std::vector<uint8_t> spare_in_;  // a read buffer no connection holds now
    uint64_t next_id_ = 2;           // 0: listener, 1: wake-up eventfd
    bool accept_paused_ = false;
    Clock::time_point accept_resume_;
};

struct TcpServer::Conn {
    uint64_t id;
    Fd fd;
    // Unparsed input is in[in_off, in_end); in.size() is capacity, so reads do
    // not zero-fill (resize would, on every recv).
    std::vector<uint8_t> in;
    size_t in_off = 0, in_end = 0;
    std::vector<uint8_t> out;
    size_t out_off = 0;
    bool dialect_known = false;
    wire::Dialect dialect = wire::Dialect::Torch1;
    uint32_t version = 0;     // the distc protocol version agreed in HELLO; 0: a PyTorch client
    bool authed = false;      // may make requests: proved the token, or none is needed
    bool challenged = false;  // was sent `nonce` and owes an AUTH
    bool closing = false;     // closes once its last reply (an error) is sent
    uint8_t nonce[wire::kNonceSize];
    std::string why;       // why handle() refused a request, for the log
    uint32_t events = 0;   // the epoll interest set now
    size_t accounted = 0;  // its share of buffered_
    // A request that waits for keys (GET on a distc server, WAIT, MULTI_GET).
    // Its keys are kept as they came on the wire (a uint64 length and the bytes
    // each), which costs no more than the request did, however many keys it names.
    bool blocked = false;
    wire::Op blocked_op = wire::Op::Invalid;
    uint64_t blocked_count = 0;
    Bytes blocked_keys;
    size_t cursor = 0;  // offset in blocked_keys of the first key not yet seen stored
    // The one key the request is registered on in waiters_, while it is.
    bool waiting = false;
    std::string waiting_on;
};

}  // namespace distc
