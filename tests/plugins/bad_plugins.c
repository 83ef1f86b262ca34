/*
 * Plugin libraries that must fail to load, each with a clear message; one
 * source, built once per defect (test_backend_plugin loads them):
 *   BAD_VERSION    a vtable of a future ABI version
 *   REFUSE         an init that refuses to start
 *   NO_INIT        no distc_backend_plugin_init at all
 *   NEEDS_MISSING  linked against a library that is not installed
 */
#include <distc.h>

#ifdef NEEDS_MISSING
int distc_test_gone_value(void);
int distc_test_touch_gone(void) { return distc_test_gone_value(); }
#endif

#ifndef NO_INIT
static int never_create(void **g, const distc_backend_group_info *i, void *p) {
    (void)g, (void)i, (void)p;
    return distc_error_set(DISTC_EBACKEND, "never");
}
static void never_destroy(void *g) { (void)g; }

static distc_backend_ops g_ops = {
    .version = DISTC_BACKEND_OPS_VERSION,
    .device_types = DISTC_DEVICE_BIT(kDLCPU),
    .create = never_create,
    .destroy = never_destroy,
};

DISTC_EXTERN(int) distc_backend_plugin_init(const distc_backend_ops **ops, void **payload, unsigned int core_version);
DISTC_EXTERN(int) distc_backend_plugin_init(const distc_backend_ops **ops, void **payload, unsigned int core_version) {
    (void)core_version;
#ifdef REFUSE
    (void)ops, (void)payload;
    return distc_error_set(DISTC_EBACKEND, "no engine device found (test plugin refuses)");
#else
#ifdef BAD_VERSION
    g_ops.version = DISTC_BACKEND_OPS_VERSION + 7;
#endif
    *ops = &g_ops;
    *payload = 0;
    return 0;
#endif
}
#else
int distc_test_not_a_plugin(void) { return 1; }
#endif
