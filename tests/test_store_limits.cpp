// The 1 GiB limit on a value grown by append (core/store/store.hpp), which
// the hash, file and TCP stores and the emulated append share: checked here
// on sizes alone, since a real value that large would need over 1 GiB.
#include <cstdint>
#include <cstring>

#include "core/store/store.hpp"
#include "core/util/error.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::append_fits;

namespace {

const size_t kMax = DISTC_STORE_MAX_VALUE_SIZE;

void test_what_fits(void **) {
    assert_true(append_fits(0, 0));
    assert_true(append_fits(0, kMax));
    assert_true(append_fits(kMax - 1, 1));
    assert_true(append_fits(kMax, 0));
    assert_false(append_fits(1, kMax));
    assert_false(append_fits(kMax, 1));
    assert_false(append_fits(kMax / 2 + 1, kMax / 2));
    // Sums that would wrap around are not small.
    assert_false(append_fits(SIZE_MAX, 2));
    assert_false(append_fits(2, SIZE_MAX));
    assert_false(append_fits(kMax + 1, 0));
}

void test_refusal_names_the_key(void **) {
    distc::check_append("k", kMax - 4, 4);  // up to the limit: fine
    try {
        distc::check_append("config", kMax - 4, 5);
        fail_msg("an append past the limit was taken");
    } catch (const distc::Error &e) {
        assert_int_equal(e.code(), DISTC_ENOMEM);
        assert_non_null(std::strstr(e.what(), "key 'config'"));
        assert_non_null(std::strstr(e.what(), "1 GiB limit"));
    }
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_what_fits),
        cmocka_unit_test(test_refusal_names_the_key),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
