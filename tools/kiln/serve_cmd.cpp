// `kiln serve`: the KServe v2 / Triton-protocol inference server (tools/serve), with tritonserver's flag spellings.
//   kiln serve --model-repository=DIR [--http-port=8000] [--grpc-port=8001] [--metrics-port=8002]
//              [--model-control-mode=none|explicit --load-model=M ...] [--backend=cpu|cuda] [--log-verbose=1]
//              [--allow-client-shm=true]
// Runs until SIGINT or SIGTERM, then stops taking requests, lets those queued or running finish (at most
// --exit-timeout-secs) and exits.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "grpc_server.h"
#include "http_server.h"
#include "serve_cmd.h"
#include "server.h"

namespace kiln::cli {

int ServeCommand(int argc, char** argv) {
  serve::ServerOptions so;
  serve::HttpOptions ho;
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001, log_verbose = 0, exit_timeout_s = 30;
  int64_t request_timeout_ms = 0;
  bool allow_http = true, allow_grpc = true, allow_metrics = true, exit_on_error = true;
  size_t grpc_max_message = 256u << 20;
  ho.metrics_port = 8002;

  CLI::App app{"kiln serve: a KServe v2 / Triton-protocol inference server over a Triton model repository\n"
               "  (<repository>/<model>/config.pbtxt, <repository>/<model>/<version>/model.engine or model.onnx)"};
  app.name("kiln serve");
  app.add_option("--model-repository,--model-store", so.model_repository, "The model repository folder")->required();
  app.add_option("--model-control-mode", so.model_control_mode,
                 "none: load every model at start; explicit: only --load-model ones, then the repository API")
      ->check(CLI::IsMember({"none", "explicit"}));
  app.add_option("--load-model", so.load_models, "With explicit mode: a model to load at start ('*' for all)");
  app.add_option("--strict-model-config", so.strict_model_config, "Require config.pbtxt (no auto-complete)");
  app.add_option("--exit-on-error", exit_on_error, "Exit when a model fails to load at start (default true)");
  app.add_option("--backend", so.backend, "kiln backend for the models: cpu or cuda (default: cuda where a GPU is)");
  app.add_option("--timing-cache", so.timing_cache, "Timing cache file for the ONNX models built at load");
  app.add_option("--allow-http", allow_http, "Serve HTTP/REST (default true)");
  app.add_option("--http-address", ho.address, "HTTP address (default 0.0.0.0)");
  app.add_option("--http-port", ho.port, "HTTP port (default 8000; 0 picks one)");
  app.add_option("--http-thread-count", ho.threads, "HTTP connections served at once (default 64)");
  app.add_option("--http-max-input-size", ho.max_body_bytes, "Largest HTTP request body in bytes (default 256 MiB)");
  app.add_option("--allow-grpc", allow_grpc, "Serve gRPC (default true)");
  app.add_option("--grpc-address", grpc_address, "gRPC address (default 0.0.0.0)");
  app.add_option("--grpc-port", grpc_port, "gRPC port (default 8001; 0 picks one)");
  app.add_option("--grpc-max-message-size", grpc_max_message, "Largest gRPC message in bytes (default 256 MiB)");
  app.add_option("--allow-metrics", allow_metrics, "Serve Prometheus metrics at /metrics (default true)");
  app.add_option("--metrics-port", ho.metrics_port, "Metrics port (default 8002; 0 picks one)");
  app.add_option("--request-timeout-ms", request_timeout_ms,
                 "Answer requests still queued after this many ms with a timeout (default: none)");
  app.add_option("--max-queue-size", so.max_queue_size, "Requests a model queues before refusing more (503)");
  app.add_option("--allow-client-shm", so.allow_client_shm,
                 "Let clients register system shared-memory regions and name them in requests (Triton's system "
                 "shared memory extension; default false: a client could have the server map any shared-memory "
                 "object it may open)");
  app.add_option("--exit-timeout-secs", exit_timeout_s, "On SIGINT/SIGTERM, how long requests in flight may finish");
  app.add_option("--log-verbose", log_verbose, "1: log each model load and server event; 2: also kiln's build log");
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!allow_metrics) ho.metrics_port = -1;
  so.log_verbose = log_verbose;
  so.request_timeout = std::chrono::milliseconds(std::max<int64_t>(0, request_timeout_ms));
  StderrLogger logger(log_verbose >= 2 ? Severity::kVerbose : log_verbose == 1 ? Severity::kInfo : Severity::kWarning);

  // SIGINT/SIGTERM are taken by sigwait below: block them before any thread starts, so every thread inherits that.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = serve::Server::Create(so, logger, exit_on_error);
  if (!server.ok()) {
    std::fprintf(stderr, "kiln serve: error: %s\n", server.status().message().c_str());
    return 1;
  }
  std::unique_ptr<serve::HttpFrontEnd> http;
  std::unique_ptr<serve::GrpcFrontEnd> grpc;
  if (allow_http || allow_metrics) {
    serve::HttpOptions opts = ho;
    if (!allow_http) {  // metrics only: the REST routes are left out
      opts.rest = false;
      opts.port = 0;
    }
    auto h = serve::HttpFrontEnd::Start(**server, opts, logger);
    if (!h.ok()) {
      std::fprintf(stderr, "kiln serve: error: %s\n", h.status().message().c_str());
      return 1;
    }
    http = std::move(*h);
    if (allow_http) std::printf("kiln serve: HTTP/REST at %s:%d\n", ho.address.c_str(), http->port());
    if (allow_metrics) std::printf("kiln serve: metrics at %s:%d/metrics\n", ho.address.c_str(), http->metrics_port());
  }
  if (allow_grpc) {
    auto g = serve::GrpcFrontEnd::Start(**server, grpc_address, grpc_port, grpc_max_message, logger);
    if (!g.ok()) {
      std::fprintf(stderr, "kiln serve: error: %s\n", g.status().message().c_str());
      return 1;
    }
    grpc = std::move(*g);
    std::printf("kiln serve: gRPC at %s:%d\n", grpc_address.c_str(), grpc->port());
  }
  for (const auto& e : (*server)->RepositoryIndex(false))
    std::printf("kiln serve: model %s%s%s: %s%s%s\n", e.name.c_str(), e.version.empty() ? "" : " version ",
                e.version.c_str(), e.state.c_str(), e.reason.empty() ? "" : " - ", e.reason.c_str());
  std::printf("kiln serve: ready\n");
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("kiln serve: %s: finishing the requests in flight (at most %d s)\n",
              sig == SIGINT ? "SIGINT" : "SIGTERM", exit_timeout_s);
  std::fflush(stdout);
  (*server)->Shutdown(std::chrono::seconds(exit_timeout_s));  // new requests get 503; queued ones run
  if (grpc) grpc->Shutdown();
  if (http) http->Shutdown();
  return 0;
}

}  // namespace kiln::cli
