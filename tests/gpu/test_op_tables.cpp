// The CUDA backend's layer table and the OpDefs agree: every layer is registered under an OpDef (a layer
// without an OpDef fails here), and every op kiln imports has a CUDA layer, except those named below with the
// reason (a new op without a CUDA layer must be added to the list on purpose).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "backends/cuda/layer.h"
#include "ops/op_def.h"

namespace kiln {
namespace {

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  const size_t dot = key.rfind('.');
  if (dot == std::string::npos) return {"", key};
  return {key.substr(0, dot), key.substr(dot + 1)};
}

TEST(OpTables, EveryCudaLayerHasAnOpDef) {
  std::vector<std::string> orphans;
  for (const std::string& key : cuda::Layers().OpTypes()) {
    auto [domain, name] = SplitKey(key);
    const OpDef* d = FindOp(domain, name);
    if (!d || d->traits.import_only) orphans.push_back(key);
  }
  EXPECT_TRUE(orphans.empty()) << "CUDA layers registered under no OpDef: " << ::testing::PrintToString(orphans);
}

TEST(OpTables, EveryOpDefHasACudaLayer) {
  // Ops that run on the CPU only, and why.
  static const std::map<std::string, std::string> kCpuOnly = {};
  std::vector<std::string> missing;
  for (const OpDef* d : BuiltinOps().All()) {
    if (d->traits.import_only || kCpuOnly.count(d->QualifiedName())) continue;
    if (!cuda::Layers().Find(d->QualifiedName())) missing.push_back(d->QualifiedName());
  }
  EXPECT_TRUE(missing.empty()) << "OpDefs without a CUDA layer: " << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace kiln
