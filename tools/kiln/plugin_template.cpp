// The project `kiln plugin new` writes (plugin_cmd.h): @NAME@ is the op (and class) name, @SNAKE@ its snake_case
// form (files, targets), @UPPER@ the upper-case form (macros), @DOMAIN@ the ONNX domain.
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "plugin_cmd.h"

namespace kiln::cli {

namespace {

const char* kCMakeLists = R"KILN(# @NAME@: a kiln plugin (op @DOMAIN@.@NAME@). Build and test against an installed kiln:
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=<kiln install prefix> && cmake --build build && ctest --test-dir build
cmake_minimum_required(VERSION 3.25)
project(@SNAKE@_plugin LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
find_package(kiln REQUIRED)

# The CUDA implementation is built where nvcc is found (-D@UPPER@_WITH_CUDA=OFF skips it).
option(@UPPER@_WITH_CUDA "Build the CUDA implementation" ON)
set(WITH_CUDA OFF)
if(@UPPER@_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper; pass -DCMAKE_CUDA_ARCHITECTURES=native (or 80, 89...) for yours
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    find_package(CUDAToolkit REQUIRED)
    set(WITH_CUDA ON)
  endif()
endif()

# The plugin library. It uses <kiln/plugin.h> only (kiln::plugin_api) and must not link kiln: kiln loads it.
add_library(@SNAKE@_plugin MODULE src/@SNAKE@_plugin.cpp)
target_link_libraries(@SNAKE@_plugin PRIVATE kiln::plugin_api)
set_target_properties(@SNAKE@_plugin PROPERTIES CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
                      VISIBILITY_INLINES_HIDDEN ON)
if(WITH_CUDA)
  target_sources(@SNAKE@_plugin PRIVATE src/@SNAKE@_kernels.cu)
  target_compile_definitions(@SNAKE@_plugin PRIVATE @UPPER@_WITH_CUDA=1)
  target_link_libraries(@SNAKE@_plugin PRIVATE CUDA::cudart)
endif()

# A tiny ONNX model using the op (tools/make_model.cpp writes its protobuf bytes): x[2,3,4] -> @NAME@ -> y.
add_executable(@SNAKE@_make_model tools/make_model.cpp)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/@SNAKE@.onnx
                   COMMAND @SNAKE@_make_model ${CMAKE_BINARY_DIR}/@SNAKE@.onnx DEPENDS @SNAKE@_make_model)
add_custom_target(@SNAKE@_model ALL DEPENDS ${CMAKE_BINARY_DIR}/@SNAKE@.onnx)

# The test links kiln (kiln::kiln), loads the plugin library and runs the model: on the cpu backend against the
# expected values and through an engine file; on the cuda backend against the cpu result (skipped without a GPU).
enable_testing()
add_executable(@SNAKE@_test test/@SNAKE@_test.cpp)
target_link_libraries(@SNAKE@_test PRIVATE kiln::kiln)
if(WITH_CUDA)
  target_compile_definitions(@SNAKE@_test PRIVATE @UPPER@_WITH_CUDA=1)
  target_link_libraries(@SNAKE@_test PRIVATE CUDA::cudart)
endif()
add_dependencies(@SNAKE@_test @SNAKE@_plugin @SNAKE@_model)
add_test(NAME @SNAKE@_cpu COMMAND @SNAKE@_test cpu $<TARGET_FILE:@SNAKE@_plugin> ${CMAKE_BINARY_DIR}/@SNAKE@.onnx)
add_test(NAME @SNAKE@_cuda_vs_cpu
         COMMAND @SNAKE@_test cuda $<TARGET_FILE:@SNAKE@_plugin> ${CMAKE_BINARY_DIR}/@SNAKE@.onnx)
set_tests_properties(@SNAKE@_cuda_vs_cpu PROPERTIES SKIP_RETURN_CODE 77)
)KILN";

const char* kPluginCpp = R"KILN(// @NAME@ (op @DOMAIN@.@NAME@), a kiln plugin. As written it computes y = alpha * x in float32, and alpha defaults
// to 1, so by default it is the identity. Make it yours:
//   - fields: fieldSpecs() and create() (typed; engines store what serializeFields() gives);
//   - shapes and types: inferOutputs() (dims may be symbolic; an output whose size depends on the data leaves a dim
//     PluginDim::Unknown() with a bound in max_dims and is given memory by ctx.outputs->allocate()) and
//     supportsTypes() (the default takes float32 only);
//   - runCpu(): required, kiln checks every other backend against it;
//   - enqueueCuda(): optional, in src/@SNAKE@_kernels.cu.
// The library uses <kiln/plugin.h> only: it cannot call kiln's library functions (kiln::Status::ToString, say).
#include <string>

#include <kiln/plugin.h>

#include "@SNAKE@_kernels.h"

namespace {

using kiln::Status;
using kiln::StatusCode;

class @NAME@Plugin final : public kiln::IPlugin {
 public:
  explicit @NAME@Plugin(float alpha) : alpha_(alpha) {}

  kiln::PluginFields serializeFields() const override {
    kiln::PluginFields f;
    f.set("alpha", alpha_);
    return f;
  }

  Status inferOutputs(const std::vector<kiln::PluginInputInfo>& inputs, std::vector<kiln::PluginOutputInfo>& outputs,
                      kiln::IDimBuilder& dims) const override {
    if (inputs.size() != 1 || !inputs[0].present || outputs.size() != 1)
      return Status(StatusCode::kInvalidModel, "@NAME@ takes one input and gives one output");
    outputs[0].dtype = inputs[0].dtype;
    outputs[0].dims = inputs[0].dims;
    return Status::Ok();
  }

  Status runCpu(const std::vector<kiln::PluginTensor>& in, std::vector<kiln::PluginTensor>& out,
                const kiln::PluginCpuContext&) const override {
    const float* x = in[0].as<const float>();
    float* y = out[0].as<float>();
    for (int64_t i = 0, n = in[0].numel(); i < n; ++i) y[i] = alpha_ * x[i];
    return Status::Ok();
  }

#ifdef @UPPER@_WITH_CUDA
  bool hasCuda() const override { return true; }
  Status enqueueCuda(const std::vector<kiln::PluginTensor>& in, std::vector<kiln::PluginTensor>& out,
                     const kiln::PluginCudaContext& ctx) const override {
    const char* err = Launch@NAME@(in[0].as<const float>(), out[0].as<float>(), in[0].numel(), alpha_, ctx.stream);
    return err ? Status(StatusCode::kCudaError, std::string("@NAME@ kernel: ") + err) : Status::Ok();
  }
#endif

 private:
  float alpha_;
};

class @NAME@Creator final : public kiln::IPluginCreator {
 public:
  const char* name() const override { return "@NAME@"; }
  const char* domain() const override { return "@DOMAIN@"; }
  const char* version() const override { return "1"; }
  std::vector<kiln::PluginFieldSpec> fieldSpecs() const override { return {kiln::PluginFieldSpec::Of("alpha", 1.0f)}; }
  kiln::Result<std::unique_ptr<kiln::IPlugin>> create(const kiln::PluginFields& fields) const override {
    auto alpha = fields.get<float>("alpha");
    if (!alpha.ok()) return alpha.status();
    return std::unique_ptr<kiln::IPlugin>(new @NAME@Plugin(*alpha));
  }
};

}  // namespace

KILN_PLUGIN_LIBRARY(@NAME@Creator)
)KILN";

const char* kKernelsH = R"KILN(// The launcher of @NAME@'s CUDA kernel (src/@SNAKE@_kernels.cu): plain C++, no CUDA headers.
#pragma once

#include <cstdint>

// y = alpha * x over n float32 elements on `stream` (a cudaStream_t). nullptr on success, else the CUDA error.
const char* Launch@NAME@(const float* x, float* y, int64_t n, float alpha, void* stream);
)KILN";

const char* kKernelsCu = R"KILN(// @NAME@'s CUDA kernel.
#include <cuda_runtime.h>

#include "@SNAKE@_kernels.h"

namespace {

__global__ void @NAME@Kernel(const float* x, float* y, int64_t n, float alpha) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = alpha * x[i];
}

}  // namespace

const char* Launch@NAME@(const float* x, float* y, int64_t n, float alpha, void* stream) {
  if (n == 0) return nullptr;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  @NAME@Kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, y, n, alpha);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}
)KILN";

const char* kMakeModel = R"KILN(// Writes a tiny ONNX model using @NAME@: x float32[2,3,4] -> @DOMAIN@.@NAME@ -> y. The protobuf bytes are
// written by hand (no protobuf library needed); field numbers are onnx.proto's.
// Usage: @SNAKE@_make_model OUT.onnx
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

std::string Varint(uint64_t v) {
  std::string s;
  do {
    s += static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return s;
}
std::string Int(int field, int64_t v) { return Varint(static_cast<uint64_t>(field) << 3) + Varint(static_cast<uint64_t>(v)); }
std::string Bytes(int field, const std::string& b) { return Varint((static_cast<uint64_t>(field) << 3) | 2) + Varint(b.size()) + b; }

// ValueInfoProto{name, type: TypeProto{tensor_type: {elem_type: FLOAT, shape}}}
std::string TensorValue(const std::string& name, const std::vector<int64_t>& dims) {
  std::string shape;
  for (int64_t d : dims) shape += Bytes(1, Int(1, d));  // TensorShapeProto.dim{dim_value}
  const std::string tensor = Int(1, 1) + Bytes(2, shape);  // elem_type 1 = FLOAT
  return Bytes(1, name) + Bytes(2, Bytes(1, tensor));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.onnx\n", argv[0]);
    return 2;
  }
  // NodeProto{input, output, name, op_type, domain}; add attributes (field 5) to set fields other than defaults.
  const std::string node = Bytes(1, "x") + Bytes(2, "y") + Bytes(3, "@SNAKE@_node") + Bytes(4, "@NAME@") +
                           Bytes(7, "@DOMAIN@");
  const std::string graph = Bytes(1, node) + Bytes(2, "@SNAKE@_graph") + Bytes(11, TensorValue("x", {2, 3, 4})) +
                            Bytes(12, TensorValue("y", {2, 3, 4}));
  const std::string model = Int(1, 8) +                                        // ir_version
                            Bytes(8, Bytes(1, "") + Int(2, 17)) +              // opset_import: ONNX 17
                            Bytes(8, Bytes(1, "@DOMAIN@") + Int(2, 1)) +       // opset_import: the plugin's domain
                            Bytes(2, "kiln plugin new") + Bytes(7, graph);     // producer_name, graph
  FILE* f = std::fopen(argv[1], "wb");
  if (!f || std::fwrite(model.data(), 1, model.size(), f) != model.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
)KILN";

const char* kTest = R"KILN(// @NAME@'s test. Usage: @SNAKE@_test cpu|cuda PLUGIN_LIBRARY MODEL
//   cpu:  loads the plugin library into kiln, builds the model for the cpu backend and checks y against Expected();
//         then saves the engine to a file, loads it again and checks it gives the same;
//   cuda: builds the model for the cuda backend and checks it against the cpu backend (the plugin's CPU
//         implementation is the oracle); exits 77 ("skipped") without CUDA or a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <kiln/kiln.h>
#include <kiln/plugin.h>
#ifdef @UPPER@_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

kiln::StderrLogger logger(kiln::Severity::kWarning);

std::vector<float> Input() {
  std::vector<float> x(2 * 3 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i)) * 3.f;
  return x;
}

// What the op computes: y = alpha * x with the default alpha = 1. Change it with the op.
std::vector<float> Expected(const std::vector<float>& x) { return x; }

kiln::Result<std::vector<uint8_t>> Build(const char* model, const char* backend) {
  kiln::Builder builder(logger);
  auto network = builder.createNetwork();
  kiln::OnnxParser parser(*network, logger);
  KILN_RETURN_IF_ERROR(parser.parseFromFile(model));
  auto config = builder.createBuilderConfig();
  config->setBackend(backend);
  return builder.buildSerializedNetwork(*network, *config);
}

// Runs an engine on x: host buffers on the cpu backend, device buffers on cuda.
kiln::Result<std::vector<float>> Run(const std::vector<uint8_t>& engine_bytes, std::vector<float> x, bool device) {
  kiln::Runtime runtime(logger);
  KILN_ASSIGN_OR_RETURN(auto engine, runtime.deserializeEngine(engine_bytes.data(), engine_bytes.size()));
  KILN_ASSIGN_OR_RETURN(auto context, engine->createExecutionContext());
  std::vector<float> y(x.size());
  void* px = x.data();
  void* py = y.data();
#ifdef @UPPER@_WITH_CUDA
  if (device) {
    if (cudaMalloc(&px, x.size() * 4) != cudaSuccess || cudaMalloc(&py, y.size() * 4) != cudaSuccess ||
        cudaMemcpy(px, x.data(), x.size() * 4, cudaMemcpyHostToDevice) != cudaSuccess)
      return kiln::Status(kiln::StatusCode::kCudaError, "cannot allocate or upload device buffers");
  }
#endif
  KILN_RETURN_IF_ERROR(context->setTensorAddress("x", px));
  KILN_RETURN_IF_ERROR(context->setTensorAddress("y", py));
  KILN_RETURN_IF_ERROR(context->enqueue(nullptr));
#ifdef @UPPER@_WITH_CUDA
  if (device) {
    const cudaError_t e = cudaMemcpy(y.data(), py, y.size() * 4, cudaMemcpyDeviceToHost);  // waits for the run
    cudaFree(px);
    cudaFree(py);
    if (e != cudaSuccess) return kiln::Status(kiln::StatusCode::kCudaError, cudaGetErrorString(e));
  }
#endif
  return y;
}

// The largest |a - b| - tol * |b| (> 0: some element is off).
double WorstExcess(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  double worst = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]) - tol * (1 + std::fabs(static_cast<double>(b[i])));
    worst = std::isnan(d) ? 1e30 : std::max(worst, d);
  }
  return worst;
}

int Fail(const std::string& what, const kiln::Status& st) {
  std::fprintf(stderr, "FAILED: %s: %s\n", what.c_str(), st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::strcmp(argv[1], "cpu") != 0 && std::strcmp(argv[1], "cuda") != 0)) {
    std::fprintf(stderr, "usage: %s cpu|cuda PLUGIN_LIBRARY MODEL\n", argv[0]);
    return 2;
  }
  const bool cuda = std::strcmp(argv[1], "cuda") == 0;
  auto loaded = kiln::loadPluginLibrary(argv[2]);
  if (!loaded.ok()) return Fail("loading the plugin library", loaded.status());
  const std::vector<float> x = Input();
  auto cpu_engine = Build(argv[3], "cpu");
  if (!cpu_engine.ok()) return Fail("building for the cpu backend", cpu_engine.status());
  auto cpu = Run(*cpu_engine, x, false);
  if (!cpu.ok()) return Fail("running on the cpu backend", cpu.status());

  if (!cuda) {
    if (WorstExcess(*cpu, Expected(x), 1e-6) > 0) {
      std::fprintf(stderr, "FAILED: the cpu backend's y differs from Expected(x)\n");
      return 1;
    }
    const std::string path = "@SNAKE@_test.engine";
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(cpu_engine->data()),
                                                static_cast<std::streamsize>(cpu_engine->size()));
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> reloaded((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto again = Run(reloaded, x, false);
    if (!again.ok()) return Fail("running the engine loaded from " + path, again.status());
    if (*again != *cpu) {
      std::fprintf(stderr, "FAILED: the engine loaded from %s gives another y\n", path.c_str());
      return 1;
    }
    std::printf("PASSED: @DOMAIN@.@NAME@ on the cpu backend gives the expected y, and so does its engine file\n");
    return 0;
  }
#ifndef @UPPER@_WITH_CUDA
  std::printf("skipped: the plugin was built without CUDA (no nvcc found)\n");
  return 77;
#else
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device; run this test on a machine with a GPU\n");
    return 77;
  }
  auto gpu_engine = Build(argv[3], "cuda");
  if (!gpu_engine.ok()) return Fail("building for the cuda backend", gpu_engine.status());
  auto gpu = Run(*gpu_engine, x, true);
  if (!gpu.ok()) return Fail("running on the cuda backend", gpu.status());
  if (WorstExcess(*gpu, *cpu, 1e-5) > 0) {
    std::fprintf(stderr, "FAILED: the cuda backend's y differs from the cpu backend's\n");
    return 1;
  }
  std::printf("PASSED: @DOMAIN@.@NAME@ on the cuda backend matches its CPU implementation\n");
  return 0;
#endif
}
)KILN";

const char* kReadme = R"KILN(# @NAME@ — a kiln plugin

The op `@NAME@` in ONNX domain `@DOMAIN@`, written by `kiln plugin new`. As generated it computes `y = alpha * x`
(float32; the field `alpha` defaults to 1, so the default is the identity) on the CPU and, where nvcc is found,
on CUDA.

| file | what it holds |
| --- | --- |
| `src/@SNAKE@_plugin.cpp` | the plugin: fields, shape function, types, the CPU implementation, the CUDA call, and `KILN_PLUGIN_LIBRARY` (the library's one entry point) |
| `src/@SNAKE@_kernels.cu` | the CUDA kernel behind a plain launcher (`src/@SNAKE@_kernels.h`) |
| `tools/make_model.cpp` | writes `build/@SNAKE@.onnx`, a one-node model using the op |
| `test/@SNAKE@_test.cpp` | the test: the CPU result against the expected values and through an engine file; the CUDA result against the CPU one |

## Build and test

```sh
cmake -S . -B build -DCMAKE_PREFIX_PATH=<kiln install prefix>
cmake --build build
ctest --test-dir build --output-on-failure   # @SNAKE@_cuda_vs_cpu is skipped where no GPU is found
```

## Use it

```sh
kiln build --onnx=build/@SNAKE@.onnx --dynamicPlugins=build/lib@SNAKE@_plugin.so --saveEngine=m.engine
kiln run --loadEngine=m.engine --dynamicPlugins=build/lib@SNAKE@_plugin.so --dumpOutput
```

or from C++: `kiln::loadPluginLibrary("build/lib@SNAKE@_plugin.so")` before parsing a model or loading an engine.
An engine records the plugin's name, version and fields; loading it without the library says which library to load.

## Make it yours

Change the computation in `runCpu` (the oracle: kiln checks other backends against it), the kernel in
`src/@SNAKE@_kernels.cu`, and `Expected()` in the test. Add fields in `fieldSpecs()`/`create()`/`serializeFields()`;
take other types by overriding `supportsTypes()` (and `floatTypes()` on the creator, for --fp16 engines). An output
whose size depends on the data leaves a dim `PluginDim::Unknown()` with a bound in `max_dims`, and the kernels ask
`ctx.outputs->allocate(i, shape)` for its memory. Bump `version()` when the fields or the results change: engines
built with another version refuse to load.

The library must be built against the same `<kiln/plugin.h>` (`KILN_PLUGIN_ABI_VERSION`) and C++ standard library
as the kiln that loads it, and may use only what that header defines inline.
)KILN";

std::string Fill(std::string text, const std::string& name, const std::string& snake, const std::string& upper,
                 const std::string& domain) {
  const std::pair<const char*, const std::string*> keys[] = {
      {"@NAME@", &name}, {"@SNAKE@", &snake}, {"@UPPER@", &upper}, {"@DOMAIN@", &domain}};
  for (const auto& [key, value] : keys) {
    const std::string k = key;
    for (size_t pos = text.find(k); pos != std::string::npos; pos = text.find(k, pos + value->size()))
      text.replace(pos, k.size(), *value);
  }
  return text;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> PluginProjectFiles(const std::string& name, const std::string& snake,
                                                                    const std::string& domain) {
  std::string upper;
  for (char c : snake) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::pair<std::string, const char*> files[] = {
      {"CMakeLists.txt", kCMakeLists},
      {"README.md", kReadme},
      {"src/" + snake + "_plugin.cpp", kPluginCpp},
      {"src/" + snake + "_kernels.h", kKernelsH},
      {"src/" + snake + "_kernels.cu", kKernelsCu},
      {"tools/make_model.cpp", kMakeModel},
      {"test/" + snake + "_test.cpp", kTest},
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [path, text] : files) out.emplace_back(path, Fill(text, name, snake, upper, domain));
  return out;
}

}  // namespace kiln::cli
