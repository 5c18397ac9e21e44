#include "backends/cpu/common.h"

#include <algorithm>
#include <thread>

namespace kiln::cpu {

std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> r(out.size(), 0);
  const auto s = Strides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) r[off + i] = in[i] == 1 ? 0 : s[i];
  return r;
}

Result<std::vector<int64_t>> BroadcastShape(const Node& n, const std::vector<int64_t>& a,
                                            const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> r(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return Err(StatusCode::kInvalidArgument, "{}: shapes {} and {} cannot be broadcast together", n.Where(),
                 ShapeToString(a), ShapeToString(b));
    r[i] = da == 1 ? db : da;
  }
  return r;
}

BroadcastIterator::BroadcastIterator(const std::vector<int64_t>& shape, std::vector<std::vector<int64_t>> strides)
    : shape_(shape), strides_(std::move(strides)), index_(shape.size(), 0), offsets_(strides_.size(), 0) {}

void BroadcastIterator::Next() {
  for (int64_t d = static_cast<int64_t>(shape_.size()) - 1; d >= 0; --d) {
    if (++index_[d] < shape_[d]) {
      for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] += strides_[k][d];
      return;
    }
    for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] -= strides_[k][d] * (shape_[d] - 1);
    index_[d] = 0;
  }
}

int NumThreads() {
  static const int n = std::max(1u, std::thread::hardware_concurrency());
  return n;
}

void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  const int threads = NumThreads();
  if (n <= grain || threads <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  const int64_t parts = std::min<int64_t>(threads, (n + grain - 1) / grain);
  const int64_t chunk = (n + parts - 1) / parts;
  std::vector<std::thread> pool;
  for (int64_t p = 1; p < parts; ++p) {
    const int64_t b = p * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(0, std::min(n, chunk));
  for (auto& t : pool) t.join();
}

}  // namespace kiln::cpu
