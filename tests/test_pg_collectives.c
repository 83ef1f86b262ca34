/*
 * Collective correctness with threads as ranks (util/pg_harness.h): every
 * collective of distc/pg.h x every dtype x every reduce op x every root, for
 * world sizes 1 to 4, against results computed here. Inputs are small
 * integers (and halves for floating types) so that results are exact.
 *
 * The tests are in pg_collectives/, by what they cover: reductions.c,
 * movement.c (data movement and the barrier), p2p.c and layouts.c, on the
 * reduce ops, inputs and expected values of expect.c. This file runs them.
 */
#include "test_util.h"

#include "pg_collectives/tests.h"

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_allreduce_avg_int_truncates),
        cmocka_unit_test(test_allreduce_coalesced),
        cmocka_unit_test(test_reduce_paths),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_allgather),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_scatter),
        cmocka_unit_test(test_reduce_scatter),
        cmocka_unit_test(test_alltoall),
        cmocka_unit_test(test_alltoall_single_even),
        cmocka_unit_test(test_alltoall_single_uneven),
        cmocka_unit_test(test_alltoall_single_torch_example),
        cmocka_unit_test(test_barrier),
        cmocka_unit_test(test_send_recv_ring),
        cmocka_unit_test(test_p2p_tags_out_of_order),
        cmocka_unit_test(test_p2p_irecv_then_isend),
        cmocka_unit_test(test_recv_any_source),
        cmocka_unit_test(test_zero_elements),
        cmocka_unit_test(test_two_dim),
        cmocka_unit_test(test_byte_offset),
        cmocka_unit_test(test_strides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
