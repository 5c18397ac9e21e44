// CUDA layer of Einsum (matmul family): the generic strided contraction kernel (matmul_kernels.h), one thread per
// output element, with the CPU reference's label strides (a repeated label walks the diagonal; a dim of size 1
// broadcasts with stride 0). Floating types accumulate in double, integers in 64-bit wrapping arithmetic.
// Tactic: "generic".
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/layer.h"
#include "backends/cuda/matmul_kernels.h"
#include "core/error.h"
#include "ops/einsum_equation.h"

namespace kiln::cuda {

namespace {

bool EinsumTypeSupported(DataType t) {
  switch (t) {
    case DataType::kFloat32: case DataType::kFloat16: case DataType::kBFloat16: case DataType::kFloat64:
    case DataType::kInt8: case DataType::kUInt8: case DataType::kInt16: case DataType::kUInt16:
    case DataType::kInt32: case DataType::kUInt32: case DataType::kInt64: case DataType::kUInt64:
      return true;
    default:
      return false;
  }
}

class EinsumLayer : public Layer {
 public:
  EinsumLayer(const Node& node, std::string equation, DataType dtype)
      : node_(node), equation_(std::move(equation)), dtype_(dtype) {
    node_.inputs.clear();  // only the name and op type are used (for errors); the graph may not outlive the layer
    node_.outputs.clear();
  }

  Status Enqueue(const LaunchContext& ctx, const std::vector<DeviceTensor>& in,
                 std::vector<DeviceTensor>& out) const override {
    std::vector<int64_t> ranks;
    std::vector<Shape> shapes;
    for (const DeviceTensor& t : in) {
      ranks.push_back(static_cast<int64_t>(t.shape.size()));
      shapes.push_back(FromStatic(t.shape));
    }
    KILN_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(node_, equation_, ranks));
    KILN_ASSIGN_OR_RETURN(auto dims, EinsumLabelSizes(node_, spec, shapes));
    const std::vector<int64_t> sizes = ToStatic(dims);
    const size_t nl = sizes.size();
    if (nl > static_cast<size_t>(kMaxContractionLabels))
      return Err(StatusCode::kUnsupported, "{}: the equation '{}' has {} labels; the CUDA Einsum handles up to {}",
                 node_.Where(), equation_, nl, kMaxContractionLabels);
    ContractionParams p;
    p.num_operands = static_cast<int>(in.size());
    p.num_labels = static_cast<int>(nl);
    p.num_out = static_cast<int>(spec.output.size());
    for (size_t l = 0; l < nl; ++l) p.sizes[l] = sizes[l];
    for (size_t k = 0; k < in.size(); ++k) {
      p.operands[k] = in[k].data;
      // Row-major strides of operand k; each label's stride is the sum over the dims carrying it.
      const std::vector<int64_t>& shape = in[k].shape;
      int64_t st = 1;
      for (size_t d = shape.size(); d-- > 0;) {
        if (shape[d] != 1) {
          const size_t l = std::find(spec.all_labels.begin(), spec.all_labels.end(), spec.inputs[k][d]) -
                           spec.all_labels.begin();
          if (l >= nl) return Err(StatusCode::kInternal, "{}: label of input {} dim {} not found", node_.Where(), k, d);
          p.strides[k][l] += st;
        }
        st *= shape[d];
      }
    }
    p.out = out[0].data;
    int64_t out_numel = 1;
    for (int l = 0; l < p.num_out; ++l) out_numel *= sizes[l];
    if (out_numel != out[0].numel())
      return Err(StatusCode::kInternal, "{}: output has {} elements, the equation gives {}", node_.Where(),
                 out[0].numel(), out_numel);
    return KILN_CUDA_STATUS(LaunchContraction(static_cast<int>(dtype_), p, ctx.stream));
  }

 private:
  Node node_;
  std::string equation_;
  DataType dtype_;
};

Status CheckEinsum(const Node& n) {
  if (n.inputs.empty()) return Err(StatusCode::kInvalidArgument, "{}: Einsum needs inputs", n.Where());
  if (n.inputs.size() > static_cast<size_t>(kMaxContractionOperands))
    return Err(StatusCode::kUnsupported, "{}: the CUDA Einsum handles up to {} operands, not {}; run it on the CPU",
               n.Where(), kMaxContractionOperands, n.inputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!n.inputs[i]) return Err(StatusCode::kInvalidArgument, "{}: input {} is missing", n.Where(), i);
  const DataType t = n.inputs[0]->dtype;
  if (!EinsumTypeSupported(t))
    return Err(StatusCode::kUnsupported,
               "{}: the CUDA Einsum supports float32/float16/bfloat16/float64 and 8-64 bit integers, not {}; run it "
               "on the CPU or cast its inputs",
               n.Where(), DataTypeName(t));
  return Status::Ok();
}

}  // namespace

LayerFactory EinsumLayerFactory() {
  LayerFactory f;
  f.tactics = [](const LayerSpec& spec) -> Result<std::vector<std::string>> {
    KILN_RETURN_IF_ERROR(CheckEinsum(spec.node));
    return std::vector<std::string>{"generic"};
  };
  f.create = [](const LayerSpec& spec, const std::string& tactic) -> Result<std::unique_ptr<Layer>> {
    const Node& n = spec.node;
    KILN_RETURN_IF_ERROR(CheckEinsum(n));
    if (tactic != "generic" && tactic != "default")
      return Err(StatusCode::kInvalidArgument, "{}: unknown tactic '{}' (Einsum has 'generic')", n.Where(), tactic);
    KILN_ASSIGN_OR_RETURN(std::string eq, n.attr_string("equation", ""));
    return std::unique_ptr<Layer>(std::make_unique<EinsumLayer>(n, std::move(eq), n.inputs[0]->dtype));
  };
  return f;
}

}  // namespace kiln::cuda
