/* test_pg_processes' tests, by the part of tests/pg_processes/ that holds
 * them; main (tests/test_pg_processes.c) runs them in its own order. */
#ifndef DISTC_TEST_PG_PROCESSES_TESTS_H
#define DISTC_TEST_PG_PROCESSES_TESTS_H

/* collectives.c */
void test_mixed_hosts(void **state);
void test_split_mismatch_across_hosts(void **state);
void test_segment_fails_everyone_on_tcp(void **state);
void test_two_processes(void **state);
void test_four_processes(void **state);

/* hierarchy.c */
void test_hierarchy(void **state);

/* failures.c */
void test_killed_rank(void **state);
void test_rank_killed_mid_message(void **state);
void test_stalled_rank(void **state);
void test_abort_wakes_blocked_collective(void **state);

/* sigpipe.c */
void test_library_threads_block_sigpipe(void **state);

#endif
