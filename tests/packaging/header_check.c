/* Compiled by headers.sh as C99 (-pedantic) and as C++17: the public headers
 * must build warning-free in both, and their macros must expand in both. */
#include <distc.h>
#include <distc.h> /* include guards */

#include <stdio.h>

#if !DISTC_VERSION_CHECK(0, 1, 0)
#error "DISTC_VERSION_CHECK(0, 1, 0) is false"
#endif
#if DISTC_VERSION_NUMBER != DISTC_VERSION_MAJOR * 10000 + DISTC_VERSION_MINOR * 100 + DISTC_VERSION_PATCH
#error "DISTC_VERSION_NUMBER does not match its parts"
#endif

static int set_cb(void *payload, const char *key, const void *value, size_t len) {
    (void)payload;
    (void)key;
    (void)value;
    (void)len;
    return DISTC_ENOTSUP;
}

int main(void) {
    distc_tcp_store_options topts = DISTC_TCP_STORE_OPTIONS_INIT;
    distc_rendezvous_options ropts = DISTC_RENDEZVOUS_OPTIONS_INIT;
    distc_store_vtable vt = {
        DISTC_STORE_VTABLE_VERSION, set_cb, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    distc_buf buf = {NULL, 0};
    distc_status st = DISTC_OK;
    distc_tcp_protocol proto = DISTC_TCP_PROTOCOL_AUTO;
    distc_store *store = NULL;
    uint64_t limit = DISTC_STORE_MAX_VALUE_SIZE;
    int64_t timeout = DISTC_TIMEOUT_DEFAULT + DISTC_STORE_DEFAULT_TIMEOUT_MS;
    printf("%u %u %u %d %d %p %p %zu %llu %lld %s\n", topts.version, ropts.version, vt.version, (int)st, (int)proto,
           (void *)store, (void *)buf.data, buf.size, (unsigned long long)limit, (long long)timeout,
           DISTC_VERSION_STRING);
    return 0;
}
