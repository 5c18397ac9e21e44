// Err (include/kiln/error.h: public), and fmt's range formatting for the messages built with it.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/error.h"
