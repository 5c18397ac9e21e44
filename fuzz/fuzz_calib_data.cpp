// libFuzzer target: INT8 calibration inputs. The first byte picks the reader: even -> a calibration cache
// (ParseCalibrationCache; what it accepts must write and read back to the same table), odd -> a .npz archive
// (ParseNpz through libzip; members capped at 64 MiB). Every malformed input is an error.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "fuzz_util.h"
#include "kiln/calibrator.h"
#include "npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    auto t = kiln::ParseCalibrationCache(rest.data(), rest.size(), "fuzz.cache");
    kiln::fuzz::CheckError(t.status(), "ParseCalibrationCache");
    if (t.ok()) {
      const std::string text = kiln::WriteCalibrationCache(*t);
      auto back = kiln::ParseCalibrationCache(text.data(), text.size(), "rewritten.cache");
      if (!back.ok() || back->scales.size() != t->scales.size() || back->algorithm != t->algorithm) std::abort();
      for (size_t i = 0; i < t->scales.size(); ++i)
        if (back->scales[i].first != t->scales[i].first ||
            std::memcmp(&back->scales[i].second, &t->scales[i].second, 4) != 0)
          std::abort();
    }
  } else {
    auto a = kiln::ParseNpz(rest, "fuzz.npz", uint64_t{64} << 20);
    kiln::fuzz::CheckError(a.status(), "ParseNpz");
  }
  return 0;
}
