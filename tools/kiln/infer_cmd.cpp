// Timing inference like trtexec: warm-up, then at least --iterations runs and --duration seconds on
// --infStreams contexts at once; latency = H2D + compute + D2H per run; percentiles; per-layer profile.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "commands.h"
#include "infer_device.h"
#include "kiln/error.h"

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Timing {
  double start_ms, h2d_ms, compute_ms, d2h_ms, latency_ms, enqueue_ms;
};

class LayerProfiler : public IProfiler {
 public:
  void reportLayerTime(const char* name, float ms) noexcept override {
    auto it = index_.find(name);
    if (it == index_.end()) {
      index_[name] = order_.size();
      order_.push_back({name, 0.0, 0});
      it = index_.find(name);
    }
    order_[it->second].total_ms += ms;
    order_[it->second].count += 1;
  }
  struct Layer {
    std::string name;
    double total_ms;
    int64_t count;
  };
  const std::vector<Layer>& layers() const { return order_; }

 private:
  std::map<std::string, size_t> index_;
  std::vector<Layer> order_;
};

struct Stream {
  std::unique_ptr<ExecutionContext> ctx;
  std::map<std::string, std::vector<uint8_t>> host_in, device_in;  // "device" = what the context reads
  std::map<std::string, std::vector<uint8_t>> host_out;
  std::vector<Timing> times;
  std::shared_ptr<DeviceRun> device;  // engines on a device-memory backend: device buffers, stream, events
};

Status RunOnce(Stream& s, const Engine& e, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
               bool transfers, Clock::time_point origin) {
  Timing t{};
  const auto a = Clock::now();
  if (s.device) {
    RunTimes rt;
    KILN_RETURN_IF_ERROR(DeviceRunOnce(*s.device, *s.ctx, transfers, &rt));
    t.start_ms = Ms(a - origin);
    t.h2d_ms = rt.h2d_ms;
    t.compute_ms = rt.compute_ms;
    t.d2h_ms = rt.d2h_ms;
    t.latency_ms = rt.latency_ms;
    t.enqueue_ms = rt.enqueue_ms;
    s.times.push_back(t);
    return Status::Ok();
  }
  if (transfers)
    for (const auto& n : inputs) std::memcpy(s.device_in[n].data(), s.host_in[n].data(), s.host_in[n].size());
  const auto b = Clock::now();
  KILN_RETURN_IF_ERROR(s.ctx->enqueue(nullptr));
  const auto c = Clock::now();
  if (transfers)
    for (const auto& n : outputs) {
      KILN_ASSIGN_OR_RETURN(const void* p, s.ctx->getOutputBuffer(n));
      KILN_ASSIGN_OR_RETURN(Dims d, s.ctx->getTensorShape(n));
      const size_t bytes = static_cast<size_t>(NumElements(d)) * DataTypeSize(e.getTensorDataType(n));
      s.host_out[n].resize(bytes);
      std::memcpy(s.host_out[n].data(), p, bytes);
    }
  const auto d = Clock::now();
  t.start_ms = Ms(a - origin);
  t.h2d_ms = Ms(b - a);
  t.compute_ms = Ms(c - b);
  t.enqueue_ms = t.compute_ms;  // the cpu backend computes inside enqueue
  t.d2h_ms = Ms(d - c);
  t.latency_ms = Ms(d - a);
  s.times.push_back(t);
  return Status::Ok();
}

struct Stats {
  double min, max, mean, median;
  std::vector<std::pair<double, double>> percentiles;
};

Stats Summarize(std::vector<double> v, const std::vector<double>& pcts) {
  Stats s{};
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  for (double p : pcts) {
    size_t idx = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
    idx = std::min(v.size() - 1, idx == 0 ? 0 : idx - 1);
    s.percentiles.emplace_back(p, v[idx]);
  }
  return s;
}

void PrintStats(const char* what, const Stats& s) {
  std::string pct;
  for (const auto& [p, x] : s.percentiles) pct += fmt::format(", percentile({:g}%) = {:.4f} ms", p, x);
  std::printf("[kiln] %s: min = %.4f ms, max = %.4f ms, mean = %.4f ms, median = %.4f ms%s\n", what, s.min, s.max,
              s.mean, s.median, pct.c_str());
}

nlohmann::json StatsJson(const Stats& s) {
  nlohmann::json j = {{"min", s.min}, {"max", s.max}, {"mean", s.mean}, {"median", s.median}};
  for (const auto& [p, x] : s.percentiles) j[fmt::format("p{:g}", p)] = x;
  return j;
}

}  // namespace

Status RunInference(const Engine& e, const Options& o, nlohmann::json* report) {
  std::vector<double> pcts;
  {
    size_t pos = 0;
    while (pos < o.percentile.size()) {
      size_t comma = o.percentile.find(',', pos);
      std::string p = o.percentile.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      char* end = nullptr;
      double v = std::strtod(p.c_str(), &end);
      if (p.empty() || *end != '\0' || v < 0 || v > 100)
        return Err(StatusCode::kInvalidArgument, "--percentile: '{}' is not a number in [0, 100]", p);
      pcts.push_back(v);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  KILN_ASSIGN_OR_RETURN(const BackendInfo backend, GetBackendInfo(e.getBackend()));
  const bool device = backend.device_memory;
  const bool graphs = backend.graph_capture && o.use_cuda_graph;
  if (o.use_spin_wait && !device)
    std::printf("[kiln] note: --useSpinWait has no effect on the %s backend (it computes inside enqueue)\n",
                backend.name.c_str());
  if (o.use_cuda_graph && !backend.graph_capture)
    std::printf("[kiln] note: --useCudaGraph has no effect on the %s backend\n", backend.name.c_str());
  KILN_ASSIGN_OR_RETURN(auto input_tensors, MakeEngineInputs(e, o));
  std::vector<std::string> inputs, outputs;
  for (int i = 0; i < e.getNbIOTensors(); ++i) {
    const std::string n = e.getIOTensorName(i);
    (e.getTensorIOMode(n) == TensorIOMode::kInput ? inputs : outputs).push_back(n);
  }
  std::map<std::string, Dims> shapes;
  for (const auto& [n, t] : input_tensors) shapes[n] = t.shape();
  std::vector<Stream> streams(static_cast<size_t>(o.inf_streams));
  for (auto& s : streams) {
    KILN_ASSIGN_OR_RETURN(s.ctx, e.createExecutionContext());
    for (const auto& n : inputs) {
      KILN_RETURN_IF_ERROR(s.ctx->setInputShape(n, shapes[n]));
      const Tensor& t = input_tensors[n];
      s.host_in[n].assign(static_cast<const uint8_t*>(t.raw()), static_cast<const uint8_t*>(t.raw()) + t.nbytes());
      if (!device) {
        s.device_in[n] = s.host_in[n];
        KILN_RETURN_IF_ERROR(s.ctx->setTensorAddress(n, s.device_in[n].data()));
      }
    }
    if (device) {
      KILN_ASSIGN_OR_RETURN(s.device, DeviceSetup(*s.ctx, e, s.host_in, outputs, o.use_cuda_graph));
    }
  }
  const bool transfers = !o.no_data_transfers;
  const auto origin = Clock::now();
  // Warm-up: every context runs once (launch plans, CUDA graph capture), then stream 0 for --warmUp ms.
  for (size_t k = 1; k < streams.size(); ++k) KILN_RETURN_IF_ERROR(RunOnce(streams[k], e, inputs, outputs, transfers, origin));
  while (Ms(Clock::now() - origin) < o.warm_up_ms || streams[0].times.empty())
    KILN_RETURN_IF_ERROR(RunOnce(streams[0], e, inputs, outputs, transfers, origin));
  for (auto& s : streams) s.times.clear();

  // Per-layer profile: during the timed runs, or in a run of its own (--separateProfileRun).
  LayerProfiler profiler;
  const bool profile = o.dump_profile || !o.export_profile.empty();
  if (profile && !o.separate_profile_run) streams[0].ctx->setProfiler(&profiler);

  const auto t_start = Clock::now();
  std::vector<Status> errors(streams.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < streams.size(); ++k)
    threads.emplace_back([&, k] {
      Stream& s = streams[k];
      // A new thread starts on device 0: take the engine's (--device), so that no call switches devices.
      if (Status st = SetDevice(e.getBackend(), e.getDevice()); !st.ok()) {
        errors[k] = st;
        return;
      }
      while (static_cast<int>(s.times.size()) < o.iterations || Ms(Clock::now() - t_start) < o.duration_s * 1000.0) {
        Status st = RunOnce(s, e, inputs, outputs, transfers, origin);
        if (!st.ok()) {
          errors[k] = st;
          return;
        }
      }
    });
  for (auto& t : threads) t.join();
  const double wall_ms = Ms(Clock::now() - t_start);
  for (const Status& st : errors) KILN_RETURN_IF_ERROR(st);
  streams[0].ctx->setProfiler(nullptr);
  if (profile && o.separate_profile_run) {
    streams[0].ctx->setProfiler(&profiler);
    for (int i = 0; i < std::max(1, std::min(o.iterations, 10)); ++i) {
      if (device) {
        RunTimes rt;
        KILN_RETURN_IF_ERROR(DeviceRunOnce(*streams[0].device, *streams[0].ctx, false, &rt));
      } else {
        KILN_RETURN_IF_ERROR(streams[0].ctx->enqueue(nullptr));
      }
    }
    streams[0].ctx->setProfiler(nullptr);
  }

  std::vector<double> lat, enq, h2d, comp, d2h;
  size_t total = 0;
  for (const auto& s : streams) {
    total += s.times.size();
    for (const auto& t : s.times) {
      lat.push_back(t.latency_ms);
      enq.push_back(t.enqueue_ms);
      h2d.push_back(t.h2d_ms);
      comp.push_back(t.compute_ms);
      d2h.push_back(t.d2h_ms);
    }
  }
  const double qps = total / (wall_ms / 1000.0);
  // --avgRuns: latency averaged over consecutive runs before the statistics, as trtexec reports it.
  std::vector<double> lat_avg;
  for (size_t i = 0; i + o.avg_runs <= lat.size(); i += o.avg_runs) {
    double sum = 0;
    for (int k = 0; k < o.avg_runs; ++k) sum += lat[i + k];
    lat_avg.push_back(sum / o.avg_runs);
  }
  const Stats s_lat = Summarize(lat, pcts), s_enq = Summarize(enq, pcts), s_h2d = Summarize(h2d, pcts),
              s_comp = Summarize(comp, pcts), s_d2h = Summarize(d2h, pcts);
  std::printf("[kiln] === Performance summary (%s backend, %d stream%s%s) ===\n", e.getBackend().c_str(), o.inf_streams,
              o.inf_streams > 1 ? "s" : "", graphs ? ", CUDA graph" : "");
  std::printf("[kiln] Throughput: %.3f qps\n", qps);
  PrintStats("Latency", s_lat);
  if (!lat_avg.empty()) PrintStats(fmt::format("Latency (average of {} runs)", o.avg_runs).c_str(), Summarize(lat_avg, pcts));
  PrintStats("Enqueue Time", s_enq);
  PrintStats("H2D Latency", s_h2d);
  const std::string compute =
      device ? "GPU Compute Time" : fmt::format("GPU Compute Time ({} backend: compute)", backend.name);
  PrintStats(compute.c_str(), s_comp);
  PrintStats("D2H Latency", s_d2h);
  std::printf("[kiln] Total Host Walltime: %.3f s; Total inferences: %zu\n", wall_ms / 1000.0, total);

  if (report) {
    (*report)["inference"] = {{"backend", e.getBackend()},
                              {"cuda_graph", graphs},
                              {"streams", o.inf_streams},
                              {"inferences", total},
                              {"walltime_s", wall_ms / 1000.0},
                              {"throughput_qps", qps},
                              {"latency_ms", StatsJson(s_lat)},
                              {"enqueue_ms", StatsJson(s_enq)},
                              {"h2d_ms", StatsJson(s_h2d)},
                              {"compute_ms", StatsJson(s_comp)},
                              {"d2h_ms", StatsJson(s_d2h)}};
    nlohmann::json sh;
    for (const auto& [n, d] : shapes) sh[n] = d;
    (*report)["inference"]["input_shapes"] = sh;
  }
  if (!o.export_times.empty()) {
    // Every stream's records (each names its stream), in start order.
    std::vector<std::pair<size_t, const Timing*>> all;
    for (size_t si = 0; si < streams.size(); ++si)
      for (const auto& t : streams[si].times) all.emplace_back(si, &t);
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.second->start_ms < b.second->start_ms; });
    nlohmann::json j = nlohmann::json::array();
    for (const auto& [si, t] : all)
      j.push_back({{"stream", si}, {"startMs", t->start_ms}, {"h2dMs", t->h2d_ms}, {"computeMs", t->compute_ms},
                   {"d2hMs", t->d2h_ms}, {"latencyMs", t->latency_ms}, {"enqueueMs", t->enqueue_ms}});
    KILN_RETURN_IF_ERROR(WriteJsonFile(o.export_times, j));
  }
  if (profile) {
    double sum = 0;
    for (const auto& l : profiler.layers()) sum += l.total_ms;
    nlohmann::json j = nlohmann::json::array();
    if (o.dump_profile) std::printf("[kiln] === Profile (%zu layers) ===\n%10s %10s %7s  %s\n", profiler.layers().size(), "total ms", "avg ms", "%", "layer");
    for (const auto& l : profiler.layers()) {
      const double avg = l.total_ms / std::max<int64_t>(1, l.count);
      if (o.dump_profile) std::printf("%10.3f %10.4f %6.1f%%  %s\n", l.total_ms, avg, sum ? 100 * l.total_ms / sum : 0.0, l.name.c_str());
      j.push_back({{"name", l.name}, {"timeMs", l.total_ms}, {"averageMs", avg}, {"percentage", sum ? 100 * l.total_ms / sum : 0.0}, {"count", l.count}});
    }
    if (!o.export_profile.empty()) KILN_RETURN_IF_ERROR(WriteJsonFile(o.export_profile, j));
  }
  // Outputs of the last run.
  std::vector<NamedTensor> outs;
  std::map<std::string, std::vector<uint8_t>> fetched;
  if (device) {
    KILN_ASSIGN_OR_RETURN(fetched, DeviceFetchOutputs(*streams[0].device, *streams[0].ctx));
  }
  for (const auto& n : outputs) {
    const void* p = nullptr;
    if (device) {
      p = fetched.at(n).data();
    } else {
      KILN_ASSIGN_OR_RETURN(p, streams[0].ctx->getOutputBuffer(n));
    }
    KILN_ASSIGN_OR_RETURN(Dims d, streams[0].ctx->getTensorShape(n));
    outs.push_back({n, e.getTensorDataType(n), d, p});
  }
  if (o.dump_output)
    for (const auto& t : outs) {
      Tensor view = Tensor::View(t.dtype, t.shape, const_cast<void*>(t.data));
      std::string vals;
      for (int64_t i = 0; i < std::min<int64_t>(view.numel(), 16); ++i) vals += fmt::format("{}{:g}", i ? " " : "", view.GetAsDouble(i));
      std::printf("[kiln] output '%s' %s: %s%s\n", t.name.c_str(), view.Describe().c_str(), vals.c_str(), view.numel() > 16 ? " ..." : "");
    }
  if (!o.export_output.empty()) {
    KILN_RETURN_IF_ERROR(ExportOutputs(o.export_output, outs));
    std::printf("[kiln] outputs written to %s\n", o.export_output.c_str());
  }
  return Status::Ok();
}

}  // namespace kiln::cli
