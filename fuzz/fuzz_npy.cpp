// libFuzzer target: .npy bytes -> the reader (header dict, shape tuple, sizes). Every malformed file is an error.
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = kiln::ParseNpy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  kiln::fuzz::CheckError(t.status(), "ParseNpy");
  return 0;
}
