/* Helpers shared by the cmocka tests. */
#ifndef DISTC_TEST_UTIL_H
#define DISTC_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <distc.h>

/* Asserts that a distc call succeeded, printing the library's message if not. */
#define ASSERT_OK(expr)                                                                                   \
    do {                                                                                                  \
        int rc_ = (expr);                                                                                 \
        if (rc_ != 0) fail_msg("%s -> %d (%s): %s", #expr, rc_, distc_strerror(rc_), distc_error_last()); \
    } while (0)

/* Asserts that a distc call failed with `code` and left a message containing `needle`. */
#define ASSERT_ERR(expr, code, needle)                                                                         \
    do {                                                                                                       \
        int rc_ = (expr);                                                                                      \
        if (rc_ != (code)) fail_msg("%s -> %d, expected %d: %s", #expr, rc_, (int)(code), distc_error_last()); \
        dt_assert_contains(distc_error_last(), (needle));                                                      \
    } while (0)

void dt_assert_contains(const char *haystack, const char *needle);

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int dt_free_port(void);

/* A fresh temporary file path (the file does not exist); caller frees. */
char *dt_temp_path(const char *tag);

/*
 * Runs fn(rank, n, arg) in n forked child processes and waits for all of
 * them (killing any still alive after timeout_s). Returns the number of
 * children that did not exit with status 0. Child failures are printed.
 */
typedef int (*dt_child_fn)(int rank, int n, void *arg);
int dt_run_procs(int n, dt_child_fn fn, void *arg, int timeout_s);

/* Creates a TCP store server on 127.0.0.1 (free port), with timeout_ms. */
distc_store *dt_tcp_server(int32_t *port, int64_t timeout_ms);
/* Creates a TCP store client of 127.0.0.1:port. */
distc_store *dt_tcp_client(int32_t port, int64_t timeout_ms);

/* Monotonic milliseconds. */
int64_t dt_now_ms(void);

/* This process's address space in bytes (VmSize), for an RLIMIT_AS above it. */
uint64_t dt_vm_size(void);

/* Sets DISTC_SHM_CORES to `cores` for the ranks started after it (a host
 * with a core per rank takes the collectives' rounds and trees), saving
 * what it was in `saved` (at least 32 bytes; "" when unset), and puts that
 * back: dt_cores_say(saved, "64"); ...; dt_cores_restore(saved). */
void dt_cores_say(char *saved, const char *cores);
void dt_cores_restore(const char *saved);

#endif
