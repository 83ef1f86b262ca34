// Element types and reduction kernels (src/core/pg/types.hpp): names and
// sizes, which (dtype, op) pairs are defined, every kernel against a
// reference, float16/bfloat16 rounding, and scale_in_place.
//
// The parts are in reduce_kernels/: reference.cpp, matrix.cpp, integers.cpp,
// floating.cpp, half.cpp and scale.cpp; this file runs them.
#include <cstdarg>
#include <cstddef>
#include <csetjmp>
#include <cstdint>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

#include "reduce_kernels/tests.hpp"

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_sizes),
        cmocka_unit_test(test_every_dtype_and_op),
        cmocka_unit_test(test_unsupported_messages),
        cmocka_unit_test(test_integer_ops_against_reference),
        cmocka_unit_test(test_integer_hand_picked),
        cmocka_unit_test(test_bool_ops),
        cmocka_unit_test(test_float_ops),
        cmocka_unit_test(test_float16_roundtrip),
        cmocka_unit_test(test_float16_rounding),
        cmocka_unit_test(test_float16_hand_picked),
        cmocka_unit_test(test_bfloat16_roundtrip),
        cmocka_unit_test(test_bfloat16_rounding),
        cmocka_unit_test(test_bfloat16_hand_picked),
        cmocka_unit_test(test_complex_sum),
        cmocka_unit_test(test_scale_float),
        cmocka_unit_test(test_scale_integer),
        cmocka_unit_test(test_scale_half_complex_bool),
        cmocka_unit_test(test_scale_long_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
