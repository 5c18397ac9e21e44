// libFuzzer target: the command line's value parsers (--shapes, --inputIOFormats, --memPoolSize-style name:value
// lists, precisions). The first byte picks the parser, the rest is the flag's value.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  using namespace kiln::cli;
  switch (data[0] % 4) {
    case 0: kiln::fuzz::CheckError(ParseShapeList(text, "--shapes").status(), "ParseShapeList"); break;
    case 1: kiln::fuzz::CheckError(ParseIOFormats(text, "--inputIOFormats").status(), "ParseIOFormats"); break;
    case 2: kiln::fuzz::CheckError(ParseNameValueList(text, "--memPoolSize").status(), "ParseNameValueList"); break;
    default: kiln::fuzz::CheckError(ParsePrecision(text, "--precisionConstraints").status(), "ParsePrecision"); break;
  }
  return 0;
}
