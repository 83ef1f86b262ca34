/**
 * @file distc.h
 * @brief The umbrella header: everything public in distc.
 *
 * SWIG, bindgen and the Julia generator read this file.
 */
#ifndef DISTC_H
#define DISTC_H

#include "distc/common.h"
#include "distc/version.h"
#include "distc/errors.h"
#include "distc/store.h"
#include "distc/sys/store.h"
#include "distc/work.h"
#include "distc/pg.h"
#include "distc/sys/backend.h"
#include "distc/reducer.h"
#include "distc/mem.h"

#endif /* DISTC_H */
