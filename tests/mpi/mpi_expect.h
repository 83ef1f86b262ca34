/*
 * What the mpi test programs that own MPI (not the cmocka suites) check
 * with: expect() counts a call that did not return `code` with `needle`
 * in distc's last error (NULL: any message), naming `what` on stderr; the
 * program exits with mpi_fails != 0. mpi_group() makes an mpi:// group
 * (NULL, counted and named, when it cannot).
 */
#ifndef DISTC_TESTS_MPI_EXPECT_H
#define DISTC_TESTS_MPI_EXPECT_H

#include <stdio.h>
#include <string.h>

#include <distc.h>

static int mpi_fails = 0;

static inline void expect(int rc, int code, const char *needle, const char *what) {
    if (rc == code && (!needle || strstr(distc_error_last(), needle))) return;
    fprintf(stderr, "%s: got %d (%s), expected %d with \"%s\"\n", what, rc, distc_error_last(), code,
            needle ? needle : "");
    ++mpi_fails;
}

static inline distc_pg_options mpi_options(int64_t timeout_ms, int debug) {
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "mpi";
    o.timeout_ms = timeout_ms;
    o.debug = debug;
    return o;
}

static inline distc_pg *mpi_group(int64_t timeout_ms, int debug) {
    distc_pg_options o = mpi_options(timeout_ms, debug);
    distc_pg *pg = NULL;
    if (distc_pg_new_from_url(&pg, "mpi://", NULL, &o) != 0) {
        fprintf(stderr, "group: %s\n", distc_error_last());
        ++mpi_fails;
    }
    return pg;
}

#endif
