// test_reduce_kernels' tests, by the part of tests/reduce_kernels/ that holds
// them; main (tests/test_reduce_kernels.cpp) runs them in its own order.
#ifndef DISTC_TEST_REDUCE_KERNELS_TESTS_HPP
#define DISTC_TEST_REDUCE_KERNELS_TESTS_HPP

// matrix.cpp
void test_names_and_sizes(void **);
void test_every_dtype_and_op(void **);
void test_unsupported_messages(void **);

// integers.cpp
void test_integer_ops_against_reference(void **);
void test_integer_hand_picked(void **);
void test_bool_ops(void **);

// floating.cpp
void test_float_ops(void **);
void test_complex_sum(void **);

// half.cpp
void test_float16_roundtrip(void **);
void test_float16_rounding(void **);
void test_float16_hand_picked(void **);
void test_bfloat16_roundtrip(void **);
void test_bfloat16_rounding(void **);
void test_bfloat16_hand_picked(void **);

// scale.cpp
void test_scale_float(void **);
void test_scale_integer(void **);
void test_scale_half_complex_bool(void **);
void test_scale_long_inputs(void **);

#endif
