/* Two translation units both include the header (twice each) and link together. */
#include "embedder.h"
#include "embedder.h"
#include "cpp_embedder/c_api.h"

#include <stdio.h>

unsigned version_from_b(void);

int main(void) {
    if (version_from_b() != embd_version_number()) {
        fprintf(stderr, "double_include: mismatch\n");
        return 1;
    }
    printf("double_include: ok\n");
    return 0;
}
