// Strided copy and output allocation for the data-movement kernels (see tensor_util.h).
#include "backends/cpu/tensor_util.h"

#include <algorithm>
#include <cstring>

namespace kiln::cpu {

namespace {

template <typename T>
void CopyRowTyped(const uint8_t* s, uint8_t* d, int64_t n, int64_t ss, int64_t ds) {
  const T* sp = reinterpret_cast<const T*>(s);
  T* dp = reinterpret_cast<T*>(d);
  if (ds == 1) {
    for (int64_t i = 0; i < n; ++i) dp[i] = sp[i * ss];
  } else {
    for (int64_t i = 0; i < n; ++i) dp[i * ds] = sp[i * ss];
  }
}

void CopyRow(const uint8_t* s, uint8_t* d, int64_t n, int64_t ss, int64_t ds, size_t es) {
  if (ss == 1 && ds == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * es);
    return;
  }
  switch (es) {
    case 1: CopyRowTyped<uint8_t>(s, d, n, ss, ds); break;
    case 2: CopyRowTyped<uint16_t>(s, d, n, ss, ds); break;
    case 4: CopyRowTyped<uint32_t>(s, d, n, ss, ds); break;
    case 8: CopyRowTyped<uint64_t>(s, d, n, ss, ds); break;
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * ds * es, s + i * ss * es, es);
  }
}

// Transposing copy: source contiguous along dim `j`, destination along the last dim. Copies 2-D tiles
// [i-tile of dim j] x [k-tile of the last dim] so both sides stay in cache.
template <typename T>
void TiledCopy(const uint8_t* sb, uint8_t* db, const std::vector<int64_t>& sh, const std::vector<int64_t>& ss,
               const std::vector<int64_t>& ds, size_t j) {
  constexpr int64_t kTile = 32;
  const size_t r = sh.size(), last = r - 1;
  const int64_t nj = sh[j], nl = sh[last], dj = ds[j], sl = ss[last], dl = ds[last];
  const int64_t tiles_j = (nj + kTile - 1) / kTile;
  // Outer dims: every dim except j and last.
  std::vector<size_t> outer;
  for (size_t d = 0; d < last; ++d)
    if (d != j) outer.push_back(d);
  int64_t rows = 1;
  for (size_t d : outer) rows *= sh[d];
  const T* src = reinterpret_cast<const T*>(sb);
  T* dst = reinterpret_cast<T*>(db);
  ParallelFor(
      rows * tiles_j,
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          int64_t rem = item / tiles_j, so = 0, dof = 0;
          const int64_t i0 = (item % tiles_j) * kTile, i1 = std::min(nj, i0 + kTile);
          for (int64_t o = static_cast<int64_t>(outer.size()) - 1; o >= 0; --o) {
            const size_t d = outer[o];
            const int64_t idx = rem % sh[d];
            rem /= sh[d];
            so += idx * ss[d];
            dof += idx * ds[d];
          }
          for (int64_t k0 = 0; k0 < nl; k0 += kTile) {
            const int64_t k1 = std::min(nl, k0 + kTile);
            for (int64_t i = i0; i < i1; ++i) {
              const T* s = src + so + i;
              T* d = dst + dof + i * dj;
              for (int64_t k = k0; k < k1; ++k) d[k * dl] = s[k * sl];
            }
          }
        }
      },
      std::max<int64_t>(1, 16384 / std::max<int64_t>(1, kTile * nl)));
}

}  // namespace

void StridedCopy(const void* src, void* dst, std::vector<int64_t> shape, std::vector<int64_t> ss,
                 std::vector<int64_t> ds, size_t es) {
  // Drop unit dims; stop on empty tensors.
  std::vector<int64_t> sh, s, d;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return;
    if (shape[i] == 1) continue;
    sh.push_back(shape[i]);
    s.push_back(ss[i]);
    d.push_back(ds[i]);
  }
  // Merge dim i into dim i+1 when both views are contiguous across them.
  std::vector<int64_t> msh, ms, md;
  for (size_t i = 0; i < sh.size(); ++i) {
    if (!msh.empty() && ms.back() == s[i] * sh[i] && md.back() == d[i] * sh[i]) {
      msh.back() *= sh[i];
      ms.back() = s[i];
      md.back() = d[i];
    } else {
      msh.push_back(sh[i]);
      ms.push_back(s[i]);
      md.push_back(d[i]);
    }
  }
  const auto* sb = static_cast<const uint8_t*>(src);
  auto* db = static_cast<uint8_t*>(dst);
  const int64_t r = static_cast<int64_t>(msh.size());
  if (r == 0) {
    std::memcpy(db, sb, es);
    return;
  }
  const int64_t n = msh[r - 1], sl = ms[r - 1], dl = md[r - 1];
  // A transpose (source contiguous along another dim than the destination's) goes tile by tile.
  if (sl != 1 && dl == 1 && n >= 8 && (es == 1 || es == 2 || es == 4 || es == 8)) {
    for (int64_t j = r - 2; j >= 0; --j) {
      if (ms[j] != 1 || msh[j] < 8) continue;
      switch (es) {
        case 1: TiledCopy<uint8_t>(sb, db, msh, ms, md, j); break;
        case 2: TiledCopy<uint16_t>(sb, db, msh, ms, md, j); break;
        case 4: TiledCopy<uint32_t>(sb, db, msh, ms, md, j); break;
        default: TiledCopy<uint64_t>(sb, db, msh, ms, md, j); break;
      }
      return;
    }
  }
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < r; ++i) rows *= msh[i];
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, n * static_cast<int64_t>(es)));
  ParallelFor(
      rows,
      [&](int64_t begin, int64_t end) {
        std::vector<int64_t> idx(std::max<int64_t>(r - 1, 0), 0);
        int64_t so = 0, dof = 0, rem = begin;
        for (int64_t i = r - 2; i >= 0; --i) {
          idx[i] = rem % msh[i];
          rem /= msh[i];
          so += idx[i] * ms[i];
          dof += idx[i] * md[i];
        }
        for (int64_t row = begin; row < end; ++row) {
          CopyRow(sb + so * static_cast<int64_t>(es), db + dof * static_cast<int64_t>(es), n, sl, dl, es);
          for (int64_t i = r - 2; i >= 0; --i) {
            so += ms[i];
            dof += md[i];
            if (++idx[i] < msh[i]) break;
            so -= ms[i] * msh[i];
            dof -= md[i] * msh[i];
            idx[i] = 0;
          }
        }
      },
      grain);
}

Tensor& AllocOutput(KernelContext& c, size_t i, DataType dtype, const std::vector<int64_t>& shape) {
  Tensor& o = c.out(i);
  if (!o.defined() || o.dtype() != dtype || o.shape() != shape) o = Tensor(dtype, shape);
  return o;
}

}  // namespace kiln::cpu
