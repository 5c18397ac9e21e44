#include <sstream>

#include "core/error.h"
#include "ir/graph.h"

namespace kiln {

namespace {
std::string AttrToString(const Attribute& a) {
  switch (a.kind) {
    case Attribute::Kind::kInt: return std::to_string(a.i);
    case Attribute::Kind::kFloat: return fmt::format("{}", a.f);
    case Attribute::Kind::kString: return "\"" + a.s + "\"";
    case Attribute::Kind::kInts: return fmt::format("[{}]", fmt::join(a.ints, ","));
    case Attribute::Kind::kFloats: return fmt::format("[{}]", fmt::join(a.floats, ","));
    case Attribute::Kind::kStrings: return fmt::format("[{}]", fmt::join(a.strings, ","));
    case Attribute::Kind::kTensor: return a.t.Describe();
    default: return "?";
  }
}
}  // namespace

std::string PrintGraph(const Graph& g, bool with_constants) {
  std::ostringstream os;
  os << "graph " << g.name << "\n";
  for (Value* v : g.inputs) os << "  input  " << v->name << ": " << v->TypeString() << "\n";
  if (with_constants)
    for (Value* v : g.values())
      if (v->is_const()) os << "  const  " << v->name << ": " << v->const_value->Describe() << "\n";
  for (const auto& n : g.nodes()) {
    os << "  ";
    for (size_t i = 0; i < n->outputs.size(); ++i)
      os << (i ? ", " : "") << (n->outputs[i] ? n->outputs[i]->name + ": " + n->outputs[i]->TypeString() : "_");
    os << " = " << n->op_type << "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) os << (i ? ", " : "") << (n->inputs[i] ? n->inputs[i]->name : "_");
    os << ")";
    if (!n->attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto& [k, a] : n->attrs) {
        os << (first ? "" : ", ") << k << "=" << AttrToString(a);
        first = false;
      }
      os << "}";
    }
    os << "  # " << n->name << "\n";
  }
  for (Value* v : g.outputs) os << "  output " << v->name << ": " << v->TypeString() << "\n";
  return os.str();
}

}  // namespace kiln
