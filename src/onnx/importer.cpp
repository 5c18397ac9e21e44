// ONNX model -> kiln IR: protobuf parsing, initializers (external data too), Constant nodes, converters,
// the one report of unsupported nodes, topological sort, shape inference with constant folding.
#include "onnx/importer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_set>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "onnx.pb.h"
#include "ops/control_flow.h"
#include "ops/onnx_schema.h"
#include "ops/op_def.h"
#include "ops/sequence.h"
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

// The tensor type a TypeProto gives, directly or as what a sequence or an optional holds (kind says which); nullptr
// for types kiln does not hold (maps, sparse tensors, sequences of sequences, optionals of optionals) and for a
// TypeProto that gives no type.
const onnx::TypeProto_Tensor* TensorTypeOf(const onnx::TypeProto& t, ValueKind* kind) {
  if (t.has_tensor_type()) {
    *kind = ValueKind::kTensor;
    return &t.tensor_type();
  }
  if (t.has_sequence_type() && t.sequence_type().has_elem_type() && t.sequence_type().elem_type().has_tensor_type()) {
    *kind = ValueKind::kSequence;
    return &t.sequence_type().elem_type().tensor_type();
  }
  if (t.has_optional_type() && t.optional_type().has_elem_type()) {
    ValueKind held = ValueKind::kTensor;
    const onnx::TypeProto_Tensor* tt = TensorTypeOf(t.optional_type().elem_type(), &held);
    if (!tt || IsOptionalKind(held)) return nullptr;
    *kind = OptionalOf(held);
    return tt;
  }
  return nullptr;
}

// A TypeProto that gives a type kiln does not hold (TensorTypeOf is null but the type is set).
bool UnheldType(const onnx::TypeProto& t) {
  ValueKind kind = ValueKind::kTensor;
  return t.value_case() != onnx::TypeProto::VALUE_NOT_SET && !TensorTypeOf(t, &kind);
}

void ReadValueType(const onnx::ValueInfoProto& vi, Value* v) {
  ValueKind kind = ValueKind::kTensor;
  const onnx::TypeProto_Tensor* type = vi.has_type() ? TensorTypeOf(vi.type(), &kind) : nullptr;
  if (!type) return;
  const auto& tt = *type;
  v->kind = kind;
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
  ValueKind kind = ValueKind::kTensor;
  const onnx::TypeProto_Tensor* tt = vi.has_type() ? TensorTypeOf(vi.type(), &kind) : nullptr;
  const int code = tt ? tt->elem_type() : 0;
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
    case onnx::AttributeProto::TYPE_PROTO: {  // Optional's `type`: kept as ints {kind, element type}
      ValueKind kind = ValueKind::kTensor;
      const onnx::TypeProto_Tensor* tt = TensorTypeOf(a.tp(), &kind);
      if (!tt || IsOptionalKind(kind) || !IsSupportedType(static_cast<DataType>(tt->elem_type())))
        return Err(StatusCode::kUnsupported, "{}: attribute '{}' gives a type kiln does not hold (it holds tensors of "
                   "its element types and sequences of them)", where, a.name());
      r = TypeAttribute(kind, static_cast<DataType>(tt->elem_type()));
      break;
    }
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
// Mod-28: floored float remainders (fmod = 0). Range-27: float16/bfloat16 with stash_type (the CPU and cuda
// layers). RMSNormalization-23, Swish-24: new operators. SpaceToDepth-28: its
// CRD mode. CausalConvWithState-27, LinearAttention-27: new operators (ops/llm_ops.cpp; CPU kernels only).
// Attention-23 (new), -24 (nonpad_kv_seqlen), -25 (left/right_window_size), RotaryEmbedding-23 and
// SwiGLU-28 (new): ops/transformer.cpp (the CPU kernels; SwiGLU becomes Swish and Mul). BitCast-26, CumProd-26,
// TensorScatter-24: new operators (CPU kernels).
constexpr std::pair<const char*, int64_t> kImplementedChanges[] = {
    {"Attention", 23},   {"Attention", 24},      {"Attention", 25},          {"AveragePool", 22},
    {"BitCast", 26},     {"BitShift", 28},       {"Cast", 24},               {"CastLike", 24},
    {"CausalConvWithState", 27},                 {"CumProd", 26},            {"DequantizeLinear", 23},
    {"LinearAttention", 27},                     {"MaxPool", 22},            {"Mod", 28},
    {"QuantizeLinear", 23},                      {"QuantizeLinear", 25},     {"Range", 27},
    {"RMSNormalization", 23},                    {"RotaryEmbedding", 23},    {"SpaceToDepth", 28},
    {"SwiGLU", 28},      {"Swish", 24},          {"TensorScatter", 24}};

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

// What the node readers share while reading a model: where external data lives, the model's name in messages, its
// default-domain opset and opset imports, and the one list of unsupported nodes (subgraphs' included).
struct ImportScope {
  const DataDirs& data_dirs;
  const std::string& source;
  int64_t opset;
  std::map<std::string, int64_t> opsets;
  std::vector<std::string>* unsupported;
};

// Deeper nesting is refused: a crafted file must not exhaust the stack.
constexpr int kMaxSubgraphDepth = 32;

Status ImportNodes(const onnx::GraphProto& gp, Graph* g, ImportScope& scope, int depth);

// A body read from a graph attribute, and the outer-scope names it reads (in order of first use).
struct Subgraph {
  std::string attr;
  std::shared_ptr<Graph> g;
  std::vector<std::string> captures;
};

// Reads a control-flow body: its initializers, inputs (their types may be left to inference), nodes and outputs. A name
// the body reads but neither defines nor takes as an input is a value of an enclosing graph: it is listed in
// `captures`, and AddCaptures turns it into an input of the body and of its node.
Status ImportSubgraph(const onnx::GraphProto& gp, Subgraph* sub, ImportScope& scope, int depth,
                      const std::string& where) {
  if (depth > kMaxSubgraphDepth)
    return Err(StatusCode::kInvalidModel, "'{}': {}: subgraphs are nested more than {} deep", scope.source, where,
               kMaxSubgraphDepth);
  Graph* g = sub->g.get();
  g->name = gp.name();
  g->opsets = scope.opsets;
  if (gp.sparse_initializer_size() > 0)
    return Err(StatusCode::kUnsupported, "'{}': {}: sparse initializers are not supported", scope.source, where);
  for (const auto& init : gp.initializer()) {
    if (init.name().empty())
      return Err(StatusCode::kInvalidModel, "'{}': {}: an initializer has no name", scope.source, where);
    Value* v = g->GetOrAddValue(init.name());
    if (v->is_const())
      return Err(StatusCode::kInvalidModel, "'{}': {}: initializer '{}' is listed twice", scope.source, where,
                 init.name());
    KILN_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(init, scope.data_dirs,
                                                    fmt::format("'{}': {} initializer '{}'", scope.source, where,
                                                                init.name())));
    v->dtype = t.dtype();
    v->shape = FromStatic(t.shape());
    v->has_shape = true;
    v->const_value = std::move(t);
  }
  for (const auto& in : gp.input()) {
    Value* v = g->GetOrAddValue(in.name());
    if (v->is_const()) continue;
    if (v->is_graph_input)
      return Err(StatusCode::kInvalidModel, "'{}': {}: input '{}' is listed twice", scope.source, where, in.name());
    if (in.has_type() && UnheldType(in.type()))
      return Err(StatusCode::kUnsupported, "'{}': {}: input '{}' is a map, a sparse tensor or a nested sequence or "
                 "optional; kiln holds tensors, sequences of tensors and optionals of those", scope.source, where,
                 in.name());
    ReadValueType(in, v);  // may leave the type to shape inference (Loop's and Scan's bodies often do)
    v->is_graph_input = true;
    g->inputs.push_back(v);
  }
  for (const auto& vi : gp.value_info())
    KILN_RETURN_IF_ERROR(ReadDeclaredType(vi, g->GetOrAddValue(vi.name()), "value_info", scope.source));
  KILN_RETURN_IF_ERROR(ImportNodes(gp, g, scope, depth));
  for (const auto& out : gp.output()) {
    if (out.name().empty())
      return Err(StatusCode::kInvalidModel, "'{}': {}: an output has no name", scope.source, where);
    Value* v = g->GetOrAddValue(out.name());  // may be an outer-scope value the body passes through
    KILN_RETURN_IF_ERROR(ReadDeclaredType(out, v, "subgraph output", scope.source));
    v->is_graph_output = true;
    g->outputs.push_back(v);
  }
  std::unordered_set<const Value*> produced;
  for (const auto& n : g->nodes())
    for (const Value* o : n->outputs)
      if (o) produced.insert(o);
  std::unordered_set<std::string> seen;
  auto consider = [&](const Value* v) {
    if (!v || v->is_const() || v->is_graph_input || produced.count(v) || !seen.insert(v->name).second) return;
    sub->captures.push_back(v->name);
  };
  for (const auto& n : g->nodes())
    for (const Value* in : n->inputs) consider(in);
  for (const Value* o : g->outputs) consider(o);
  return Status::Ok();
}

// Makes the outer-scope values a node's bodies read explicit: each body gets one input per name any of them captures
// (in one order, after its formal inputs; a body that does not read a name gets an unused input), and the node gets
// the outer values as extra inputs after its ONNX inputs. `captured_inputs` records how many there are. Dataflow over
// the outer graph (sorting, dead-node removal, memory planning) then sees what the bodies read.
Status AddCaptures(Graph& g, Node& n, std::vector<Subgraph>& subs) {
  std::vector<std::string> all;
  std::unordered_set<std::string> seen;
  for (const Subgraph& s : subs)
    for (const std::string& c : s.captures)
      if (seen.insert(c).second) all.push_back(c);
  for (Subgraph& s : subs) {
    const std::unordered_set<std::string> mine(s.captures.begin(), s.captures.end());
    for (const std::string& name : all) {
      Value* v = mine.count(name) ? s.g->FindValue(name) : s.g->AddValue("outer_" + name);
      v->is_graph_input = true;
      s.g->inputs.push_back(v);
    }
    Status st = s.g->TopoSort();
    if (!st.ok()) return st.WithContext(fmt::format("{} attribute '{}'", n.Where(), s.attr));
    Attribute attr;
    attr.kind = Attribute::Kind::kGraph;
    attr.g = s.g;
    n.attrs[s.attr] = std::move(attr);
  }
  for (const std::string& name : all) n.inputs.push_back(g.GetOrAddValue(name));
  n.attrs[kCapturedInputsAttr] = Attribute::Int(static_cast<int64_t>(all.size()));
  return Status::Ok();
}

// Reads the nodes of `gp` into `g`: Constant nodes become constants, graph attributes (If/Loop/Scan bodies) become
// subgraphs whose outer-scope reads are made explicit inputs of the node. Unsupported nodes go to the scope's list.
Status ImportNodes(const onnx::GraphProto& gp, Graph* g, ImportScope& scope, int depth) {
  int64_t index = 0;
  for (const auto& np : gp.node()) {
    const std::string name = np.name().empty() ? np.op_type() + "_" + std::to_string(index) : np.name();
    ++index;
    const std::string where = "node '" + name + "' (" + np.op_type() + ")";
    if (np.op_type().empty()) return Err(StatusCode::kInvalidModel, "'{}': node '{}' has no op type", scope.source, name);
    // An attribute the op's ONNX schema does not have at this opset makes the model invalid (onnxruntime refuses
    // it too): it is not silently ignored.
    if (IsDefaultDomain(np.domain()))
      if (auto known = OnnxSchemaAttributes(np.op_type(), scope.opset))
        for (const auto& a : np.attribute())
          if (std::find(known->begin(), known->end(), a.name()) == known->end())
            return Err(StatusCode::kInvalidModel,
                       "'{}': {} has an attribute '{}' that {} does not take at opset {} (its attributes: {}); remove "
                       "it from the model", scope.source, where, a.name(), np.op_type(), scope.opset,
                       known->empty() ? std::string("none") : fmt::format("{}", fmt::join(*known, ", ")));
    if (np.op_type() == "Constant" && IsDefaultDomain(np.domain())) {
      if (np.output_size() != 1 || np.output(0).empty())
        return Err(StatusCode::kInvalidModel, "{}: needs exactly one output", where);
      auto t = ConstantValue(np, scope.data_dirs, where);
      if (!t.ok()) {
        if (t.status().code() != StatusCode::kUnsupported) return t.status();
        scope.unsupported->push_back(fmt::format("{} opset {}: {}", where, scope.opset, t.status().message()));
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
    n->opset = IsDefaultDomain(np.domain()) ? scope.opset : (g->opsets.count(np.domain()) ? g->opsets[np.domain()] : 1);
    for (const auto& i : np.input()) n->inputs.push_back(i.empty() ? nullptr : g->GetOrAddValue(i));
    for (const auto& o : np.output()) n->outputs.push_back(o.empty() ? nullptr : g->GetOrAddValue(o));
    std::vector<Subgraph> subs;  // the node's graph attributes
    for (const auto& a : np.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH || (a.type() == onnx::AttributeProto::UNDEFINED && a.has_g())) {
        subs.push_back(Subgraph{a.name(), std::make_shared<Graph>(), {}});
        KILN_RETURN_IF_ERROR(
            ImportSubgraph(a.g(), &subs.back(), scope, depth + 1, where + " attribute '" + a.name() + "'"));
        continue;
      }
      if (a.type() == onnx::AttributeProto::GRAPHS)
        return Err(StatusCode::kUnsupported, "{}: attribute '{}' is a list of graphs, which no ONNX op kiln knows "
                   "takes", where, a.name());
      KILN_ASSIGN_OR_RETURN(Attribute attr, ConvertAttribute(a, scope.data_dirs, where));
      n->attrs[a.name()] = std::move(attr);
    }
    if (!subs.empty()) KILN_RETURN_IF_ERROR(AddCaptures(*g, *n, subs));
    // Below opset 7, a node is rewritten to its op's opset-7 form (or refused) and looked up there.
    if (const std::string legacy = onnx_import::RewriteLegacyNode(*n); !legacy.empty()) {
      scope.unsupported->push_back(fmt::format("{} opset {}: {}", where, n->opset, legacy));
      continue;
    }
    const int64_t lookup_opset = n->domain.empty() && n->opset < 7 ? 7 : n->opset;
    // ONNX ops and plugin ops by (domain, name, the domain's opset); kiln's internal domain is not for models.
    const OpDef* def = n->domain == kKilnDomain ? nullptr : FindOp(n->domain, n->op_type, lookup_opset);
    if (!def) {
      const OpDef* any = n->domain == kKilnDomain ? nullptr : FindOp(n->domain, n->op_type, 0);
      if (n->domain == kKilnDomain)
        scope.unsupported->push_back(fmt::format("{} domain 'kiln': this is kiln's internal op set, which models cannot use",
                                          where));
      else if (any)
        scope.unsupported->push_back(fmt::format("{} opset {}: kiln supports this op from opset {}{}", where, n->opset,
                                          any->since_version,
                                          any->until_version < INT64_MAX
                                              ? fmt::format(" to {}", any->until_version) : std::string()));
      else if (!n->domain.empty())
        scope.unsupported->push_back(fmt::format(
            "{} domain '{}': no plugin defines this op; load one with --dynamicPlugins=lib.so, or write one "
            "(kiln plugin new {} --domain {})", where, n->domain, n->op_type, n->domain));
      else
        scope.unsupported->push_back(fmt::format("{} opset {}: kiln does not implement this op (a plugin can: kiln plugin "
                                          "new {})", where, scope.opset, n->op_type));
      continue;
    }
    if (const std::string change = ChangedSinceImplemented(*n); !change.empty()) {
      scope.unsupported->push_back(fmt::format("{} opset {}: {}; kiln implements {} as of opset {}: convert the model to "
                                        "opset {} with onnx.version_converter", where, n->opset, change, n->op_type,
                                        kImplementedOpset, kImplementedOpset));
      continue;
    }
    if (def->convert) {
      ConvertContext ctx{*g, *n, scope.opset};
      Status st = def->convert(ctx);
      if (!st.ok()) {
        if (st.code() != StatusCode::kUnsupported) return st;
        scope.unsupported->push_back(fmt::format("{} opset {}: {}", where, scope.opset, st.message()));
        continue;
      }
    }
    // A converter may rewrite the op (Upsample -> Resize): the op it leaves needs a shape function.
    if (!FindOp(*n))
      scope.unsupported->push_back(fmt::format("{} opset {}: kiln has no shape inference for {}", where, scope.opset, n->op_type));
  }
  return Status::Ok();
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
    if (in.has_type() && UnheldType(in.type()))
      return Err(StatusCode::kUnsupported, "'{}': graph input '{}' is a map, a sparse tensor or a nested sequence or "
                 "optional; kiln holds tensors, sequences of tensors and optionals of those", source, in.name());
    ReadValueType(in, v);
    if (v->dtype == DataType::kUndefined)
      return Err(StatusCode::kInvalidModel, "'{}': graph input '{}' has no tensor element type", source, in.name());
    if (!IsSupportedType(v->dtype)) {
      // Name the type as ONNX does (kiln's own names cover only the types it has: complex64 is none of them).
      const int code = static_cast<int>(v->dtype);
      const std::string onnx_name = onnx::TensorProto_DataType_IsValid(code)
                                        ? onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(code))
                                        : fmt::format("code {}", code);
      return Err(StatusCode::kUnsupported, "'{}': graph input '{}' has element type {} ({}), which kiln does not support",
                 source, in.name(), onnx_name, code);
    }
    auto ov = opts.input_shapes.find(in.name());
    if (ov != opts.input_shapes.end() && v->kind != ValueKind::kTensor)
      return Err(StatusCode::kInvalidArgument, "input '{}' is {}: a shape can be given for tensor inputs only",
                 in.name(), AValueKind(v->kind));
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
  ImportScope scope{data_dirs, source, opset, g->opsets, &unsupported};
  KILN_RETURN_IF_ERROR(ImportNodes(gp, g.get(), scope, 0));
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
  // An If whose condition is now a constant becomes the branch it takes; its nodes are then inferred in place.
  g->RemoveFoldedNodes();
  auto inlined = InlineConstantIfs(*g);
  if (!inlined.ok()) return inlined.status().WithContext("'" + source + "'");
  if (*inlined > 0) {
    st = InferGraph(*g, opts.infer);
    if (!st.ok()) return st.WithContext("'" + source + "'");
  }
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
