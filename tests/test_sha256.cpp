// SHA-256 and HMAC-SHA256 (src/core/util/sha256.hpp) against the published
// vectors: FIPS 180-2's appendix B and RFC 4231's test cases.
#include <cstring>
#include <string>
#include <vector>

#include "core/util/sha256.hpp"

// After distc's headers: cmocka defines a fail() macro.
#include <cstdarg>
#include <cstddef>
#include <csetjmp>
#include <cstdint>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

namespace {

std::string hex(const distc::Digest &d, size_t n = 32) {
    static const char *x = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += x[d[i] >> 4];
        s += x[d[i] & 15];
    }
    return s;
}

std::string sha(const std::string &m) { return hex(distc::sha256(m.data(), m.size())); }

void test_fips_180_2(void **) {
    assert_string_equal(sha("abc").c_str(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_string_equal(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq").c_str(),
                        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    assert_string_equal(sha(std::string(1000000, 'a')).c_str(),
                        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    assert_string_equal(sha("").c_str(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    // Fed in pieces that straddle the 64-byte blocks: the same digest.
    std::string m(1000, 'q');
    distc::Sha256 h;
    for (size_t off = 0; off < m.size(); off += 37) h.update(m.data() + off, std::min<size_t>(37, m.size() - off));
    assert_string_equal(hex(h.finish()).c_str(), sha(m).c_str());
}

std::string hmac(const std::string &k, const std::string &m, size_t n = 32) {
    return hex(distc::hmac_sha256(k.data(), k.size(), m.data(), m.size()), n);
}

void test_rfc_4231(void **) {
    std::string k4;
    for (int i = 1; i <= 25; ++i) k4 += static_cast<char>(i);
    const std::string big_key(131, '\xaa');
    assert_string_equal(hmac(std::string(20, '\x0b'), "Hi There").c_str(),
                        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    assert_string_equal(hmac("Jefe", "what do ya want for nothing?").c_str(),
                        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    assert_string_equal(hmac(std::string(20, '\xaa'), std::string(50, '\xdd')).c_str(),
                        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    assert_string_equal(hmac(k4, std::string(50, '\xcd')).c_str(),
                        "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
    assert_string_equal(hmac(std::string(20, '\x0c'), "Test With Truncation", 16).c_str(),
                        "a3b6167473100ee06e0c796c2955552b");
    assert_string_equal(hmac(big_key, "Test Using Larger Than Block-Size Key - Hash Key First").c_str(),
                        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    assert_string_equal(hmac(big_key,
                             "This is a test using a larger than block-size key and a larger than "
                             "block-size data. The key needs to be hashed before being used by the "
                             "HMAC algorithm.")
                            .c_str(),
                        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

void test_digest_equal(void **) {
    distc::Digest a = distc::sha256("x", 1), b = a;
    assert_true(distc::digest_equal(a, b));
    b[31] ^= 1;
    assert_false(distc::digest_equal(a, b));
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_180_2),
        cmocka_unit_test(test_rfc_4231),
        cmocka_unit_test(test_digest_equal),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
