// libFuzzer target: timing cache text -> the reader; what it accepts must write and read back the same.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "backends/timing_cache_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = kiln::ParseTimingCache(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  kiln::fuzz::CheckError(c.status(), "ParseTimingCache");
  if (!c.ok()) return 0;
  auto again = kiln::ParseTimingCache(kiln::SerializeTimingCache(*c), "again.json");
  if (!again.ok() || again->entries.size() > c->entries.size()) {
    std::fprintf(stderr, "a timing cache kiln wrote does not read back: %s\n",
                 again.ok() ? "entry count" : again.status().message().c_str());
    std::abort();
  }
  return 0;
}
