#include "embedder.h"
#include "cpp_embedder/c_api.h"
#include "embedder.h"

unsigned version_from_b(void);

unsigned version_from_b(void) { return (unsigned)embd_version_number(); }
