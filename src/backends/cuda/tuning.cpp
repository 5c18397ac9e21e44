#include "backends/cuda/tuning.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <regex>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/handles.h"
#include "backends/cuda/tuning_fill.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {

// KILN_TACTIC_EXCLUDE (an ECMAScript regex, for experiments such as bisecting a wrong result to one tactic family):
// candidates whose name it matches anywhere are dropped, unless that would leave a node none.
Result<std::optional<std::regex>> TacticExclusion() {
  const char* env = std::getenv("KILN_TACTIC_EXCLUDE");
  if (!env || !*env) return std::optional<std::regex>();
  try {
    return std::optional<std::regex>(std::regex(env, std::regex::ECMAScript));
  } catch (const std::regex_error& e) {
    return Err(StatusCode::kInvalidArgument, "KILN_TACTIC_EXCLUDE='{}' is not a valid regular expression: {}", env,
               e.what());
  }
}

}  // namespace

Result<std::vector<std::vector<std::string>>> CheckSupport(const Graph& g, const Graph& tuned, bool allow_tf32,
                                                           std::vector<FallbackNode>* fallbacks) {
  KILN_ASSIGN_OR_RETURN(std::optional<std::regex> exclude, TacticExclusion());
  std::vector<std::vector<std::string>> candidates;
  std::string errors;
  int n = 0;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node& node = *g.nodes()[k];
    auto t = TacticsFor(SpecAt(node, *tuned.nodes()[k], allow_tf32));
    if (!t.ok()) {
      // Sequences and optionals live on the host only: a GPU engine cannot hand them from one layer to the next, so
      // nodes that make or read them cannot fall back either.
      bool tensors_only = true;
      for (const auto* list : {&node.inputs, &node.outputs})
        for (const Value* v : *list) tensors_only &= !v || v->kind == ValueKind::kTensor;
      if (fallbacks && tensors_only && t.status().code() == StatusCode::kUnsupported && CpuCanRun(node)) {
        fallbacks->push_back({k, t.status().message()});
        candidates.push_back({kCpuFallbackTactic});
        continue;
      }
      errors += "\n  - " + t.status().message();
      if (!fallbacks && tensors_only && CpuCanRun(node)) errors += " (it would run on the CPU without --noFallback)";
      ++n;
      continue;
    }
    if (exclude) {
      std::vector<std::string> kept;
      for (const std::string& name : *t)
        if (!std::regex_search(name, *exclude)) kept.push_back(name);
      if (!kept.empty()) *t = std::move(kept);
    }
    candidates.push_back(std::move(*t));
  }
  if (n == 0) return candidates;
  return Status(StatusCode::kUnsupported,
                fmt::format("{} node(s) cannot run on the CUDA backend:{}", n, errors));
}

namespace {

// Device tensors for one node at the tuning shapes: constants hold their values, activations random data.
struct Bench {
  std::vector<DeviceBuffer> buffers;
  std::vector<DeviceTensor> inputs, outputs;
};

// n elements of v's type on the device: uniform in [-1, 1] for float types (drawn on the device), zeros otherwise.
Result<DeviceBuffer> RandomBuffer(const Value& v, int64_t n, std::mt19937& rng) {
  const bool fl = IsFloatType(v.dtype);
  const uint32_t seed = static_cast<uint32_t>(rng());
  const size_t bytes = static_cast<size_t>(n) * DataTypeSize(v.dtype);
  KILN_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::Allocate(std::max<size_t>(bytes, 1)));
  if (fl && FillTuningInput(d.get(), v.dtype, n, seed, nullptr).ok()) return d;
  if (!fl) {
    KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d.get(), 0, bytes, nullptr));
    return d;
  }
  // The narrow float types (float8, float4 codes): encoded on the host.
  Tensor h(v.dtype, {n});
  std::mt19937 local(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < n; ++i) h.SetFromDouble(i, u(local));
  KILN_RETURN_IF_ERROR(CopyToDevice(d.get(), h.raw(), h.nbytes(), nullptr));
  return d;
}

Result<Bench> MakeBench(const Node& tn, const LayerSpec& spec, std::mt19937& rng) {
  Bench b;
  for (size_t i = 0; i < tn.inputs.size(); ++i) {
    const Value* v = tn.inputs[i];
    DeviceTensor t;
    if (v) {
      t.dtype = v->dtype;
      t.shape = spec.input_shapes[i];
      if (v->is_const()) {
        const Tensor& c = *v->const_value;
        KILN_ASSIGN_OR_RETURN(DeviceBuffer d, UploadToDevice(c.raw(), c.nbytes(), v->name));
        t.host = &c;
        t.data = d.get();
        b.buffers.push_back(std::move(d));
      } else {
        KILN_ASSIGN_OR_RETURN(DeviceBuffer d, RandomBuffer(*v, t.numel(), rng));
        t.data = d.get();
        b.buffers.push_back(std::move(d));
      }
    }
    b.inputs.push_back(t);
  }
  for (size_t i = 0; i < tn.outputs.size(); ++i) {
    const Value* v = tn.outputs[i];
    DeviceTensor t;
    if (v) {
      t.dtype = v->dtype;
      t.shape = spec.output_shapes[i];
      KILN_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::Allocate(std::max<size_t>(t.nbytes(), 1)));
      t.data = d.get();
      b.buffers.push_back(std::move(d));
    }
    b.outputs.push_back(t);
  }
  KILN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // pageable uploads complete before the timed stream reads them
  return b;
}

// Milliseconds per enqueue of `layer`: the median over up to `runs` samples after two warm-up runs. Small kernels
// are timed in bursts of back-to-back enqueues between one pair of events, so the host's launch cost overlaps GPU
// work as it does in a real run (and in CUDA-graph replay). The number of samples shrinks for slow candidates
// (about 25 ms of GPU time per candidate at most), and a candidate whose first sample is over twice `best_ms` is
// not timed further (it cannot win).
Result<double> TimeLayer(const Layer& layer, Bench& b, cudaStream_t stream, Handles& handles, int runs, double best_ms) {
  KILN_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // weights the layer uploaded when it was created
  const size_t ws = layer.WorkspaceBytes(b.inputs, b.outputs);
  DeviceBuffer workspace;
  if (ws) {
    KILN_ASSIGN_OR_RETURN(workspace, DeviceBuffer::Allocate(ws));
  }
  LaunchContext lc{stream, workspace.get(), ws, handles.cublaslt(), handles.cudnn()};
  for (int w = 0; w < 2; ++w) KILN_RETURN_IF_ERROR(layer.Enqueue(lc, b.inputs, b.outputs));
  KILN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  KILN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  cudaEvent_t e0, e1;
  KILN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e0));
  KILN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e1));
  std::vector<double> ms;
  Status st = Status::Ok();
  int burst = 1;
  for (int r = 0; r < runs && st.ok(); ++r) {
    cudaEventRecord(e0, stream);
    for (int k = 0; k < burst && st.ok(); ++k) st = layer.Enqueue(lc, b.inputs, b.outputs);
    cudaEventRecord(e1, stream);
    if (st.ok()) st = KILN_CUDA_STATUS(cudaEventSynchronize(e1));
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    const double per = t / burst;
    if (r == 0) {
      if (best_ms > 0 && per > 2 * best_ms) {  // far behind the best so far: one sample decides
        ms.push_back(per);
        break;
      }
      burst = per < 0.05 ? 4 : 1;
      runs = std::max(3, std::min(runs, static_cast<int>(25.0 / std::max(per * burst, 1e-3))));
      continue;  // the first sample (single enqueue) only sizes the others
    }
    ms.push_back(per);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  KILN_RETURN_IF_ERROR(st);
  if (ms.empty()) return Err(StatusCode::kInternal, "no timing sample was taken");
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Whether every input and output of n has a static shape.
bool StaticShapes(const Node& n) {
  for (const auto* list : {&n.inputs, &n.outputs})
    for (const Value* v : *list)
      if (v && !(v->has_shape && IsStatic(v->shape))) return false;
  return true;
}

// Whether a and b (the same node in two inferred graphs) have the same static shapes everywhere.
bool SameStaticShapes(const Node& a, const Node& b) {
  if (a.inputs.size() != b.inputs.size() || a.outputs.size() != b.outputs.size()) return false;
  auto same = [](const Value* x, const Value* y) {
    if (!x || !y) return x == y;
    return x->has_shape && y->has_shape && IsStatic(x->shape) && IsStatic(y->shape) &&
           ToStatic(x->shape) == ToStatic(y->shape);
  };
  for (size_t i = 0; i < a.inputs.size(); ++i)
    if (!same(a.inputs[i], b.inputs[i])) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (!same(a.outputs[i], b.outputs[i])) return false;
  return true;
}

// A tactic's name as log lines show it (cuDNN's and cuBLASLt's run long).
std::string ShortName(const std::string& t) { return t.size() > 40 ? t.substr(0, 40) + "..." : t; }

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Candidate `t` created for `spec` and timed on `bench` (cut short past twice `best_ms`; 0: no best yet), its
// creation and timing counted in `rep`. One that fails is listed in rep.failures (`at` says where) and gives nullopt;
// a failure that leaves the CUDA context unusable (an illegal address) ends the build.
Result<std::optional<double>> TimeCandidate(const Node& n, const LayerSpec& spec, const std::string& t, Bench& bench,
                                            double best_ms, const TuneOptions& opts, cudaStream_t stream,
                                            Handles& handles, TuneReport& rep, const std::string& at) {
  const auto c0 = Clock::now();
  auto layer = CreateLayer(spec, t);
  rep.create_seconds += SecondsSince(c0);
  const auto t1 = Clock::now();
  Result<double> ms = layer.ok() ? TimeLayer(**layer, bench, stream, handles, std::max(1, opts.avg_timing) + 1, best_ms)
                                 : Result<double>(layer.status());
  rep.timing_seconds += SecondsSince(t1);
  ++rep.candidates;
  if (ms.ok()) return std::optional<double>(*ms);
  rep.failures.push_back(n.Where() + " tactic " + t + at + ": " + ms.status().message());
  // A failed launch must not poison the next candidate.
  cudaDeviceSynchronize();
  cudaGetLastError();
  if (cudaError_t sticky = cudaDeviceSynchronize(); sticky != cudaSuccess)
    return Err(StatusCode::kCudaError, "{}: tactic {} left the CUDA context unusable ({}): {}; exclude it or report a bug",
               n.Where(), t, cudaGetErrorString(sticky), ms.status().message());
  return std::optional<double>();
}

// The tactic among those that ran at the tuning shapes (`at_tuning`) whose worst slowdown against the fastest, over
// the tuning shapes and each of `others` (the node at other shapes of the profile), is least; within 2% of that, the
// fastest at the tuning shapes. Each candidate is created for the tuning shapes and run at the other shapes, as an
// engine's layer is (a cuBLASLt algorithm tuned for the opt shape runs there only; elsewhere the layer asks the
// heuristic). A candidate that fails at another shape is out (its layer would fail there at run time); a shape no
// candidate runs at, or whose bench cannot be made, does not count. Appends each shape's times to `line`.
Result<std::string> AcrossShapes(const Node& n, const LayerSpec& tuning_spec, const std::vector<const Node*>& others,
                                 const std::map<std::string, double>& at_tuning, const std::string& fastest,
                                 const TuneOptions& opts, cudaStream_t stream, Handles& handles, std::mt19937& rng,
                                 TuneReport& rep, std::string& line) {
  // Only the few candidates near the fastest at the tuning shapes are run elsewhere (each costs a plan per shape): at
  // most kAcrossCandidates, each within kAcrossSlack of it. One slower than that at opt could win only where the
  // others are slower still everywhere else, and it would give up the opt shape to do so.
  constexpr size_t kAcrossCandidates = 4;
  constexpr double kAcrossSlack = 1.25;
  std::vector<std::pair<double, std::string>> by_time;
  for (const auto& [t, ms] : at_tuning) by_time.emplace_back(ms, t);
  std::sort(by_time.begin(), by_time.end());
  std::map<std::string, double> worst;  // candidate -> its worst ratio to the fastest so far
  const double fastest_ms = at_tuning.at(fastest);
  worst[fastest] = 1.0;
  for (const auto& [ms, t] : by_time)
    if (worst.size() < kAcrossCandidates && ms <= kAcrossSlack * fastest_ms) worst[t] = ms / fastest_ms;
  int counted = 0;
  for (const Node* o : others) {
    auto made = MakeBench(*o, SpecAt(n, *o, opts.allow_tf32), rng);
    if (!made.ok()) {
      rep.failures.push_back(n.Where() + ": no bench at other profile shapes: " + made.status().message());
      continue;
    }
    Bench& bench = *made;
    std::map<std::string, double> here;
    double best_here = 0;
    for (const auto& [t, unused] : worst) {
      (void)unused;
      KILN_ASSIGN_OR_RETURN(std::optional<double> ms, TimeCandidate(n, tuning_spec, t, bench, best_here, opts, stream,
                                                                    handles, rep, " at other profile shapes"));
      if (!ms) continue;
      here[t] = *ms;
      if (best_here == 0 || *ms < best_here) best_here = *ms;
    }
    if (here.empty() || !(best_here > 0)) continue;  // nothing ran, or an empty shape that takes no time
    ++counted;
    std::string shape = o->outputs.empty() || !o->outputs[0] ? "?" : ShapeToString(o->outputs[0]->shape);
    line += fmt::format(" | at {}:", shape);
    for (auto& [t, w] : worst) {
      auto it = here.find(t);
      if (it == here.end()) {
        w = std::numeric_limits<double>::infinity();
        continue;
      }
      line += fmt::format(" {}={:.4f}ms", ShortName(t), it->second);
      w = std::max(w, it->second / best_here);
    }
  }
  if (counted == 0) return fastest;
  ++rep.range_timed;
  double least = std::numeric_limits<double>::infinity();
  for (const auto& [t, w] : worst) least = std::min(least, w);
  if (!std::isfinite(least)) return fastest;  // every candidate failed somewhere: keep the tuning shapes' choice
  std::string pick;
  for (const auto& [t, w] : worst)
    if (w <= least * 1.02 && (pick.empty() || at_tuning.at(t) < at_tuning.at(pick))) pick = t;
  return pick;
}

// The bytes of a node's constant inputs (a layer made for it copies or repacks them).
int64_t ConstantBytes(const Node& n) {
  int64_t b = 0;
  for (const Value* v : n.inputs)
    if (v && v->is_const()) b += static_cast<int64_t>(v->const_value->nbytes());
  return b;
}

// Per-shape tactics are not made for layers whose constants are larger than this (a decoder's weight-only GEMMs).
constexpr int64_t kVariantMaxLayerBytes = int64_t{16} << 20;

}  // namespace

Result<std::vector<std::string>> SelectTactics(const Graph& g, const Graph& tuned,
                                               const std::vector<std::vector<std::string>>& candidates,
                                               const TuneOptions& opts, TuneReport* report,
                                               const std::vector<const Graph*>& also_at,
                                               const std::vector<std::vector<std::vector<std::string>>>* point_candidates,
                                               TacticVariants* variants) {
  const auto& nodes = g.nodes();
  if (candidates.size() != nodes.size())
    return Err(StatusCode::kInternal, "{} candidate lists for {} nodes", candidates.size(), nodes.size());
  TuneReport rep;
  const auto t0 = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  Handles handles;
  KILN_RETURN_IF_ERROR(handles.Init(stream.get()));
  std::mt19937 rng(7);
  std::vector<std::string> chosen;
  // The choice made for each layer signature (with its candidate list) decided in this build: a network repeats its
  // layers (ResNet's blocks of a stage, a transformer's layers), and an identical layer (same op, attributes, types,
  // shapes and candidates) gets the same answer without being timed again, as a timing cache would give it.
  std::map<std::string, std::string> chosen_for;
  std::map<std::string, std::vector<std::pair<int32_t, std::string>>> variants_for;  // likewise, per-shape tactics
  if (variants) variants->assign(nodes.size(), {});
  int64_t weight_bytes = 0, variant_bytes = 0;  // the engine's constants, and those the variant layers copy
  for (const auto& node : nodes) weight_bytes += ConstantBytes(*node);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = *nodes[k];
    const Node& tn = *tuned.nodes()[k];
    LayerSpec spec = SpecAt(n, tn, opts.allow_tf32);
    const std::vector<std::string>& tactics = candidates[k];
    ++rep.layers;
    const bool shapes_known = StaticShapes(tn);
    // The node at the profile's other shapes where they differ from the tuning shapes (and are static).
    std::vector<const Node*> others;
    std::vector<int32_t> other_points;  // their indices in also_at
    if (tactics.size() > 1 && shapes_known)
      for (size_t pi = 0; pi < also_at.size(); ++pi) {
        const Node& an = *also_at[pi]->nodes()[k];
        if (SameStaticShapes(tn, an) || !StaticShapes(an)) continue;
        others.push_back(&an);
        other_points.push_back(static_cast<int32_t>(pi));
      }
    // An identical earlier layer (same signature and candidates, hence the same workspace needs) decided already.
    std::string sig, repeat_key;
    if (tactics.size() > 1 && shapes_known) {
      sig = LayerSignature(spec);
      for (const Node* o : others) sig += " @ " + LayerSignature(SpecAt(n, *o, opts.allow_tf32));
      repeat_key = sig + " points";
      for (int32_t pi : other_points) repeat_key += fmt::format(" {}", pi);
      for (const std::string& t : tactics) repeat_key += "|" + t;
      if (auto it = chosen_for.find(repeat_key); it != chosen_for.end()) {
        chosen.push_back(it->second);
        if (variants) {  // the earlier layer's per-shape tactics, as far as the constants' budget goes
          const int64_t own = ConstantBytes(n);
          for (const auto& v : variants_for[repeat_key]) {
            if (variant_bytes + own > weight_bytes) break;
            (*variants)[k].push_back(v);
            variant_bytes += own;
            ++rep.variants;
          }
        }
        ++rep.repeats;
        continue;
      }
    }
    // With a workspace limit: the candidates whose scratch memory at the tuning shapes fits it (each measured on
    // a bench of the node), or an error naming what each needs.
    std::vector<std::string> fitting = tactics;
    std::optional<Bench> bench;
    if (opts.workspace_limit > 0 && shapes_known) {
      KILN_ASSIGN_OR_RETURN(Bench b, MakeBench(tn, spec, rng));
      bench.emplace(std::move(b));
      fitting.clear();
      std::string needs;
      for (const std::string& t : tactics) {
        auto layer = CreateLayer(spec, t);
        if (!layer.ok()) {
          fitting.push_back(t);  // its error surfaces when it is timed (or chosen)
          continue;
        }
        const size_t ws = (*layer)->WorkspaceBytes(bench->inputs, bench->outputs);
        if (ws <= opts.workspace_limit) {
          fitting.push_back(t);
        } else {
          ++rep.over_workspace;
          needs += fmt::format("{}{} {:.2f} MiB", needs.empty() ? "" : ", ", ShortName(t),
                               ws / 1048576.0);
        }
      }
      if (fitting.empty())
        return Err(StatusCode::kOutOfRange,
                   "{}: every CUDA tactic needs more scratch memory than the WORKSPACE limit of {:.2f} MiB ({}); "
                   "raise the limit (--memPoolSize=workspace:MiB, set_memory_pool_limit(WORKSPACE, bytes))",
                   n.Where(), opts.workspace_limit / 1048576.0, needs);
      if (!needs.empty() && opts.log)
        opts.log(fmt::format("tactic {}: left out over the WORKSPACE limit: {}", n.Where(), needs));
    }
    if (fitting.size() == 1 || !shapes_known) {
      chosen.push_back(fitting.front());
      if (!repeat_key.empty()) chosen_for[repeat_key] = fitting.front();
      continue;
    }
    // Per-shape tactics at the other points, for `main` (from the cache where it has them, else timed; cached).
    auto choose_variants = [&](const std::string& main) -> Status {
      // Not under a WORKSPACE limit (the point's candidates are not filtered by it), and not for layers whose
      // constants are large or once the variants' constants would pass the engine's own: each variant layer holds
      // its own copy of them, so per-shape tactics at most double the engine's device weights.
      if (!variants || !point_candidates || opts.workspace_limit > 0) return Status::Ok();
      const int64_t own = ConstantBytes(n);
      if (own > kVariantMaxLayerBytes || variant_bytes + own > weight_bytes) return Status::Ok();
      for (size_t i = 0; i < others.size(); ++i) {
        const int32_t pi = other_points[i];
        if (static_cast<size_t>(pi) >= point_candidates->size()) continue;
        std::vector<std::string> here;
        for (const std::string& t : (*point_candidates)[pi][k])
          if (t != kCpuFallbackTactic) here.push_back(t);  // a layer runs on the CPU only where no GPU layer can
        if (here.empty()) continue;
        const Node& o = *others[i];
        const LayerSpec spec_o = SpecAt(n, o, opts.allow_tf32);
        const std::string vkey = LayerSignature(spec_o) + " # variant of " + LayerSignature(spec) + " running " + main;
        std::string pick;  // "" where none beats `main` there
        const TimingEntry* e = opts.cache ? opts.cache->Find(vkey) : nullptr;
        const bool listed = e && std::find(here.begin(), here.end(), e->tactic) != here.end();
        if (e && (listed || (e->tactic == "-" && e->candidates == static_cast<int>(here.size())))) {
          if (listed) pick = e->tactic;  // else the entry says none beats `main` there
        } else {  // not cached, or cached for other candidates: timed (and the entry replaced)
          auto made = MakeBench(o, spec_o, rng);
          if (!made.ok()) continue;
          KILN_ASSIGN_OR_RETURN(std::optional<double> main_ms, TimeCandidate(n, spec, main, *made, 0.0, opts, stream.get(),
                                                                             handles, rep, " at another profile point"));
          double best_ms = 0;
          for (const std::string& t : here) {
            KILN_ASSIGN_OR_RETURN(std::optional<double> ms, TimeCandidate(n, spec_o, t, *made, best_ms, opts, stream.get(),
                                                                          handles, rep, " made at another profile point"));
            if (ms && (best_ms == 0 || *ms < best_ms)) {
              best_ms = *ms;
              pick = t;
            }
          }
          if (!pick.empty() && main_ms && !(best_ms * 1.05 < *main_ms)) pick.clear();
          if (opts.log)
            opts.log(fmt::format("tactic {} at {}: {} {} (made at opt: {})", n.Where(),
                                 o.outputs.empty() || !o.outputs[0] ? "?" : ShapeToString(o.outputs[0]->shape),
                                 pick.empty() ? "keeps" : "takes", pick.empty() ? main : pick,
                                 main_ms ? fmt::format("{:.4f} ms", *main_ms) : "fails"));
          if (opts.cache) opts.cache->Put(vkey, TimingEntry{pick.empty() ? "-" : pick, best_ms, static_cast<int>(here.size())});
        }
        if (!pick.empty() && variant_bytes + own <= weight_bytes) {
          (*variants)[k].emplace_back(pi, pick);
          ++rep.variants;
          variant_bytes += own;
        }
      }
      variants_for[repeat_key] = (*variants)[k];
      return Status::Ok();
    };
    if (opts.cache) {
      // A cached tactic counts where it is a candidate, or, with no WORKSPACE filtering, where the layer can still be
      // made with it: cuBLASLt's heuristic can name another algorithm for the same GEMM depending on what it was asked
      // before (an H200 listed a Gemm's algorithms with other bytes after the per-shape listing queried other shapes).
      const TimingEntry* e = opts.cache->Find(sig);
      const bool usable = e && (std::find(fitting.begin(), fitting.end(), e->tactic) != fitting.end() ||
                                (fitting.size() == tactics.size() && CreateLayer(spec, e->tactic).ok()));
      if (usable) {
        chosen.push_back(e->tactic);
        chosen_for[repeat_key] = e->tactic;
        ++rep.cache_hits;
        KILN_RETURN_IF_ERROR(choose_variants(e->tactic));
        continue;
      }
    }
    if (!bench) {
      KILN_ASSIGN_OR_RETURN(Bench b, MakeBench(tn, spec, rng));
      bench.emplace(std::move(b));
    }
    std::string best;
    double best_ms = 0;
    std::string line;
    std::map<std::string, double> at_tuning;  // the candidates that ran, and their time at the tuning shapes
    for (const std::string& t : fitting) {
      KILN_ASSIGN_OR_RETURN(std::optional<double> ms, TimeCandidate(n, spec, t, *bench, best.empty() ? 0.0 : best_ms,
                                                                    opts, stream.get(), handles, rep, ""));
      if (!ms) continue;
      line += fmt::format(" {}={:.4f}ms", ShortName(t), *ms);
      at_tuning[t] = *ms;
      if (best.empty() || *ms < best_ms) {
        best = t;
        best_ms = *ms;
      }
    }
    if (best.empty())
      return Err(StatusCode::kUnsupported, "{}: none of its {} CUDA tactics ran at the tuning shapes (first error: {})",
                 n.Where(), fitting.size(), rep.failures.empty() ? "?" : rep.failures.back());
    ++rep.timed;
    if (!others.empty()) {
      KILN_ASSIGN_OR_RETURN(std::string across, AcrossShapes(n, spec, others, at_tuning, best, opts, stream.get(),
                                                             handles, rng, rep, line));
      rep.range_changed += across != best;
      best = across;
      best_ms = at_tuning.at(best);
    }
    if (opts.log) opts.log(fmt::format("tactic {}: {} (of {}:{})", n.Where(), best, fitting.size(), line));
    // A choice among fewer candidates than the node has (the workspace limit left some out) is not cached: a
    // build without the limit would reuse it.
    if (opts.cache && fitting.size() == tactics.size())
      opts.cache->Put(sig, TimingEntry{best, best_ms, static_cast<int>(tactics.size())});
    chosen_for[repeat_key] = best;
    chosen.push_back(best);
    KILN_RETURN_IF_ERROR(choose_variants(best));
  }
  rep.seconds = SecondsSince(t0);
  if (report) *report = rep;
  return chosen;
}

}  // namespace kiln::cuda
