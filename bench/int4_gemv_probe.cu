// A probe of the INT4 weight-only GEMVs against cuBLAS FP16 at a LLaMA-7B decode step's shapes (rows 1 and 4), each
// timed over copies of the weight that together pass the L2 cache, and the tensor-core kernel at several warps per
// block (W) and tiles per batch of loads (U); it also prints the largest difference between the two GEMVs' outputs.
// Not part of kiln's build. Compile here, run on the GPU machine (the binary travels; results in bench/results):
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. -Isrc -o out/int4_gemv_probe bench/int4_gemv_probe.cu \
//        src/backends/cuda/weight_only.cu -lcublas
#include "src/backends/cuda/weight_only_mma.cu"
#include <cublas_v2.h>
#include <cstdio>
#include <vector>
#include <random>
using namespace kiln::cuda;
#define CK(x) do { auto e = (x); if (e != 0) { printf("err %d at %d\n", (int)e, __LINE__); exit(1); } } while (0)

template <int W, int U>
float TimeMma(WoqMmaArgs a, std::vector<uint4*>& ws, int iters, cudaStream_t st) {
  const dim3 grid((a.n + 15) / 16, (a.rows + 7) / 8);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) { a.w = ws[i % ws.size()]; WoqMmaKernel<__half, W, U><<<grid, W * 32, 0, st>>>(a, true); }
  cudaEventRecord(e0, st);
  for (int i = 0; i < iters; ++i) { a.w = ws[i % ws.size()]; WoqMmaKernel<__half, W, U><<<grid, W * 32, 0, st>>>(a, true); }
  cudaEventRecord(e1, st); cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1); CK(cudaGetLastError());
  return ms * 1000 / iters;
}

int main() {
  cublasHandle_t h; cublasCreate(&h);
  cudaStream_t st; cudaStreamCreate(&st); cublasSetStream(h, st);
  std::mt19937 rng(1);
  const int shapes[3][2] = {{4096, 4096}, {4096, 11008}, {11008, 4096}};
  for (int rows : {1, 4}) for (auto& sh : shapes) {
    const int64_t K = sh[0], N = sh[1], G = K / 128, ldw = K / 2, kt = K / 64, npad = (N + 15) / 16 * 16;
    const int copies = std::max<int64_t>(4, (int64_t(400) << 20) / (N * K / 2));
    std::vector<uint8_t> wq(N * ldw); for (auto& b : wq) b = rng();
    std::vector<__half> x(rows * K); for (auto& v : x) v = __float2half((rng() % 2000) / 1000.f - 1);
    std::vector<float> sf(N * G); for (auto& v : sf) v = __half2float(__float2half(0.01f + (rng() % 100) / 10000.f));
    std::vector<uint32_t> sb(G * npad, 0);
    for (int64_t j = 0; j < N; ++j) for (int64_t g = 0; g < G; ++g) {
      __half s = __float2half(sf[j * G + g]), b = __float2half(1032.f);
      uint16_t sbits, bbits; memcpy(&sbits, &s, 2); memcpy(&bbits, &b, 2);
      sb[g * npad + j] = sbits | (uint32_t(bbits) << 16);
    }
    uint8_t* dw; float* ds; __half *dx, *dy, *dy2; uint32_t* dsb;
    CK(cudaMalloc(&dw, wq.size())); CK(cudaMemcpy(dw, wq.data(), wq.size(), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&ds, sf.size() * 4)); CK(cudaMemcpy(ds, sf.data(), sf.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dsb, sb.size() * 4)); CK(cudaMemcpy(dsb, sb.data(), sb.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dx, x.size() * 2)); CK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dy, rows * N * 2)); CK(cudaMalloc(&dy2, rows * N * 2));
    WoqArgs a; a.x = dx; a.x_dtype = kF16; a.w = dw; a.ldw = ldw; a.scales = ds; a.scale_dtype = kF16; a.w_signed = true;
    a.rows = rows; a.n = N; a.k = K; a.group = 128; a.groups = G; a.group_shift = 2; a.y = dy;
    std::vector<uint4*> ws(copies); std::vector<uint8_t*> wrows(copies);
    for (int c = 0; c < copies; ++c) {
      CK(cudaMalloc(&ws[c], npad / 16 * kt * 32 * 16));
      CK(LaunchWoqMmaLayout(a, kt, ws[c], st));
      CK(cudaMalloc(&wrows[c], wq.size())); CK(cudaMemcpy(wrows[c], dw, wq.size(), cudaMemcpyDeviceToDevice));
    }
    WoqMmaArgs m; m.x = dx; m.x_dtype = kF16; m.w = ws[0]; m.sb = dsb; m.rows = rows; m.n = N; m.k = K; m.ktiles = kt;
    m.npad = npad; m.group = 128; m.group_shift = 3; m.y = dy2;
    CK(LaunchWoqGemv(a, st)); CK(LaunchWoqMma(m, st)); CK(cudaStreamSynchronize(st));
    std::vector<__half> y1(rows * N), y2(rows * N);
    cudaMemcpy(y1.data(), dy, y1.size() * 2, cudaMemcpyDeviceToHost); cudaMemcpy(y2.data(), dy2, y2.size() * 2, cudaMemcpyDeviceToHost);
    double md = 0, mx = 0; for (size_t i = 0; i < y1.size(); ++i) { md = std::max(md, (double)fabsf(__half2float(y1[i]) - __half2float(y2[i]))); mx = std::max(mx, (double)fabsf(__half2float(y1[i]))); }
    // cuBLAS FP16: y[rows, N] = x[rows, K] W[K, N]; column-major: Y^T[N, rows] = W^T[N,K] ... as in a Linear.
    std::vector<__half*> wf(std::max(2, copies / 4));
    for (auto& p : wf) { CK(cudaMalloc(&p, N * K * 2)); cudaMemset(p, 0x11, N * K * 2); }
    const int iters = 200;
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    __half one = __float2half(1.f), zero = __float2half(0.f);
    auto gemm = [&](int i) { CK(cublasHgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, rows, K, &one, wf[i % wf.size()], K, dx, K, &zero, dy, N)); };
    for (int i = 0; i < 3; ++i) gemm(i);
    cudaEventRecord(e0, st); for (int i = 0; i < iters; ++i) gemm(i); cudaEventRecord(e1, st); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); const float t_cublas = ms * 1000 / iters;
    cudaEventRecord(e0, st); for (int i = 0; i < iters; ++i) { a.w = wrows[i % copies]; LaunchWoqGemv(a, st); } cudaEventRecord(e1, st); cudaEventSynchronize(e1);
    cudaEventElapsedTime(&ms, e0, e1); const float t_gemv = ms * 1000 / iters;
    const double wbytes = N * K / 2.0;
    printf("rows %d K %5ld N %5ld (%d copies) max|gemv-mma| %.3g (max|y| %.3g): cublas-fp16 %.2f us (%.0f GB/s)  gemv %.2f us (%.0f GB/s)\n",
           rows, K, N, copies, md, mx, t_cublas, 2 * wbytes * 2 / t_cublas / 1e3, t_gemv, wbytes / t_gemv / 1e3);
#define V(W, U) { float t = TimeMma<W, U>(m, ws, iters, st); printf("   mma W%-2d U%d %.2f us (%.0f GB/s) %.2fx cublas\n", W, U, t, wbytes / t / 1e3, t_cublas / t); }
    V(4, 2) V(4, 4) V(4, 8) V(8, 2) V(8, 4) V(8, 8) V(16, 1) V(16, 2) V(16, 4)
    for (auto p : wf) cudaFree(p); for (auto p : ws) cudaFree(p); for (auto p : wrows) cudaFree(p);
    cudaFree(dw); cudaFree(ds); cudaFree(dsb); cudaFree(dx); cudaFree(dy); cudaFree(dy2);
  }
  return 0;
}
