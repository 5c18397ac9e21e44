// The timing cache: the tactic the builder chose for each layer signature, measured on one device with one set
// of library versions, so that a rebuild skips timing and picks the same tactics (--timingCacheFile).
//
// File format: backends/timing_cache_file.h. A cache written on another GPU or with other
// CUDA/cuBLASLt/cuDNN versions is ignored with a warning (its timings do not describe this machine).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "backends/cuda/layer.h"
#include "backends/timing_cache_file.h"

namespace kiln::cuda {

using kiln::TimingEntry;

class TimingCache {
 public:
  // The calling thread's current device and the library versions
  // ("NVIDIA H100 ...|sm_90|cuda 13000|cublasLt ...|cudnn ...").
  static Result<std::string> CurrentDeviceKey();
  // Loads `path` when it exists. Returns a warning (empty when none) when the file was for another device or
  // versions, or unreadable; the cache then starts empty.
  Result<std::string> Load(const std::string& path);
  Status Save(const std::string& path) const;
  const TimingEntry* Find(const std::string& signature) const;
  void Put(const std::string& signature, TimingEntry e) { entries_[signature] = std::move(e); }
  size_t size() const { return entries_.size(); }
  void set_device_key(std::string k) { device_key_ = std::move(k); }

 private:
  std::string device_key_;
  std::map<std::string, TimingEntry> entries_;
};

// A layer's signature: op type, attributes, input/output types and shapes (constant inputs by shape), TF32.
std::string LayerSignature(const LayerSpec& spec);

}  // namespace kiln::cuda
