// Compiled once per library build: the feature level that build exports.
#include "driver_internal.h"

#ifndef NNPIPE_NNAPI_BUILD_LEVEL
#error "NNPIPE_NNAPI_BUILD_LEVEL must be set by the build (27, 29 or 30)"
#endif

int nnpipe_driver::build_feature_level() { return NNPIPE_NNAPI_BUILD_LEVEL; }
