// kiln serve — the gRPC front end: KServe v2's inference.GRPCInferenceService (ServerLive, ServerReady, ModelReady,
// ServerMetadata, ModelMetadata, ModelInfer with raw_input_contents / raw_output_contents and typed contents,
// ModelConfig, RepositoryIndex, RepositoryModelLoad/Unload, and Triton's SystemSharedMemory Status/Register/Unregister
// with inputs and outputs in shared memory) over the server core, with grpc++'s synchronous server.
#pragma once

#include <memory>
#include <string>

#include "kiln/logger.h"
#include "kiln/status.h"
#include "server.h"

namespace kiln::serve {

class GrpcFrontEndImpl;

class GrpcFrontEnd {
 public:
  // Listens on address:port (port 0: one the system picks; port() says which). Messages larger than
  // max_message_bytes are refused by gRPC with RESOURCE_EXHAUSTED.
  static Result<std::unique_ptr<GrpcFrontEnd>> Start(Server& server, const std::string& address, int port,
                                                     size_t max_message_bytes, ILogger& logger);
  ~GrpcFrontEnd();
  int port() const;
  void Shutdown();  // stops taking calls and waits for those running

 private:
  explicit GrpcFrontEnd(std::unique_ptr<GrpcFrontEndImpl> impl);
  std::unique_ptr<GrpcFrontEndImpl> impl_;
};

}  // namespace kiln::serve
