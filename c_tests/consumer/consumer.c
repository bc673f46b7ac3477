/* Consumer of the installed package: header and library agree. */
#include <embedder.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    embd_model *m = NULL;
    embd_status st = embd_open("/nonexistent/model.weights", NULL, &m);
    if (embd_version_number() != EMBD_VERSION_NUMBER || strcmp(embd_version(), EMBD_VERSION_STRING) != 0) {
        fprintf(stderr, "header/library version mismatch\n");
        return 1;
    }
    if (st == EMBD_STATUS_OK || m != NULL || embd_last_error()[0] == '\0') {
        fprintf(stderr, "embd_open on a missing file did not fail cleanly\n");
        return 1;
    }
    printf("consumer: embedder %s, open(missing) -> %s\n", embd_version(), embd_status_str(st));
    return 0;
}
