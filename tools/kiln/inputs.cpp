// The inputs an engine runs on from the command line: --loadInputs files (checked against the engine's types and
// run shapes), random data elsewhere; the run shape of each input is --shapes, else the loaded file's, else the
// first profile's opt shape.
#include <algorithm>
#include <random>

#include "commands.h"
#include "kiln/error.h"
#include "npy.h"

namespace kiln::cli {

Result<std::map<std::string, Tensor>> MakeEngineInputs(const Engine& e, const Options& o) {
  KILN_ASSIGN_OR_RETURN(auto run_shapes, ParseShapeList(o.shapes, "--shapes"));
  for (const auto& [n, _] : run_shapes)
    if (e.getTensorIOMode(n) != TensorIOMode::kInput)
      return Err(StatusCode::kInvalidArgument, "--shapes names '{}', which is not an input of the engine", n);
  std::map<std::string, Tensor> loaded;
  if (!o.load_inputs.empty()) {
    KILN_ASSIGN_OR_RETURN(auto files, ParseNameValueList(o.load_inputs, "--loadInputs"));
    for (const auto& [name, file] : files) {
      if (e.getTensorIOMode(name) != TensorIOMode::kInput)
        return Err(StatusCode::kInvalidArgument, "--loadInputs: the engine has no input named '{}'", name);
      auto t = ReadNpy(file);
      if (!t.ok()) return t.status().WithContext("--loadInputs '" + name + "'");
      loaded[name] = *t;
    }
  }
  std::mt19937_64 rng(static_cast<uint64_t>(o.seed));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::map<std::string, Tensor> inputs;
  for (int i = 0; i < e.getNbIOTensors(); ++i) {
    const std::string n = e.getIOTensorName(i);
    if (e.getTensorIOMode(n) != TensorIOMode::kInput) continue;
    Dims d = e.getTensorShape(n);
    const bool dynamic = std::any_of(d.begin(), d.end(), [](int64_t x) { return x < 0; });
    auto l = loaded.find(n);
    if (auto it = run_shapes.find(n); it != run_shapes.end()) d = it->second;
    else if (l != loaded.end() && dynamic) d = l->second.shape();
    else if (dynamic) d = e.getProfileShape(n, 0, ProfileSelector::kOpt);
    const DataType t = e.getTensorDataType(n);
    if (l != loaded.end()) {
      if (l->second.dtype() != t)
        return Err(StatusCode::kInvalidArgument, "--loadInputs: input '{}' must be {} but the file holds {}", n,
                   DataTypeName(t), DataTypeName(l->second.dtype()));
      if (l->second.shape() != d)
        return Err(StatusCode::kInvalidArgument, "--loadInputs: input '{}' runs at shape {} but the file holds {}", n,
                   ShapeToString(d), ShapeToString(l->second.shape()));
      inputs[n] = l->second;
      continue;
    }
    uint64_t bytes = DataTypeSize(t);  // checked before allocating: no overflow, at most 2^40 bytes
    for (int64_t x : d) {
      if (x < 0 || (x != 0 && bytes > (uint64_t{1} << 40) / static_cast<uint64_t>(x)))
        return Err(StatusCode::kOutOfRange, "input '{}' at shape {} is larger than 2^40 bytes: give smaller --shapes",
                   n, ShapeToString(d));
      bytes *= static_cast<uint64_t>(x);
    }
    Tensor r(t, d);
    if (bytes > 0 && !r.raw())
      return Err(StatusCode::kOutOfRange,
                 "input '{}' at shape {} needs {} bytes of host memory, which could not be allocated: give smaller "
                 "--shapes",
                 n, ShapeToString(d), bytes);
    for (int64_t k = 0; k < r.numel(); ++k)
      r.SetFromDouble(k, IsFloatType(t) ? real(rng) : static_cast<double>(rng() % 2));
    inputs[n] = r;
  }
  return inputs;
}

}  // namespace kiln::cli
