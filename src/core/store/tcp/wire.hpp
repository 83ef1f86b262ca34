// The TCPStore wire protocol, as PyTorch speaks it, plus distc's handshake.
//
// Every message is a one-byte query type followed by native-endian (x86-64:
// little-endian) fields: strings and byte vectors as a uint64 length and the
// bytes, counts as uint64, counters as int64. Two numberings exist:
// - PyTorch 1.x: SET=0 ... DELETE_KEY=8, no handshake.
// - PyTorch 2.x: VALIDATE=0 (+ uint32 magic) first, then SET=1 ... PING=13.
// distc clients open with HELLO (0x40, an opcode neither PyTorch knows, so a
// PyTorch server drops the connection and the client falls back) and then use
// the 2.x numbering; on a distc server a GET waits for its key, which saves
// the WAIT round trip PyTorch clients make first.
//
// HELLO carries the client's version and the server answers with the one both
// speak (the lower). From version 2 on, the replies to ADD and MULTI_GET start
// with a status byte: kStatusOk and the reply, or kStatusError, an int32 distc
// error code, a uint32 length and a message; the connection stays usable.
// PyTorch's dialects have no error reply: the server drops the connection.
//
// From version 3 on, HELLO's reply goes on with the server's max_request_bytes
// (uint64) and a uint8 that says whether it requires a token. If it does, a
// 32-byte random nonce follows, and the client's next message is AUTH: a uint8
// (1: a MAC follows; 0: the client has no token) and HMAC-SHA256(token,
// kAuthLabel || nonce), so the token never crosses the wire. The server answers
// with a status byte; after an error it closes the connection.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/store/store.hpp"
#include "core/util/sha256.hpp"

namespace distc::wire {

constexpr uint32_t kTorchMagic = 0x3C85F7CE;
constexpr uint32_t kDistcMagic = 0x43545344;  // "DSTC"
constexpr uint32_t kDistcVersion = 3;
constexpr uint8_t kHello = 0x40, kAuth = 0x41;
constexpr char kAuthLabel[] = "distc-store-auth-v1";
constexpr size_t kNonceSize = 32;
constexpr uint8_t kStatusOk = 0, kStatusError = 1;
constexpr uint32_t kMaxErrorMessage = 1024;  // longer messages are cut

// Query types independent of numbering.
enum class Op : uint8_t {
    Set,
    CompareSet,
    Get,
    Add,
    Check,
    Wait,
    NumKeys,
    WatchKey,
    DeleteKey,
    Append,
    MultiGet,
    MultiSet,
    CancelWait,
    Ping,
    Validate,
    Hello,
    Auth,
    Invalid
};

enum class Dialect : uint8_t { Torch1, Torch2 };  // distc clients speak Torch2 + HELLO

Op decode_op(Dialect d, uint8_t byte);
uint8_t encode_op(Dialect d, Op op);  // throws DISTC_ENOTSUP for ops the dialect lacks
const char *op_name(Op op);
// The MAC an AUTH carries: HMAC-SHA256(token, kAuthLabel || nonce).
Digest auth_mac(const std::string &token, const uint8_t *nonce);

constexpr uint8_t kCheckReady = 0, kCheckNotReady = 1;
constexpr uint8_t kStopWaiting = 0, kWaitCanceled = 1;

// Builds one message.
class Writer {
public:
    explicit Writer(uint8_t op) { buf_.push_back(op); }
    Writer() = default;
    Writer &u8(uint8_t v) { return raw(&v, 1); }
    Writer &u32(uint32_t v) { return raw(&v, 4); }
    Writer &u64(uint64_t v) { return raw(&v, 8); }
    Writer &i64(int64_t v) { return raw(&v, 8); }
    Writer &bytes(ByteView v) { return u64(v.size).raw(v.data, v.size); }
    Writer &str(const std::string &s) { return u64(s.size()).raw(s.data(), s.size()); }
    // A version-2 error reply (see above).
    Writer &error(int code, const std::string &msg) {
        uint32_t n = static_cast<uint32_t>(std::min<size_t>(msg.size(), kMaxErrorMessage));
        return u8(kStatusError).u32(static_cast<uint32_t>(code)).u32(n).raw(msg.data(), n);
    }
    Writer &raw(const void *p, size_t n) {
        auto *c = static_cast<const uint8_t *>(p);
        buf_.insert(buf_.end(), c, c + n);
        return *this;
    }
    const std::vector<uint8_t> &buf() const { return buf_; }
    std::vector<uint8_t> &buf() { return buf_; }

private:
    std::vector<uint8_t> buf_;
};

// Parses from a byte range that may hold only part of a message: every read
// sets `short_` instead of running past the end, and lengths over the limit
// set `bad_`, so a peer can never make us allocate what it did not send.
class Reader {
public:
    Reader(const uint8_t *p, size_t n) : p_(p), n_(n) {}
    bool ok() const { return !short_ && !bad_; }
    bool incomplete() const { return short_ && !bad_; }
    bool bad() const { return bad_; }
    size_t consumed() const { return off_; }
    const uint8_t *here() const { return p_ + off_; }
    bool at_end() const { return off_ == n_; }

    uint8_t u8() { return pod<uint8_t>(); }
    uint32_t u32() { return pod<uint32_t>(); }
    uint64_t u64() { return pod<uint64_t>(); }
    void raw(void *out, size_t n) {
        if (!ok()) return;
        if (n_ - off_ < n) {
            short_ = true;
            return;
        }
        std::memcpy(out, p_ + off_, n);
        off_ += n;
    }
    int64_t i64() { return pod<int64_t>(); }
    // A length-prefixed field: checked against the limit before anything is copied.
    ByteView view() {
        uint64_t len = u64();
        if (!ok()) return {};
        if (len > DISTC_STORE_MAX_VALUE_SIZE) {
            bad_ = true;
            return {};
        }
        if (n_ - off_ < len) {
            short_ = true;
            return {};
        }
        ByteView v(p_ + off_, len);
        off_ += len;
        return v;
    }
    std::string str() {
        ByteView v = view();
        return std::string(reinterpret_cast<const char *>(v.data), v.size);
    }
    // A count of following items; each takes at least 8 bytes, so bound it by what could fit.
    uint64_t count() {
        uint64_t c = u64();
        if (ok() && c > DISTC_STORE_MAX_VALUE_SIZE / 8) bad_ = true;
        return c;
    }

private:
    template <typename T>
    T pod() {
        T v{};
        if (!ok()) return v;
        if (n_ - off_ < sizeof(T)) {
            short_ = true;
            return v;
        }
        std::memcpy(&v, p_ + off_, sizeof(T));
        off_ += sizeof(T);
        return v;
    }
    const uint8_t *p_;
    size_t n_;
    size_t off_ = 0;
    bool short_ = false, bad_ = false;
};

}  // namespace distc::wire
