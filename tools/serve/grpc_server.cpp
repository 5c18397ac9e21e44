// kiln serve — the gRPC front end (see grpc_server.h): inference.GRPCInferenceService, KServe v2's / Triton's gRPC
// protocol, over the server core. It uses grpc++'s synchronous server: every call runs on a thread of gRPC's pool
// and calls the core directly (Server::Infer blocks until the request is answered), so the pool is sized for many
// calls at once.
#include "grpc_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "grpc_service.grpc.pb.h"
#include "model_config.pb.h"
#include "shared_memory.h"

namespace kiln::serve {

namespace {

using inference::InferParameter;
using inference::ModelInferRequest;
using Clock = std::chrono::steady_clock;

// Threads of the synchronous server (each call in flight holds one while the core runs it). Far above the 64+
// concurrent calls a load generator makes; past it gRPC refuses calls with RESOURCE_EXHAUSTED.
constexpr int kMaxThreads = 1024;
// Idle threads kept polling for calls, so that a burst of calls does not start a thread each.
constexpr int kMinPollers = 4;
constexpr int kMaxPollers = 32;
// How long Shutdown lets calls in flight finish before gRPC cancels them.
constexpr std::chrono::seconds kShutdownGrace{5};

Status Invalid(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

// The core's outcomes as gRPC statuses (the HTTP statuses Outcome carries, mapped as Triton maps its errors).
grpc::StatusCode GrpcCode(int http) {
  switch (http) {
    case 400: return grpc::StatusCode::INVALID_ARGUMENT;
    case 404: return grpc::StatusCode::NOT_FOUND;
    case 413: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 503: return grpc::StatusCode::UNAVAILABLE;
    case 501: return grpc::StatusCode::UNIMPLEMENTED;
    case 504: return grpc::StatusCode::DEADLINE_EXCEEDED;
    default: return grpc::StatusCode::INTERNAL;
  }
}

grpc::Status ToGrpc(const Outcome& o) { return o.ok() ? grpc::Status::OK : grpc::Status(GrpcCode(o.http), o.message); }

grpc::Status ToGrpc(const Status& s) { return ToGrpc(Outcome::FromStatus(s)); }

// "host:port", with an IPv6 address in brackets ("[::]:8001").
std::string Endpoint(const std::string& address, int port) {
  const std::string host = address.empty() ? "0.0.0.0" : address;
  if (host.find(':') != std::string::npos && host.front() != '[') return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

// The number of elements a request's shape holds; refuses negative dims and products past int64.
Result<int64_t> ShapeVolume(const std::string& input, const std::vector<int64_t>& shape) {
  int64_t volume = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return Invalid(fmt::format("input '{}' has a negative dimension in its shape {}", input, ShapeToString(shape)));
    if (__builtin_mul_overflow(volume, d, &volume)) {
      return Invalid(
          fmt::format("input '{}': shape {} holds more elements than fit in int64", input, ShapeToString(shape)));
    }
  }
  return volume;
}

// Converts typed contents (contents.<field>) to the element bytes of the input's datatype, checking the count
// against the shape and, for the narrower integer types, each value's range.
template <typename Dst, typename Src>
Status PackContents(const google::protobuf::RepeatedField<Src>& values, const char* field,
                    const ModelInferRequest::InferInputTensor& in, int64_t volume, std::string* bytes) {
  if (values.size() != volume) {
    return Invalid(fmt::format("input '{}' ({} {}) needs {} elements, but contents.{} has {}", in.name(), in.datatype(),
                               ShapeToString({in.shape().begin(), in.shape().end()}), volume, field, values.size()));
  }
  bytes->resize(static_cast<size_t>(values.size()) * sizeof(Dst));
  char* out = bytes->data();
  for (int i = 0; i < values.size(); ++i) {
    const Src v = values[i];
    if constexpr (std::is_integral_v<Src> && !std::is_same_v<Src, bool>) {
      if (!std::in_range<Dst>(v)) {
        return Invalid(fmt::format("input '{}': contents.{}[{}] = {} is out of range for {}", in.name(), field, i, v,
                                   in.datatype()));
      }
    }
    const Dst d = static_cast<Dst>(v);
    std::memcpy(out + static_cast<size_t>(i) * sizeof(Dst), &d, sizeof(Dst));
  }
  return Status::Ok();
}

Status TypedContentsToBytes(const ModelInferRequest::InferInputTensor& in, DataType dtype, int64_t volume,
                            std::string* bytes) {
  const auto& c = in.contents();
  switch (dtype) {
    case DataType::kBool: return PackContents<uint8_t>(c.bool_contents(), "bool_contents", in, volume, bytes);
    case DataType::kInt8: return PackContents<int8_t>(c.int_contents(), "int_contents", in, volume, bytes);
    case DataType::kInt16: return PackContents<int16_t>(c.int_contents(), "int_contents", in, volume, bytes);
    case DataType::kInt32: return PackContents<int32_t>(c.int_contents(), "int_contents", in, volume, bytes);
    case DataType::kInt64: return PackContents<int64_t>(c.int64_contents(), "int64_contents", in, volume, bytes);
    case DataType::kUInt8: return PackContents<uint8_t>(c.uint_contents(), "uint_contents", in, volume, bytes);
    case DataType::kUInt16: return PackContents<uint16_t>(c.uint_contents(), "uint_contents", in, volume, bytes);
    case DataType::kUInt32: return PackContents<uint32_t>(c.uint_contents(), "uint_contents", in, volume, bytes);
    case DataType::kUInt64: return PackContents<uint64_t>(c.uint64_contents(), "uint64_contents", in, volume, bytes);
    case DataType::kFloat32: return PackContents<float>(c.fp32_contents(), "fp32_contents", in, volume, bytes);
    case DataType::kFloat64: return PackContents<double>(c.fp64_contents(), "fp64_contents", in, volume, bytes);
    default:  // FP16, BF16: InferTensorContents has no field for them
      return Invalid(fmt::format("input '{}' is {}, which has no typed contents field: send it in raw_input_contents",
                                 in.name(), in.datatype()));
  }
}

// Request parameters: "timeout" (microseconds) bounds the request; sequence and priority parameters ask for
// schedulers kiln does not have. Others are ignored, as Triton leaves them to backends and kiln's have none.
Status ReadRequestParameters(const ModelInferRequest& req, Clock::time_point now, InferRequest* out) {
  for (const auto& [key, p] : req.parameters()) {
    if (key == "timeout") {
      int64_t us = 0;
      if (p.parameter_choice_case() == InferParameter::kInt64Param) {
        us = p.int64_param();
      } else if (p.parameter_choice_case() == InferParameter::kUint64Param) {
        us = static_cast<int64_t>(std::min<uint64_t>(p.uint64_param(), INT64_MAX));
      } else {
        return Invalid("the 'timeout' parameter must be an int64 count of microseconds");
      }
      if (us < 0) return Invalid(fmt::format("the 'timeout' parameter is negative ({} microseconds)", us));
      // 0 means no timeout (as Triton reads it); one too far to represent is none either.
      const auto room = std::chrono::duration_cast<std::chrono::microseconds>(Clock::time_point::max() - now);
      if (us > 0 && us < room.count()) out->deadline = std::min(out->deadline, now + std::chrono::microseconds(us));
    } else if (key == "sequence_id" || key == "sequence_start" || key == "sequence_end") {
      return Invalid(fmt::format(
          "kiln serve has no sequence batching, so it cannot take the '{}' parameter: send each request on its own, "
          "without sequence_id / sequence_start / sequence_end",
          key));
    } else if (key == "priority") {
      return Invalid(
          "kiln serve has no request priorities (its queues are first come, first served): send the "
          "request without the 'priority' parameter");
    }
  }
  return Status::Ok();
}

// Triton's shared-memory parameters of an input or a requested output, as Triton reads them: shared_memory_region a
// string_param, shared_memory_offset (optional, 0) and shared_memory_byte_size int64_params (uint64 taken too).
template <typename Tensor>
Status ReadSharedMemoryParameters(const Tensor& t, const char* kind, std::optional<SharedMemoryRef>* out) {
  const auto& params = t.parameters();
  const auto region = params.find("shared_memory_region");
  const bool named = region != params.end();
  SharedMemoryRef ref;
  for (const char* key : {"shared_memory_offset", "shared_memory_byte_size"}) {
    const auto it = params.find(key);
    if (it == params.end()) continue;
    if (!named)
      return Invalid(fmt::format("{} '{}': '{}' can not be specified without the 'shared_memory_region' parameter",
                                 kind, t.name(), key));
    int64_t v = 0;
    if (it->second.parameter_choice_case() == InferParameter::kInt64Param) {
      v = it->second.int64_param();
    } else if (it->second.parameter_choice_case() == InferParameter::kUint64Param) {
      v = static_cast<int64_t>(std::min<uint64_t>(it->second.uint64_param(), INT64_MAX));
    } else {
      return Invalid(
          fmt::format("{} '{}': invalid value type for the '{}' parameter, expected int64_param", kind, t.name(), key));
    }
    if (v < 0) return Invalid(fmt::format("{} '{}': the '{}' parameter is negative ({})", kind, t.name(), key, v));
    (std::string_view(key) == "shared_memory_offset" ? ref.offset : ref.byte_size) = static_cast<uint64_t>(v);
  }
  if (!named) return Status::Ok();
  if (region->second.parameter_choice_case() != InferParameter::kStringParam || region->second.string_param().empty()) {
    return Invalid(
        fmt::format("{} '{}': invalid value for the 'shared_memory_region' parameter, expected a region's "
                    "name in string_param",
                    kind, t.name()));
  }
  if (!params.contains("shared_memory_byte_size")) {
    return Invalid(
        fmt::format("{} '{}': 'shared_memory_byte_size' must be specified along with the "
                    "'shared_memory_region' parameter",
                    kind, t.name()));
  }
  ref.region = region->second.string_param();
  *out = std::move(ref);
  return Status::Ok();
}

// The protocol's request as the core's. The raw input bytes are moved out of `req` (no copy of the tensors). Inputs
// in shared memory have no raw_input_contents entry: the entries are the other inputs', in order (as Triton reads
// them).
Status ToInferRequest(ModelInferRequest& req, Clock::time_point deadline, InferRequest* out) {
  out->model = req.model_name();
  out->version = req.model_version();
  out->id = req.id();
  out->deadline = deadline;
  KILN_RETURN_IF_ERROR(ReadRequestParameters(req, Clock::now(), out));

  int in_shm = 0;
  for (const auto& in : req.inputs()) in_shm += in.parameters().contains("shared_memory_region") ? 1 : 0;
  const bool raw = req.raw_input_contents_size() > 0;
  if (raw && req.raw_input_contents_size() != req.inputs_size() - in_shm) {
    return Invalid(
        fmt::format("the request has {} inputs ({} of them in shared memory) but {} raw_input_contents entries: when "
                    "raw_input_contents is used it must hold one entry per input not in shared memory, in the order "
                    "of 'inputs'",
                    req.inputs_size(), in_shm, req.raw_input_contents_size()));
  }
  out->inputs.reserve(req.inputs_size());
  int raw_index = 0;
  for (int i = 0; i < req.inputs_size(); ++i) {
    const auto& in = req.inputs(i);
    TensorData t;
    t.name = in.name();
    auto dtype = FromV2Datatype(in.datatype());
    if (!dtype.ok()) return Invalid(fmt::format("input '{}': {}", in.name(), dtype.status().message()));
    t.dtype = *dtype;
    t.shape.assign(in.shape().begin(), in.shape().end());
    KILN_ASSIGN_OR_RETURN(const int64_t volume, ShapeVolume(in.name(), t.shape));

    KILN_RETURN_IF_ERROR(ReadSharedMemoryParameters(in, "input", &t.shm));
    if (t.shm) {  // the bytes are in the region (the server looks it up)
      if (in.has_contents()) {
        return Invalid(
            fmt::format("unexpected 'contents' for input '{}', which is in shared memory: send it in one "
                        "of them",
                        in.name()));
      }
    } else if (raw) {
      if (in.has_contents()) {
        return Invalid(
            fmt::format("input '{}' has both contents and raw_input_contents: send it in one of them", in.name()));
      }
      int64_t want = 0;
      if (__builtin_mul_overflow(volume, static_cast<int64_t>(DataTypeSize(t.dtype)), &want)) {
        return Invalid(fmt::format("input '{}': shape {} is too large", in.name(), ShapeToString(t.shape)));
      }
      t.bytes = std::move(*req.mutable_raw_input_contents(raw_index++));
      if (static_cast<int64_t>(t.bytes.size()) != want) {
        return Invalid(fmt::format("input '{}' ({} {}) needs {} bytes, but its raw_input_contents entry has {}",
                                   in.name(), in.datatype(), ShapeToString(t.shape), want, t.bytes.size()));
      }
    } else {
      KILN_RETURN_IF_ERROR(TypedContentsToBytes(in, t.dtype, volume, &t.bytes));
    }
    out->inputs.push_back(std::move(t));
  }

  for (const auto& o : req.outputs()) {
    if (o.parameters().contains("classification")) {
      return Invalid(
          fmt::format("output '{}' asks for classification, which kiln serve does not have: request the "
                      "output without class_count and take the top classes on the client",
                      o.name()));
    }
    RequestedOutput r{o.name(), false, std::nullopt};
    KILN_RETURN_IF_ERROR(ReadSharedMemoryParameters(o, "output", &r.shm));
    out->outputs.push_back(std::move(r));
  }
  return Status::Ok();
}

// When the client's gRPC deadline falls, as a steady_clock time (max when the client set none): the core need not
// run a request its caller has given up on.
Clock::time_point ClientDeadline(const grpc::ServerContext& ctx) {
  const auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return Clock::time_point::max();
  const auto left = deadline - std::chrono::system_clock::now();
  if (left > std::chrono::hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(left);
}

}  // namespace

class GrpcFrontEndImpl final : public inference::GRPCInferenceService::Service {
 public:
  GrpcFrontEndImpl(Server& server, ILogger& logger) : server_(server), logger_(logger) {}
  ~GrpcFrontEndImpl() override { Shutdown(); }

  Status Listen(const std::string& address, int port, size_t max_message_bytes) {
    const std::string endpoint = Endpoint(address, port);
    const int message_limit = static_cast<int>(std::min<size_t>(max_message_bytes, INT_MAX));
    grpc::ServerBuilder builder;
    builder.AddListeningPort(endpoint, grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    builder.SetMaxReceiveMessageSize(message_limit);
    builder.SetMaxSendMessageSize(message_limit);
    // gRPC sets SO_REUSEPORT by default, which would let a second server "bind" a port already in use.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    grpc::ResourceQuota quota("kiln-serve-grpc");
    quota.SetMaxThreads(kMaxThreads);
    builder.SetResourceQuota(quota);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, kMinPollers);
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxPollers);

    server_grpc_ = builder.BuildAndStart();
    if (!server_grpc_ || port_ == 0) {
      if (server_grpc_) server_grpc_->Shutdown();
      server_grpc_.reset();
      return Status(StatusCode::kIoError,
                    fmt::format("cannot listen for gRPC on {}: the port is in use, or the address is not one of "
                                "this host's",
                                endpoint));
    }
    Log(Severity::kInfo, fmt::format("gRPC inference service listening on {}", Endpoint(address, port_)));
    return Status::Ok();
  }

  int port() const { return port_; }

  void Shutdown() {
    std::lock_guard<std::mutex> lock(shutdown_mu_);
    if (!server_grpc_) return;
    server_grpc_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    server_grpc_->Wait();
    server_grpc_.reset();
  }

  // --- Health -----------------------------------------------------------------------------------------------

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* resp) override {
    resp->set_live(server_.Live());
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* resp) override {
    resp->set_ready(server_.Ready());
    return grpc::Status::OK;
  }

  // A model that is unknown or not ready answers ready=false (as Triton's does); a bad request is an error.
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* req,
                          inference::ModelReadyResponse* resp) override {
    const Outcome o = server_.ModelReady(req->name(), req->version());
    resp->set_ready(o.ok());
    if (o.ok() || o.http == 404 || o.http == 503) return grpc::Status::OK;
    return Finish("ModelReady", ToGrpc(o));
  }

  // --- Metadata and configuration ---------------------------------------------------------------------------

  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* resp) override {
    resp->set_name(server_.Name());
    resp->set_version(server_.Version());
    for (const std::string& e : server_.Extensions()) resp->add_extensions(e);
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* req,
                             inference::ModelMetadataResponse* resp) override {
    serve::ModelMetadata md;
    const Outcome o = server_.Metadata(req->name(), req->version(), &md);
    if (!o.ok()) return Finish("ModelMetadata", ToGrpc(o));
    resp->set_name(md.name);
    for (const std::string& v : md.versions) resp->add_versions(v);
    resp->set_platform(md.platform);
    auto add = [](const serve::TensorMetadata& t, inference::ModelMetadataResponse::TensorMetadata* m) {
      m->set_name(t.name);
      m->set_datatype(V2Datatype(t.dtype));
      for (int64_t d : t.shape) m->add_shape(d);
    };
    for (const auto& t : md.inputs) add(t, resp->add_inputs());
    for (const auto& t : md.outputs) add(t, resp->add_outputs());
    return grpc::Status::OK;
  }

  // The core keeps the configuration as a serialized inference.ModelConfig (model_config.proto, shared with us).
  grpc::Status ModelConfig(grpc::ServerContext*, const inference::ModelConfigRequest* req,
                           inference::ModelConfigResponse* resp) override {
    std::string serialized;
    const Outcome o = server_.ConfigProto(req->name(), req->version(), &serialized);
    if (!o.ok()) return Finish("ModelConfig", ToGrpc(o));
    if (!resp->mutable_config()->ParseFromString(serialized)) {
      return Finish("ModelConfig", grpc::Status(grpc::StatusCode::INTERNAL,
                                                fmt::format("model '{}': its configuration did not parse as "
                                                            "inference.ModelConfig",
                                                            req->name())));
    }
    return grpc::Status::OK;
  }

  grpc::Status ModelStatistics(grpc::ServerContext*, const inference::ModelStatisticsRequest* req,
                               inference::ModelStatisticsResponse* resp) override {
    std::vector<ModelStatisticsData> data;
    const Outcome o = server_.Statistics(req->name(), req->version(), &data);
    if (!o.ok()) return Finish("ModelStatistics", ToGrpc(o));
    auto put = [](inference::StatisticDuration* to, const DurationStat& d) {
      to->set_count(d.count);
      to->set_ns(d.ns);
    };
    for (const auto& d : data) {
      inference::ModelStatistics* m = resp->add_model_stats();
      m->set_name(d.name);
      m->set_version(d.version);
      m->set_last_inference(d.last_inference_ms);
      m->set_inference_count(d.inference_count);
      m->set_execution_count(d.execution_count);
      inference::InferStatistics* s = m->mutable_inference_stats();
      put(s->mutable_success(), d.success);
      put(s->mutable_fail(), d.fail);
      put(s->mutable_queue(), d.queue);
      put(s->mutable_compute_input(), d.compute_input);
      put(s->mutable_compute_infer(), d.compute_infer);
      put(s->mutable_compute_output(), d.compute_output);
      s->mutable_cache_hit();
      s->mutable_cache_miss();
      for (const auto& b : d.batches) {
        inference::InferBatchStatistics* bs = m->add_batch_stats();
        bs->set_batch_size(static_cast<uint64_t>(b.batch_size));
        put(bs->mutable_compute_input(), b.compute_input);
        put(bs->mutable_compute_infer(), b.compute_infer);
        put(bs->mutable_compute_output(), b.compute_output);
      }
    }
    return grpc::Status::OK;
  }

  // --- Inference --------------------------------------------------------------------------------------------

  grpc::Status ModelInfer(grpc::ServerContext* ctx, const inference::ModelInferRequest* req,
                          inference::ModelInferResponse* resp) override {
    // grpc++'s handler constructs the request non-const and destroys it after we return without reading it again,
    // so moving the raw tensor bytes out of it is safe; it saves a copy of every input.
    auto& request = const_cast<inference::ModelInferRequest&>(*req);
    InferRequest in;
    if (Status s = ToInferRequest(request, ClientDeadline(*ctx), &in); !s.ok()) return Finish("ModelInfer", ToGrpc(s));

    InferResponse out;
    const Outcome o = server_.Infer(std::move(in), &out);
    if (!o.ok()) return Finish("ModelInfer", ToGrpc(o));

    resp->set_model_name(out.model);
    resp->set_model_version(out.version);
    resp->set_id(out.id);
    // As Triton answers: each output's name, datatype and shape, its bytes in raw_output_contents (same order; an
    // empty entry for an output written to shared memory, whose parameters name the region).
    for (TensorData& t : out.outputs) {
      auto* o_tensor = resp->add_outputs();
      o_tensor->set_name(t.name);
      o_tensor->set_datatype(V2Datatype(t.dtype));
      for (int64_t d : t.shape) o_tensor->add_shape(d);
      if (t.shm) {
        auto& p = *o_tensor->mutable_parameters();
        p["shared_memory_region"].set_string_param(t.shm->region);
        p["shared_memory_offset"].set_int64_param(static_cast<int64_t>(t.shm->offset));
        p["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(t.shm->byte_size));
      }
      resp->add_raw_output_contents(std::move(t.bytes));
    }
    return grpc::Status::OK;
  }

  // --- Model repository -------------------------------------------------------------------------------------

  grpc::Status RepositoryIndex(grpc::ServerContext*, const inference::RepositoryIndexRequest* req,
                               inference::RepositoryIndexResponse* resp) override {
    if (!req->repository_name().empty()) return Finish("RepositoryIndex", OneRepository(req->repository_name()));
    for (const RepositoryEntry& e : server_.RepositoryIndex(req->ready())) {
      auto* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return grpc::Status::OK;
  }

  // Loads the model from the repository as it is there: Triton's "config" and "file:..." overrides are refused.
  grpc::Status RepositoryModelLoad(grpc::ServerContext*, const inference::RepositoryModelLoadRequest* req,
                                   inference::RepositoryModelLoadResponse*) override {
    if (!req->repository_name().empty()) return Finish("RepositoryModelLoad", OneRepository(req->repository_name()));
    if (!req->parameters().empty()) {
      return Finish("RepositoryModelLoad",
                    grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 fmt::format("kiln serve loads '{}' from the model repository as it is there, so it "
                                             "takes no load parameters ('{}'): change the model's files instead",
                                             req->model_name(), req->parameters().begin()->first)));
    }
    return Finish("RepositoryModelLoad", ToGrpc(server_.LoadModel(req->model_name())));
  }

  // "unload_dependents" (which tritonclient always sends) has nothing to act on: kiln has no ensembles.
  grpc::Status RepositoryModelUnload(grpc::ServerContext*, const inference::RepositoryModelUnloadRequest* req,
                                     inference::RepositoryModelUnloadResponse*) override {
    if (!req->repository_name().empty()) {
      return Finish("RepositoryModelUnload", OneRepository(req->repository_name()));
    }
    for (const auto& [key, unused] : req->parameters()) {
      if (key == "unload_dependents") continue;
      return Finish("RepositoryModelUnload",
                    grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 fmt::format("kiln serve takes no unload parameter '{}'", key)));
    }
    return Finish("RepositoryModelUnload", ToGrpc(server_.UnloadModel(req->model_name())));
  }

  // --- Shared memory ----------------------------------------------------------------------------------------

  grpc::Status SystemSharedMemoryStatus(grpc::ServerContext*, const inference::SystemSharedMemoryStatusRequest* req,
                                        inference::SystemSharedMemoryStatusResponse* resp) override {
    std::vector<SharedMemoryRegionStatus> regions;
    const Outcome o = server_.SystemSharedMemoryStatus(req->name(), &regions);
    if (!o.ok()) return Finish("SystemSharedMemoryStatus", ToGrpc(o));
    for (const auto& r : regions) {
      auto& s = (*resp->mutable_regions())[r.name];
      s.set_name(r.name);
      s.set_key(r.key);
      s.set_offset(r.offset);
      s.set_byte_size(r.byte_size);
    }
    return grpc::Status::OK;
  }

  grpc::Status SystemSharedMemoryRegister(grpc::ServerContext*, const inference::SystemSharedMemoryRegisterRequest* req,
                                          inference::SystemSharedMemoryRegisterResponse*) override {
    return Finish("SystemSharedMemoryRegister",
                  ToGrpc(server_.RegisterSystemSharedMemory(req->name(), req->key(), req->offset(), req->byte_size())));
  }

  grpc::Status SystemSharedMemoryUnregister(grpc::ServerContext*,
                                            const inference::SystemSharedMemoryUnregisterRequest* req,
                                            inference::SystemSharedMemoryUnregisterResponse*) override {
    return Finish("SystemSharedMemoryUnregister", ToGrpc(server_.UnregisterSystemSharedMemory(req->name())));
  }

  grpc::Status CudaSharedMemoryStatus(grpc::ServerContext*, const inference::CudaSharedMemoryStatusRequest* req,
                                      inference::CudaSharedMemoryStatusResponse*) override {
    return Finish("CudaSharedMemoryStatus", ToGrpc(server_.CudaSharedMemoryStatus(req->name())));
  }

  grpc::Status CudaSharedMemoryRegister(grpc::ServerContext*, const inference::CudaSharedMemoryRegisterRequest* req,
                                        inference::CudaSharedMemoryRegisterResponse*) override {
    return Finish("CudaSharedMemoryRegister", ToGrpc(server_.RegisterCudaSharedMemory(req->name())));
  }

  grpc::Status CudaSharedMemoryUnregister(grpc::ServerContext*, const inference::CudaSharedMemoryUnregisterRequest* req,
                                          inference::CudaSharedMemoryUnregisterResponse*) override {
    return Finish("CudaSharedMemoryUnregister", ToGrpc(server_.UnregisterCudaSharedMemory(req->name())));
  }

 private:
  static grpc::Status OneRepository(const std::string& name) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        fmt::format("kiln serve has a single model repository: leave repository_name empty (got '{}')", name));
  }

  // Logs a failed call (verbose: failures are the client's to report) and returns its status.
  grpc::Status Finish(const char* rpc, grpc::Status s) {
    if (!s.ok())
      Log(Severity::kVerbose,
          fmt::format("gRPC {}: error {}: {}", rpc, static_cast<int>(s.error_code()), s.error_message()));
    return s;
  }

  void Log(Severity severity, const std::string& message) { logger_.log(severity, message.c_str()); }

  Server& server_;
  ILogger& logger_;
  int port_ = 0;
  std::mutex shutdown_mu_;
  std::unique_ptr<grpc::Server> server_grpc_;
};

Result<std::unique_ptr<GrpcFrontEnd>> GrpcFrontEnd::Start(Server& server, const std::string& address, int port,
                                                          size_t max_message_bytes, ILogger& logger) {
  if (port < 0 || port > 65535) return Invalid(fmt::format("gRPC port {} is out of range (0 to 65535)", port));
  auto impl = std::make_unique<GrpcFrontEndImpl>(server, logger);
  KILN_RETURN_IF_ERROR(impl->Listen(address, port, max_message_bytes));
  return std::unique_ptr<GrpcFrontEnd>(new GrpcFrontEnd(std::move(impl)));
}

GrpcFrontEnd::GrpcFrontEnd(std::unique_ptr<GrpcFrontEndImpl> impl) : impl_(std::move(impl)) {}

GrpcFrontEnd::~GrpcFrontEnd() { Shutdown(); }

int GrpcFrontEnd::port() const { return impl_->port(); }

void GrpcFrontEnd::Shutdown() { impl_->Shutdown(); }

}  // namespace kiln::serve
