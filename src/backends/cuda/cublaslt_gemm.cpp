// cuBLASLt wrapper of the matmul family (see cublaslt_gemm.h).
#include "backends/cuda/cublaslt_gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "backends/cuda/device.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {

static_assert(sizeof(LtAlgo) == sizeof(cublasLtMatmulAlgo_t), "LtAlgo must hold a cublasLtMatmulAlgo_t");

// DTypeCode values (kernel_util.cuh) of the types cuBLASLt runs here.
constexpr int kCodeF32 = 1, kCodeF16 = 10, kCodeBF16 = 16, kCodeI8 = 3;

Status LtStatus(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Err(StatusCode::kCudaError, "{} failed: {} ({})", what, cublasLtGetStatusString(s), cublasLtGetStatusName(s));
}
#define KILN_LT_RETURN_IF_ERROR(expr) KILN_RETURN_IF_ERROR(LtStatus((expr), #expr))

// The descriptors of one GEMM (owned; destroyed with the object).
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;  // cuBLASLt's A (our B), B (our A)
  LtDescs() = default;
  LtDescs(const LtDescs&) = delete;
  LtDescs& operator=(const LtDescs&) = delete;
  ~LtDescs() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

cublasLtEpilogue_t ToCublasEpilogue(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
    case LtEpilogue::kReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case LtEpilogue::kGeluTanh: return CUBLASLT_EPILOGUE_GELU;
    case LtEpilogue::kGeluTanhBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

Status MakeLayout(cublasLtMatrixLayout_t* l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                  int64_t stride) {
  KILN_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    KILN_LT_RETURN_IF_ERROR(
        cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    KILN_LT_RETURN_IF_ERROR(
        cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return Status::Ok();
}

// Builds the descriptors of `s` (column-major view: D^T = op(B)^T op(A)^T; see the header).
Status BuildDescs(const LtGemmShape& s, const void* bias, LtDescs& out) {
  cudaDataType_t dt, out_dt;  // A and B; C and D
  switch (s.dtype) {
    case kCodeF32: dt = out_dt = CUDA_R_32F; break;
    case kCodeF16: dt = out_dt = CUDA_R_16F; break;
    case kCodeBF16: dt = out_dt = CUDA_R_16BF; break;
    case kCodeI8: dt = CUDA_R_8I, out_dt = CUDA_R_32I; break;
    default:
      return Err(StatusCode::kUnsupported, "cuBLASLt GEMM: dtype code {} is not float32/float16/bfloat16/int8", s.dtype);
  }
  const bool int8 = s.dtype == kCodeI8;
  if (int8 && (s.epilogue != LtEpilogue::kNone || s.has_c || s.batch != 1))
    return Err(StatusCode::kInternal, "cuBLASLt int8 GEMM: no epilogue, C or batch");
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0)
    return Err(StatusCode::kInternal, "cuBLASLt GEMM: empty problem M={} N={} K={} batch={}", s.m, s.n, s.k, s.batch);
  if (s.batch > INT32_MAX)
    return Err(StatusCode::kUnsupported, "cuBLASLt GEMM: batch count {} exceeds 2^31-1", s.batch);
  const cublasComputeType_t compute = int8                          ? CUBLAS_COMPUTE_32I
                                       : (s.dtype == kCodeF32 && s.tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                         : CUBLAS_COMPUTE_32F;
  KILN_LT_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&out.op, compute, int8 ? CUDA_R_32I : CUDA_R_32F));
  const cublasOperation_t ta = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our B
  const cublasOperation_t tb = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B is our A
  KILN_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(out.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  KILN_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(out.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const cublasLtEpilogue_t epi = ToCublasEpilogue(s.epilogue);
  if (epi != CUBLASLT_EPILOGUE_DEFAULT)
    KILN_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(out.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (LtEpilogueHasBias(s.epilogue)) {
    KILN_LT_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(out.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    const int32_t bias_type = static_cast<int32_t>(dt);  // bias in the output type
    KILN_LT_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(out.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  // cuBLASLt's A = our B: [N,K] column-major (ld N) when B is [K,N] row-major; [K,N] (ld K) transposed otherwise.
  if (!s.trans_b) KILN_RETURN_IF_ERROR(MakeLayout(&out.a, dt, s.n, s.k, s.n, s.batch, s.stride_b));
  else KILN_RETURN_IF_ERROR(MakeLayout(&out.a, dt, s.k, s.n, s.k, s.batch, s.stride_b));
  // cuBLASLt's B = our A: [K,M] column-major (ld K) when A is [M,K] row-major; [M,K] (ld M) transposed otherwise.
  if (!s.trans_a) KILN_RETURN_IF_ERROR(MakeLayout(&out.b, dt, s.k, s.m, s.k, s.batch, s.stride_a));
  else KILN_RETURN_IF_ERROR(MakeLayout(&out.b, dt, s.m, s.k, s.m, s.batch, s.stride_a));
  KILN_RETURN_IF_ERROR(MakeLayout(&out.d, out_dt, s.n, s.m, s.n, s.batch, s.stride_y));
  KILN_RETURN_IF_ERROR(MakeLayout(&out.c, out_dt, s.n, s.m, s.n, s.batch, s.has_c ? s.stride_c : s.stride_y));
  return Status::Ok();
}

size_t ElementSize(int dtype) { return dtype == kCodeF32 ? 4 : dtype == kCodeI8 ? 1 : 2; }

// A stand-in pointer aligned to exactly `alignment` bytes, for descriptor queries that read only its alignment.
const void* FakePointer(uint32_t alignment) {
  return reinterpret_cast<const void*>(static_cast<uintptr_t>(alignment) * 0x100001u);
}

uint32_t LowestBit(uint64_t bits) { return static_cast<uint32_t>(bits & (~bits + 1)); }

// The largest power of two (up to 256) dividing every pointer and batch stride (in bytes) of the call.
uint32_t CallAlignment(const LtGemmShape& s, const LtGemmArgs& a) {
  uint64_t bits = 256;
  auto add = [&](uint64_t v) { bits |= v; };
  add(reinterpret_cast<uintptr_t>(a.a));
  add(reinterpret_cast<uintptr_t>(a.b));
  add(reinterpret_cast<uintptr_t>(a.y));
  if (s.has_c) add(reinterpret_cast<uintptr_t>(a.c));
  if (LtEpilogueHasBias(s.epilogue)) add(reinterpret_cast<uintptr_t>(a.bias));
  if (s.batch > 1) {
    const uint64_t es = ElementSize(s.dtype);
    add(static_cast<uint64_t>(s.stride_a) * es);
    add(static_cast<uint64_t>(s.stride_b) * es);
    add(static_cast<uint64_t>(s.stride_y) * es);
    if (s.has_c) add(static_cast<uint64_t>(s.stride_c) * es);
  }
  return LowestBit(bits);
}

}  // namespace

uint32_t LtTunedAlignment(const LtGemmShape& s) {
  uint64_t bits = kLtMaxTunedAlignment;
  if (s.batch > 1) {
    const uint64_t es = ElementSize(s.dtype);
    bits |= static_cast<uint64_t>(s.stride_a) * es | static_cast<uint64_t>(s.stride_b) * es |
            static_cast<uint64_t>(s.stride_y) * es | (s.has_c ? static_cast<uint64_t>(s.stride_c) * es : 0);
  }
  return LowestBit(bits);
}

bool LtEpilogueHasBias(LtEpilogue e) {
  return e == LtEpilogue::kBias || e == LtEpilogue::kReluBias || e == LtEpilogue::kGeluTanhBias;
}

Result<cublasLtContext*> SharedLtHandle() {
  // One per device (a handle holds what it read of the device current when it was created, and its heuristics
  // answer for that GPU), created on first use there and deliberately never destroyed: tearing cuBLASLt down
  // during process exit, after the CUDA runtime, is not safe.
  static std::mutex mu;
  static std::map<int, cublasLtHandle_t>* handles = new std::map<int, cublasLtHandle_t>;
  KILN_ASSIGN_OR_RETURN(const int device, CurrentDevice());
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = handles->find(device); it != handles->end()) return it->second;
  cublasLtHandle_t h = nullptr;
  KILN_RETURN_IF_ERROR(LtStatus(cublasLtCreate(&h), "cublasLtCreate"));
  (*handles)[device] = h;
  return h;
}

Result<std::vector<LtAlgo>> LtHeuristicAlgos(cublasLtContext* h, const LtGemmShape& shape, size_t workspace_limit,
                                             int max_count, uint32_t alignment) {
  LtDescs descs;
  KILN_RETURN_IF_ERROR(BuildDescs(shape, FakePointer(alignment), descs));
  cublasLtMatmulPreference_t pref = nullptr;
  KILN_LT_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const uint64_t ws = workspace_limit;
  KILN_LT_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    KILN_LT_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof(alignment)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(std::max(1, max_count)));
  int returned = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, descs.op, descs.a, descs.b, descs.c, descs.d, pref,
                                                           static_cast<int>(results.size()), results.data(), &returned);
  std::vector<LtAlgo> algos;
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return algos;  // no algorithm for this configuration
  KILN_RETURN_IF_ERROR(LtStatus(st, "cublasLtMatmulAlgoGetHeuristic"));
  for (int i = 0; i < returned; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS || results[i].workspaceSize > workspace_limit) continue;
    LtAlgo a;
    std::memcpy(a.data(), &results[i].algo, sizeof(a));
    algos.push_back(a);
  }
  return algos;
}

Result<size_t> LtCheckAlgo(cublasLtContext* h, const LtGemmShape& shape, const LtAlgo& algo) {
  LtDescs descs;
  KILN_RETURN_IF_ERROR(BuildDescs(shape, FakePointer(LtTunedAlignment(shape)), descs));
  cublasLtMatmulAlgo_t a;
  std::memcpy(&a, algo.data(), sizeof(a));
  cublasLtMatmulHeuristicResult_t result{};
  KILN_LT_RETURN_IF_ERROR(cublasLtMatmulAlgoCheck(h, descs.op, descs.a, descs.b, descs.c, descs.d, &a, &result));
  return result.workspaceSize;
}

Status LtGemmRun(cublasLtContext* h, const LtGemmShape& shape, const LtGemmArgs& args, const LtAlgo* tuned,
                 size_t tuned_workspace, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (!h) return Err(StatusCode::kInternal, "cuBLASLt GEMM: the launch context has no cuBLASLt handle");
  const uint32_t alignment = CallAlignment(shape, args);
  LtAlgo algo;
  if (tuned && alignment >= LtTunedAlignment(shape) && tuned_workspace <= workspace_bytes) {
    algo = *tuned;
  } else {
    KILN_ASSIGN_OR_RETURN(auto algos, LtHeuristicAlgos(h, shape, workspace_bytes, 1, alignment));
    if (algos.empty())
      return Err(StatusCode::kUnsupported,
                 "cuBLASLt has no algorithm for this GEMM (M={} N={} K={} batch={}, {}-byte aligned operands, {} bytes "
                 "of workspace)",
                 shape.m, shape.n, shape.k, shape.batch, alignment, workspace_bytes);
    algo = algos.front();
  }
  LtDescs descs;
  KILN_RETURN_IF_ERROR(BuildDescs(shape, args.bias, descs));
  cublasLtMatmulAlgo_t a;
  std::memcpy(&a, algo.data(), sizeof(a));
  const void* c = shape.has_c ? args.c : args.y;
  if (shape.dtype == kCodeI8) {  // integer scale: D = 1 * A B + 0
    const int32_t one = 1, zero = 0;
    return LtStatus(cublasLtMatmul(h, descs.op, &one, args.b, descs.a, args.a, descs.b, &zero, c, descs.c, args.y,
                                   descs.d, &a, workspace, workspace_bytes, stream),
                    "cublasLtMatmul");
  }
  const float alpha = args.alpha;
  const float beta = shape.has_c ? args.beta : 0.f;
  return LtStatus(cublasLtMatmul(h, descs.op, &alpha, args.b, descs.a, args.a, descs.b, &beta, c, descs.c, args.y,
                                 descs.d, &a, workspace, workspace_bytes, stream),
                  "cublasLtMatmul");
}

std::string LtAlgoToTactic(const LtAlgo& algo) {
  static const char* kHex = "0123456789abcdef";
  std::string s = "cublaslt:";
  const auto* bytes = reinterpret_cast<const unsigned char*>(algo.data());
  for (size_t i = 0; i < sizeof(LtAlgo); ++i) {
    s.push_back(kHex[bytes[i] >> 4]);
    s.push_back(kHex[bytes[i] & 15]);
  }
  return s;
}

std::optional<LtAlgo> LtAlgoFromTactic(std::string_view tactic) {
  constexpr std::string_view kPrefix = "cublaslt:";
  if (tactic.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  tactic.remove_prefix(kPrefix.size());
  if (tactic.size() != 2 * sizeof(LtAlgo)) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  LtAlgo algo{};
  auto* bytes = reinterpret_cast<unsigned char*>(algo.data());
  for (size_t i = 0; i < sizeof(LtAlgo); ++i) {
    const int hi = nibble(tactic[2 * i]), lo = nibble(tactic[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return algo;
}

}  // namespace kiln::cuda
