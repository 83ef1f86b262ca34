/* test_pg_collectives' tests, by the part of tests/pg_collectives/ that holds
 * them; main (tests/test_pg_collectives.c) runs them in its own order. */
#ifndef DISTC_TEST_PG_COLLECTIVES_TESTS_H
#define DISTC_TEST_PG_COLLECTIVES_TESTS_H

/* reductions.c */
void test_allreduce(void **state);
void test_allreduce_avg_int_truncates(void **state);
void test_allreduce_coalesced(void **state);
void test_reduce_paths(void **state);
void test_reduce(void **state);
void test_reduce_scatter(void **state);

/* movement.c */
void test_broadcast(void **state);
void test_allgather(void **state);
void test_gather(void **state);
void test_scatter(void **state);
void test_alltoall(void **state);
void test_alltoall_single_even(void **state);
void test_alltoall_single_uneven(void **state);
void test_alltoall_single_torch_example(void **state);
void test_barrier(void **state);

/* p2p.c */
void test_send_recv_ring(void **state);
void test_p2p_tags_out_of_order(void **state);
void test_p2p_irecv_then_isend(void **state);
void test_recv_any_source(void **state);

/* layouts.c */
void test_zero_elements(void **state);
void test_two_dim(void **state);
void test_byte_offset(void **state);
void test_strides(void **state);

#endif
