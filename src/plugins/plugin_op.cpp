// A registered plugin as an OpDef (plugin_op.h), and the plugin shape function's checks.
#include "plugins/plugin_op.h"

#include <algorithm>

#include "core/error.h"

namespace kiln::plugins {

namespace {

class KilnDimBuilder final : public IDimBuilder {
 public:
  PluginDim add(const PluginDim& a, const PluginDim& b) override { return Op(DimAdd, a, b); }
  PluginDim sub(const PluginDim& a, const PluginDim& b) override { return Op(DimSub, a, b); }
  PluginDim mul(const PluginDim& a, const PluginDim& b) override { return Op(DimMul, a, b); }
  PluginDim floorDiv(const PluginDim& a, const PluginDim& b) override { return Op(DimDiv, a, b); }

 private:
  static PluginDim Op(Dim (*f)(const Dim&, const Dim&), const PluginDim& a, const PluginDim& b) {
    return ToPluginDim(f(FromPluginDim(a), FromPluginDim(b)));
  }
};

std::string DimsString(const PluginDims& d) {
  std::vector<std::string> s;
  for (const PluginDim& x : d) s.push_back(x.toString());
  return fmt::format("[{}]", fmt::join(s, ","));
}

// Import: the node's attributes become the plugin's serialized fields (what engines store).
Status Convert(const RegisteredPlugin& p, ConvertContext& c) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const IPlugin> plugin, PluginForNode(p, c.node));
  const PluginFields fields = plugin->serializeFields();
  std::map<std::string, Attribute> attrs;
  for (const auto& [name, v] : fields.items()) {
    const std::string& field = name;  // clang 14: a lambda may not capture a structured binding
    auto spec = std::find_if(p.specs.begin(), p.specs.end(), [&](const PluginFieldSpec& s) { return s.name == field; });
    if (spec == p.specs.end() || spec->type != fieldTypeOf(v))
      return Err(StatusCode::kInternal,
                 "{}, {}: serializeFields() gives field '{}' ({}), which the creator's fieldSpecs() {}: an engine "
                 "could not give it back to create()",
                 c.node.Where(), p.Describe(), name, fieldTypeName(fieldTypeOf(v)),
                 spec == p.specs.end() ? "does not declare" : "declares with another type");
    attrs[name] = ToAttribute(v);
  }
  c.node.attrs = std::move(attrs);
  return Status::Ok();
}

Status Infer(const RegisteredPlugin& p, InferContext& c) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const IPlugin> plugin, PluginForNode(p, c.node));
  std::vector<PluginInputInfo> ins(c.num_inputs());
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!c.has_input(i)) continue;
    const TensorInfo& t = c.in(i);
    if (!t.has_shape)
      return Err(StatusCode::kUnsupported,
                 "{}, {}: the rank of input {} is unknown; a plugin's shape function needs input ranks (give the "
                 "model's inputs shapes)",
                 c.node.Where(), p.Describe(), i);
    ins[i].present = true;
    ins[i].dtype = t.dtype;
    for (const Dim& d : t.shape) ins[i].dims.push_back(ToPluginDim(d));
    ins[i].data = t.value ? t.value->raw() : nullptr;
  }
  KILN_ASSIGN_OR_RETURN(std::vector<PluginOutputInfo> outs,
                        InferPluginOutputs(p, *plugin, c.node.Where(), ins, c.outputs.size()));
  for (size_t i = 0; i < outs.size(); ++i) {
    Shape s;
    for (const PluginDim& d : outs[i].dims) s.push_back(FromPluginDim(d));
    c.set_output(i, outs[i].dtype, std::move(s));
  }
  return Status::Ok();
}

bool HasReducedFloat(const std::vector<DataType>& types) {
  return std::any_of(types.begin(), types.end(),
                     [](DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; });
}

}  // namespace

IDimBuilder& DimBuilder() {
  static KilnDimBuilder b;
  return b;
}

PluginDim ToPluginDim(const Dim& d) {
  if (d.known()) return PluginDim(d.value);
  return d.symbolic() ? PluginDim::Symbol(d.sym) : PluginDim::Unknown();
}

Dim FromPluginDim(const PluginDim& d) {
  if (d.known()) return Dim(d.value);
  return d.symbolic() ? Dim::Symbol(d.expr) : Dim::Unknown();
}

Result<std::vector<PluginOutputInfo>> InferPluginOutputs(const RegisteredPlugin& p, const IPlugin& plugin,
                                                         const std::string& where,
                                                         const std::vector<PluginInputInfo>& inputs,
                                                         size_t num_outputs) {
  std::vector<PluginOutputInfo> outs(num_outputs);
  Status st = plugin.inferOutputs(inputs, outs, DimBuilder());
  if (!st.ok()) return Status(st.code(), fmt::format("{}, {}: {}", where, p.Describe(), st.message()));
  if (outs.size() != num_outputs)
    return Err(StatusCode::kInternal, "{}, {}: the shape function describes {} outputs; the node has {}", where,
               p.Describe(), outs.size(), num_outputs);
  for (size_t i = 0; i < outs.size(); ++i) {
    const PluginOutputInfo& o = outs[i];
    if (o.dtype == DataType::kUndefined)
      return Err(StatusCode::kInternal, "{}, {}: the shape function gives output {} no type", where, p.Describe(), i);
    const bool data_dependent =
        std::any_of(o.dims.begin(), o.dims.end(), [](const PluginDim& d) { return d.unknown(); });
    if (!data_dependent) continue;
    const bool bounded =
        o.max_dims.size() == o.dims.size() &&
        std::none_of(o.max_dims.begin(), o.max_dims.end(), [](const PluginDim& d) { return d.unknown(); });
    if (!bounded)
      return Err(StatusCode::kInternal,
                 "{}, {}: output {} has data-dependent dims {} but max_dims {} is no bound (one known or symbolic "
                 "size per dim)",
                 where, p.Describe(), i, DimsString(o.dims), DimsString(o.max_dims));
  }
  return outs;
}

OpDef MakePluginOpDef(std::shared_ptr<const RegisteredPlugin> p) {
  OpDef d;
  d.domain = p->domain;
  d.name = p->name;
  d.convert = [p](ConvertContext& c) { return Convert(*p, c); };
  d.infer = [p](InferContext& c) { return Infer(*p, c); };
  // --fp16/--bf16 lower the node only where its CUDA implementation computes in a reduced type.
  d.traits.keeps_fp32 = !HasReducedFloat(p->cuda_types);
  return d;
}

}  // namespace kiln::plugins
