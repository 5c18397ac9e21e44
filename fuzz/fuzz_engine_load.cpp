// libFuzzer target: engine file bytes -> the loader -> an execution context -> one run at the smallest profile
// shapes. The checksum is recomputed over the mutated bytes first (ResealEngine), so that the fuzzer reaches the
// payload instead of stopping at the checksum: no engine, checksum valid or not, may crash or run away.
#include <cstdint>
#include <vector>

#include "engine/engine_file.h"
#include "fuzz_util.h"
#include "kiln/kiln.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kiln::fuzz::QuietLogger logger;
  std::vector<uint8_t> file(data, data + size);
  if (file.size() >= kiln::kEngineHeaderSize) kiln::ResealEngine(file);
  kiln::Runtime runtime(logger);
  auto engine = runtime.deserializeEngine(file.data(), file.size());
  kiln::fuzz::CheckError(engine.status(), "deserializeEngine");
  if (!engine.ok()) return 0;
  const kiln::Engine& e = **engine;
  (void)e.getLayerInformationJson();
  // A context allocates the arena: an engine asking for more than the fuzzer's memory limit is only run where
  // it fits (the loader itself refuses one beyond the machine's memory); small activations also keep a run's
  // compute small enough for the fuzzer's per-input timeout.
  if (e.getDeviceMemorySize() > (size_t{16} << 20)) return 0;
  auto ctx = e.createExecutionContext();
  kiln::fuzz::CheckError(ctx.status(), "createExecutionContext");
  if (!ctx.ok()) return 0;
  for (int i = 0; i < e.getNbIOTensors(); ++i) {
    const std::string name = e.getIOTensorName(i);
    if (e.getTensorIOMode(name) != kiln::TensorIOMode::kInput) continue;
    kiln::Dims dims = e.getTensorShape(name);
    bool dynamic = false;
    for (int64_t d : dims) dynamic = dynamic || d < 0;
    if (dynamic) {
      dims = e.getProfileShape(name, 0, kiln::ProfileSelector::kMin);
      kiln::Status st = (*ctx)->setInputShape(name, dims);
      kiln::fuzz::CheckError(st, "setInputShape");
      if (!st.ok()) return 0;
    }
  }
  kiln::fuzz::RunOnceIfSmall(e, **ctx);
  return 0;
}
