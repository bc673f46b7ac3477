/* A Rust panic inside the library becomes EMBD_STATUS_INTERNAL_PANIC at the
 * boundary (never an unwind into C, never an abort); the library stays usable.
 * Needs the cargo feature test-panic (CMake: -DEMBEDDER_TEST_PANIC=ON). */
#define EMBD_TEST_PANIC 1
#include "embedder.h"
#include "check.h"

int main(void) {
    int i;
    for (i = 0; i < 3; i++) {
        embd_options *o;
        CHECK_ST(embd_test_panic(), EMBD_STATUS_INTERNAL_PANIC, "deliberate panic");
        CHECK(strstr(embd_last_error(), "embd_test_panic") != NULL);
        o = embd_options_new();
        CHECK(o != NULL);
        CHECK_ST(embd_options_set_threads(o, 1), EMBD_STATUS_OK, NULL);
        embd_options_free(o);
    }
    return check_done("panic");
}
