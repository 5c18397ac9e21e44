// kiln — the public API in one include.
#pragma once

#include "kiln/builder.h"
#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/ops.h"
#include "kiln/profiler.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/types.h"
