// The timing cache's file format, apart from the backend that measures it (so that the reader is tested and
// fuzzed in every build). JSON: {"format": "kiln-timing-cache", "version": 1, "device": "<device key>",
// "entries": {"<layer signature>": {"tactic": "...", "ms": 0.0123, "candidates": 4}}}.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "kiln/status.h"

namespace kiln {

struct TimingEntry {
  std::string tactic;
  double ms = 0;
  int candidates = 0;
};

struct TimingCacheContents {
  std::string device;  // the device and library versions the timings were measured with
  std::map<std::string, TimingEntry> entries;
};

// Parses a timing cache's text. Anything that is not a version-1 kiln timing cache — invalid JSON, another
// format, a field of the wrong type, an entry without a tactic — is an error naming `source` and what is wrong;
// no text throws.
Result<TimingCacheContents> ParseTimingCache(std::string_view text, const std::string& source);
std::string SerializeTimingCache(const TimingCacheContents& cache);

// Reads `path`: not found is an empty cache with `*found` false; a file that is not a regular file (a FIFO, a
// device, a folder) or cannot be read is an error; its contents go through ParseTimingCache.
Result<TimingCacheContents> ReadTimingCacheFile(const std::string& path, bool* found);
// Writes through a temporary file and a rename, so that a reader never sees half a cache.
Status WriteTimingCacheFile(const std::string& path, const TimingCacheContents& cache);

}  // namespace kiln
