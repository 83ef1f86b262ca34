/* test_custom_store's store (cstore.h): its entries, its callbacks with every
 * call counted and failures injected, and three vtables that offer more or less. */
#define _GNU_SOURCE
#include "cstore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"

/* ------------------------------------------------------------------------ */
/* The test's store: an array of entries under a mutex, waiters on a condvar. */

struct cstore *cstore_new(int *free_count) {
    struct cstore *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &a);
    pthread_condattr_destroy(&a);
    c->fail_op = -1;
    c->free_count = free_count;
    return c;
}

void cs_free(void *payload) {
    struct cstore *c = payload;
    if (c->free_count) ++*c->free_count;
    for (size_t i = 0; i < c->n; ++i) {
        free(c->e[i].key);
        free(c->e[i].val);
    }
    free(c->e);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Called with mu held: counts the call and applies any injected failure. */
static int enter(struct cstore *c, int op) {
    ++c->calls[op];
    if (c->fail_op == op) {
        c->fail_op = -1;
        if (c->fail_msg) return distc_error_set(c->fail_code, c->fail_msg);
        return c->fail_code;
    }
    return 0;
}

struct entry *find(struct cstore *c, const char *key) {
    for (size_t i = 0; i < c->n; ++i)
        if (strcmp(c->e[i].key, key) == 0) return &c->e[i];
    return NULL;
}

static void put(struct cstore *c, const char *key, const void *v, size_t len) {
    struct entry *e = find(c, key);
    if (!e) {
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 16;
            c->e = realloc(c->e, c->cap * sizeof *c->e);
        }
        e = &c->e[c->n++];
        e->key = strdup(key);
    } else {
        free(e->val);
    }
    e->val = malloc(len ? len : 1);
    if (len) memcpy(e->val, v, len);
    e->len = len;
    pthread_cond_broadcast(&c->cv);
}

static struct timespec deadline_after(int64_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Waits (mu held) until every key exists; returns the first missing key on timeout, else NULL. */
static const char *wait_keys(struct cstore *c, const char *const *keys, size_t n, int64_t timeout_ms) {
    struct timespec dl = deadline_after(timeout_ms);
    for (;;) {
        const char *missing = NULL;
        for (size_t i = 0; i < n && !missing; ++i)
            if (!find(c, keys[i])) missing = keys[i];
        if (!missing) return NULL;
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT) {
            for (size_t i = 0; i < n; ++i)
                if (!find(c, keys[i])) return keys[i];
            return NULL;
        }
    }
}

static int timeout_error(const char *key) {
    char msg[256];
    snprintf(msg, sizeof msg, "key '%s' did not appear in the custom store", key);
    return distc_error_set(DISTC_ETIMEOUT, msg);
}

#define LOCKED(c, op)           \
    struct cstore *c = payload; \
    pthread_mutex_lock(&c->mu); \
    int rc = enter(c, op);      \
    if (rc != 0) goto out;

#define UNLOCK(c)                 \
    out:                          \
    pthread_mutex_unlock(&c->mu); \
    return rc

static int cs_set(void *payload, const char *key, const void *value, size_t len) {
    LOCKED(c, OP_SET)
    put(c, key, value, len);
    UNLOCK(c);
}

static int cs_get(void *payload, const char *key, int64_t timeout_ms, distc_buf *outb) {
    LOCKED(c, OP_GET)
    if (wait_keys(c, &key, 1, timeout_ms)) {
        rc = timeout_error(key);
        goto out;
    }
    struct entry *e = find(c, key);
    rc = distc_buf_set(outb, e->val, e->len);
    UNLOCK(c);
}

static int parse_i64(const struct entry *e, int64_t *v) {
    char buf[32];
    if (e->len == 0 || e->len >= sizeof buf) return 0;
    memcpy(buf, e->val, e->len);
    buf[e->len] = '\0';
    if (strlen(buf) != e->len) return 0;
    char *end;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno || *end) return 0;
    *v = x;
    return 1;
}

int cs_add(void *payload, const char *key, int64_t delta, int64_t *outv) {
    LOCKED(c, OP_ADD)
    int64_t v = 0;
    struct entry *e = find(c, key);
    if (e && !parse_i64(e, &v)) {
        rc = distc_error_set(DISTC_EINVAL, "value is not an integer");
        goto out;
    }
    if (__builtin_add_overflow(v, delta, &v)) {
        rc = distc_error_set(DISTC_EINVAL, "counter overflow");
        goto out;
    }
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", (long long)v);
    put(c, key, text, (size_t)n);
    *outv = v;
    UNLOCK(c);
}

static int cs_compare_set(void *payload, const char *key, const void *expected, size_t expected_len,
                          const void *desired, size_t desired_len, distc_buf *outb) {
    LOCKED(c, OP_CAS)
    struct entry *e = find(c, key);
    if (!e) {
        if (expected_len == 0) {
            put(c, key, desired, desired_len);
            rc = distc_buf_set(outb, desired, desired_len);
        } else {
            rc = distc_buf_set(outb, expected, expected_len);
        }
        goto out;
    }
    if (e->len == expected_len && (expected_len == 0 || memcmp(e->val, expected, expected_len) == 0))
        put(c, key, desired, desired_len);
    e = find(c, key);
    rc = distc_buf_set(outb, e->val, e->len);
    UNLOCK(c);
}

static int cs_check(void *payload, const char *const *keys, size_t n, int32_t *outv) {
    LOCKED(c, OP_CHECK)
    *outv = 1;
    for (size_t i = 0; i < n; ++i)
        if (!find(c, keys[i])) *outv = 0;
    UNLOCK(c);
}

static int cs_wait(void *payload, const char *const *keys, size_t n, int64_t timeout_ms) {
    LOCKED(c, OP_WAIT)
    const char *missing = wait_keys(c, keys, n, timeout_ms);
    if (missing) rc = timeout_error(missing);
    UNLOCK(c);
}

static int cs_delete_key(void *payload, const char *key, int32_t *outv) {
    LOCKED(c, OP_DELETE)
    struct entry *e = find(c, key);
    *outv = e != NULL;
    if (e) {
        free(e->key);
        free(e->val);
        *e = c->e[--c->n];
    }
    UNLOCK(c);
}

static int cs_num_keys(void *payload, int64_t *outv) {
    LOCKED(c, OP_NUM_KEYS)
    *outv = (int64_t)c->n;
    UNLOCK(c);
}

static int cs_append(void *payload, const char *key, const void *value, size_t len) {
    LOCKED(c, OP_APPEND)
    struct entry *e = find(c, key);
    size_t old = e ? e->len : 0;
    uint8_t *v = malloc(old + len + 1);
    if (old) memcpy(v, e->val, old);
    if (len) memcpy(v + old, value, len);
    put(c, key, v, old + len);
    free(v);
    UNLOCK(c);
}

static int cs_multi_get(void *payload, const char *const *keys, size_t n, int64_t timeout_ms, distc_buf *outb) {
    LOCKED(c, OP_MULTI_GET)
    const char *missing = wait_keys(c, keys, n, timeout_ms);
    if (missing) {
        /* Hand back a partial result first: distc must release it. */
        if (n > 0 && find(c, keys[0])) distc_buf_set(&outb[0], "partial", 7);
        rc = timeout_error(missing);
        goto out;
    }
    for (size_t i = 0; i < n && rc == 0; ++i) {
        struct entry *e = find(c, keys[i]);
        rc = distc_buf_set(&outb[i], e->val, e->len);
    }
    UNLOCK(c);
}

static int cs_multi_set(void *payload, const char *const *keys, const void *const *values, const size_t *lens,
                        size_t n) {
    LOCKED(c, OP_MULTI_SET)
    for (size_t i = 0; i < n; ++i) put(c, keys[i], values[i], lens[i]);
    UNLOCK(c);
}

const distc_store_vtable full_vt = {
    DISTC_STORE_VTABLE_VERSION,
    cs_set,
    cs_get,
    cs_add,
    cs_compare_set,
    cs_check,
    cs_wait,
    cs_delete_key,
    cs_num_keys,
    cs_append,
    cs_multi_get,
    cs_multi_set,
    cs_free,
};

const distc_store_vtable emulated_vt = {
    DISTC_STORE_VTABLE_VERSION,
    cs_set,
    cs_get,
    cs_add,
    cs_compare_set,
    cs_check,
    NULL,
    cs_delete_key,
    cs_num_keys,
    NULL,
    NULL,
    NULL,
    cs_free,
};

const distc_store_vtable minimal_vt = {
    DISTC_STORE_VTABLE_VERSION, cs_set, cs_get, cs_add, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, cs_free,
};

distc_store *make(const distc_store_vtable *vt, struct cstore **payload, int *free_count) {
    struct cstore *c = cstore_new(free_count);
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_custom(&s, vt, c));
    if (payload) *payload = c;
    return s;
}

int calls(struct cstore *c, int op) {
    pthread_mutex_lock(&c->mu);
    int n = c->calls[op];
    pthread_mutex_unlock(&c->mu);
    return n;
}

void inject(struct cstore *c, int op, int code, const char *msg) {
    pthread_mutex_lock(&c->mu);
    c->fail_op = op;
    c->fail_code = code;
    c->fail_msg = msg;
    pthread_mutex_unlock(&c->mu);
}
