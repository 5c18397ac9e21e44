// The HTTP front end (http_server.h): routes, KServe v2 JSON (tensor_json.h converts tensors), Triton's binary tensor
// data extension, the repository API and /metrics.
#include "http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "shared_memory.h"
#include "tensor_json.h"

namespace kiln::serve {

using json = nlohmann::json;

class HttpFrontEndImpl {
 public:
  HttpFrontEndImpl(Server& s, const HttpOptions& o, ILogger& l) : server(s), opts(o), logger(l) {}
  Server& server;
  HttpOptions opts;
  ILogger& logger;
  httplib::Server http, metrics;
  std::thread http_thread, metrics_thread;
  int port = 0, metrics_port = 0;
  bool separate_metrics = false;
  bool stopped = false;

  void Routes();
  void Infer(const httplib::Request& req, httplib::Response& res, const std::string& model,
             const std::string& version);
};

namespace {

void Reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void ReplyError(httplib::Response& res, const Outcome& o) { Reply(res, o.http, json{{"error", o.message}}); }

// /v2/models/{m}[/versions/{v}]/...: the model and version of a match of kModelPath (groups 1 and 3).
constexpr const char* kModelPath = R"(/v2/models/([^/]+)(/versions/([^/]+))?)";

std::string Group(const httplib::Request& req, size_t i) {
  return i < req.matches.size() ? std::string(req.matches[i]) : std::string();
}

json MetadataJson(const ModelMetadata& m) {
  auto tensors = [](const std::vector<TensorMetadata>& ts) {
    json a = json::array();
    for (const auto& t : ts) a.push_back({{"name", t.name}, {"datatype", V2Datatype(t.dtype)}, {"shape", t.shape}});
    return a;
  };
  return {{"name", m.name}, {"versions", m.versions}, {"platform", m.platform}, {"inputs", tensors(m.inputs)},
          {"outputs", tensors(m.outputs)}};
}

}  // namespace

void HttpFrontEndImpl::Routes() {
  auto metrics_handler = [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(server.MetricsText(), "text/plain; version=0.0.4");
  };
  if (separate_metrics) metrics.Get("/metrics", metrics_handler);
  else http.Get("/metrics", metrics_handler);
  if (!opts.rest) return;
  http.Get("/v2/health/live", [this](const httplib::Request&, httplib::Response& res) {
    res.status = server.Live() ? 200 : 503;
  });
  http.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    res.status = server.Ready() ? 200 : 503;
  });
  http.Get("/v2", [this](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, {{"name", server.Name()}, {"version", server.Version()}, {"extensions", server.Extensions()}});
  });
  http.Get(std::string(kModelPath) + "/ready", [this](const httplib::Request& req, httplib::Response& res) {
    Outcome o = server.ModelReady(Group(req, 1), Group(req, 3));
    if (o.ok()) res.status = 200;
    else ReplyError(res, o.http == 503 ? Outcome{400, o.message} : o);  // Triton: 400 for a model not ready
  });
  http.Get(std::string(kModelPath) + "/config", [this](const httplib::Request& req, httplib::Response& res) {
    std::string body;
    Outcome o = server.ConfigJson(Group(req, 1), Group(req, 3), &body);
    if (!o.ok()) return ReplyError(res, o);
    res.set_content(body, "application/json");
  });
  auto stats = [this](const std::string& model, const std::string& version, httplib::Response& res) {
    std::vector<ModelStatisticsData> data;
    Outcome o = server.Statistics(model, version, &data);
    if (!o.ok()) return ReplyError(res, o);
    auto dur = [](const DurationStat& d) { return json{{"count", d.count}, {"ns", d.ns}}; };
    json list = json::array();
    for (const auto& d : data) {
      json batches = json::array();
      for (const auto& b : d.batches)
        batches.push_back({{"batch_size", b.batch_size}, {"compute_input", dur(b.compute_input)},
                           {"compute_infer", dur(b.compute_infer)}, {"compute_output", dur(b.compute_output)}});
      list.push_back({{"name", d.name}, {"version", d.version}, {"last_inference", d.last_inference_ms},
                      {"inference_count", d.inference_count}, {"execution_count", d.execution_count},
                      {"inference_stats", {{"success", dur(d.success)}, {"fail", dur(d.fail)}, {"queue", dur(d.queue)},
                                           {"compute_input", dur(d.compute_input)},
                                           {"compute_infer", dur(d.compute_infer)},
                                           {"compute_output", dur(d.compute_output)},
                                           {"cache_hit", dur({})}, {"cache_miss", dur({})}}},
                      {"batch_stats", batches}});
    }
    Reply(res, 200, json{{"model_stats", list}});
  };
  http.Get("/v2/models/stats", [stats](const httplib::Request&, httplib::Response& res) { stats("", "", res); });
  http.Get(std::string(kModelPath) + "/stats", [stats](const httplib::Request& req, httplib::Response& res) {
    stats(Group(req, 1), Group(req, 3), res);
  });
  http.Get(std::string(kModelPath), [this](const httplib::Request& req, httplib::Response& res) {
    ModelMetadata m;
    Outcome o = server.Metadata(Group(req, 1), Group(req, 3), &m);
    if (!o.ok()) return ReplyError(res, o);
    Reply(res, 200, MetadataJson(m));
  });
  http.Post(std::string(kModelPath) + "/infer", [this](const httplib::Request& req, httplib::Response& res) {
    Infer(req, res, Group(req, 1), Group(req, 3));
  });
  http.Post("/v2/repository/index", [this](const httplib::Request& req, httplib::Response& res) {
    bool ready = false;
    if (!req.body.empty()) {
      const json j = json::parse(req.body, nullptr, false);
      if (j.is_discarded() || !j.is_object()) return ReplyError(res, Outcome::BadRequest("the body is not a JSON object"));
      ready = j.value("ready", false);
    }
    json a = json::array();
    for (const auto& e : server.RepositoryIndex(ready)) {
      json m = {{"name", e.name}, {"state", e.state}};
      if (!e.version.empty()) m["version"] = e.version;
      if (!e.reason.empty()) m["reason"] = e.reason;
      a.push_back(m);
    }
    Reply(res, 200, a);
  });
  http.Post(R"(/v2/repository/models/([^/]+)/(load|unload))", [this](const httplib::Request& req,
                                                                     httplib::Response& res) {
    const std::string model = Group(req, 1);
    if (!req.body.empty()) {  // Triton's load parameters ("config", "file:..." overrides): kiln reads the repository
      const json j = json::parse(req.body, nullptr, false);
      if (j.is_discarded() || !j.is_object()) return ReplyError(res, Outcome::BadRequest("the body is not a JSON object"));
      if (j.contains("parameters") && j["parameters"].is_object())
        for (const auto& [k, v] : j["parameters"].items())
          if (k != "unload_dependents")
            return ReplyError(res, Outcome::BadRequest(fmt::format(
                                       "repository parameter '{}' is not supported: kiln serve loads what the "
                                       "repository holds (edit config.pbtxt or the model files, then load)", k)));
    }
    Outcome o = Group(req, 2) == "load" ? server.LoadModel(model) : server.UnloadModel(model);
    if (!o.ok()) return ReplyError(res, o);
    Reply(res, 200, json::object());
  });
  // Triton's system shared memory extension; CUDA shared memory answers as a server with no such region (register:
  // 400), so that clients that clear both kinds (perf_analyzer --shared-memory=system) work.
  http.Get(R"(/v2/(system|cuda)sharedmemory(/region/([^/]+))?/status)",
           [this](const httplib::Request& req, httplib::Response& res) {
             const std::string region = Group(req, 3);
             if (Group(req, 1) != "system") {  // cudasharedmemory
               Outcome o = server.CudaSharedMemoryStatus(region);
               if (!o.ok()) return ReplyError(res, o);
               return Reply(res, 200, json::array());
             }
             std::vector<SharedMemoryRegionStatus> regions;
             Outcome o = server.SystemSharedMemoryStatus(region, &regions);
             if (!o.ok()) return ReplyError(res, o);
             json a = json::array();
             for (const auto& r : regions)
               a.push_back({{"name", r.name}, {"key", r.key}, {"offset", r.offset}, {"byte_size", r.byte_size}});
             Reply(res, 200, a);
           });
  http.Post(
      R"(/v2/(system|cuda)sharedmemory(/region/([^/]+))?/(register|unregister))",
      [this](const httplib::Request& req, httplib::Response& res) {
        const std::string region = Group(req, 3);
        const bool cuda = Group(req, 1) != "system";  // cudasharedmemory
        Outcome o;
        if (Group(req, 4) == "unregister") {
          o = cuda ? server.UnregisterCudaSharedMemory(region) : server.UnregisterSystemSharedMemory(region);
        } else if (cuda) {
          o = server.RegisterCudaSharedMemory(region);
        } else if (region.empty()) {
          o = Outcome::BadRequest("'region name' is necessary to register system shared memory region");
        } else {
          // {"key": "/shm_key", "offset": N, "byte_size": N}: offset is optional (0).
          const json j = json::parse(req.body.empty() ? std::string("{}") : req.body, nullptr, false);
          if (j.is_discarded() || !j.is_object())
            return ReplyError(res, Outcome::BadRequest("the body is not a JSON object"));
          uint64_t offset = 0, byte_size = 0;
          if (!j.contains("key"))
            o = Outcome::BadRequest("Shared memory register request has no 'key' field");
          else if (!j["key"].is_string())
            o = Outcome::BadRequest("Shared memory register request: 'key' must be a string");
          else if (!j.contains("byte_size"))
            o = Outcome::BadRequest("Shared memory register request has no 'byte_size' field");
          else if (!j["byte_size"].is_number_unsigned() || (j.contains("offset") && !j["offset"].is_number_unsigned()))
            o = Outcome::BadRequest("Shared memory register request: 'offset' and 'byte_size' must be integers >= 0");
          if (!o.ok()) return ReplyError(res, o);
          byte_size = j["byte_size"].get<uint64_t>();
          if (j.contains("offset")) offset = j["offset"].get<uint64_t>();
          o = server.RegisterSystemSharedMemory(region, j["key"].get<std::string>(), offset, byte_size);
        }
        if (!o.ok()) return ReplyError(res, o);
        Reply(res, 200, json::object());
      });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    ReplyError(res, Outcome::Internal("the request failed: " + what));
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) ReplyError(res, Outcome::NotFound(fmt::format("no endpoint {} {}", req.method, req.path)));
    else if (res.status == 413)
      ReplyError(res, Outcome::TooLarge("the request body is larger than the server takes (--http-max-input-size)"));
  });
}

void HttpFrontEndImpl::Infer(const httplib::Request& req, httplib::Response& res, const std::string& model,
                             const std::string& version) {
  if (Outcome ready = server.ModelReady(model, version); !ready.ok()) return ReplyError(res, ready);
  // Triton's binary tensor data extension: the first Inference-Header-Content-Length bytes are the JSON header;
  // the rest holds the binary inputs in the order the header lists them.
  size_t header_len = req.body.size();
  if (req.has_header("Inference-Header-Content-Length")) {
    const std::string v = req.get_header_value("Inference-Header-Content-Length");
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n > req.body.size())
      return ReplyError(res, Outcome::BadRequest(fmt::format("Inference-Header-Content-Length '{}' is not a length "
                                                             "within the {}-byte body", v, req.body.size())));
    header_len = static_cast<size_t>(n);
  }
  if (header_len > opts.max_json_bytes)
    return ReplyError(res, Outcome::TooLarge(fmt::format("the JSON part of the request is {} bytes (at most {}): send "
                                                         "large tensors as binary data (binary_data_size)",
                                                         header_len, opts.max_json_bytes)));
  InferRequest request;
  request.model = model;
  request.version = version;
  Outcome o = ParseInferRequest(std::string_view(req.body).substr(0, header_len),
                                std::string_view(req.body).substr(header_len), &request);
  if (!o.ok()) return ReplyError(res, o);
  InferResponse response;
  o = server.Infer(std::move(request), &response);
  if (!o.ok()) return ReplyError(res, o);
  std::string header, binary;
  WriteInferResponse(response, &header, &binary);
  res.status = 200;
  if (binary.empty()) {
    res.set_content(header, "application/json");
  } else {
    res.set_header("Inference-Header-Content-Length", std::to_string(header.size()));
    res.set_content(header + binary, "application/octet-stream");
  }
}

HttpFrontEnd::HttpFrontEnd(std::unique_ptr<HttpFrontEndImpl> impl) : impl_(std::move(impl)) {}
HttpFrontEnd::~HttpFrontEnd() { Shutdown(); }
int HttpFrontEnd::port() const { return impl_->port; }
int HttpFrontEnd::metrics_port() const { return impl_->separate_metrics ? impl_->metrics_port : impl_->port; }

Result<std::unique_ptr<HttpFrontEnd>> HttpFrontEnd::Start(Server& server, const HttpOptions& options,
                                                          ILogger& logger) {
  auto impl = std::make_unique<HttpFrontEndImpl>(server, options, logger);
  impl->separate_metrics = options.metrics_port >= 0;
  const int threads = std::max(4, options.threads);
  for (httplib::Server* s : {&impl->http, &impl->metrics}) {
    s->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    s->set_payload_max_length(options.max_body_bytes);
    // A kept-alive connection holds a pool thread while it sends; after this many requests it is closed (the client
    // reconnects), so connections beyond the pool's size are not starved.
    s->set_keep_alive_max_count(16);
    s->set_keep_alive_timeout(5);  // an idle kept-alive connection holds a thread, and shutdown waits for it
    s->set_read_timeout(60);
    s->set_write_timeout(60);
    s->set_tcp_nodelay(true);
  }
  impl->Routes();
  auto bind = [&](httplib::Server& s, int port, int* bound) -> Status {
    if (port == 0) *bound = s.bind_to_any_port(options.address);
    else *bound = s.bind_to_port(options.address, port) ? port : -1;
    if (*bound < 0)
      return Status(StatusCode::kIoError, fmt::format("cannot listen on {}:{} (in use, or not an address of this "
                                                      "machine)", options.address, port));
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(bind(impl->http, options.port, &impl->port));
  if (impl->separate_metrics) KILN_RETURN_IF_ERROR(bind(impl->metrics, options.metrics_port, &impl->metrics_port));
  HttpFrontEndImpl* p = impl.get();
  p->http_thread = std::thread([p] { p->http.listen_after_bind(); });
  if (p->separate_metrics) p->metrics_thread = std::thread([p] { p->metrics.listen_after_bind(); });
  return std::unique_ptr<HttpFrontEnd>(new HttpFrontEnd(std::move(impl)));
}

void HttpFrontEnd::Shutdown() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  impl_->http.stop();
  impl_->metrics.stop();
  if (impl_->http_thread.joinable()) impl_->http_thread.join();
  if (impl_->metrics_thread.joinable()) impl_->metrics_thread.join();
}

}  // namespace kiln::serve
