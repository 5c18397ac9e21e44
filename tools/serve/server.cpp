// The server core (server.h): the model repository in Triton's layout, model versions loaded per the version
// policy, the control modes, and the metrics text.
#include "server.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>

#include "kiln/backend.h"
#include "model.h"
#include "shared_memory.h"

namespace kiln::serve {

namespace fs = std::filesystem;

namespace {

std::string ReadText(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool IsVersionDir(const fs::directory_entry& e) {
  if (!e.is_directory()) return false;
  const std::string n = e.path().filename().string();
  return !n.empty() && n.size() < 19 && std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A name a request may carry: no path separators or dot-segments (the repository is a folder tree).
bool SafeName(const std::string& n) {
  return !n.empty() && n.size() < 256 && n != "." && n != ".." && n.find('/') == std::string::npos &&
         n.find('\\') == std::string::npos && n.find('\0') == std::string::npos;
}

}  // namespace

struct ModelEntry {
  std::map<int64_t, std::shared_ptr<LoadedModel>> versions;  // ready versions
  std::map<int64_t, std::string> failed;                     // version -> reason (UNAVAILABLE)
  std::string state = "UNAVAILABLE";                         // READY when any version is
  std::string reason;
};

class ServerImpl {
 public:
  ServerImpl(const ServerOptions& o, ILogger& l) : opts(o), logger(l), shm(o.allow_client_shm, l) {}
  ServerOptions opts;
  ILogger& logger;
  SharedMemoryManager shm;
  std::string backend;
  mutable std::shared_mutex mu;  // guards models (shared: lookups; exclusive: load/unload)
  std::map<std::string, ModelEntry> models;
  std::set<std::string> should_load;  // models the control mode keeps loaded (for Ready)
  std::atomic<bool> shutting_down{false};
  std::mutex load_mu;  // one load/unload at a time

  void Log(Severity s, const std::string& m) const { logger.log(s, m.c_str()); }

  // The versions a model's policy serves, among those on disk.
  static std::vector<int64_t> PolicyVersions(const inference::ModelConfig& c, std::vector<int64_t> on_disk) {
    std::sort(on_disk.begin(), on_disk.end());
    const auto& p = c.version_policy();
    if (p.has_all()) return on_disk;
    if (p.has_specific()) {
      std::vector<int64_t> v;
      for (int64_t x : p.specific().versions())
        if (std::find(on_disk.begin(), on_disk.end(), x) != on_disk.end()) v.push_back(x);
      return v;
    }
    const size_t n = p.has_latest() && p.latest().num_versions() > 0 ? p.latest().num_versions() : 1;
    return std::vector<int64_t>(on_disk.end() - static_cast<std::ptrdiff_t>(std::min(n, on_disk.size())),
                                on_disk.end());
  }

  Outcome Load(const std::string& name) {
    if (!SafeName(name)) return Outcome::BadRequest(fmt::format("'{}' is not a model name", name));
    std::lock_guard<std::mutex> one(load_mu);
    const fs::path dir = fs::path(opts.model_repository) / name;
    if (!fs::is_directory(dir))
      return Outcome::NotFound(fmt::format("model '{}' is not in the repository {}", name, opts.model_repository));
    const bool have_config = fs::exists(dir / "config.pbtxt");
    if (!have_config && opts.strict_model_config)
      return Outcome::BadRequest(fmt::format("model '{}' has no config.pbtxt (--strict-model-config)", name));
    const std::string config_text = have_config ? ReadText(dir / "config.pbtxt") : "";
    std::vector<int64_t> on_disk;
    for (const auto& e : fs::directory_iterator(dir))
      if (IsVersionDir(e)) on_disk.push_back(std::stoll(e.path().filename().string()));
    ModelEntry entry;
    inference::ModelConfig policy_config;
    std::vector<std::string> ignored;
    if (have_config) {
      auto c = ParseModelConfig(config_text, name + "/config.pbtxt", &ignored);
      if (!c.ok()) return Fail(name, c.status().message());
      policy_config = *c;
    }
    const std::vector<int64_t> versions = PolicyVersions(policy_config, on_disk);
    if (versions.empty())
      return Fail(name, fmt::format("model '{}' has no version folder (<repository>/{}/1/model.engine or model.onnx) "
                                    "its version_policy serves", name, name));
    for (int64_t v : versions) {
      auto m = LoadedModel::Load(name, std::to_string(v), (dir / std::to_string(v)).string(), config_text,
                                 have_config, backend, opts.timing_cache, opts.max_queue_size, logger);
      if (m.ok()) {
        entry.versions[v] = std::shared_ptr<LoadedModel>(std::move(*m));
        Log(Severity::kInfo, fmt::format("loaded model '{}' version {}", name, v));
      } else {
        entry.failed[v] = m.status().message();
        Log(Severity::kError, fmt::format("model '{}' version {} failed to load: {}", name, v, m.status().message()));
      }
    }
    entry.state = entry.versions.empty() ? "UNAVAILABLE" : "READY";
    if (entry.versions.empty()) entry.reason = entry.failed.begin()->second;
    const bool ready = !entry.versions.empty();
    const std::string reason = entry.reason;
    if (!ready && Serving(name))  // a failed reload leaves the versions being served in place (as Triton does)
      return Outcome::BadRequest(fmt::format("failed to load model '{}' (the loaded versions keep serving): {}", name,
                                             reason));
    ModelEntry old;  // a reload: the old versions finish their requests after the new ones take over
    {
      std::unique_lock<std::shared_mutex> lock(mu);
      auto it = models.find(name);
      if (it != models.end()) old = std::move(it->second);
      models[name] = std::move(entry);
    }
    StopAll(old);
    if (ready) return Outcome::Ok();
    return Outcome::BadRequest(fmt::format("failed to load model '{}': {}", name, reason));
  }

  bool Serving(const std::string& name) const {
    std::shared_lock<std::shared_mutex> lock(mu);
    auto it = models.find(name);
    return it != models.end() && !it->second.versions.empty();
  }

  Outcome Fail(const std::string& name, const std::string& why) {
    if (Serving(name))
      return Outcome::BadRequest(fmt::format("failed to load model '{}' (the loaded versions keep serving): {}", name,
                                             why));
    ModelEntry old;
    {
      std::unique_lock<std::shared_mutex> lock(mu);
      auto& e = models[name];
      old = std::move(e);
      e = ModelEntry{};
      e.reason = why;
    }
    StopAll(old);
    Log(Severity::kError, fmt::format("model '{}' failed to load: {}", name, why));
    return Outcome::BadRequest(fmt::format("failed to load model '{}': {}", name, why));
  }

  static void StopAll(ModelEntry& e) {
    for (auto& [v, m] : e.versions) m->Stop(std::chrono::seconds(30));
  }

  // The loaded model for a request: the version named, or the latest ready one.
  Outcome Get(const std::string& name, const std::string& version, std::shared_ptr<LoadedModel>* out,
              std::vector<std::string>* versions = nullptr) const {
    if (shutting_down) return Outcome::Unavailable("the server is shutting down");
    std::shared_lock<std::shared_mutex> lock(mu);
    auto it = models.find(name);
    if (it == models.end()) return Outcome::NotFound(fmt::format("unknown model '{}'", name));
    const ModelEntry& e = it->second;
    if (version.empty()) {
      if (e.versions.empty())
        return Outcome::Unavailable(fmt::format("model '{}' is not ready{}", name,
                                                e.reason.empty() ? "" : ": " + e.reason));
      *out = e.versions.rbegin()->second;
      if (versions)
        for (const auto& [v, _] : e.versions) versions->push_back(std::to_string(v));
      return Outcome::Ok();
    }
    int64_t v = -1;
    try {
      size_t used = 0;
      v = std::stoll(version, &used);
      if (used != version.size()) v = -1;
    } catch (const std::exception&) {
    }
    auto vit = v >= 0 ? e.versions.find(v) : e.versions.end();
    if (vit == e.versions.end()) {
      auto fit = v >= 0 ? e.failed.find(v) : e.failed.end();
      if (fit != e.failed.end())
        return Outcome::Unavailable(fmt::format("model '{}' version {} is not ready: {}", name, version, fit->second));
      return Outcome::NotFound(fmt::format("model '{}' has no version '{}'", name, version));
    }
    *out = vit->second;
    if (versions)
      for (const auto& [v2, _] : e.versions) versions->push_back(std::to_string(v2));
    return Outcome::Ok();
  }
};

Server::Server(std::unique_ptr<ServerImpl> impl) : impl_(std::move(impl)) {}
Server::~Server() { Shutdown(std::chrono::milliseconds(0)); }

Result<std::unique_ptr<Server>> Server::Create(const ServerOptions& options, ILogger& logger, bool exit_on_error) {
  if (options.model_repository.empty() || !fs::is_directory(options.model_repository))
    return Status(StatusCode::kNotFound,
                  fmt::format("--model-repository '{}' is not a folder", options.model_repository));
  if (options.model_control_mode != "none" && options.model_control_mode != "explicit")
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("--model-control-mode={}: kiln serve has none and explicit (poll is not supported: load "
                              "and unload through the repository API)",
                              options.model_control_mode));
  auto impl = std::make_unique<ServerImpl>(options, logger);
  impl->backend = options.backend.empty() ? GetDefaultBackendName() : options.backend;
  KILN_ASSIGN_OR_RETURN(BackendInfo info, GetBackendInfo(impl->backend));
  if (!info.available)
    return Status(StatusCode::kUnsupported, fmt::format("--backend={}: {}", impl->backend, info.description));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(options.model_repository))
    if (e.is_directory() && e.path().filename().string()[0] != '.') names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::set<std::string> to_load;
  if (options.model_control_mode == "none") {
    to_load.insert(names.begin(), names.end());
  } else {
    for (const std::string& m : options.load_models) {
      if (m == "*") to_load.insert(names.begin(), names.end());
      else to_load.insert(m);
    }
  }
  std::unique_ptr<Server> server(new Server(std::move(impl)));
  for (const std::string& n : to_load) {
    server->impl_->should_load.insert(n);
    Outcome o = server->impl_->Load(n);
    if (!o.ok() && exit_on_error) return Status(StatusCode::kInvalidModel, o.message);
  }
  return server;
}

bool Server::Live() const { return !impl_->shutting_down; }

bool Server::Ready() const {
  if (impl_->shutting_down) return false;
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  for (const std::string& n : impl_->should_load) {
    auto it = impl_->models.find(n);
    if (it == impl_->models.end() || it->second.state != "READY") return false;
  }
  return true;
}

std::string Server::Version() const { return "0.1.0"; }

std::vector<std::string> Server::Extensions() const {
  return {"binary_tensor_data", "model_repository", "model_configuration", "statistics", "system_shared_memory"};
}

Outcome Server::ModelReady(const std::string& model, const std::string& version) const {
  std::shared_ptr<LoadedModel> m;
  return impl_->Get(model, version, &m);
}

Outcome Server::Metadata(const std::string& model, const std::string& version, ModelMetadata* out) const {
  std::shared_ptr<LoadedModel> m;
  std::vector<std::string> versions;
  Outcome o = impl_->Get(model, version, &m, &versions);
  if (!o.ok()) return o;
  *out = m->metadata();
  out->versions = std::move(versions);
  return Outcome::Ok();
}

Outcome Server::ConfigJson(const std::string& model, const std::string& version, std::string* json) const {
  std::shared_ptr<LoadedModel> m;
  Outcome o = impl_->Get(model, version, &m);
  if (o.ok()) *json = ModelConfigJson(m->config());
  return o;
}

Outcome Server::ConfigProto(const std::string& model, const std::string& version, std::string* serialized) const {
  std::shared_ptr<LoadedModel> m;
  Outcome o = impl_->Get(model, version, &m);
  if (o.ok()) m->config().SerializeToString(serialized);
  return o;
}

Outcome Server::Infer(InferRequest request, InferResponse* response) {
  if (impl_->shutting_down) return Outcome::Unavailable("the server is shutting down");
  std::shared_ptr<LoadedModel> m;
  Outcome o = impl_->Get(request.model, request.version, &m);
  if (!o.ok()) return o;
  if (impl_->opts.request_timeout.count() > 0)
    request.deadline = std::min(request.deadline, std::chrono::steady_clock::now() + impl_->opts.request_timeout);
  // Inputs and outputs in shared memory: their regions are looked up (and held mapped) before the request queues.
  std::vector<SharedMemoryOutput> shm_outputs;
  o = impl_->shm.Resolve(&request, &shm_outputs);
  if (!o.ok()) return o;
  o = m->Infer(std::move(request), response);
  if (!o.ok()) return o;
  return SharedMemoryManager::WriteOutputs(shm_outputs, response);
}

Outcome Server::RegisterSystemSharedMemory(const std::string& name, const std::string& key, uint64_t offset,
                                           uint64_t byte_size) {
  if (impl_->shutting_down) return Outcome::Unavailable("the server is shutting down");
  return impl_->shm.Register(name, key, offset, byte_size);
}

Outcome Server::UnregisterSystemSharedMemory(const std::string& name) { return impl_->shm.Unregister(name); }

Outcome Server::SystemSharedMemoryStatus(const std::string& name, std::vector<SharedMemoryRegionStatus>* out) const {
  return impl_->shm.GetStatus(name, out);
}

Outcome Server::RegisterCudaSharedMemory(const std::string& name) {
  if (!impl_->shm.allowed()) return Outcome::NotImplemented(kClientShmDisabled);
  return Outcome::BadRequest(fmt::format("failed to register CUDA shared memory region '{}': kiln serve does not "
                                         "support CUDA shared memory (cuda_shared_memory); use system shared memory "
                                         "(/v2/systemsharedmemory) or send the tensors in the request",
                                         name));
}

Outcome Server::UnregisterCudaSharedMemory(const std::string&) {
  if (!impl_->shm.allowed()) return Outcome::NotImplemented(kClientShmDisabled);
  return Outcome::Ok();  // none is ever registered
}

Outcome Server::CudaSharedMemoryStatus(const std::string& name) const {
  if (name.empty()) return Outcome::Ok();
  return Outcome::NotFound(fmt::format("Unable to find cuda shared memory region: '{}' (kiln serve does not support "
                                       "CUDA shared memory)",
                                       name));
}

Outcome Server::Statistics(const std::string& model, const std::string& version,
                           std::vector<ModelStatisticsData>* out) const {
  std::vector<std::pair<std::string, std::shared_ptr<LoadedModel>>> picked;
  if (model.empty()) {
    std::shared_lock<std::shared_mutex> lock(impl_->mu);
    for (const auto& [name, e] : impl_->models)
      for (const auto& [v, m] : e.versions) picked.push_back({name, m});
  } else if (version.empty()) {
    std::shared_ptr<LoadedModel> any;
    Outcome o = impl_->Get(model, "", &any);
    if (!o.ok()) return o;
    std::shared_lock<std::shared_mutex> lock(impl_->mu);
    auto it = impl_->models.find(model);
    if (it != impl_->models.end())
      for (const auto& [v, m] : it->second.versions) picked.push_back({model, m});
  } else {
    std::shared_ptr<LoadedModel> m;
    Outcome o = impl_->Get(model, version, &m);
    if (!o.ok()) return o;
    picked.push_back({model, m});
  }
  const auto ns = [](uint64_t us) { return us * 1000; };
  for (const auto& [name, m] : picked) {
    ModelStats& s = m->stats();
    ModelStatisticsData d;
    d.name = name;
    d.version = m->version();
    d.last_inference_ms = s.last_inference_ms.load();
    d.inference_count = s.inference_count.load();
    d.execution_count = s.execution_count.load();
    d.success = {s.request_success.load(), ns(s.success_us.load())};
    d.fail = {s.request_failure.load(), ns(s.fail_us.load())};
    const uint64_t computed = s.computed.load();
    d.queue = {computed, ns(s.queue_us.load())};
    d.compute_input = {computed, ns(s.compute_input_us.load())};
    d.compute_infer = {computed, ns(s.compute_infer_us.load())};
    d.compute_output = {computed, ns(s.compute_output_us.load())};
    for (const auto& [size, b] : s.PerBatchCopy())
      d.batches.push_back({size, {b.count, ns(b.input_us)}, {b.count, ns(b.infer_us)}, {b.count, ns(b.output_us)}});
    out->push_back(std::move(d));
  }
  return Outcome::Ok();
}

std::vector<RepositoryEntry> Server::RepositoryIndex(bool ready_only) const {
  std::vector<RepositoryEntry> out;
  std::set<std::string> seen;
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  for (const auto& [name, e] : impl_->models) {
    seen.insert(name);
    for (const auto& [v, m] : e.versions) out.push_back({name, std::to_string(v), "READY", ""});
    if (ready_only) continue;
    for (const auto& [v, why] : e.failed) out.push_back({name, std::to_string(v), "UNAVAILABLE", why});
    if (e.versions.empty() && e.failed.empty()) out.push_back({name, "", "UNAVAILABLE", e.reason});
  }
  if (!ready_only && fs::is_directory(impl_->opts.model_repository))
    for (const auto& d : fs::directory_iterator(impl_->opts.model_repository)) {
      const std::string n = d.path().filename().string();
      if (d.is_directory() && n[0] != '.' && !seen.count(n)) out.push_back({n, "", "UNAVAILABLE", "unloaded"});
    }
  return out;
}

Outcome Server::LoadModel(const std::string& model) {
  if (impl_->shutting_down) return Outcome::Unavailable("the server is shutting down");
  if (impl_->opts.model_control_mode != "explicit")
    return Outcome::BadRequest("explicit model load / unload is not allowed unless --model-control-mode=explicit");
  Outcome o = impl_->Load(model);
  if (o.ok()) {
    std::unique_lock<std::shared_mutex> lock(impl_->mu);
    impl_->should_load.insert(model);
  }
  return o;
}

Outcome Server::UnloadModel(const std::string& model) {
  if (impl_->opts.model_control_mode != "explicit")
    return Outcome::BadRequest("explicit model load / unload is not allowed unless --model-control-mode=explicit");
  std::lock_guard<std::mutex> one(impl_->load_mu);
  ModelEntry entry;
  {
    std::unique_lock<std::shared_mutex> lock(impl_->mu);
    auto it = impl_->models.find(model);
    if (it == impl_->models.end()) return Outcome::NotFound(fmt::format("unknown model '{}'", model));
    entry = std::move(it->second);
    impl_->models.erase(it);
    impl_->should_load.erase(model);
  }
  ServerImpl::StopAll(entry);  // outside the lock: requests in flight finish
  impl_->Log(Severity::kInfo, fmt::format("unloaded model '{}'", model));
  return Outcome::Ok();
}

void Server::Shutdown(std::chrono::milliseconds drain) {
  if (impl_->shutting_down.exchange(true)) return;
  std::map<std::string, ModelEntry> models;
  {
    std::unique_lock<std::shared_mutex> lock(impl_->mu);
    models.swap(impl_->models);
  }
  const auto until = std::chrono::steady_clock::now() + drain;  // one deadline for every model
  for (auto& [n, e] : models)
    for (auto& [v, m] : e.versions)
      m->Stop(std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                         until - std::chrono::steady_clock::now())));
  impl_->shm.UnregisterAll();  // (a region a request still holds is unmapped when it is answered)
}

std::string Server::MetricsText() const {
  std::vector<std::pair<std::string, std::shared_ptr<LoadedModel>>> loaded;
  {
    std::shared_lock<std::shared_mutex> lock(impl_->mu);
    for (const auto& [name, e] : impl_->models)
      for (const auto& [v, m] : e.versions) loaded.push_back({name, m});
  }
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const auto& [n, m] : loaded)
      out += fmt::format("{}{{model=\"{}\",version=\"{}\"}} {}\n", name, n, m->version(), value(*m));
  };
  family("nv_inference_request_success", "counter", "Number of successful inference requests",
         [](LoadedModel& m) { return m.stats().request_success.load(); });
  family("nv_inference_request_failure", "counter", "Number of failed inference requests",
         [](LoadedModel& m) { return m.stats().request_failure.load(); });
  family("nv_inference_count", "counter", "Number of inferences performed (a batch of n counts n)",
         [](LoadedModel& m) { return m.stats().inference_count.load(); });
  family("nv_inference_exec_count", "counter", "Number of model executions (batches run)",
         [](LoadedModel& m) { return m.stats().execution_count.load(); });
  family("nv_inference_request_duration_us", "counter", "Cumulative request duration, queue and compute included",
         [](LoadedModel& m) { return m.stats().request_us.load(); });
  family("nv_inference_queue_duration_us", "counter", "Cumulative time requests waited in the queue",
         [](LoadedModel& m) { return m.stats().queue_us.load(); });
  family("nv_inference_compute_input_duration_us", "counter", "Cumulative time preparing and copying inputs",
         [](LoadedModel& m) { return m.stats().compute_input_us.load(); });
  family("nv_inference_compute_infer_duration_us", "counter", "Cumulative time running the engine",
         [](LoadedModel& m) { return m.stats().compute_infer_us.load(); });
  family("nv_inference_compute_output_duration_us", "counter", "Cumulative time copying and splitting outputs",
         [](LoadedModel& m) { return m.stats().compute_output_us.load(); });
  family("nv_inference_pending_request_count", "gauge", "Requests queued or running",
         [](LoadedModel& m) { return static_cast<uint64_t>(m.in_flight()); });
  // Per GPU the model's instances run on (a gpu label); one line without it, 0, for a model on a host backend.
  out += "# HELP kiln_gpu_memory_used_bytes Device memory the model's instances hold on each GPU (activations and "
         "staging buffers; 0 on the cpu backend)\n# TYPE kiln_gpu_memory_used_bytes gauge\n";
  for (const auto& [n, m] : loaded) {
    const std::map<int, size_t> by_gpu = m->device_memory_bytes();
    if (by_gpu.empty())
      out += fmt::format("kiln_gpu_memory_used_bytes{{model=\"{}\",version=\"{}\"}} 0\n", n, m->version());
    for (const auto& [gpu, bytes] : by_gpu)
      out += fmt::format("kiln_gpu_memory_used_bytes{{model=\"{}\",version=\"{}\",gpu=\"{}\"}} {}\n", n,
                         m->version(), gpu, bytes);
  }
  // The batch sizes the engine ran: a Prometheus histogram with power-of-two buckets.
  out += "# HELP kiln_inference_batch_size Batch size of each model execution\n"
         "# TYPE kiln_inference_batch_size histogram\n";
  for (const auto& [n, m] : loaded) {
    ModelStats& s = m->stats();
    uint64_t cumulative = 0;
    for (int b = 0; b < ModelStats::kBatchBuckets; ++b) {
      cumulative += s.batch_buckets[b].load();
      const std::string le = b == ModelStats::kBatchBuckets - 1 ? "+Inf" : std::to_string(int64_t{1} << b);
      out += fmt::format("kiln_inference_batch_size_bucket{{model=\"{}\",version=\"{}\",le=\"{}\"}} {}\n", n,
                         m->version(), le, cumulative);
    }
    out += fmt::format("kiln_inference_batch_size_sum{{model=\"{}\",version=\"{}\"}} {}\n", n, m->version(),
                       s.batch_sum.load());
    out += fmt::format("kiln_inference_batch_size_count{{model=\"{}\",version=\"{}\"}} {}\n", n, m->version(),
                       cumulative);
  }
  return out;
}

}  // namespace kiln::serve
