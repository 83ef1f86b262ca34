/**
 * @file distc/version.h
 * @brief Compile-time and run-time versions.
 */
#ifndef DISTC_VERSION_H
#define DISTC_VERSION_H

#include "common.h"

/** The major version of these headers; the SONAME carries it (libdistc.so.0). */
#define DISTC_VERSION_MAJOR 0
/** The minor version of these headers. */
#define DISTC_VERSION_MINOR 1
/** The patch version of these headers. */
#define DISTC_VERSION_PATCH 0
/** The version of these headers as "MAJOR.MINOR.PATCH". */
#define DISTC_VERSION_STRING "0.1.0"

/** The version as one comparable number: major * 10000 + minor * 100 + patch. */
#define DISTC_VERSION_NUMBER (DISTC_VERSION_MAJOR * 10000 + DISTC_VERSION_MINOR * 100 + DISTC_VERSION_PATCH)

/** True when the headers are at least version a.b.c. */
#define DISTC_VERSION_CHECK(a, b, c) (DISTC_VERSION_NUMBER >= ((a)*10000 + (b)*100 + (c)))

DISTC_BEGIN_DECL

/**
 * The version of the loaded library as "MAJOR.MINOR.PATCH"; never NULL.
 * @return a static string, which may differ from the headers' DISTC_VERSION_STRING.
 */
DISTC_EXTERN(const char *) distc_version(void);

/**
 * The version of the loaded library as DISTC_VERSION_NUMBER computes it.
 * @return major * 10000 + minor * 100 + patch of the loaded library.
 */
DISTC_EXTERN(uint32_t) distc_version_number(void);

DISTC_END_DECL

#endif /* DISTC_VERSION_H */
