/* Original include path of cpp_embedder: forwards to <cpp_embedder/c_api.h>. */
#include "../c_api.h"
