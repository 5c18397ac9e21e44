// The builder's precision and layout planning (see builder_plan.h).
#include "runtime/builder_plan.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "plan/fold_quantized_casts.h"
#include "plan/fuse_reformats.h"
#include "plan/layout.h"
#include "plan/precision.h"

namespace kiln {

namespace {

// KILN_LAYOUT, when set, overrides the config's convolution layout (A/B experiments without a rebuild of the tool).
Result<ConvolutionLayout> LayoutMode(const BuilderConfig& cfg) {
  const char* env = std::getenv("KILN_LAYOUT");
  if (!env) return cfg.convolutionLayout();
  const std::string mode = env;
  if (mode.empty()) return ConvolutionLayout::kAuto;
  if (mode == "nchw") return ConvolutionLayout::kNCHW;
  if (mode == "nhwc-fp32") return ConvolutionLayout::kNHWCFloat32;
  if (mode == "nhwc-fp16") return ConvolutionLayout::kNHWCReducedOnly;
  if (mode == "nhwc-c8") return ConvolutionLayout::kNHWCChannels8;
  return Err(StatusCode::kInvalidArgument, "KILN_LAYOUT must be nchw, nhwc-fp32, nhwc-fp16 or nhwc-c8, not '{}'", mode);
}

// KILN_LAYOUT_PAD, when set, overrides the config's channel padding.
Result<int> LayoutPad(const BuilderConfig& cfg) {
  const auto valid = [](int n) { return n == 0 || n == 4 || n == 8 || n == 16; };
  if (const char* pad = std::getenv("KILN_LAYOUT_PAD")) {
    const std::string p = pad;
    if (p != "0" && p != "4" && p != "8" && p != "16")
      return Err(StatusCode::kInvalidArgument, "KILN_LAYOUT_PAD must be 0, 4, 8 or 16, not '{}'", p);
    return std::stoi(p);
  }
  if (!valid(cfg.layoutChannelPadding()))
    return Err(StatusCode::kInvalidArgument,
               "the layout channel padding must be 0, 4, 8 or 16, not {} (BuilderConfig::setLayoutChannelPadding)",
               cfg.layoutChannelPadding());
  return cfg.layoutChannelPadding();
}

}  // namespace

Status PlanPrecision(Graph& g, const BuilderConfig& cfg, const Backend& backend, BuildReport& rep,
                     ILogger& logger) {
  PrecisionOptions po;
  po.kernel_takes = [&backend](const Node& n, DataType t) { return backend.ComputesIn(n, t); };
  po.obey_layer_precisions = cfg.getFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS);
  if (cfg.getFlag(BuilderFlag::kSTRONGLY_TYPED)) {
    // The network's types are the engine's: no precision flag, per-layer precision or I/O format may change them.
    const std::pair<BuilderFlag, const char*> flags[] = {{BuilderFlag::kFP16, "--fp16"}, {BuilderFlag::kBF16, "--bf16"},
                                                         {BuilderFlag::kINT8, "--int8"}, {BuilderFlag::kFP8, "--fp8"}};
    for (const auto& [f, name] : flags)
      if (cfg.getFlag(f))
        return Err(StatusCode::kInvalidArgument,
                   "--stronglyTyped keeps the network's own types, so {} cannot apply: drop one of them (cast in the "
                   "model where it should compute in another type)", name);
    if (!cfg.layerPrecisions().empty() || !cfg.layerOutputTypes().empty() || !cfg.ioTypes().empty())
      return Err(StatusCode::kInvalidArgument,
                 "--stronglyTyped keeps the network's own types, so --layerPrecisions, --layerOutputTypes and "
                 "--inputIOFormats/--outputIOFormats cannot apply: drop one of them");
    return Status::Ok();
  }
  if (cfg.getFlag(BuilderFlag::kFP16)) po.low = DataType::kFloat16;
  else if (cfg.getFlag(BuilderFlag::kBF16)) po.low = DataType::kBFloat16;
  for (const auto& [layer, t] : cfg.layerPrecisions()) {
    if (t == DataType::kInt8) continue;  // INT8 planning's (builder_int8.cpp)
    bool found = false;
    for (const auto& n : g.nodes()) found |= n->name == layer;
    if (!found)
      logger.log(Severity::kWarning, fmt::format("--layerPrecisions names '{}', which is not a layer of the optimized "
                                                 "network (fused or renamed?): ignored",
                                                 layer)
                                         .c_str());
    po.layer_precision[layer] = t;
  }
  po.io_types = cfg.ioTypes();
  KILN_ASSIGN_OR_RETURN(PrecisionReport pr, AssignPrecision(g, po));
  const QuantizedCastFolds folds = FoldQuantizedCasts(
      g, [&backend](const Node& n) { return backend.ComputesIn(n, DataType::kFloat16); });
  rep.layers_reduced_precision = pr.lowered;
  rep.layers_fp32 = pr.kept_fp32;
  rep.casts_inserted = std::max(0, pr.casts_inserted - folds.casts_removed);  // the model's own Casts may fold too
  if (folds.casts_removed > 0 || folds.norm_quantizes > 0 || folds.attention_quantizes > 0)
    logger.log(Severity::kVerbose, fmt::format("precision: {} INT8 layer(s) write float16, {} read a float16 "
                                               "residual and {} QuantizeLinear(s) a 16-bit input, in place of {} "
                                               "cast(s); {} LayerNormalization(s) quantize their output, {} "
                                               "attention(s) write theirs quantized",
                                               folds.outputs, folds.residuals, folds.quantize_inputs,
                                               folds.casts_removed, folds.norm_quantizes, folds.attention_quantizes)
                                       .c_str());
  if (po.low != DataType::kFloat32)
    logger.log(Severity::kInfo, fmt::format("precision: {} layer(s) in {}, {} in fp32, {} cast(s) inserted, {} "
                                            "constant(s) converted",
                                            pr.lowered, DataTypeName(po.low), pr.kept_fp32, rep.casts_inserted,
                                            pr.constants_converted)
                                    .c_str());
  for (const auto& d : pr.details) logger.log(Severity::kVerbose, ("precision: " + d).c_str());
  return Status::Ok();
}

// Float32 convolutions go NHWC too where TF32 is allowed (ResNet-50 FP32 b64 on an H100: 7.57 -> 4.18 ms of layer
// time); with --noTF32 they stay NCHW (builder.h: ConvolutionLayout says what each mode changes).
Status PlanLayout(Graph& g, const BuilderConfig& cfg, BuildReport& rep, ILogger& logger) {
  KILN_ASSIGN_OR_RETURN(const ConvolutionLayout mode, LayoutMode(cfg));
  KILN_ASSIGN_OR_RETURN(const int pad, LayoutPad(cfg));
  const bool allow_tf32 = cfg.getFlag(BuilderFlag::kTF32);
  LayoutOptions lo;
  // NCHW keeps float convolutions as they are; int8 ones still go NHWC, the only layout the int8 tensor-core
  // kernels read (and the optimizer creates them for cuda on that assumption).
  lo.float_convs = mode != ConvolutionLayout::kNCHW;
  lo.float32 = mode == ConvolutionLayout::kNHWCFloat32 || (allow_tf32 && mode != ConvolutionLayout::kNHWCReducedOnly);
  if (mode == ConvolutionLayout::kNHWCChannels8) lo.channel_multiple = 8;
  lo.pad_channels = pad;
  KILN_ASSIGN_OR_RETURN(LayoutReport lr, AssignLayout(g, lo));
  rep.reformats_inserted += lr.reformats_inserted;
  rep.reformats_eliminated += lr.reformats_eliminated;
  for (const auto& d : lr.details) logger.log(Severity::kInfo, ("layout: " + d).c_str());
  return Status::Ok();
}

Result<int> PlanReformats(Graph& g, const Backend& backend, BuildReport& rep, ILogger& logger) {
  const ReformatFusions f = FuseReformats(g, [&backend](const Node& n) { return backend.Prefers(n); });
  if (f.merged == 0) return 0;
  rep.fusions["reformats_merged"] += f.merged;
  logger.log(Severity::kInfo, fmt::format("layout: {} reformat chain(s) of {} Cast/Transpose/Pad node(s) merged into "
                                          "kiln.Reformat", f.merged, f.nodes_removed).c_str());
  for (const auto& d : f.details) logger.log(Severity::kVerbose, ("layout: " + d).c_str());
  return f.merged;
}

}  // namespace kiln
