/* What test_pg_work's files share: the helpers and callback state that
 * tests/test_pg_work.c defines and aborts.c uses too, and aborts.c's tests. */
#ifndef DISTC_TEST_PG_WORK_H
#define DISTC_TEST_PG_WORK_H

#include <pthread.h>
#include <stdint.h>

#include "pg_harness.h"

#define MAX_SIZE 4

void sleep_ms(int ms);
uint64_t seq_of(distc_work *w);
int64_t duration_of(distc_work *w);

struct cb_state {
    int calls;        /* atomic */
    pthread_t thread; /* where it ran */
    int status;       /* distc_work_test inside the callback */
    int32_t source;   /* distc_work_source_rank inside the callback */
    uint64_t seq;
    void *work_seen;
};

void on_done(distc_work *w, void *payload);

/* Waits up to 5 s for the callback count to reach `n` (the callback may run just after wait returns). */
int wait_calls(struct cb_state *s, int n);

/* aborts.c */
void test_work_timeout_then_abort(void **state);
void test_abort_wakes_blocking_call(void **state);
void test_op_timeout(void **state);
void test_group_timeout(void **state);

#endif
