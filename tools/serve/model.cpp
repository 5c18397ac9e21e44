// A loaded model version: engine, instances, request queue and dynamic batcher (model.h).
#include "model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "kiln/builder.h"
#include "kiln/network.h"
#include "parallel_copy.h"

namespace kiln::serve {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

uint64_t MicrosSince(Clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
}

// The backend an instance group's kind asks for: KIND_GPU the first available backend with device memory, KIND_CPU
// the first available host backend, KIND_AUTO the server's default.
Result<std::string> BackendOf(const inference::ModelInstanceGroup& g, const std::string& default_backend,
                              const std::string& model) {
  if (g.kind() == inference::ModelInstanceGroup::KIND_AUTO) return default_backend;
  if (g.kind() != inference::ModelInstanceGroup::KIND_GPU && g.kind() != inference::ModelInstanceGroup::KIND_CPU)
    return Status(StatusCode::kUnsupported,
                  fmt::format("model '{}': instance_group kind {} is not supported (KIND_AUTO, KIND_GPU, KIND_CPU)",
                              model, inference::ModelInstanceGroup::Kind_Name(g.kind())));
  const bool want_device = g.kind() == inference::ModelInstanceGroup::KIND_GPU;
  std::string why;
  for (const std::string& name : GetBackendNames()) {
    auto info = GetBackendInfo(name);
    if (!info.ok() || info->device_memory != want_device) continue;
    if (info->available) return name;
    why = info->description;
  }
  return Status(StatusCode::kUnsupported,
                fmt::format("model '{}': instance_group kind {} has no backend here{}", model,
                            inference::ModelInstanceGroup::Kind_Name(g.kind()), why.empty() ? "" : ": " + why));
}

}  // namespace

void ModelStats::Reset() {
  for (auto* a : {&request_success, &request_failure, &inference_count, &execution_count, &computed, &request_us,
                  &success_us, &fail_us, &queue_us, &compute_input_us, &compute_infer_us, &compute_output_us,
                  &batch_sum, &last_inference_ms})
    a->store(0);
  for (auto& b : batch_buckets) b.store(0);
  std::lock_guard<std::mutex> lock(batch_mu);
  per_batch.clear();
}

void ModelStats::AddExecution(int64_t size, uint64_t input_us, uint64_t infer_us, uint64_t output_us) {
  std::lock_guard<std::mutex> lock(batch_mu);
  PerBatch& b = per_batch[size];
  ++b.count;
  b.input_us += input_us;
  b.infer_us += infer_us;
  b.output_us += output_us;
}

std::map<int64_t, ModelStats::PerBatch> ModelStats::PerBatchCopy() const {
  std::lock_guard<std::mutex> lock(batch_mu);
  return per_batch;
}

void ModelStats::AddBatch(int64_t size) {
  int b = 0;
  while (b < kBatchBuckets - 1 && size > (int64_t{1} << b)) ++b;
  batch_buckets[b].fetch_add(1);
  batch_sum.fetch_add(static_cast<uint64_t>(size));
}

struct Pending {
  InferRequest request;
  int64_t batch = 1;        // rows along the batch dim (1 where the model does not batch)
  std::string key;          // non-batch shapes: requests with the same key batch together
  std::vector<int> order;   // request input index for each model input
  Clock::time_point enqueued = Clock::now();
  std::promise<std::pair<Outcome, InferResponse>> promise;
};

struct LoadedModel::Instance {
  int device = 0;                  // the GPU it runs on (device backends; 0 on a host backend)
  const Engine* engine = nullptr;  // that GPU's engine copy
  std::unique_ptr<ExecutionContext> context;
  DeviceStream stream;                         // device backends
  std::map<std::string, DeviceMemory> buffers;  // device backends: per I/O tensor, grown on demand
  std::map<std::string, DeviceMemory> pinned;   // device backends: page-locked staging per I/O tensor
  std::vector<std::string> host_inputs;        // host backends: concatenated batch inputs
  size_t device_bytes = 0;
};

Result<std::unique_ptr<LoadedModel>> LoadedModel::Load(const std::string& name, const std::string& version,
                                                       const std::string& version_dir, const std::string& config_text,
                                                       bool have_config, const std::string& default_backend,
                                                       const std::string& timing_cache, size_t max_queue,
                                                       ILogger& logger) {
  std::unique_ptr<LoadedModel> m(new LoadedModel());
  m->name_ = name;
  m->version_ = version;
  m->logger_ = &logger;
  m->max_queue_ = max_queue;
  std::vector<std::string> warnings;
  if (have_config) {
    KILN_ASSIGN_OR_RETURN(m->config_, ParseModelConfig(config_text, name + "/config.pbtxt", &warnings));
  }
  // One backend for the model: every instance group's kind must agree.
  if (m->config_.instance_group_size() == 0) m->config_.add_instance_group()->set_count(1);
  std::string backend;
  for (const auto& g : m->config_.instance_group()) {
    KILN_ASSIGN_OR_RETURN(std::string b, BackendOf(g, default_backend, name));
    if (!backend.empty() && b != backend)
      return Status(StatusCode::kUnsupported,
                    fmt::format("model '{}': its instance groups ask for both {} and {}; kiln serves a model on one "
                                "backend: give every group the same kind",
                                name, backend, b));
    backend = b;
  }
  KILN_ASSIGN_OR_RETURN(BackendInfo info, GetBackendInfo(backend));
  if (!info.available)
    return Status(StatusCode::kUnsupported, fmt::format("model '{}': backend {}: {}", name, backend, info.description));
  m->backend_ = backend;
  m->device_memory_ = info.device_memory;
  // The devices the instances go on: each group's gpus (default [0]), every id one this process sees. A host backend
  // has one device (0); its instances all run on the host.
  KILN_ASSIGN_OR_RETURN(const int device_count, GetDeviceCount(backend));
  std::vector<int> devices;  // in the order the groups name them; the first builds an ONNX model
  for (auto& g : *m->config_.mutable_instance_group()) {
    if (g.gpus_size() == 0 && m->device_memory_) g.add_gpus(0);  // the config as served says where they run
    for (int gpu : g.gpus()) {
      if (gpu < 0 || gpu >= device_count) {
        const std::string have =
            m->device_memory_
                ? fmt::format("the {} backend sees {} GPU{} here{}; give ids below {} (CUDA_VISIBLE_DEVICES chooses "
                              "which GPUs the server sees, and numbers them from 0)",
                              backend, device_count, device_count == 1 ? "" : "s",
                              device_count > 1 ? fmt::format(" (0 to {})", device_count - 1) : std::string(),
                              device_count)
                : fmt::format("the {} backend runs on the host, which is device 0 only; leave gpus out for KIND_CPU",
                              backend);
        return Status(StatusCode::kInvalidArgument,
                      fmt::format("model '{}': instance_group gpus [{}]: there is no GPU {}: {}", name,
                                  fmt::join(g.gpus(), ", "), gpu, have));
      }
      if (m->device_memory_ && std::find(devices.begin(), devices.end(), gpu) == devices.end()) devices.push_back(gpu);
    }
  }
  if (devices.empty()) devices.push_back(0);
  // Loading makes each GPU current in turn on this thread: it gets its own device back at the end.
  struct RestoreDevice {
    std::string backend;
    Result<int> device;
    ~RestoreDevice() {
      if (device.ok()) (void)SetDevice(backend, *device);
    }
  } restore{backend, GetDevice(backend)};
  KILN_RETURN_IF_ERROR(SetDevice(backend, devices[0]).WithContext(fmt::format("model '{}'", name)));

  // The model file: config's default_model_filename, else model.engine, else model.onnx.
  const fs::path dir(version_dir);
  fs::path file;
  if (!m->config_.default_model_filename().empty()) file = dir / m->config_.default_model_filename();
  else if (fs::exists(dir / "model.engine")) file = dir / "model.engine";
  else if (fs::exists(dir / "model.plan")) file = dir / "model.plan";
  else file = dir / "model.onnx";
  if (!fs::exists(file))
    return Status(StatusCode::kNotFound,
                  fmt::format("model '{}' version {}: {} holds no model.engine, model.plan or model.onnx", name,
                              version, version_dir));
  Runtime runtime(logger);
  const bool onnx = file.extension() == ".onnx";
  std::vector<uint8_t> bytes;  // the serialized engine: deserialized once per GPU (each GPU its own copy)
  if (!onnx) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return Status(StatusCode::kNotFound, fmt::format("model '{}': cannot open {}", name, file.string()));
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    // (A header that does not read is reported by deserializeEngine below.)
    auto engine_info = ReadEngineFileInfo(bytes.data(), bytes.size());
    if (engine_info.ok() && engine_info->backend != backend)
      return Status(StatusCode::kInvalidModel,
                    fmt::format("model '{}': {} was built for the {} backend but its instance group asks for {}: set "
                                "the instance_group kind to match, or rebuild the engine",
                                name, file.string(), engine_info->backend, backend));
    m->metadata_.platform = "kiln_engine";
  } else {
    KILN_ASSIGN_OR_RETURN(BuildParameters params, ReadBuildParameters(m->config_, &warnings));
    Builder builder(logger);
    auto network = builder.createNetwork();
    OnnxParser parser(*network, logger);
    KILN_RETURN_IF_ERROR(parser.parseFromFile(file.string()));
    auto config = builder.createBuilderConfig();
    config->setBackend(backend);
    if (params.precision == "fp16" || params.precision == "best") config->setFlag(BuilderFlag::kFP16);
    if (params.precision == "bf16" || params.precision == "best") config->setFlag(BuilderFlag::kBF16);
    if (params.workspace_bytes) config->setMemoryPoolLimit("workspace", params.workspace_bytes);
    if (!timing_cache.empty() && info.tunes_tactics) config->setTimingCacheFile(timing_cache);
    // A profile for the dynamic inputs: the parameters' shapes, else batch dims up to max_batch_size (Triton's
    // default of 4 where there is no config).
    const int64_t mb = have_config ? m->config_.max_batch_size() : 4;
    auto profile = builder.createOptimizationProfile();
    bool dynamic = false;
    for (int i = 0; i < network->getNbInputs(); ++i) {
      const NetworkTensor t = network->getInput(i);
      Dims lo = t.dims, opt = t.dims, hi = t.dims;
      bool has_dynamic = false;
      for (size_t d = 0; d < t.dims.size(); ++d) {
        if (t.dims[d] >= 0) continue;
        has_dynamic = true;
        if (d == 0 && mb > 0) {
          lo[d] = 1, opt[d] = mb, hi[d] = mb;
        } else if (!params.max_shapes.count(t.name)) {
          return Status(StatusCode::kInvalidModel,
                        fmt::format("model '{}': input '{}' has a dynamic dim {} ({}); give its range in config.pbtxt: "
                                    "parameters {{ key: \"max_shapes\" value: {{ string_value: \"{}:...\" }} }} (and "
                                    "min_shapes, opt_shapes)",
                                    name, t.name, d, ShapeToString(t.dims), t.name));
        }
      }
      if (params.max_shapes.count(t.name)) {
        hi = params.max_shapes[t.name];
        lo = params.min_shapes.count(t.name) ? params.min_shapes[t.name] : hi;
        opt = params.opt_shapes.count(t.name) ? params.opt_shapes[t.name] : hi;
        has_dynamic = true;
      }
      if (!has_dynamic) continue;
      dynamic = true;
      KILN_RETURN_IF_ERROR(profile->setDimensions(t.name, ProfileSelector::kMin, lo));
      KILN_RETURN_IF_ERROR(profile->setDimensions(t.name, ProfileSelector::kOpt, opt));
      KILN_RETURN_IF_ERROR(profile->setDimensions(t.name, ProfileSelector::kMax, hi));
    }
    if (dynamic) KILN_RETURN_IF_ERROR(config->addOptimizationProfile(*profile).status());
    logger.log(Severity::kInfo,
               fmt::format("model '{}': building {} for the {} backend", name, file.string(), backend).c_str());
    // Built once, on the first GPU (the current device); every GPU loads the same bytes.
    KILN_ASSIGN_OR_RETURN(bytes, builder.buildSerializedNetwork(*network, *config));
    m->metadata_.platform = "onnxruntime_onnx";
  }
  for (int device : devices) {
    KILN_RETURN_IF_ERROR(SetDevice(backend, device).WithContext(fmt::format("model '{}'", name)));
    auto engine = runtime.deserializeEngine(bytes.data(), bytes.size());
    if (!engine.ok())
      return engine.status().WithContext(
          fmt::format("model '{}': {}{}", name, file.string(),
                      m->device_memory_ ? fmt::format(" on GPU {}", device) : std::string()));
    m->engines_[device] = std::move(*engine);
  }
  m->engine_ = m->engines_.at(devices[0]).get();
  for (const std::string& w : warnings) logger.log(Severity::kWarning, w.c_str());
  KILN_RETURN_IF_ERROR(CompleteAndCheckConfig(*m->engine_, name, have_config, &m->config_));
  if (m->config_.platform().empty() && m->config_.backend().empty()) m->config_.set_platform(m->metadata_.platform);

  // Metadata: the engine's tensors; -1 for dynamic dims.
  m->metadata_.name = name;
  m->metadata_.versions = {version};
  for (int i = 0; i < m->engine_->getNbIOTensors(); ++i) {
    const std::string n = m->engine_->getIOTensorName(i);
    const Dims d = m->engine_->getTensorShape(n);
    TensorMetadata t{n, m->engine_->getTensorDataType(n), std::vector<int64_t>(d.begin(), d.end())};
    if (V2Datatype(t.dtype).empty())
      return Status(StatusCode::kUnsupported, fmt::format("model '{}': tensor '{}' is {}, which KServe v2 has no "
                                                          "datatype for", name, n, DataTypeName(t.dtype)));
    if (m->engine_->getTensorIOMode(n) == TensorIOMode::kInput) {
      m->inputs_.push_back(n);
      m->metadata_.inputs.push_back(t);
    } else {
      m->outputs_.push_back(n);
      m->metadata_.outputs.push_back(t);
    }
  }

  // Instances: `count` contexts per group and GPU (data parallel: each GPU runs its own engine copy), each with its
  // stream, made on its GPU; host backends: `count` per group.
  for (const auto& g : m->config_.instance_group()) {
    const std::vector<int> group_devices =
        m->device_memory_ ? std::vector<int>(g.gpus().begin(), g.gpus().end()) : std::vector<int>{0};
    for (int device : group_devices) {
      KILN_RETURN_IF_ERROR(SetDevice(backend, device));
      for (int k = 0; k < g.count(); ++k) {
        auto inst = std::make_unique<Instance>();
        inst->device = device;
        inst->engine = m->engines_.at(m->device_memory_ ? device : devices[0]).get();
        KILN_ASSIGN_OR_RETURN(inst->context, inst->engine->createExecutionContext());
        if (m->device_memory_) {
          KILN_ASSIGN_OR_RETURN(inst->stream, DeviceStream::create(backend));
        }
        inst->host_inputs.resize(m->inputs_.size());
        m->instances_.push_back(std::move(inst));
      }
    }
  }
  // Bucket sizes (device backends with dynamic batching): powers of two, the preferred sizes and max_batch_size.
  const int64_t mb = m->config_.max_batch_size();
  if (m->device_memory_ && mb > 0 && m->config_.has_dynamic_batching()) {
    std::set<int64_t> sizes = {mb};
    for (int64_t b = 1; b < mb; b *= 2) sizes.insert(b);
    for (int32_t p : m->config_.dynamic_batching().preferred_batch_size()) sizes.insert(p);
    m->buckets_.assign(sizes.begin(), sizes.end());
    KILN_RETURN_IF_ERROR(m->WarmUp());
  }
  for (auto& inst : m->instances_) m->workers_.emplace_back([mp = m.get(), i = inst.get()] { mp->Worker(i); });
  if (m->device_memory_ && devices.size() > 1)
    logger.log(Severity::kInfo, fmt::format("model '{}': {} instance(s) on GPUs {}", name, m->instances_.size(),
                                            fmt::join(devices, ", "))
                                    .c_str());
  return m;
}

LoadedModel::~LoadedModel() { Stop(std::chrono::milliseconds(0)); }

int64_t LoadedModel::PaddedBatch(int64_t rows) const {
  for (int64_t b : buckets_)
    if (b >= rows) return b;
  return rows;
}

// Runs every bucket size once on every instance (zero inputs; the other dynamic dims at the profile's opt), so that
// requests do not pay for the launch plans.
Status LoadedModel::WarmUp() {
  for (auto& inst : instances_) {
    KILN_RETURN_IF_ERROR(SetDevice(backend_, inst->device));  // its staging and buffers are allocated on its GPU
    for (int64_t b : buckets_) {
      std::vector<std::unique_ptr<Pending>> batch;
      auto p = std::make_unique<Pending>();
      p->batch = b;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        TensorData t;
        t.name = inputs_[i];
        t.dtype = engine_->getTensorDataType(inputs_[i]);
        Dims d = engine_->getTensorShape(inputs_[i]);
        if (engine_->getNbOptimizationProfiles() > 0)
          for (size_t k = 0; k < d.size(); ++k)
            if (d[k] < 0) d[k] = engine_->getProfileShape(inputs_[i], 0, ProfileSelector::kOpt)[k];
        d[0] = b;
        t.shape.assign(d.begin(), d.end());
        t.bytes.assign(static_cast<size_t>(NumElements(d)) * DataTypeSize(t.dtype), '\0');
        p->request.inputs.push_back(std::move(t));
        p->order.push_back(static_cast<int>(i));
      }
      auto answer = p->promise.get_future();
      batch.push_back(std::move(p));
      RunBatch(inst.get(), batch);
      auto [outcome, unused] = answer.get();
      if (!outcome.ok())
        return Status(StatusCode::kInternal, fmt::format("model '{}': the warm-up run at batch {} failed: {}", name_, b,
                                                         outcome.message));
    }
  }
  stats_.Reset();
  return Status::Ok();
}

std::map<int, size_t> LoadedModel::device_memory_bytes() const {
  std::map<int, size_t> by_gpu;
  if (!device_memory_) return by_gpu;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& i : instances_) by_gpu[i->device] += i->engine->getDeviceMemorySize() + i->device_bytes;
  return by_gpu;
}

Outcome LoadedModel::Validate(const InferRequest& r, int64_t* batch) const {
  const int64_t mb = config_.max_batch_size();
  const std::string who = fmt::format("model '{}'", name_);
  for (size_t i = 0; i < r.inputs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (r.inputs[i].name == r.inputs[j].name)
        return Outcome::BadRequest(fmt::format("{}: input '{}' is given twice", who, r.inputs[i].name));
  for (const auto& in : r.inputs)
    if (std::find(inputs_.begin(), inputs_.end(), in.name) == inputs_.end())
      return Outcome::BadRequest(fmt::format("{}: it has no input '{}' (its inputs: {})", who, in.name,
                                             fmt::join(inputs_, ", ")));
  *batch = 1;
  bool first = true;
  for (const std::string& n : inputs_) {
    auto it = std::find_if(r.inputs.begin(), r.inputs.end(), [&](const TensorData& t) { return t.name == n; });
    if (it == r.inputs.end())
      return Outcome::BadRequest(fmt::format("{}: input '{}' is missing (the model takes {})", who, n,
                                             fmt::join(inputs_, ", ")));
    const DataType want = engine_->getTensorDataType(n);
    if (it->dtype != want)
      return Outcome::BadRequest(fmt::format("{}: input '{}' is {}, the model takes {}", who, n, V2Datatype(it->dtype),
                                             V2Datatype(want)));
    const Dims dims = engine_->getTensorShape(n);
    if (it->shape.size() != dims.size())
      return Outcome::BadRequest(fmt::format("{}: input '{}' has shape {}, the model takes {} ({} dims; -1 is "
                                             "dynamic)", who, n, ShapeToString(it->shape), ShapeToString(dims),
                                             dims.size()));
    const bool profiled = engine_->getNbOptimizationProfiles() > 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      const int64_t got = it->shape[d];
      if (got < 0)
        return Outcome::BadRequest(fmt::format("{}: input '{}' has a negative dim in {}", who, n,
                                               ShapeToString(it->shape)));
      if (dims[d] >= 0) {
        if (got != dims[d])
          return Outcome::BadRequest(fmt::format("{}: input '{}' has shape {}, the model takes {}", who, n,
                                                 ShapeToString(it->shape), ShapeToString(dims)));
        continue;
      }
      if (profiled) {
        const int64_t lo = engine_->getProfileShape(n, 0, ProfileSelector::kMin)[d];
        const int64_t hi = engine_->getProfileShape(n, 0, ProfileSelector::kMax)[d];
        if (got < lo || got > hi)
          return Outcome::BadRequest(fmt::format("{}: input '{}' has {} in dim {}, outside the model's range [{}, {}] "
                                                 "(shape {})", who, n, got, d, lo, hi, ShapeToString(it->shape)));
      }
    }
    if (mb > 0) {
      if (it->shape[0] < 1 || it->shape[0] > mb)
        return Outcome::BadRequest(fmt::format("{}: input '{}' has batch {}; the model takes 1 to {} (max_batch_size)",
                                               who, n, it->shape[0], mb));
      if (first) *batch = it->shape[0];
      else if (it->shape[0] != *batch)
        return Outcome::BadRequest(fmt::format("{}: the inputs disagree on the batch size ({} and {})", who, *batch,
                                               it->shape[0]));
      first = false;
    }
    const char* data = it->data();  // (in the request, or in a shared-memory region)
    if (want == DataType::kBool)
      for (size_t k = 0; k < it->size(); ++k)
        if (static_cast<unsigned char>(data[k]) > 1)
          return Outcome::BadRequest(fmt::format("{}: input '{}' is BOOL but element {} is {} (BOOL elements are 0 or 1)",
                                                 who, n, k, static_cast<int>(static_cast<unsigned char>(data[k]))));
    const int64_t volume = NumElements(it->shape);
    uint64_t want_bytes = 0;
    if (volume < 0 || __builtin_mul_overflow(static_cast<uint64_t>(volume), DataTypeSize(want), &want_bytes))
      return Outcome::BadRequest(fmt::format("{}: input '{}' has shape {}, too large for {}", who, n,
                                             ShapeToString(it->shape), V2Datatype(want)));
    if (it->size() != want_bytes)
      return Outcome::BadRequest(fmt::format("{}: input '{}' has {} bytes of data{}; shape {} of {} takes {}", who, n,
                                             it->size(), it->shm ? " in shared memory region '" + it->shm->region + "'"
                                                                 : "",
                                             ShapeToString(it->shape), V2Datatype(want), want_bytes));
  }
  for (const auto& o : r.outputs)
    if (std::find(outputs_.begin(), outputs_.end(), o.name) == outputs_.end())
      return Outcome::BadRequest(fmt::format("{}: it has no output '{}' (its outputs: {})", who, o.name,
                                             fmt::join(outputs_, ", ")));
  return Outcome::Ok();
}

Outcome LoadedModel::Infer(InferRequest request, InferResponse* response) {
  const auto start = Clock::now();
  auto p = std::make_unique<Pending>();
  Outcome v = Validate(request, &p->batch);
  if (!v.ok()) {
    stats_.request_failure.fetch_add(1);
    return v;
  }
  const bool batching = config_.max_batch_size() > 0;
  for (const std::string& n : inputs_) {
    const auto it = std::find_if(request.inputs.begin(), request.inputs.end(),
                                 [&](const TensorData& t) { return t.name == n; });
    p->order.push_back(static_cast<int>(it - request.inputs.begin()));
    for (size_t d = batching ? 1 : 0; d < it->shape.size(); ++d) p->key += std::to_string(it->shape[d]) + ",";
    p->key += ";";
  }
  p->request = std::move(request);
  auto future = p->promise.get_future();
  const Pending* mine = p.get();  // compared, never read: the worker may free it once answered
  const Clock::time_point deadline = p->request.deadline;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      stats_.request_failure.fetch_add(1);
      return Outcome::Unavailable(fmt::format("model '{}' is unloading", name_));
    }
    if (queue_.size() >= max_queue_) {
      stats_.request_failure.fetch_add(1);
      return Outcome::Unavailable(fmt::format("model '{}': {} requests are queued already; try again", name_,
                                              queue_.size()));
    }
    p->enqueued = Clock::now();
    queue_.push_back(std::move(p));
    in_flight_.fetch_add(1);
  }
  cv_.notify_all();
  // Past the deadline while still queued: answered with a timeout now (a request already running finishes).
  if (deadline != Clock::time_point::max() && future.wait_until(deadline) == std::future_status::timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const auto& q) { return q.get() == mine; });
    if (it != queue_.end()) {
      std::unique_ptr<Pending> gone = std::move(*it);
      queue_.erase(it);
      lock.unlock();
      in_flight_.fetch_sub(1);
      stats_.request_failure.fetch_add(1);
      stats_.fail_us.fetch_add(MicrosSince(start));
      return Outcome::Timeout(fmt::format("model '{}': the request timed out after waiting {} us in the queue", name_,
                                          MicrosSince(gone->enqueued)));
    }
  }
  auto [outcome, result] = future.get();
  in_flight_.fetch_sub(1);
  const uint64_t took = MicrosSince(start);
  stats_.request_us.fetch_add(took);
  (outcome.ok() ? stats_.request_success : stats_.request_failure).fetch_add(1);
  (outcome.ok() ? stats_.success_us : stats_.fail_us).fetch_add(took);
  if (outcome.ok()) *response = std::move(result);
  return outcome;
}

// Answers the queued requests past their deadline (504) and drops them from the queue.
void LoadedModel::ExpireQueued() {
  const auto now = Clock::now();
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->request.deadline < now) {
      (*it)->promise.set_value({Outcome::Timeout(fmt::format("model '{}': the request timed out after waiting {} us "
                                                             "in the queue", name_, MicrosSince((*it)->enqueued))),
                                {}});
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<std::unique_ptr<Pending>> LoadedModel::NextBatch(std::unique_lock<std::mutex>& lock) {
  std::vector<std::unique_ptr<Pending>> batch;
  ExpireQueued();
  if (queue_.empty()) return batch;
  const int64_t mb = config_.max_batch_size();
  if (mb > 0 && config_.has_dynamic_batching()) {
    const auto& db = config_.dynamic_batching();
    int64_t target = mb;
    if (db.preferred_batch_size_size() > 0)
      target = *std::max_element(db.preferred_batch_size().begin(), db.preferred_batch_size().end());
    const auto delay = std::chrono::microseconds(db.max_queue_delay_microseconds());
    for (;;) {
      ExpireQueued();
      if (queue_.empty()) return batch;
      const std::string& key = queue_.front()->key;
      int64_t total = 0;
      for (const auto& q : queue_)
        if (q->key == key && total + q->batch <= mb) total += q->batch;
      auto until = queue_.front()->enqueued + delay;
      if (total >= target || stopping_ || Clock::now() >= until) break;
      for (const auto& q : queue_) until = std::min(until, q->request.deadline);  // wake to answer a timeout
      cv_.wait_until(lock, until);
    }
    const std::string key = queue_.front()->key;
    int64_t total = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->key == key && total + (*it)->batch <= target) {
        total += (*it)->batch;
        batch.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    return batch;
  }
  batch.push_back(std::move(queue_.front()));
  queue_.pop_front();
  return batch;
}

void LoadedModel::Worker(Instance* inst) {
  // This thread's CUDA calls (allocations, copies, enqueue, synchronize) go to the instance's GPU.
  const Status on_device = device_memory_ ? SetDevice(backend_, inst->device) : Status::Ok();
  for (;;) {
    std::vector<std::unique_ptr<Pending>> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && queue_.empty()) return;
      batch = NextBatch(lock);
    }
    if (!on_device.ok()) {
      const Outcome o = Outcome::FromStatus(
          on_device.WithContext(fmt::format("model '{}': its instance on GPU {}", name_, inst->device)));
      for (auto& p : batch) p->promise.set_value({o, {}});
      continue;
    }
    if (!batch.empty()) RunBatch(inst, batch);
  }
}

void LoadedModel::RunBatch(Instance* inst, std::vector<std::unique_ptr<Pending>>& batch) {
  try {
    RunBatchUnguarded(inst, batch);
  } catch (const std::exception& e) {  // (out of memory, mostly): every request not yet answered gets the error
    for (auto& p : batch) {
      try {
        p->promise.set_value({Outcome::Internal(fmt::format("model '{}': the batch failed: {}", name_, e.what())), {}});
      } catch (const std::future_error&) {  // answered already
      }
    }
  }
}

void LoadedModel::RunBatchUnguarded(Instance* inst, std::vector<std::unique_ptr<Pending>>& batch) {
  const auto t_start = Clock::now();
  const bool batching = config_.max_batch_size() > 0;
  int64_t total = 0;
  for (const auto& p : batch) total += p->batch;
  // Device backends run the batch at the next bucket size (zero rows after the requests'): each new shape costs the
  // engine a launch plan, so the shapes stay few (buckets_) and are planned at load.
  const int64_t run_rows = PaddedBatch(total);
  for (const auto& p : batch) {
    stats_.queue_us.fetch_add(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(t_start - p->enqueued).count()));
  }
  auto fail_all = [&](const Outcome& o) {
    for (auto& p : batch) p->promise.set_value({o, {}});
  };
  auto fail_status = [&](const Status& s) { fail_all(Outcome::FromStatus(s)); };
  ExecutionContext& ctx = *inst->context;
  // Every way out (errors and exceptions included) waits for the stream: copies queued from page-locked staging or
  // straight from a request's shared-memory region must land before the next batch reuses the staging or the region
  // can be unmapped (the batch's holds go when the worker drops it, after this returns).
  struct DrainStream {
    const DeviceStream* stream;
    ~DrainStream() {
      if (stream) (void)stream->synchronize();
    }
  } drain{device_memory_ ? &inst->stream : nullptr};

  // Page-locked staging (device backends): the batch's inputs are gathered there, so the copy to the device is one
  // asynchronous DMA, and outputs come back there.
  auto pinned_buffer = [&](const std::string& key, size_t bytes) -> Result<char*> {
    auto it = inst->pinned.find(key);
    if (it == inst->pinned.end() || it->second.size() < bytes) {
      KILN_ASSIGN_OR_RETURN(DeviceMemory mem,
                            DeviceMemory::allocate(backend_, std::max<size_t>(bytes, 1), DeviceMemory::Kind::kPinnedHost));
      inst->pinned[key] = std::move(mem);
    }
    return static_cast<char*>(inst->pinned[key].data());
  };

  // Inputs: one request's tensors as they are (host backends), or several requests' concatenated along the batch dim.
  // Device backends: a request's bytes in a shared-memory region (page-locked at registration) are copied from there
  // to the device at their batch offset (direct); the others are gathered into the page-locked staging at theirs, over
  // several threads when they are large (ParallelCopy), and copied from there.
  struct DirectCopy {
    size_t offset;
    const char* src;
    size_t bytes;
  };
  std::vector<std::vector<DirectCopy>> direct(inputs_.size());
  std::vector<const void*> in_ptr(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const TensorData& first = batch[0]->request.inputs[batch[0]->order[i]];
    Dims shape(first.shape.begin(), first.shape.end());
    if (batch.size() > 1 || run_rows != total) shape[0] = run_rows;
    size_t bytes = 0;
    for (const auto& p : batch) bytes += p->request.inputs[p->order[i]].size();
    if (device_memory_) {
      const size_t padded = run_rows == total ? bytes : bytes / static_cast<size_t>(total) * run_rows;
      auto buf = pinned_buffer("in:" + inputs_[i], padded);
      if (!buf.ok()) return fail_status(buf.status());
      std::vector<CopyPiece> gather;
      size_t at = 0;
      for (const auto& p : batch) {
        const TensorData& t = p->request.inputs[p->order[i]];
        if (t.external) direct[i].push_back({at, t.data(), t.size()});
        else if (t.size() > 0) gather.push_back({*buf + at, t.data(), t.size()});
        at += t.size();
      }
      ParallelCopy(gather);
      if (padded > bytes) std::memset(*buf + bytes, 0, padded - bytes);
      in_ptr[i] = *buf;
    } else if (batch.size() == 1 &&
               reinterpret_cast<uintptr_t>(first.data()) % DataTypeSize(engine_->getTensorDataType(inputs_[i])) == 0) {
      in_ptr[i] = first.data();  // read in place (a shared-memory region at any offset is copied below instead)
    } else {
      std::string& buf = inst->host_inputs[i];
      buf.resize(bytes);
      std::vector<CopyPiece> gather;
      size_t at = 0;
      for (const auto& p : batch) {
        const TensorData& t = p->request.inputs[p->order[i]];
        if (t.size() > 0) gather.push_back({buf.data() + at, t.data(), t.size()});
        at += t.size();
      }
      ParallelCopy(gather);
      in_ptr[i] = buf.data();
    }
    if (Status s = ctx.setInputShape(inputs_[i], shape); !s.ok()) return fail_status(s);
  }
  // Outputs whose shape is known before the run.
  std::vector<Dims> out_shape(outputs_.size());
  std::vector<std::string> out_host(outputs_.size());
  std::vector<bool> known(outputs_.size(), false);
  for (size_t o = 0; o < outputs_.size(); ++o) {
    auto s = ctx.getTensorShape(outputs_[o]);
    if (s.ok() && std::all_of(s->begin(), s->end(), [](int64_t d) { return d >= 0; })) {
      out_shape[o] = *s;
      known[o] = true;
      out_host[o].resize(static_cast<size_t>(NumElements(*s)) * DataTypeSize(engine_->getTensorDataType(outputs_[o])));
    }
  }
  auto device_buffer = [&](const std::string& n, size_t bytes) -> Result<void*> {
    auto it = inst->buffers.find(n);
    if (it == inst->buffers.end() || it->second.size() < bytes) {
      KILN_ASSIGN_OR_RETURN(DeviceMemory mem, DeviceMemory::allocate(backend_, std::max<size_t>(bytes, 1)));
      std::lock_guard<std::mutex> lock(mu_);
      if (it != inst->buffers.end()) inst->device_bytes -= it->second.size();
      inst->device_bytes += mem.size();
      inst->buffers[n] = std::move(mem);
    }
    return inst->buffers[n].data();
  };
  const auto t_input = Clock::now();
  if (device_memory_) {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const size_t bytes = static_cast<size_t>(NumElements(*ctx.getTensorShape(inputs_[i]))) *
                           DataTypeSize(engine_->getTensorDataType(inputs_[i]));
      auto dst = device_buffer(inputs_[i], bytes);
      if (!dst.ok()) return fail_status(dst.status());
      // The staged bytes between the direct ones, and each direct one from its region (one copy when none is).
      char* const to = static_cast<char*>(*dst);
      const char* const staged = static_cast<const char*>(in_ptr[i]);
      size_t at = 0;
      for (const DirectCopy& c : direct[i]) {
        if (c.offset > at) {
          if (Status s = CopyToDevice(to + at, staged + at, c.offset - at, inst->stream); !s.ok())
            return fail_status(s);
        }
        if (Status s = CopyToDevice(to + c.offset, c.src, c.bytes, inst->stream); !s.ok()) return fail_status(s);
        at = c.offset + c.bytes;
      }
      if (bytes > at)
        if (Status s = CopyToDevice(to + at, staged + at, bytes - at, inst->stream); !s.ok()) return fail_status(s);
      if (Status s = ctx.setTensorAddress(inputs_[i], *dst); !s.ok()) return fail_status(s);
    }
    for (size_t o = 0; o < outputs_.size(); ++o) {
      if (!known[o]) continue;
      auto dst = device_buffer(outputs_[o], out_host[o].size());
      if (!dst.ok()) return fail_status(dst.status());
      if (Status s = ctx.setTensorAddress(outputs_[o], *dst); !s.ok()) return fail_status(s);
    }
  } else {
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (Status s = ctx.setTensorAddress(inputs_[i], const_cast<void*>(in_ptr[i])); !s.ok()) return fail_status(s);
    for (size_t o = 0; o < outputs_.size(); ++o)
      if (known[o])
        if (Status s = ctx.setTensorAddress(outputs_[o], out_host[o].data()); !s.ok()) return fail_status(s);
  }
  const auto t_infer = Clock::now();
  if (Status s = ctx.enqueue(device_memory_ ? inst->stream.get() : nullptr); !s.ok()) return fail_status(s);
  if (device_memory_)  // (the wait splits compute from output time in the metrics; the copies are stream-ordered)
    if (Status s = inst->stream.synchronize(); !s.ok()) return fail_status(s);
  const auto t_output = Clock::now();
  for (size_t o = 0; o < outputs_.size(); ++o) {
    const size_t elem = DataTypeSize(engine_->getTensorDataType(outputs_[o]));
    if (!known[o] && (batch.size() > 1 || run_rows != total))
      return fail_all(Outcome::Internal(fmt::format("model '{}': output '{}' has a size that depends on the data, so a "
                                                    "merged batch cannot be split: set max_batch_size: 0 or leave out "
                                                    "dynamic_batching", name_, outputs_[o])));
    if (!known[o]) {  // a size that depends on the data: the context's own buffer
      auto s = ctx.getTensorShape(outputs_[o]);
      auto buf = ctx.getOutputBuffer(outputs_[o]);
      if (!s.ok()) return fail_status(s.status());
      if (!buf.ok()) return fail_status(buf.status());
      out_shape[o] = *s;
      out_host[o].resize(static_cast<size_t>(NumElements(*s)) * elem);
      if (device_memory_) {
        if (Status st = CopyToHost(out_host[o].data(), *buf, out_host[o].size(), inst->stream); !st.ok())
          return fail_status(st);
      } else if (!out_host[o].empty()) {
        std::memcpy(out_host[o].data(), *buf, out_host[o].size());
      }
    } else if (device_memory_) {
      auto staging = pinned_buffer("out:" + outputs_[o], out_host[o].size());
      if (!staging.ok()) return fail_status(staging.status());
      if (Status st = CopyToHost(*staging, inst->buffers[outputs_[o]].data(), out_host[o].size(), inst->stream);
          !st.ok())
        return fail_status(st);
    }
  }
  if (device_memory_) {
    if (Status s = inst->stream.synchronize(); !s.ok()) return fail_status(s);
    for (size_t o = 0; o < outputs_.size(); ++o)
      if (known[o] && !out_host[o].empty()) std::memcpy(out_host[o].data(), inst->pinned["out:" + outputs_[o]].data(),
                                                        out_host[o].size());
  }
  if (batching)
    for (size_t o = 0; o < outputs_.size(); ++o)
      if (out_shape[o].empty() || out_shape[o][0] != run_rows)
        return fail_all(Outcome::Internal(fmt::format("model '{}': output '{}' has shape {} for a batch of {}; its "
                                                      "first dim is not the batch, so results cannot be split",
                                                      name_, outputs_[o], ShapeToString(out_shape[o]), run_rows)));
  const auto t_done = Clock::now();
  auto us = [](Clock::time_point a, Clock::time_point b) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
  };
  const uint64_t n = batch.size();
  stats_.compute_input_us.fetch_add(us(t_start, t_infer) * n);
  stats_.compute_infer_us.fetch_add(us(t_infer, t_output) * n);
  stats_.compute_output_us.fetch_add(us(t_output, t_done) * n);
  stats_.computed.fetch_add(n);
  stats_.AddExecution(run_rows, us(t_start, t_infer), us(t_infer, t_output), us(t_output, t_done));
  stats_.last_inference_ms.store(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                          std::chrono::system_clock::now().time_since_epoch())
                                                          .count()));
  stats_.execution_count.fetch_add(1);
  stats_.inference_count.fetch_add(static_cast<uint64_t>(total));
  stats_.AddBatch(run_rows);
  (void)t_input;

  // Split along the batch dim and answer each request with the outputs it asked for.
  int64_t row = 0;
  for (auto& p : batch) {
    InferResponse resp;
    resp.model = name_;
    resp.version = version_;
    resp.id = p->request.id;
    std::vector<std::pair<size_t, bool>> wanted;  // output index, binary
    if (p->request.outputs.empty()) {
      for (size_t o = 0; o < outputs_.size(); ++o) wanted.push_back({o, p->request.binary_outputs});
    } else {
      for (const auto& r : p->request.outputs)
        wanted.push_back({static_cast<size_t>(std::find(outputs_.begin(), outputs_.end(), r.name) - outputs_.begin()),
                          r.binary.value_or(p->request.binary_outputs)});
    }
    for (auto [o, binary] : wanted) {
      TensorData t;
      t.name = outputs_[o];
      t.dtype = engine_->getTensorDataType(outputs_[o]);
      t.shape.assign(out_shape[o].begin(), out_shape[o].end());
      if (!batching || (batch.size() == 1 && run_rows == total)) {
        t.bytes = out_host[o];
      } else {
        const size_t row_bytes = out_host[o].size() / static_cast<size_t>(run_rows);
        t.shape[0] = p->batch;
        t.bytes = out_host[o].substr(static_cast<size_t>(row) * row_bytes, static_cast<size_t>(p->batch) * row_bytes);
      }
      resp.outputs.push_back(std::move(t));
      resp.binary.push_back(binary);
    }
    row += p->batch;
    p->promise.set_value({Outcome::Ok(), std::move(resp)});
  }
}

void LoadedModel::Stop(std::chrono::milliseconds drain) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (workers_.empty() && stopping_) return;
    stopping_ = true;
    // Requests already queued run (the workers drain the queue) within `drain`; the rest are answered 503.
    const auto until = Clock::now() + drain;
    while (!queue_.empty() && Clock::now() < until) {
      lock.unlock();
      cv_.notify_all();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      lock.lock();
    }
    for (auto& p : queue_)
      p->promise.set_value({Outcome::Unavailable(fmt::format("model '{}' was unloaded before the request ran", name_)),
                            {}});
    queue_.clear();
  }
  cv_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  workers_.clear();
}

}  // namespace kiln::serve
