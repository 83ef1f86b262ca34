/* A program outside the distc tree, built against an installed distc. */
#include <distc.h>

#include <stdio.h>
#include <string.h>

int main(void) {
    if (strcmp(distc_version(), DISTC_VERSION_STRING) != 0) {
        fprintf(stderr, "headers %s, library %s\n", DISTC_VERSION_STRING, distc_version());
        return 1;
    }
    distc_store *s = NULL;
    distc_buf b = {NULL, 0};
    if (distc_store_new_hash(&s) != 0 || distc_store_set(s, "greeting", "OK", 2) != 0 ||
        distc_store_get(&b, s, "greeting") != 0) {
        fprintf(stderr, "store: %s\n", distc_error_last());
        distc_store_free(s);
        return 1;
    }
    printf("%.*s %s\n", (int)b.size, (const char *)b.data, distc_version());
    distc_buf_dispose(&b);
    distc_store_free(s);
    return 0;
}
