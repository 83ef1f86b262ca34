/*
 * A byte count from a command line, the one way every tool and benchmark
 * reads one (-b 8, -e 64M, --max-request 1.5G): a number, an optional binary
 * suffix K, M or G (either case) and an optional B. Header-only, C and C++.
 */
#ifndef DISTC_TOOLS_SIZE_ARG_H
#define DISTC_TOOLS_SIZE_ARG_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* 0 and *out set; -1 when malformed, negative or over 2^62 bytes. */
static inline int size_arg(const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0)) return -1;
    double m = 1;
    if (*end == 'k' || *end == 'K')
        m = 1024.0, ++end;
    else if (*end == 'm' || *end == 'M')
        m = 1024.0 * 1024.0, ++end;
    else if (*end == 'g' || *end == 'G')
        m = 1024.0 * 1024.0 * 1024.0, ++end;
    if (*end == 'b' || *end == 'B') ++end;
    if (*end || v * m > 4611686018427387904.0) return -1;
    *out = (uint64_t)(v * m);
    return 0;
}

/* The same for a program without its own usage text: a malformed or zero count exits 2, naming it. */
static inline uint64_t size_arg_or_exit(const char *s) {
    uint64_t v;
    if (size_arg(s, &v) || v == 0) {
        fprintf(stderr, "not a byte count: %s\n", s);
        exit(2);
    }
    return v;
}

#endif
