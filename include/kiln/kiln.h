// kiln — the public API in one include (the debug API, kiln/debug.h, and the formatting helper, kiln/error.h, are
// included on their own).
#pragma once

#include "kiln/backend.h"
#include "kiln/build_config_file.h"
#include "kiln/builder.h"
#include "kiln/calibrator.h"
#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/ops.h"
#include "kiln/profiler.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "kiln/types.h"
