// Numbers and switches from the environment (src/core/util/env.hpp): what a
// variable takes is read as such, and anything else (junk, trailing junk, a
// negative, an overflow, out of range) gives the default, never a guess: once
// DISTC_SHM_POLLS=-1 became 4294967295 polls and a wait that never ended.
#include <cstdint>
#include <cstdlib>
#include <initializer_list>

#include "core/util/env.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::env_flag;
using distc::env_int;

namespace {

const char *const kVar = "DISTC_TEST_ENV_VALUE";

int64_t read_int(const char *value) {
    if (value)
        setenv(kVar, value, 1);
    else
        unsetenv(kVar);
    return env_int(kVar, 7, 0, 1000);
}

void test_numbers(void **) {
    assert_int_equal(read_int(nullptr), 7);
    assert_int_equal(read_int(""), 7);
    assert_int_equal(read_int("0"), 0);
    assert_int_equal(read_int("1000"), 1000);
    assert_int_equal(read_int("42"), 42);
    const char *bad[] = {"abc", "12abc", "-1", "1001", "99999999999999999999", "1e3", " ", "4294967295"};
    for (const char *b : bad) assert_int_equal(read_int(b), 7);
    setenv(kVar, "-5", 1);
    assert_int_equal(env_int(kVar, 0, -10, 10), -5);
    unsetenv(kVar);
}

bool read_flag(const char *value, bool dflt) {
    setenv(kVar, value, 1);
    bool v = env_flag(kVar, dflt);
    unsetenv(kVar);
    return v;
}

void test_switches(void **) {
    for (const char *on : {"1", "true", "ON", "Yes"}) assert_true(read_flag(on, false));
    for (const char *off : {"0", "false", "Off", "NO"}) assert_false(read_flag(off, true));
    assert_true(read_flag("", true));
    assert_true(read_flag("maybe", true));  // not a switch: the default
    assert_false(read_flag("2", false));
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_switches),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
