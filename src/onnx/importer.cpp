// ONNX model -> kiln IR: protobuf parsing, initializers (external data too), Constant nodes, converters,
// the one report of unsupported nodes, topological sort, shape inference with constant folding.
#include "onnx/importer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "onnx.pb.h"
#include "ops/onnx_schema.h"
#include "ops/op_def.h"
#include "onnx/legacy_opsets.h"
#include "onnx/tensor_proto.h"

namespace kiln {

namespace {

bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

Status CheckModelPath(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Err(StatusCode::kNotFound, "model file '{}' does not exist", path);
  if (std::filesystem::is_directory(path, ec))
    return Err(StatusCode::kInvalidArgument, "'{}' is a directory, not an ONNX model file", path);
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path) {
  KILN_RETURN_IF_ERROR(CheckModelPath(path));
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Err(StatusCode::kIoError, "cannot open model file '{}'", path);
  std::string bytes(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    return Err(StatusCode::kIoError, "cannot read model file '{}'", path);
  return bytes;
}

void ReadValueType(const onnx::ValueInfoProto& vi, Value* v) {
  if (!vi.has_type() || !vi.type().has_tensor_type()) return;
  const auto& tt = vi.type().tensor_type();
  if (tt.elem_type() != 0) v->dtype = static_cast<DataType>(tt.elem_type());
  if (!tt.has_shape()) return;
  v->shape.clear();
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) v->shape.emplace_back(d.dim_value());
    else if (d.has_dim_param() && !d.dim_param().empty()) v->shape.push_back(Dim::Symbol(d.dim_param()));
    else v->shape.push_back(Dim::Unknown());
  }
  v->has_shape = true;
}

// value_info entries and graph outputs: their declared type. For a graph input or an initializer the model fixed the
// type already, and a different declaration is a malformed model (it would retype the input); elsewhere an element
// type ONNX does not define is one too.
Status ReadDeclaredType(const onnx::ValueInfoProto& vi, Value* v, const char* what, const std::string& source) {
  const int code = vi.has_type() && vi.type().has_tensor_type() ? vi.type().tensor_type().elem_type() : 0;
  // Codes 1..26 are ONNX's element types up to its newest (float8, int4, float4, int2 included); the onnx.proto kiln is
  // compiled from may predate some of them, so its IsValid is not the test.
  if (code != 0 && (code < 1 || code > 26))
    return Err(StatusCode::kInvalidModel, "'{}': {} '{}' is declared with element type code {}, which ONNX does not "
               "define", source, what, vi.name(), code);
  if (v->is_graph_input || v->is_const()) {
    if (code != 0 && static_cast<DataType>(code) != v->dtype)
      return Err(StatusCode::kInvalidModel, "'{}': {} '{}' is declared {} but it is a graph {} of type {}", source, what,
                 vi.name(), DataTypeName(static_cast<DataType>(code)), v->is_graph_input ? "input" : "initializer",
                 DataTypeName(v->dtype));
    return Status::Ok();  // the input's or initializer's own type and shape stand
  }
  ReadValueType(vi, v);
  return Status::Ok();
}

Result<Attribute> ConvertAttribute(const onnx::AttributeProto& a, const DataDirs& base_dir, const std::string& where) {
  Attribute r;
  auto type = a.type();
  if (type == onnx::AttributeProto::UNDEFINED) {  // very old models: infer the kind from the field set
    if (a.has_f()) type = onnx::AttributeProto::FLOAT;
    else if (a.has_i()) type = onnx::AttributeProto::INT;
    else if (a.has_s()) type = onnx::AttributeProto::STRING;
    else if (a.has_t()) type = onnx::AttributeProto::TENSOR;
    else if (a.floats_size()) type = onnx::AttributeProto::FLOATS;
    else if (a.ints_size()) type = onnx::AttributeProto::INTS;
    else if (a.strings_size()) type = onnx::AttributeProto::STRINGS;
  }
  switch (type) {
    case onnx::AttributeProto::FLOAT: r.kind = Attribute::Kind::kFloat; r.f = a.f(); break;
    case onnx::AttributeProto::INT: r.kind = Attribute::Kind::kInt; r.i = a.i(); break;
    case onnx::AttributeProto::STRING: r.kind = Attribute::Kind::kString; r.s = a.s(); break;
    case onnx::AttributeProto::FLOATS:
      r.kind = Attribute::Kind::kFloats;
      r.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      r.kind = Attribute::Kind::kInts;
      r.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::STRINGS:
      r.kind = Attribute::Kind::kStrings;
      r.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case onnx::AttributeProto::TENSOR: {
      r.kind = Attribute::Kind::kTensor;
      KILN_ASSIGN_OR_RETURN(r.t, TensorFromProto(a.t(), base_dir, where + " attribute '" + a.name() + "'"));
      break;
    }
    case onnx::AttributeProto::GRAPH: case onnx::AttributeProto::GRAPHS: r.kind = Attribute::Kind::kGraph; break;
    default:
      return Err(StatusCode::kUnsupported, "{}: attribute '{}' has a type kiln does not read ({})", where, a.name(),
                 static_cast<int>(type));
  }
  return r;
}

// Turns a Constant node into a constant value.
Result<Tensor> ConstantValue(const onnx::NodeProto& np, const DataDirs& base_dir, const std::string& where) {
  for (const auto& a : np.attribute()) {
    const std::string& k = a.name();
    if (k == "value") return TensorFromProto(a.t(), base_dir, where);
    if (k == "value_float") return Tensor::Scalar(DataType::kFloat32, a.f());
    if (k == "value_int") return Tensor::Scalar(DataType::kInt64, static_cast<double>(a.i()));
    if (k == "value_floats")
      return Tensor::FromFloat({a.floats().begin(), a.floats().end()}, {static_cast<int64_t>(a.floats_size())});
    if (k == "value_ints") return Tensor::FromInt64({a.ints().begin(), a.ints().end()});
    if (k == "sparse_value" || k == "value_string" || k == "value_strings")
      return Err(StatusCode::kUnsupported, "{}: Constant with '{}' is not supported", where, k);
  }
  return Err(StatusCode::kInvalidModel, "{}: Constant node has no value attribute", where);
}

// The default domain's operator versions after kImplementedOpset that change more than their types.
struct VersionChange {
  const char* op;
  int64_t version;
  const char* what;
};
constexpr VersionChange kVersionChanges[] = {
#include "onnx/onnx_version_changes.inc"
};

// The versions of that table kiln implements all the same. Cast-24 / CastLike-24: round_mode, for casts to float8e8m0
// (the CPU Cast, backends/cpu/elementwise_cast_narrow.cpp), and the changed Inf rows of the fnuz float8 types (Inf
// saturates). DequantizeLinear-23: its output_dtype; QuantizeLinear-23: its precision (ops/quantize_linear.h);
// QuantizeLinear-25: the int2 types only (the CPU kernels).
// AveragePool-22, MaxPool-22: a ceil_mode window starting in the end padding is dropped (kiln did so already), and
// AveragePool's count_include_pad no longer counts a window's overhang past the end pads (backends' pool kernels).
// Mod-28: floored float remainders (fmod = 0). Range-27: float16/bfloat16 with stash_type (the CPU; the cuda layer
// refuses them with the reason). RMSNormalization-23, Swish-24: new operators. SpaceToDepth-28: its
// CRD mode.
constexpr std::pair<const char*, int64_t> kImplementedChanges[] = {
    {"AveragePool", 22}, {"BitShift", 28},       {"Cast", 24},             {"CastLike", 24},
    {"DequantizeLinear", 23},
    {"MaxPool", 22},     {"Mod", 28},            {"QuantizeLinear", 23},   {"QuantizeLinear", 25},
    {"Range", 27},       {"RMSNormalization", 23}, {"SpaceToDepth", 28},   {"Swish", 24}};

// Why a default-domain node at its opset is not what kiln implements ("Mod-28: its documentation changed ..."), or
// "": the first version of its op after kImplementedOpset, up to the node's opset, that changes more than types and
// that kiln does not implement.
std::string ChangedSinceImplemented(const Node& n) {
  if (!n.domain.empty() || n.opset <= kImplementedOpset) return "";
  for (const VersionChange& c : kVersionChanges) {  // sorted by op, then version
    if (n.op_type != c.op || c.version <= kImplementedOpset || c.version > n.opset) continue;
    bool implemented = false;
    for (const auto& [op, v] : kImplementedChanges) implemented |= n.op_type == op && c.version == v;
    if (!implemented) return fmt::format("{}-{}: {}", c.op, c.version, c.what);
  }
  return "";
}

}  // namespace

Result<std::unique_ptr<Graph>> ImportOnnxBytes(std::string_view bytes, const std::string& base_dir,
                                               const std::string& source, const ImportOptions& opts) {
  onnx::ModelProto model;
  DataDirs data_dirs{base_dir};  // the model's folder, then the folders the user allowed
  data_dirs.insert(data_dirs.end(), opts.external_data_dirs.begin(), opts.external_data_dirs.end());
  if (bytes.empty()) return Err(StatusCode::kInvalidModel, "'{}' is empty, not an ONNX model", source);
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return Err(StatusCode::kInvalidModel,
               "'{}' is {} bytes: a protobuf message cannot exceed 2 GiB; save the model's weights as external data "
               "(onnx.save(model, path, save_as_external_data=True))",
               source, bytes.size());
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Err(StatusCode::kInvalidModel,
               "'{}' is not a valid ONNX model: the protobuf cannot be parsed (is the file truncated or corrupted?)",
               source);
  if (!model.has_graph())
    return Err(StatusCode::kInvalidModel, "'{}' has no graph (truncated, corrupted, or not an ONNX model?)", source);

  auto g = std::make_unique<Graph>();
  const auto& gp = model.graph();
  g->name = gp.name();
  int64_t opset = -1;
  for (const auto& os : model.opset_import()) {
    g->opsets[os.domain()] = os.version();
    if (IsDefaultDomain(os.domain())) opset = os.version();
  }
  if (model.opset_import_size() == 0) opset = 1;  // per the ONNX spec, a missing import means version 1
  if (opset >= 0 && (opset < kMinOpset || opset > kMaxOpset))
    return Err(StatusCode::kUnsupported,
               "'{}' uses ONNX opset {}, kiln supports opsets {} to {}: convert the model with "
               "onnx.version_converter (python -c \"import onnx, onnx.version_converter as v; "
               "onnx.save(v.convert_version(onnx.load('in.onnx'), 17), 'out.onnx')\")",
               source, opset, kMinOpset, kMaxOpset);
  if (gp.sparse_initializer_size() > 0)
    return Err(StatusCode::kUnsupported, "'{}': sparse initializers are not supported", source);

  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) return Err(StatusCode::kInvalidModel, "'{}': an initializer has no name", source);
    Value* v = g->GetOrAddValue(init.name());
    KILN_ASSIGN_OR_RETURN(Tensor t,
                          TensorFromProto(init, data_dirs, fmt::format("'{}': initializer '{}'", source, init.name())));
    v->dtype = t.dtype();
    v->shape = FromStatic(t.shape());
    v->has_shape = true;
    v->const_value = std::move(t);
  }
  for (const auto& in : gp.input()) {
    Value* v = g->GetOrAddValue(in.name());
    if (v->is_const()) continue;  // IR < 4: initializers are listed as inputs too
    if (v->is_graph_input)
      return Err(StatusCode::kInvalidModel, "'{}': graph input '{}' is listed twice: the model is malformed (each "
                 "input is listed once)", source, in.name());
    ReadValueType(in, v);
    if (v->dtype == DataType::kUndefined)
      return Err(StatusCode::kInvalidModel, "'{}': graph input '{}' has no tensor element type", source, in.name());
    if (!IsSupportedType(v->dtype)) {
      // Name the type as ONNX does (kiln's own names cover only the types it has: complex64 is none of them).
      const int code = in.type().tensor_type().elem_type();
      const std::string onnx_name = onnx::TensorProto_DataType_IsValid(code)
                                        ? onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(code))
                                        : fmt::format("code {}", code);
      return Err(StatusCode::kUnsupported, "'{}': graph input '{}' has element type {} ({}), which kiln does not support",
                 source, in.name(), onnx_name, code);
    }
    auto ov = opts.input_shapes.find(in.name());
    if (ov != opts.input_shapes.end()) {
      if (v->has_shape && v->shape.size() != ov->second.size())
        return Err(StatusCode::kInvalidArgument, "input '{}' has rank {} but the given shape {} has rank {}",
                   in.name(), v->shape.size(), ShapeToString(ov->second), ov->second.size());
      v->shape = ov->second;
      v->has_shape = true;
    }
    v->is_graph_input = true;
    g->inputs.push_back(v);
  }
  for (const auto& [name, shape] : opts.input_shapes)
    if (!g->FindValue(name) || !g->FindValue(name)->is_graph_input)
      return Err(StatusCode::kInvalidArgument, "a shape was given for '{}', but the model has no such input", name);
  for (const auto& vi : gp.value_info())
    KILN_RETURN_IF_ERROR(ReadDeclaredType(vi, g->GetOrAddValue(vi.name()), "value_info", source));

  std::vector<std::string> unsupported;
  int64_t index = 0;
  for (const auto& np : gp.node()) {
    const std::string name = np.name().empty() ? np.op_type() + "_" + std::to_string(index) : np.name();
    ++index;
    const std::string where = "node '" + name + "' (" + np.op_type() + ")";
    if (np.op_type().empty()) return Err(StatusCode::kInvalidModel, "'{}': node '{}' has no op type", source, name);
    // An attribute the op's ONNX schema does not have at this opset makes the model invalid (onnxruntime refuses
    // it too): it is not silently ignored.
    if (IsDefaultDomain(np.domain()))
      if (auto known = OnnxSchemaAttributes(np.op_type(), opset))
        for (const auto& a : np.attribute())
          if (std::find(known->begin(), known->end(), a.name()) == known->end())
            return Err(StatusCode::kInvalidModel,
                       "'{}': {} has an attribute '{}' that {} does not take at opset {} (its attributes: {}); remove "
                       "it from the model", source, where, a.name(), np.op_type(), opset,
                       known->empty() ? std::string("none") : fmt::format("{}", fmt::join(*known, ", ")));
    if (np.op_type() == "Constant" && IsDefaultDomain(np.domain())) {
      if (np.output_size() != 1 || np.output(0).empty())
        return Err(StatusCode::kInvalidModel, "{}: needs exactly one output", where);
      auto t = ConstantValue(np, data_dirs, where);
      if (!t.ok()) {
        if (t.status().code() != StatusCode::kUnsupported) return t.status();
        unsupported.push_back(fmt::format("{} opset {}: {}", where, opset, t.status().message()));
        continue;
      }
      Value* v = g->GetOrAddValue(np.output(0));
      if (v->is_const() || v->is_graph_input)
        return Err(StatusCode::kInvalidModel, "{}: output '{}' has the name of another input or constant", where,
                   np.output(0));
      v->dtype = t->dtype();
      v->shape = FromStatic(t->shape());
      v->has_shape = true;
      v->const_value = std::move(*t);
      continue;
    }
    Node* n = g->AddNode(np.op_type(), name);
    n->domain = np.domain() == "ai.onnx" ? "" : np.domain();
    n->opset = IsDefaultDomain(np.domain()) ? opset : (g->opsets.count(np.domain()) ? g->opsets[np.domain()] : 1);
    for (const auto& i : np.input()) n->inputs.push_back(i.empty() ? nullptr : g->GetOrAddValue(i));
    for (const auto& o : np.output()) n->outputs.push_back(o.empty() ? nullptr : g->GetOrAddValue(o));
    for (const auto& a : np.attribute()) {
      KILN_ASSIGN_OR_RETURN(Attribute attr, ConvertAttribute(a, data_dirs, where));
      n->attrs[a.name()] = std::move(attr);
    }
    // Below opset 7, a node is rewritten to its op's opset-7 form (or refused) and looked up there.
    if (const std::string legacy = onnx_import::RewriteLegacyNode(*n); !legacy.empty()) {
      unsupported.push_back(fmt::format("{} opset {}: {}", where, n->opset, legacy));
      continue;
    }
    const int64_t lookup_opset = n->domain.empty() && n->opset < 7 ? 7 : n->opset;
    // ONNX ops and plugin ops by (domain, name, the domain's opset); kiln's internal domain is not for models.
    const OpDef* def = n->domain == kKilnDomain ? nullptr : FindOp(n->domain, n->op_type, lookup_opset);
    if (!def) {
      const OpDef* any = n->domain == kKilnDomain ? nullptr : FindOp(n->domain, n->op_type, 0);
      if (n->domain == kKilnDomain)
        unsupported.push_back(fmt::format("{} domain 'kiln': this is kiln's internal op set, which models cannot use",
                                          where));
      else if (any)
        unsupported.push_back(fmt::format("{} opset {}: kiln supports this op from opset {}{}", where, n->opset,
                                          any->since_version,
                                          any->until_version < INT64_MAX
                                              ? fmt::format(" to {}", any->until_version) : std::string()));
      else if (!n->domain.empty())
        unsupported.push_back(fmt::format(
            "{} domain '{}': no plugin defines this op; load one with --dynamicPlugins=lib.so, or write one "
            "(kiln plugin new {} --domain {})", where, n->domain, n->op_type, n->domain));
      else
        unsupported.push_back(fmt::format("{} opset {}: kiln does not implement this op (a plugin can: kiln plugin "
                                          "new {})", where, opset, n->op_type));
      continue;
    }
    if (const std::string change = ChangedSinceImplemented(*n); !change.empty()) {
      unsupported.push_back(fmt::format("{} opset {}: {}; kiln implements {} as of opset {}: convert the model to "
                                        "opset {} with onnx.version_converter", where, n->opset, change, n->op_type,
                                        kImplementedOpset, kImplementedOpset));
      continue;
    }
    if (def->convert) {
      ConvertContext ctx{*g, *n, opset};
      Status st = def->convert(ctx);
      if (!st.ok()) {
        if (st.code() != StatusCode::kUnsupported) return st;
        unsupported.push_back(fmt::format("{} opset {}: {}", where, opset, st.message()));
        continue;
      }
    }
    // A converter may rewrite the op (Upsample -> Resize): the op it leaves needs a shape function.
    if (!FindOp(*n))
      unsupported.push_back(fmt::format("{} opset {}: kiln has no shape inference for {}", where, opset, n->op_type));
  }
  if (!unsupported.empty()) {
    std::string msg = fmt::format("'{}' has {} unsupported node{}:", source, unsupported.size(),
                                  unsupported.size() == 1 ? "" : "s");
    for (const auto& u : unsupported) msg += "\n  - " + u;
    return Status(StatusCode::kUnsupported, msg);
  }

  for (const auto& out : gp.output()) {
    Value* v = g->FindValue(out.name());
    if (!v) return Err(StatusCode::kInvalidModel, "'{}': graph output '{}' is produced by no node", source, out.name());
    KILN_RETURN_IF_ERROR(ReadDeclaredType(out, v, "graph output", source));
    v->is_graph_output = true;
    g->outputs.push_back(v);
  }
  if (g->outputs.empty()) return Err(StatusCode::kInvalidModel, "'{}': the graph has no outputs", source);

  // The element types the model declares for its outputs, to hold inference to them.
  std::vector<std::pair<const Value*, DataType>> declared;
  for (const Value* v : g->outputs) declared.emplace_back(v, v->dtype);
  Status st = g->TopoSort();
  if (!st.ok()) return st.WithContext("'" + source + "'");
  st = InferGraph(*g, opts.infer);
  if (!st.ok()) return st.WithContext("'" + source + "'");
  for (const auto& [v, type] : declared)
    if (type != DataType::kUndefined && v->dtype != DataType::kUndefined && v->dtype != type)
      return Err(StatusCode::kInvalidModel, "'{}': graph output '{}' is declared {}, but {} makes it {}", source,
                 v->name, DataTypeName(type), v->producer ? v->producer->Where() : std::string("the graph"),
                 DataTypeName(v->dtype));
  // Nodes folded into constants are no longer needed.
  g->RemoveFoldedNodes();
  g->RemoveDeadNodes();
  st = VerifyGraph(*g);
  if (!st.ok()) return st.WithContext("'" + source + "'");
  return g;
}

Result<std::unique_ptr<Graph>> ImportOnnxFile(const std::string& path, const ImportOptions& opts) {
  KILN_RETURN_IF_ERROR(CheckModelPath(path));
  // Mapped, not read: a large model is parsed straight from the page cache, with no copy of the file in memory.
  auto mapped = MappedFile::Open(path);
  if (!mapped.ok()) return Err(StatusCode::kIoError, "cannot read model file '{}': {}", path, mapped.status().message());
  const std::string base = std::filesystem::path(path).parent_path().string();
  return ImportOnnxBytes(mapped->bytes(), base.empty() ? "." : base, path, opts);
}

Result<Tensor> ReadTensorProtoFile(const std::string& path, std::string* name) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes))
    return Err(StatusCode::kInvalidArgument, "'{}' is not a serialized onnx.TensorProto", path);
  if (name) *name = p.name();
  const std::string base = std::filesystem::path(path).parent_path().string();
  return TensorFromProto(p, DataDirs{base.empty() ? "." : base}, "tensor file '" + path + "'");
}

}  // namespace kiln
