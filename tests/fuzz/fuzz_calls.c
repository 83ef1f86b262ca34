/* The fuzzers' calls that pass enum arguments, made from C as a C caller
 * makes them: any int converts to a C enum type, which C++ code could not
 * do without undefined behaviour of its own. */
#include <distc.h>

int fuzz_allreduce(distc_pg *pg, DLTensor *t, int32_t op, const distc_op_options *o) {
    return distc_allreduce(NULL, pg, t, (distc_reduce_op)op, o);
}
