/* Process groups across real processes: rendezvous by URL, collectives, and
 * what survivors get when a rank dies, stalls, or when a rank aborts.
 *
 * The tests are in pg_processes/: collectives.c, hierarchy.c, failures.c
 * and sigpipe.c, on the jobs of job.c; this file runs them. */
#include "test_util.h"

#include "pg_processes/tests.h"

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_processes),
        cmocka_unit_test(test_four_processes),
        cmocka_unit_test(test_mixed_hosts),
        cmocka_unit_test(test_split_mismatch_across_hosts),
        cmocka_unit_test(test_hierarchy),
        cmocka_unit_test(test_segment_fails_everyone_on_tcp),
        cmocka_unit_test(test_killed_rank),
        cmocka_unit_test(test_rank_killed_mid_message),
        cmocka_unit_test(test_stalled_rank),
        cmocka_unit_test(test_abort_wakes_blocked_collective),
        cmocka_unit_test(test_library_threads_block_sigpipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
