/* test_custom_store's store (cstore.c): an array of entries under a mutex,
 * waiters on a condvar, behind distc/sys/store.h's vtable, with every call
 * counted and failures injected. */
#ifndef DISTC_TEST_CUSTOM_STORE_CSTORE_H
#define DISTC_TEST_CUSTOM_STORE_CSTORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <distc.h>

enum {
    OP_SET,
    OP_GET,
    OP_ADD,
    OP_CAS,
    OP_CHECK,
    OP_WAIT,
    OP_DELETE,
    OP_NUM_KEYS,
    OP_APPEND,
    OP_MULTI_GET,
    OP_MULTI_SET,
    OP_COUNT
};

struct entry {
    char *key;
    uint8_t *val;
    size_t len;
};

struct cstore {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct entry *e;
    size_t n, cap;
    int calls[OP_COUNT];
    /* Failure injection: the next call of fail_op returns fail_code (with fail_msg if non-NULL). */
    int fail_op;
    int fail_code;
    const char *fail_msg;
    int *free_count; /* incremented by the free callback */
};

struct cstore *cstore_new(int *free_count);
void cs_free(void *payload);
struct entry *find(struct cstore *c, const char *key);
int cs_add(void *payload, const char *key, int64_t delta, int64_t *outv);

extern const distc_store_vtable full_vt;
/* compare_set, check, delete_key and num_keys only: append, wait, multi_get
 * and multi_set are emulated by distc. */
extern const distc_store_vtable emulated_vt;
/* set, get and add only. */
extern const distc_store_vtable minimal_vt;

distc_store *make(const distc_store_vtable *vt, struct cstore **payload, int *free_count);
int calls(struct cstore *c, int op);
void inject(struct cstore *c, int op, int code, const char *msg);

#endif
