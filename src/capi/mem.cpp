#include "capi/guard.hpp"
#include "core/util/shared_memory.hpp"
#include "distc/mem.h"

using distc::capi::guard;
using distc::capi::require_ptr;

extern "C" {

DISTC_EXTERN(int) distc_mem_alloc(void **out, size_t bytes) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = nullptr;
        *out = distc::shared_alloc(bytes);
        return 0;
    });
}

DISTC_EXTERN(int) distc_mem_free(void *ptr) {
    return guard(__func__, [&] {
        distc::shared_free(ptr);
        return 0;
    });
}

}  // extern "C"
