/* JSON output shared by the benchmark workers (one object per line for the drivers). */
#ifndef DISTC_BENCH_JSON_OUT_H
#define DISTC_BENCH_JSON_OUT_H

#include <stdio.h>

/* Prints `s` as a JSON string: quotes and backslashes escaped, control characters dropped. */
static inline void print_json_str(const char *s) {
    putchar('"');
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\') putchar('\\');
        if ((unsigned char)*s >= 0x20) putchar(*s);
    }
    putchar('"');
}

#endif
