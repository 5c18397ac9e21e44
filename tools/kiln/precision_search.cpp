// kiln calibrate --accuracyTarget: which INT8 layers to keep in float so that the INT8 engine's outputs stay within a
// relative L2 error of the float model's on the calibration data (Polygraphy's precision bisection, done for the user).
//   1. The all-INT8 engine's error; done when it meets the target.
//   2. Each INT8 layer's sensitivity: the error of an engine where it alone is INT8.
//   3. The fewest most-sensitive layers kept in float that meet the target, found by bisection over that order
//      (keeping more layers in float never adds quantization error), and checked.
#include "precision_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "kiln/error.h"

namespace kiln::cli {

namespace {

class Search {
 public:
  Search(NetworkDefinition& net, const Options& o, const std::vector<std::map<std::string, Tensor>>& batches,
         ILogger& logger)
      : net_(net), o_(o), batches_(batches), logger_(logger) {}

  Status Init() {
    for (const auto& b : batches_) {
      debug::NetworkRunOptions ro;
      KILN_ASSIGN_OR_RETURN(auto out, debug::RunNetwork(net_, b, ro));
      refs_.push_back(std::move(out));
    }
    auto info = GetBackendInfo(Backend());
    keep_type_ = info.ok() && info->reduced_precision ? DataType::kFloat16 : DataType::kFloat32;
    return Status::Ok();
  }

  std::string Backend() const {
    if (!backend_override_.empty()) return backend_override_;
    return o_.backend.empty() ? GetDefaultBackendName() : o_.backend;
  }
  DataType keep_type() const { return keep_type_; }

  // The relative L2 error over every output and batch of the INT8 engine with `keep_float` in float; the INT8 layers
  // that build had.
  Result<double> Error(const std::vector<std::string>& keep_float, std::vector<std::string>* int8_layers = nullptr) {
    Builder builder(logger_);
    auto cfg = builder.createBuilderConfig();
    cfg->setBackend(Backend());
    cfg->setFlag(BuilderFlag::kINT8);
    if (keep_type_ == DataType::kFloat16) cfg->setFlag(BuilderFlag::kFP16);
    for (const auto& l : keep_float) cfg->setLayerPrecision(l, keep_type_);
    // The batches' shapes make the profile (dynamic inputs): min and max over them, opt the first's.
    OptimizationProfile prof;
    for (const auto& [name, t] : batches_[0]) {
      Dims mn = t.shape(), mx = t.shape();
      for (const auto& b : batches_)
        if (auto it = b.find(name); it != b.end() && it->second.rank() == t.rank())
          for (int64_t d = 0; d < t.rank(); ++d)
            mn[d] = std::min(mn[d], it->second.dim(d)), mx[d] = std::max(mx[d], it->second.dim(d));
      KILN_RETURN_IF_ERROR(prof.setDimensions(name, ProfileSelector::kMin, mn));
      KILN_RETURN_IF_ERROR(prof.setDimensions(name, ProfileSelector::kOpt, t.shape()));
      KILN_RETURN_IF_ERROR(prof.setDimensions(name, ProfileSelector::kMax, mx));
    }
    KILN_RETURN_IF_ERROR(cfg->addOptimizationProfile(prof).status());
    BuildReport rep;
    auto built = builder.buildSerializedNetwork(net_, *cfg, &rep);
    if (!built.ok() && built.status().code() == StatusCode::kUnsupported && Backend() != debug::ReferenceBackendName() && builds_ == 0) {
      // A backend without INT8 engines: the search measures on the reference backend's INT8 kernels.
      std::printf("[kiln] accuracy: %s\n[kiln] accuracy: measuring on the %s backend instead\n",
                  built.status().message().c_str(), debug::ReferenceBackendName().c_str());
      backend_override_ = debug::ReferenceBackendName();
      keep_type_ = DataType::kFloat32;
      return Error(keep_float, int8_layers);
    }
    if (!built.ok()) return built.status();
    const std::vector<uint8_t>& bytes = *built;
    if (int8_layers) *int8_layers = rep.int8_candidate_layers;
    Runtime rt(logger_);
    KILN_ASSIGN_OR_RETURN(auto engine, rt.deserializeEngine(bytes.data(), bytes.size()));
    double num = 0, den = 0;
    for (size_t b = 0; b < batches_.size(); ++b) {
      KILN_ASSIGN_OR_RETURN(auto got, debug::RunEngineLayers(*engine, batches_[b]));
      for (const auto& [name, ref] : refs_[b]) {
        auto it = got.find(name);
        if (it == got.end()) return Err(StatusCode::kInternal, "the INT8 engine did not compute output '{}'", name);
        const Tensor& g = it->second;
        if (g.numel() != ref.numel())
          return Err(StatusCode::kInternal, "output '{}': {} elements against the float model's {}", name, g.numel(),
                     ref.numel());
        if (!IsFloatType(ref.dtype())) continue;
        for (int64_t i = 0; i < ref.numel(); ++i) {
          const double r = ref.GetAsDouble(i), d = g.GetAsDouble(i) - r;
          num += d * d;
          den += r * r;
        }
      }
    }
    ++builds_;
    return std::sqrt(num / std::max(den, 1e-30));
  }
  int builds() const { return builds_; }

 private:
  NetworkDefinition& net_;
  const Options& o_;
  const std::vector<std::map<std::string, Tensor>>& batches_;
  ILogger& logger_;
  std::vector<std::map<std::string, Tensor>> refs_;
  DataType keep_type_ = DataType::kFloat32;
  int builds_ = 0;
  std::string backend_override_;
};

std::string LayerPrecisionsFlag(const std::vector<std::string>& layers, DataType t) {
  std::string s;
  const char* name = t == DataType::kFloat16 ? "fp16" : "fp32";
  for (const auto& l : layers) s += (s.empty() ? "" : ",") + l + ":" + name;
  return s;
}

}  // namespace

Status SearchLayerPrecisions(NetworkDefinition& net, const Options& o,
                             const std::vector<std::map<std::string, Tensor>>& batches, ILogger& logger,
                             nlohmann::json* report) {
  if (batches.empty()) return Err(StatusCode::kInvalidArgument, "--accuracyTarget needs at least one batch");
  Search s(net, o, batches, logger);
  KILN_RETURN_IF_ERROR(s.Init());
  std::vector<std::string> layers;
  KILN_ASSIGN_OR_RETURN(const double all_int8, s.Error({}, &layers));
  std::printf("[kiln] accuracy: every layer INT8 (%zu): relative L2 %.5g on %zu batch(es); target %.5g\n",
              layers.size(), all_int8, batches.size(), o.accuracy_target);
  nlohmann::json j = {{"target", o.accuracy_target}, {"batches", batches.size()}, {"all_int8_rel_l2", all_int8},
                      {"backend", s.Backend()}};
  std::vector<std::string> keep;
  double final_error = all_int8;
  if (all_int8 > o.accuracy_target) {
    // Sensitivity: each layer alone in INT8.
    std::vector<std::pair<double, std::string>> sens;
    for (const auto& l : layers) {
      std::vector<std::string> others;
      for (const auto& x : layers)
        if (x != l) others.push_back(x);
      KILN_ASSIGN_OR_RETURN(const double e, s.Error(others));
      sens.emplace_back(e, l);
    }
    std::stable_sort(sens.begin(), sens.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    nlohmann::json sj = nlohmann::json::array();
    std::printf("[kiln] accuracy: the layers' sensitivity (relative L2 with that layer alone in INT8):\n");
    for (size_t i = 0; i < sens.size(); ++i) {
      if (i < 10) std::printf("[kiln]   %-40s %.5g\n", sens[i].second.c_str(), sens[i].first);
      sj.push_back({{"layer", sens[i].second}, {"rel_l2", sens[i].first}});
    }
    j["sensitivity"] = sj;
    // Bisection on how many of the most sensitive layers stay in float.
    auto top = [&](size_t k) {
      std::vector<std::string> v;
      for (size_t i = 0; i < k; ++i) v.push_back(sens[i].second);
      return v;
    };
    size_t lo = 0, hi = sens.size();  // error(top(lo)) > target; top(hi) keeps everything in float
    double hi_error = 0;
    bool hi_known = false;
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      KILN_ASSIGN_OR_RETURN(const double e, s.Error(top(mid)));
      if (e <= o.accuracy_target) hi = mid, hi_error = e, hi_known = true;
      else lo = mid;
    }
    keep = top(hi);
    if (!hi_known) {
      KILN_ASSIGN_OR_RETURN(hi_error, s.Error(keep));
    }
    final_error = hi_error;
    if (final_error > o.accuracy_target)
      return Err(StatusCode::kOutOfRange,
                 "--accuracyTarget={}: even with every INT8 layer in float the error is {:.5g}: the target is below "
                 "what the float layers give on this data",
                 o.accuracy_target, final_error);
  }
  const std::string flag = LayerPrecisionsFlag(keep, s.keep_type());
  std::printf("[kiln] accuracy: %zu of %zu INT8 layer(s) kept in %s: relative L2 %.5g (%d builds)\n", keep.size(),
              layers.size(), DataTypeName(s.keep_type()), final_error, s.builds());
  if (!keep.empty()) std::printf("[kiln] build with: --int8 --calib=%s --layerPrecisions=%s\n", o.calib.c_str(), flag.c_str());
  j["kept_in_float"] = keep;
  j["layer_precisions"] = flag;
  j["final_rel_l2"] = final_error;
  if (!o.calib.empty()) {
    const std::string path = o.calib + ".layers";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return Err(StatusCode::kIoError, "cannot write '{}'", path);
    std::fprintf(f, "%s\n", flag.c_str());
    if (std::fclose(f) != 0) return Err(StatusCode::kIoError, "writing '{}' failed", path);
    std::printf("[kiln] the --layerPrecisions value is in %s\n", path.c_str());
    j["layer_precisions_file"] = path;
  }
  (*report)["accuracy"] = j;
  return Status::Ok();
}

}  // namespace kiln::cli
