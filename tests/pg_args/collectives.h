/* test_pg_args' bad arguments to the collectives (collectives.c), in rank
 * threads: every collective at every group size, and the root's lists. */
#ifndef DISTC_TEST_PG_ARGS_COLLECTIVES_H
#define DISTC_TEST_PG_ARGS_COLLECTIVES_H

#define MAX_SIZE 4
void test_bad_collective_args(void **state);
void test_bad_root_lists(void **state);

#endif
