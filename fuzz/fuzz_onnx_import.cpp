// libFuzzer target: ONNX bytes -> the parser (protobuf, converters, shape inference, constant folding) -> when the
// model parses and its inputs are small, a build on the reference backend and one run. No bytes may crash,
// hang or exhaust memory: every failure must come back as a Status with a message.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "kiln/kiln.h"

namespace {

// External data is looked up in an empty folder: references to it fail as missing files, never read elsewhere.
const std::string& EmptyDir() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / "kiln_fuzz_empty";
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

void BuildAndRun(const kiln::NetworkDefinition& net, kiln::ILogger& logger) {
  for (int i = 0; i < net.getNbInputs(); ++i)
    if (kiln::fuzz::SmallElements(net.getInput(i).dims) == SIZE_MAX) return;  // dynamic or large: the build needs a profile
  kiln::Builder builder(logger);
  auto config = builder.createBuilderConfig();
  // Small caps, so that a model asking for a giant tensor is refused by kiln (as it must be) before the fuzzer's
  // own memory limit sees the allocation.
  config->setMaxTensorElements(int64_t{1} << 22);
  config->setMemoryPoolLimit("activations", size_t{256} << 20);
  auto bytes = builder.buildSerializedNetwork(net, *config);
  kiln::fuzz::CheckError(bytes.status(), "buildSerializedNetwork");
  if (!bytes.ok()) return;
  kiln::Runtime runtime(logger);
  auto engine = runtime.deserializeEngine(bytes->data(), bytes->size());
  if (!engine.ok()) {
    std::fprintf(stderr, "an engine kiln just built does not load: %s\n", engine.status().message().c_str());
    std::abort();
  }
  auto ctx = (*engine)->createExecutionContext();
  kiln::fuzz::CheckError(ctx.status(), "createExecutionContext");
  if (!ctx.ok()) return;
  kiln::fuzz::RunOnceIfSmall(**engine, **ctx);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kiln::fuzz::QuietLogger logger;
  kiln::NetworkDefinition net;
  kiln::OnnxParser parser(net, logger);
  kiln::Status st = parser.parse(data, size, EmptyDir());
  kiln::fuzz::CheckError(st, "OnnxParser::parse");
  if (st.ok()) BuildAndRun(net, logger);
  return 0;
}
