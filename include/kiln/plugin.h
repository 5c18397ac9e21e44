// kiln — plugins: ops defined outside kiln, imported from ONNX by (domain, op type), stored in engines by name,
// version and fields, run by a CPU implementation (required: it is the oracle) and optionally a CUDA one.
//
// A plugin library implements an IPluginCreator per op and exports one C entry point that lists them:
//
//   class ScaleCreator : public kiln::IPluginCreator { ... };
//   KILN_PLUGIN_LIBRARY(ScaleCreator, OtherCreator)      // defines kilnGetPluginLibrary()
//
// and is loaded with `kiln ... --dynamicPlugins=libmy_plugins.so` or kiln::loadPluginLibrary(path). Code linked
// into a program registers its creators with kiln::registerPlugin, or lists them with KILN_LINKED_IN_PLUGIN(C)
// for `--staticPlugins=domain.Name` to register. `kiln plugin new NAME` writes a project to start from.
//
// A plugin library needs this header only and does not link kiln: everything but the "kiln library" section is
// defined here (inline). The library and kiln must be built against the same KILN_PLUGIN_ABI_VERSION and the
// same C++ standard library ABI; the loader checks both and refuses a library that differs, with a sentence.
//
// Tensors reach a plugin dense and row-major ("linear", the only format kiln hands a plugin: layout planning keeps
// channels-last tensors away from it), in the element types the node has after precision planning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/status.h"
#include "kiln/types.h"

// Bump whenever a class, struct or virtual function below changes (kiln refuses libraries built otherwise).
#define KILN_PLUGIN_ABI_VERSION 1
// The one C entry point of a plugin library.
#define KILN_PLUGIN_ENTRY_POINT "kilnGetPluginLibrary"

namespace kiln {

enum class PluginBackend : int32_t { kCpu = 0, kCuda = 1 };

// ---- fields: a plugin's attributes, typed (ONNX attribute kinds); what an engine stores ----

using PluginFieldValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>>;
enum class PluginFieldType : int32_t { kInt = 0, kFloat = 1, kString = 2, kInts = 3, kFloats = 4 };  // variant index

inline PluginFieldType fieldTypeOf(const PluginFieldValue& v) { return static_cast<PluginFieldType>(v.index()); }
inline const char* fieldTypeName(PluginFieldType t) {
  switch (t) {
    case PluginFieldType::kInt: return "int";
    case PluginFieldType::kFloat: return "float";
    case PluginFieldType::kString: return "string";
    case PluginFieldType::kInts: return "ints";
    case PluginFieldType::kFloats: return "floats";
  }
  return "?";
}

// One field a creator accepts. Without a default the field is required.
struct PluginFieldSpec {
  std::string name;
  PluginFieldType type = PluginFieldType::kInt;
  std::optional<PluginFieldValue> default_value;

  static PluginFieldSpec Of(std::string name, PluginFieldValue def) {
    const PluginFieldType t = fieldTypeOf(def);
    return {std::move(name), t, std::move(def)};
  }
  static PluginFieldSpec Required(std::string name, PluginFieldType type) { return {std::move(name), type, {}}; }
};

// Named, typed values. kiln hands create() every field of the creator's specs (defaults filled in, types checked),
// and stores what serializeFields() returns in engines.
class PluginFields {
 public:
  void set(const std::string& name, PluginFieldValue v) {
    for (auto& [k, old] : items_)
      if (k == name) {
        old = std::move(v);
        return;
      }
    items_.emplace_back(name, std::move(v));
  }
  const PluginFieldValue* find(const std::string& name) const {
    for (const auto& [k, v] : items_)
      if (k == name) return &v;
    return nullptr;
  }
  bool has(const std::string& name) const { return find(name) != nullptr; }
  const std::vector<std::pair<std::string, PluginFieldValue>>& items() const { return items_; }

  // The value of field `name` as T (int64_t, float, std::string, std::vector<int64_t>, std::vector<float>); an
  // error names the field when it is missing or of another type.
  template <typename T>
  Result<T> get(const std::string& name) const {
    const PluginFieldValue* v = find(name);
    if (!v) return Status(StatusCode::kNotFound, "field '" + name + "' is missing");
    if (const T* t = std::get_if<T>(v)) return *t;
    return Status(StatusCode::kInvalidArgument,
                  "field '" + name + "' is " + fieldTypeName(fieldTypeOf(*v)) + ", not of the type asked for");
  }

 private:
  std::vector<std::pair<std::string, PluginFieldValue>> items_;
};

// ---- shapes: symbolic dimensions in, symbolic dimensions out ----

// A dimension: a known size, a symbol or expression of symbols ("batch", "2*seq"), or unknown (data-dependent).
struct PluginDim {
  int64_t value = -1;
  std::string expr;

  PluginDim() = default;
  PluginDim(int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor)
  static PluginDim Symbol(std::string s) {
    PluginDim d;
    d.expr = std::move(s);
    return d;
  }
  static PluginDim Unknown() { return PluginDim(); }
  bool known() const { return value >= 0; }
  bool symbolic() const { return value < 0 && !expr.empty(); }
  bool unknown() const { return value < 0 && expr.empty(); }
  std::string toString() const { return known() ? std::to_string(value) : expr.empty() ? "?" : expr; }
};
using PluginDims = std::vector<PluginDim>;

// Arithmetic on dimensions that keeps symbols (kiln implements it): add(2, "seq") is "2+seq"; unknown in, unknown out.
class IDimBuilder {
 public:
  virtual PluginDim add(const PluginDim& a, const PluginDim& b) = 0;
  virtual PluginDim sub(const PluginDim& a, const PluginDim& b) = 0;
  virtual PluginDim mul(const PluginDim& a, const PluginDim& b) = 0;
  virtual PluginDim floorDiv(const PluginDim& a, const PluginDim& b) = 0;

 protected:
  ~IDimBuilder() = default;
};

// An input as the shape function sees it. At build time dims may be symbolic and `data` is set only for constant
// inputs; at run time dims are known and `data` (host memory) is set where kiln has the values on the host.
struct PluginInputInfo {
  bool present = false;  // false: an omitted optional input
  DataType dtype = DataType::kUndefined;
  PluginDims dims;
  const void* data = nullptr;
};

// An output the shape function describes. A dim whose size depends on the input data is PluginDim::Unknown();
// such an output needs `max_dims` (same rank, every entry known or symbolic): the most it can hold. The CUDA
// backend allocates that much before running; both backends refuse a larger output.
struct PluginOutputInfo {
  DataType dtype = DataType::kUndefined;
  PluginDims dims;
  PluginDims max_dims;
};

// ---- running ----

inline size_t pluginDataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat64:
    case DataType::kInt64:
    case DataType::kUInt64: return 8;
    case DataType::kFloat32:
    case DataType::kInt32:
    case DataType::kUInt32: return 4;
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInt16:
    case DataType::kUInt16: return 2;
    case DataType::kUndefined:
    case DataType::kString: return 0;
    default: return 1;  // int8, uint8, bool, fp8
  }
}

// A tensor a kernel reads or writes: host memory on the cpu backend, device memory on cuda.
struct PluginTensor {
  void* data = nullptr;                   // nullptr: an omitted input, or a data-dependent output (see allocate)
  DataType dtype = DataType::kUndefined;  // kUndefined: an omitted optional input
  std::vector<int64_t> shape;

  bool present() const { return dtype != DataType::kUndefined; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * pluginDataTypeSize(dtype); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Outputs whose shape depends on the data: the kernel calls allocate(i, shape) once it knows output i's shape and
// writes the output where it returns (host memory on cpu; on cuda the device buffer sized by max_dims, so the
// shape must fit it). nullptr means refused (the shape exceeds max_dims, or the output is not data-dependent):
// return an error; kiln adds why.
class IPluginOutputAllocator {
 public:
  virtual void* allocate(int32_t index, const std::vector<int64_t>& shape) = 0;

 protected:
  ~IPluginOutputAllocator() = default;
};

struct PluginCpuContext {
  IPluginOutputAllocator* outputs = nullptr;
  int32_t num_threads = 1;  // the CPU threads kiln runs with (a kernel may use fewer)
};

struct PluginCudaContext {
  void* stream = nullptr;     // cudaStream_t: enqueue the work here
  void* workspace = nullptr;  // device scratch of at least cudaWorkspaceBytes()
  size_t workspace_bytes = 0;
  // For data-dependent outputs. Only such plugins may synchronize the stream (to read a count back); others must
  // neither synchronize nor allocate, so that kiln can capture the enqueue into a CUDA graph.
  IPluginOutputAllocator* outputs = nullptr;
};

// One configured instance of an op (its fields fixed). kiln creates one per distinct set of fields and shares it
// between threads: every method is const and must be safe to call concurrently.
class IPlugin {
 public:
  virtual ~IPlugin() = default;

  // The fields an engine stores; the creator's create() with them makes an equal plugin (deserialization).
  virtual PluginFields serializeFields() const = 0;

  // The shape function: each output's type and dims from the inputs' (`outputs` arrives sized to the node's output
  // count). Runs at import with symbolic dims and at run time with concrete ones.
  virtual Status inferOutputs(const std::vector<PluginInputInfo>& inputs, std::vector<PluginOutputInfo>& outputs,
                              IDimBuilder& dims) const = 0;

  // Whether it runs with these element types on `backend` (one per input, kUndefined where omitted; then one per
  // output). Default: every present tensor is float32.
  virtual bool supportsTypes(PluginBackend backend, const std::vector<DataType>& inputs,
                             const std::vector<DataType>& outputs) const {
    for (const auto* list : {&inputs, &outputs})
      for (DataType t : *list)
        if (t != DataType::kUndefined && t != DataType::kFloat32) return false;
    return true;
  }

  // The CPU implementation (required): the oracle every other backend is checked against.
  virtual Status runCpu(const std::vector<PluginTensor>& inputs, std::vector<PluginTensor>& outputs,
                        const PluginCpuContext& ctx) const = 0;

  // The CUDA implementation (optional): enqueue on ctx.stream, no host synchronization (see PluginCudaContext).
  virtual bool hasCuda() const { return false; }
  virtual size_t cudaWorkspaceBytes(const std::vector<PluginTensor>& inputs,
                                    const std::vector<PluginTensor>& outputs) const {
    return 0;
  }
  virtual Status enqueueCuda(const std::vector<PluginTensor>& inputs, std::vector<PluginTensor>& outputs,
                             const PluginCudaContext& ctx) const {
    return Status(StatusCode::kUnsupported, "this plugin has no CUDA implementation");
  }
};

// Makes plugins of one op. An ONNX node whose (domain, op type) is the creator's (domain(), name()) imports as it.
class IPluginCreator {
 public:
  virtual ~IPluginCreator() = default;
  virtual const char* name() const = 0;     // the op type
  virtual const char* domain() const = 0;   // the ONNX domain, e.g. "com.example" ("kiln" is kiln's own)
  virtual const char* version() const = 0;  // the plugin's version ("1"): engines record it and want it back
  virtual std::vector<PluginFieldSpec> fieldSpecs() const = 0;
  // Float types it computes in on `backend`: with --fp16/--bf16 the node runs in the reduced type only where the
  // cuda list has it, and stays float32 otherwise.
  virtual std::vector<DataType> floatTypes(PluginBackend backend) const { return {DataType::kFloat32}; }
  // A plugin from complete, type-checked fields; an error says which value is wrong.
  virtual Result<std::unique_ptr<IPlugin>> create(const PluginFields& fields) const = 0;
};

// ---- kiln library: registering and loading plugins (the application side; plugin libraries never call these) ----

struct PluginInfo {
  std::string domain, name, version;
  std::string library;  // the file it was loaded from; "" when linked in
  std::vector<PluginFieldSpec> fields;
};

// Registers a creator (a plugin linked into the program). Refused, with a sentence, when its name collides with a
// built-in op or a registered plugin, or it names no op.
Status registerPlugin(std::shared_ptr<IPluginCreator> creator);
// Removes a registered plugin (its library stays loaded). Engines using it then refuse to load.
Status deregisterPlugin(const std::string& domain, const std::string& name);
// Loads a plugin library and registers every creator it lists. Loading the same file again is a no-op. Errors
// name the file and say what is wrong: missing, not a shared library, not a kiln plugin, another plugin ABI.
Result<std::vector<PluginInfo>> loadPluginLibrary(const std::string& path);
std::vector<PluginInfo> getRegisteredPlugins();

// Linked-in plugins: listed (usually by KILN_LINKED_IN_PLUGIN at static initialization), registered on request.
void addLinkedInPlugin(std::shared_ptr<IPluginCreator> creator);
std::vector<PluginInfo> getLinkedInPlugins();
// Registers linked-in plugins by qualified name ("com.example.Scale") or "all"; already registered ones are skipped.
Status registerLinkedInPlugins(const std::vector<std::string>& names);

}  // namespace kiln

// ---- the library entry point ----

// What kilnGetPluginLibrary() returns (C layout; `magic` and `abi_version` stay first in every ABI version).
struct KilnPluginLibrary {
  uint32_t magic;       // kKilnPluginMagic
  int32_t abi_version;  // KILN_PLUGIN_ABI_VERSION the library was built with
  uint32_t cxx_abi;     // kiln::pluginCxxAbi() of the library's compiler
  int32_t num_creators;
  kiln::IPluginCreator* const* creators;
};
inline constexpr uint32_t kKilnPluginMagic = 0x4B504C47u;  // "KPLG"

namespace kiln {
// The C++ standard library's layout as seen by this compiler: libraries and kiln must agree.
inline constexpr uint32_t pluginCxxAbi() {
  uint32_t f = static_cast<uint32_t>(sizeof(std::string)) | static_cast<uint32_t>(sizeof(std::vector<int>)) << 8 |
               static_cast<uint32_t>(sizeof(PluginFieldValue)) << 16;
#if defined(_GLIBCXX_USE_CXX11_ABI)
  f |= static_cast<uint32_t>(_GLIBCXX_USE_CXX11_ABI) << 24;
#endif
#if defined(_LIBCPP_VERSION)
  f |= 1u << 25;
#endif
  return f;
}

namespace plugin_detail {
template <typename... Creators>
struct LibraryHolder {
  std::tuple<Creators...> creators;
  IPluginCreator* list[sizeof...(Creators)];
  KilnPluginLibrary lib;
  LibraryHolder() {
    std::apply(
        [this](auto&... c) {
          size_t i = 0;
          ((list[i++] = &c), ...);
        },
        creators);
    lib = {kKilnPluginMagic, KILN_PLUGIN_ABI_VERSION, pluginCxxAbi(), static_cast<int32_t>(sizeof...(Creators)), list};
  }
};
}  // namespace plugin_detail
}  // namespace kiln

#define KILN_PLUGIN_EXPORT __attribute__((visibility("default")))

// Defines the library's entry point listing the creator classes (default-constructible IPluginCreators).
#define KILN_PLUGIN_LIBRARY(...)                                                      \
  extern "C" KILN_PLUGIN_EXPORT const KilnPluginLibrary* kilnGetPluginLibrary(void) { \
    static ::kiln::plugin_detail::LibraryHolder<__VA_ARGS__> holder;                  \
    return &holder.lib;                                                               \
  }

// In code linked into a program: lists a creator class for --staticPlugins / registerLinkedInPlugins.
#define KILN_LINKED_IN_PLUGIN(Creator)                                        \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_linked_in_, __LINE__) = \
      (::kiln::addLinkedInPlugin(std::make_shared<Creator>()), true)
