// The CUDA backend's layer table and the OpDefs agree: every layer is registered under an OpDef (a layer
// without an OpDef fails here), and every op kiln imports has a CUDA layer, except those named below with the
// reason (a new op without a CUDA layer must be added to the list on purpose).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "backends/cuda/layer.h"
#include "ops/op_def.h"

namespace kiln {
namespace {

// The keys a backend's kernel table may hold: the qualified names of the built-in ops a kernel runs.
std::set<std::string> RunnableOpNames() {
  std::set<std::string> r;
  for (const OpDef* d : BuiltinOps().All())
    if (!d->traits.import_only) r.insert(d->QualifiedName());
  return r;
}

TEST(OpTables, EveryCudaLayerHasAnOpDef) {
  std::vector<std::string> orphans;
  const std::set<std::string> runnable = RunnableOpNames();
  for (const std::string& key : cuda::Layers().OpTypes())
    if (!runnable.count(key)) orphans.push_back(key);
  EXPECT_TRUE(orphans.empty()) << "CUDA layers registered under no OpDef: " << ::testing::PrintToString(orphans);
}

TEST(OpTables, EveryOpDefHasACudaLayer) {
  // Ops that run on the CPU only, and why.
  static const std::map<std::string, std::string> kCpuOnly = {
      {"Unique", "no CUDA kernel written yet (its output size depends on the data)"},
      // Sequences and optionals are host-side lists of tensors (OnnxValue) the CUDA backend does not hold: it refuses
      // them (layer_registry.cpp CheckValueTypes); the CPU backend runs them, inside CPU fallback too.
      {"SequenceEmpty", "a sequence op: sequences are host-side values the CUDA backend does not hold"},
      {"SequenceConstruct", "a sequence op: sequences are host-side values the CUDA backend does not hold"},
      {"SequenceAt", "a sequence op: sequences are host-side values the CUDA backend does not hold"},
      {"SequenceInsert", "a sequence op: sequences are host-side values the CUDA backend does not hold"},
      {"SequenceErase", "a sequence op: sequences are host-side values the CUDA backend does not hold"},
      {"SequenceLength", "a sequence op: sequences are host-side values the CUDA backend does not hold"},
      {"SplitToSequence", "a sequence op: sequences are host-side values the CUDA backend does not hold"},
      {"ConcatFromSequence", "a sequence op: sequences are host-side values the CUDA backend does not hold"},
      {"SequenceMap", "a sequence op with a body: control flow and sequences run on the CPU backend"},
      {"Optional", "an optional op: optionals are host-side values the CUDA backend does not hold"},
      {"OptionalHasElement", "an optional op: optionals are host-side values the CUDA backend does not hold"},
      {"OptionalGetElement", "an optional op: optionals are host-side values the CUDA backend does not hold"},
  };
  std::vector<std::string> missing;
  for (const OpDef* d : BuiltinOps().All()) {
    if (d->traits.import_only || kCpuOnly.count(d->QualifiedName())) continue;
    if (!cuda::Layers().Find(d->QualifiedName())) missing.push_back(d->QualifiedName());
  }
  EXPECT_TRUE(missing.empty()) << "OpDefs without a CUDA layer: " << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace kiln
