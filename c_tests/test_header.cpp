// The headers compile alone as C++17 (-Wall -Wextra -Werror -pedantic), twice,
// and the version macros equal the runtime.
#include "embedder.h"
#include "embedder.h"
#include "cpp_embedder/embedder.hpp"
#include "cpp_embedder/embedder.hpp"
#include "cpp_embedder/model/embedder.hpp"
#include "cpp_embedder/bindings/c_api.h"
#include "embedder/reranker.hpp"
#include "embedder/reranker.hpp"

#include <cstdio>
#include <cstring>

static_assert(sizeof(embd_status) == 4, "embd_status is 32-bit");
static_assert(EMBD_STATUS_OK == 0, "OK is 0");
static_assert(sizeof(embd_precision) == 4, "embd_precision is 32-bit");
static_assert(EMBD_PRECISION_DEFAULT == 0 && EMBD_PRECISION_F32 == 1 && EMBD_PRECISION_BF16 == 2 &&
                  EMBD_PRECISION_INT8 == 3,
              "precision numbers");
static_assert(EMBD_VERSION_NUMBER == EMBD_VERSION_MAJOR * 1000000 + EMBD_VERSION_MINOR * 1000 + EMBD_VERSION_PATCH,
              "version formula");
static_assert(cpp_embedder::model::EMBEDDING_DIM == 384, "cpp_embedder constant");

int main() {
    int fails = 0;
    if (embd_version_number() != EMBD_VERSION_NUMBER) fails++;
    if (std::strcmp(embd_version(), EMBD_VERSION_STRING) != 0) fails++;
    const char* e = embd_last_error();
    if (e == nullptr) fails++;
    std::printf("header (C++ %ld): %s\n", static_cast<long>(__cplusplus), fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
