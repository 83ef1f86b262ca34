/* What test_backend_plugin's files share: the helpers tests/test_backend_plugin.c
 * defines and controlled.c uses too, and controlled.c's tests. */
#ifndef DISTC_TEST_BACKEND_PLUGIN_H
#define DISTC_TEST_BACKEND_PLUGIN_H

#include <distc.h>

distc_pg *new_group(const char *backend, int expect_rc, const char *needle);
DLTensor tensor_f32(float *data, int64_t *shape);
int ok_create(void **g, const distc_backend_group_info *info, void *payload);
void ok_destroy(void *g);

/* controlled.c */
void test_work_completed_by_backend(void **state);
void test_blocking_calls_completed_racing_thread_exit(void **state);
void test_backend_never_completes(void **state);
void test_stream_ordered_and_devices(void **state);

#endif
