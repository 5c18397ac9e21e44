// Serialized values of the ONNX node tests' sequence and optional inputs and outputs: onnx.SequenceProto and
// onnx.OptionalProto (onnx-data.proto, which kiln does not compile: the wire format is read here, and each tensor in
// it through onnx.TensorProto).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "core/error.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "ops/sequence.h"

namespace kiln {

namespace {

// One field of a protobuf message: its number, and its bytes when length-delimited.
struct Field {
  uint32_t number = 0;
  bool delimited = false;
  uint64_t varint = 0;
  std::string_view bytes;
};

// A bounds-checked reader of the protobuf wire format.
class Wire {
 public:
  explicit Wire(std::string_view b) : b_(b) {}
  bool done() const { return pos_ >= b_.size(); }
  // The next field; false on malformed bytes.
  bool Next(Field* f) {
    uint64_t key = 0;
    if (!Varint(&key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) return false;
    f->number = static_cast<uint32_t>(key >> 3);
    f->delimited = false;
    switch (key & 7) {
      case 0: return Varint(&f->varint);
      case 1: return Skip(8);
      case 5: return Skip(4);
      case 2: {
        uint64_t n = 0;
        if (!Varint(&n) || n > b_.size() - pos_) return false;
        f->bytes = b_.substr(pos_, n);
        f->delimited = true;
        pos_ += n;
        return true;
      }
      default: return false;  // groups are not used by onnx-data.proto
    }
  }

 private:
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= b_.size()) return false;
      const auto c = static_cast<uint8_t>(b_[pos_++]);
      *v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return true;
    }
    return false;
  }
  bool Skip(size_t n) {
    if (n > b_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  std::string_view b_;
  size_t pos_ = 0;
};

// Both messages: name = 1, elem_type = 2, tensor(s) = 3, sparse = 4, sequence(s) = 5, map(s) = 6, optional(s) = 7.
constexpr uint32_t kName = 1, kTensors = 3, kSequences = 5;

struct Reader {
  const std::string& path;
  DataDirs dirs;

  Status Malformed(const char* what) const {
    return Err(StatusCode::kInvalidArgument, "'{}' is not a serialized onnx.{}", path, what);
  }

  Result<Tensor> TensorOf(std::string_view bytes) const {
    onnx::TensorProto p;
    if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return Malformed("TensorProto");
    return TensorFromProto(p, dirs, "tensor file '" + path + "'");
  }

  // A SequenceProto of tensors.
  Result<OnnxValue> SequenceOf(std::string_view bytes, std::string* name) const {
    OnnxValue v = OnnxValue::FromSequence({});
    Wire w(bytes);
    Field f;
    while (!w.done()) {
      if (!w.Next(&f)) return Malformed("SequenceProto");
      if (f.number == kName && f.delimited && name) *name = std::string(f.bytes);
      else if (f.number == kTensors && f.delimited) {
        KILN_ASSIGN_OR_RETURN(Tensor t, TensorOf(f.bytes));
        v.sequence.push_back(std::move(t));
      } else if (f.number > kTensors && f.number <= 7) {
        return Err(StatusCode::kUnsupported, "'{}' holds a sequence of sparse tensors, sequences, maps or optionals; "
                   "kiln's sequences hold tensors", path);
      }
    }
    return v;
  }

  // An OptionalProto of a tensor or a sequence; `held` is what the graph says it holds.
  Result<OnnxValue> OptionalOf(std::string_view bytes, ValueKind held, std::string* name) const {
    OnnxValue v = OnnxValue::None();
    Wire w(bytes);
    Field f;
    while (!w.done()) {
      if (!w.Next(&f)) return Malformed("OptionalProto");
      if (f.number == kName && f.delimited && name) {
        *name = std::string(f.bytes);
      } else if (f.number == kTensors && f.delimited) {
        if (held != ValueKind::kTensor)
          return Err(StatusCode::kInvalidArgument, "'{}' holds a tensor but the graph's value is an optional {}", path,
                     ValueKindName(held));
        KILN_ASSIGN_OR_RETURN(Tensor t, TensorOf(f.bytes));
        v = OnnxValue::FromTensor(std::move(t));
      } else if (f.number == kSequences && f.delimited) {
        if (held != ValueKind::kSequence)
          return Err(StatusCode::kInvalidArgument, "'{}' holds a sequence but the graph's value is an optional {}",
                     path, ValueKindName(held));
        KILN_ASSIGN_OR_RETURN(v, SequenceOf(f.bytes, nullptr));
      } else if (f.delimited && (f.number == 4 || f.number == 6 || f.number == 7)) {
        return Err(StatusCode::kUnsupported, "'{}' holds a sparse tensor, map or optional; kiln's optionals hold "
                   "tensors and sequences of tensors", path);
      }
    }
    return v;
  }
};

}  // namespace

Result<OnnxValue> ReadValueProtoFile(const std::string& path, ValueKind kind, std::string* name) {
  if (kind == ValueKind::kTensor) {
    KILN_ASSIGN_OR_RETURN(Tensor t, ReadTensorProtoFile(path, name));
    return OnnxValue::FromTensor(std::move(t));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Err(StatusCode::kIoError, "cannot open '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    return Err(StatusCode::kInvalidArgument, "'{}' is larger than 2 GiB, more than a protobuf message holds", path);
  const std::string base = std::filesystem::path(path).parent_path().string();
  const Reader r{path, DataDirs{base.empty() ? "." : base}};
  if (kind == ValueKind::kSequence) return r.SequenceOf(bytes, name);
  return r.OptionalOf(bytes, HeldKind(kind), name);
}

}  // namespace kiln
