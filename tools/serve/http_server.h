// kiln serve — the HTTP front end (cpp-httplib): KServe v2 REST (health, server and model metadata, model config,
// infer with JSON tensors and Triton's binary tensor data extension), Triton's repository API (index, load,
// unload), and Prometheus metrics (/metrics, on its own port when one is given).
#pragma once

#include <memory>
#include <string>

#include "kiln/logger.h"
#include "kiln/status.h"
#include "server.h"

namespace kiln::serve {

struct HttpOptions {
  std::string address = "0.0.0.0";
  int port = 8000;            // 0: one the system picks
  int metrics_port = -1;      // -1: /metrics on `port`; 0 or more: its own listener (0 picks one)
  int threads = 64;           // connections served at once (each blocks while its request runs)
  size_t max_body_bytes = 256u << 20;
  // JSON parses into a tree many times its size: larger JSON headers are refused (413) and large tensors should come
  // as binary data.
  size_t max_json_bytes = 64u << 20;
  bool rest = true;  // false: only /metrics (--allow-http=false with metrics on)
};

class HttpFrontEndImpl;

class HttpFrontEnd {
 public:
  static Result<std::unique_ptr<HttpFrontEnd>> Start(Server& server, const HttpOptions& options, ILogger& logger);
  ~HttpFrontEnd();
  int port() const;
  int metrics_port() const;  // == port() when metrics share it
  void Shutdown();           // stops listening; requests in flight finish

 private:
  explicit HttpFrontEnd(std::unique_ptr<HttpFrontEndImpl> impl);
  std::unique_ptr<HttpFrontEndImpl> impl_;
};

}  // namespace kiln::serve
