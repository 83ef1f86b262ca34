/* What the store suite's files (store_suite.c, store_suite/waits.c) share:
 * the store a test gets, and a thread that sets a key after a delay. */
#ifndef DISTC_STORE_SUITE_INTERNAL_H
#define DISTC_STORE_SUITE_INTERNAL_H

#include "store_suite.h"

#define STORE(state) ((distc_store *)*(state))

struct delayed_set {
    distc_store *s;
    const char *key;
    const char *value;
    int delay_ms;
};

void *delayed_set_fn(void *arg);

#endif
