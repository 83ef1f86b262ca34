// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the store's
// challenge-response authentication; small and dependency-free.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace distc {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
public:
    Sha256();
    Sha256 &update(const void *data, size_t n);
    Digest finish();  // the object is spent afterwards

private:
    void block(const uint8_t *p);
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t used_ = 0;
    uint64_t total_ = 0;
};

Digest sha256(const void *data, size_t n);
Digest hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len);
// Compares without an early exit, so the time taken tells nothing about where they differ.
bool digest_equal(const Digest &a, const Digest &b);

}  // namespace distc
