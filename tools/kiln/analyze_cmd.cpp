// `kiln analyze`: what the optimizer fused, and why fusable-looking pairs were left apart.
//
// Builds the model as `kiln build` would (the same flags; nothing is written), then reports
//   - fused: every rewrite of the recognition and fusion passes, by pass ("fused conv1 + relu1 -> conv1");
//   - not fused: each pointwise layer of the engine that reads the output of a layer with a fusable epilogue (a
//     convolution or matrix product, a normalization, an attention) and was not folded into it, with the reason the
//     engine shows: the output has other readers, is an output of the engine, a precision cast sits between them, or
//     no fused kernel takes that operation after that layer.
// As text, and as JSON with --json.
#include <cstdio>
#include <map>
#include <set>

#include "commands.h"
#include "kiln/error.h"

namespace kiln::cli {
namespace {

// Passes whose rewrites are recognitions and fusions (the cleanup passes' are not reported).
bool IsFusionPass(const std::string& pass) {
  return pass.rfind("recognize-", 0) == 0 || pass.rfind("fuse-", 0) == 0 || pass == "simplify-attention-mask" ||
         pass == "propagate-qdq" || pass == "fold-batchnorm";
}

// Layers with an epilogue a pointwise op could fold into.
bool HasEpilogue(const std::string& op) {
  static const std::set<std::string> k = {"Conv", "kiln.FusedConv", "ConvTranspose", "Gemm", "kiln.FusedGemm",
                                          "MatMul", "kiln.FusedMatMul", "kiln.QConv", "kiln.QMatMul",
                                          "kiln.WeightOnlyMatMul", "LayerNormalization", "kiln.Attention"};
  return k.count(op) != 0;
}

// Layers that compute element by element (what an epilogue could take).
bool IsPointwise(const std::string& op) {
  static const std::set<std::string> k = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish",
                                          "Gelu", "Elu", "Selu", "Softplus", "Mish", "Add", "Sub", "Mul", "Div",
                                          "kiln.FusedPointwise", "BatchNormalization", "Cast", "QuantizeLinear",
                                          "DequantizeLinear", "Erf", "Exp", "Pow", "Sqrt"};
  return k.count(op) != 0;
}

}  // namespace

Status Analyze(const Options& in, ILogger& logger, nlohmann::json* report) {
  if (!in.load_engine.empty())
    return Err(StatusCode::kInvalidArgument,
               "kiln analyze builds from --onnx (what fused comes from the build, which an engine file does not keep); "
               "give --onnx=model.onnx");
  Options o = in;
  o.profiling_verbosity = "detailed";  // the layers' inputs and outputs
  KILN_ASSIGN_OR_RETURN(BuildResult b, BuildFromOnnx(o, logger));
  Runtime runtime(logger);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, runtime.deserializeEngine(b.engine.data(), b.engine.size()));
  const nlohmann::json info = nlohmann::json::parse(engine->getLayerInformationJson());

  // Fused: the passes' rewrite lines ("<pass>: <what>"), for the recognition and fusion passes.
  nlohmann::json fused = nlohmann::json::array();
  std::map<std::string, int> per_pass;
  for (const std::string& line : b.report.pass_details) {
    const size_t colon = line.find(": ");
    const std::string pass = colon == std::string::npos ? "" : line.substr(0, colon);
    if (!IsFusionPass(pass)) continue;
    fused.push_back({{"pass", pass}, {"rewrite", line.substr(colon + 2)}});
    ++per_pass[pass];
  }

  // The engine's dataflow: who writes and who reads each tensor.
  const nlohmann::json& layers = info.at("layers");
  std::map<std::string, size_t> producer;
  std::map<std::string, std::vector<size_t>> readers;
  std::set<std::string> engine_outputs;
  for (int i = 0; i < engine->getNbIOTensors(); ++i) {
    const std::string n = engine->getIOTensorName(i);
    if (engine->getTensorIOMode(n) == TensorIOMode::kOutput) engine_outputs.insert(n);
  }
  for (size_t k = 0; k < layers.size(); ++k) {
    for (const auto& t : layers[k].value("outputs", nlohmann::json::array())) producer[t.at("name")] = k;
    std::set<std::string> seen;  // a layer reading a tensor twice (Mul(h, h)) is one reader
    for (const auto& t : layers[k].value("inputs", nlohmann::json::array()))
      if (!t.value("constant", false) && seen.insert(t.at("name").get<std::string>()).second)
        readers[t.at("name")].push_back(k);
  }
  auto name_of = [&](size_t k) { return layers[k].at("name").get<std::string>(); };
  auto op_of = [&](size_t k) { return layers[k].at("op_type").get<std::string>(); };

  nlohmann::json not_fused = nlohmann::json::array();
  for (size_t k = 0; k < layers.size(); ++k) {
    const std::string op = op_of(k);
    if (!IsPointwise(op)) continue;
    std::set<std::string> done;
    for (const auto& t : layers[k].value("inputs", nlohmann::json::array())) {
      if (t.value("constant", false)) continue;
      const std::string tensor = t.at("name");
      if (!done.insert(tensor).second) continue;
      auto p = producer.find(tensor);
      if (p == producer.end() || !HasEpilogue(op_of(p->second))) continue;
      const size_t pk = p->second;
      std::string why;
      const auto& rs = readers[tensor];
      if (rs.size() > 1) {
        std::string others;
        for (size_t r : rs)
          if (r != k) others += (others.empty() ? "" : ", ") + name_of(r);
        why = fmt::format("'{}' is also read by {}: folding {} into {} would still need the unfused value", tensor,
                          others, name_of(k), name_of(pk));
      } else if (engine_outputs.count(tensor)) {
        why = fmt::format("'{}' is an output of the engine", tensor);
      } else if (op == "kiln.FusedPointwise") {
        why = fmt::format("{} is a fused program of several pointwise ops; the epilogues of {} take a bias, one "
                          "activation and a residual, not a program",
                          name_of(k), op_of(pk));
      } else if (op == "Cast") {
        why = fmt::format("a precision boundary: {} computes in {}, the Cast makes {}", name_of(pk),
                          layers[pk].value("precision", "?"), layers[k].value("precision", "?"));
      } else {
        why = fmt::format("no fused kernel of this backend takes {} after {} ({}, {})", op, op_of(pk),
                          layers[pk].value("precision", "?"), layers[pk].value("tactic", "?"));
      }
      not_fused.push_back({{"producer", name_of(pk)}, {"producer_op", op_of(pk)}, {"consumer", name_of(k)},
                           {"consumer_op", op}, {"tensor", tensor}, {"reason", why}});
    }
  }

  std::printf("[kiln] analyze %s: %zu layers in the engine (%zu nodes before the optimizer), backend %s\n",
              o.onnx.c_str(), layers.size(), b.report.layers_before, engine->getBackend().c_str());
  std::printf("[kiln] fused (%zu rewrites):\n", fused.size());
  for (const auto& [pass, n] : per_pass) std::printf("[kiln]   %-28s %d\n", pass.c_str(), n);
  for (const auto& f : fused)
    std::printf("[kiln]     %s: %s\n", f.at("pass").get<std::string>().c_str(), f.at("rewrite").get<std::string>().c_str());
  std::printf("[kiln] not fused (%zu pairs):\n", not_fused.size());
  for (const auto& n : not_fused)
    std::printf("[kiln]   %s (%s) -> %s (%s): %s\n", n.at("producer").get<std::string>().c_str(),
                n.at("producer_op").get<std::string>().c_str(), n.at("consumer").get<std::string>().c_str(),
                n.at("consumer_op").get<std::string>().c_str(), n.at("reason").get<std::string>().c_str());
  *report = {{"operation", "analyze"},
             {"status", "success"},
             {"input_model", o.onnx},
             {"backend", engine->getBackend()},
             {"layers_before", b.report.layers_before},
             {"layers_after", layers.size()},
             {"fused", fused},
             {"not_fused", not_fused}};
  return Status::Ok();
}

}  // namespace kiln::cli
