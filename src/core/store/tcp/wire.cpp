#include "core/store/tcp/wire.hpp"

#include "core/util/error.hpp"

namespace distc::wire {

namespace {
// Index = wire byte.
constexpr Op kTorch1[] = {Op::Set,  Op::CompareSet, Op::Get,      Op::Add,      Op::Check,
                          Op::Wait, Op::NumKeys,    Op::WatchKey, Op::DeleteKey};
constexpr Op kTorch2[] = {Op::Validate, Op::Set,      Op::CompareSet, Op::Get,       Op::Add,
                          Op::Check,    Op::Wait,     Op::NumKeys,    Op::DeleteKey, Op::Append,
                          Op::MultiGet, Op::MultiSet, Op::CancelWait, Op::Ping};
}  // namespace

Op decode_op(Dialect d, uint8_t byte) {
    if (byte == kHello) return Op::Hello;
    if (byte == kAuth) return Op::Auth;
    if (d == Dialect::Torch1) return byte < std::size(kTorch1) ? kTorch1[byte] : Op::Invalid;
    return byte < std::size(kTorch2) ? kTorch2[byte] : Op::Invalid;
}

uint8_t encode_op(Dialect d, Op op) {
    if (op == Op::Hello) return kHello;
    if (op == Op::Auth) return kAuth;
    const Op *t = d == Dialect::Torch1 ? kTorch1 : kTorch2;
    size_t n = d == Dialect::Torch1 ? std::size(kTorch1) : std::size(kTorch2);
    for (size_t i = 0; i < n; ++i)
        if (t[i] == op) return static_cast<uint8_t>(i);
    fail(DISTC_ENOTSUP, std::string("the server's protocol has no ") + op_name(op) + " query");
}

const char *op_name(Op op) {
    switch (op) {
        case Op::Set: return "SET";
        case Op::CompareSet: return "COMPARE_SET";
        case Op::Get: return "GET";
        case Op::Add: return "ADD";
        case Op::Check: return "CHECK";
        case Op::Wait: return "WAIT";
        case Op::NumKeys: return "GETNUMKEYS";
        case Op::WatchKey: return "WATCH_KEY";
        case Op::DeleteKey: return "DELETE_KEY";
        case Op::Append: return "APPEND";
        case Op::MultiGet: return "MULTI_GET";
        case Op::MultiSet: return "MULTI_SET";
        case Op::CancelWait: return "CANCEL_WAIT";
        case Op::Ping: return "PING";
        case Op::Validate: return "VALIDATE";
        case Op::Hello: return "HELLO";
        case Op::Auth: return "AUTH";
        default: return "INVALID";
    }
}

Digest auth_mac(const std::string &token, const uint8_t *nonce) {
    uint8_t msg[sizeof kAuthLabel - 1 + kNonceSize];
    std::memcpy(msg, kAuthLabel, sizeof kAuthLabel - 1);
    std::memcpy(msg + sizeof kAuthLabel - 1, nonce, kNonceSize);
    return hmac_sha256(token.data(), token.size(), msg, sizeof msg);
}

}  // namespace distc::wire
