// Memory planner (see memory_plan.h): lifetimes over the execution order, views folded into their roots,
// greedy best-fit placement in one aligned arena, and a validator that checks the result independently.
#include "plan/memory_plan.h"

#include "ops/op_def.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "plan/streams.h"

namespace kiln {

namespace {

constexpr int64_t kMaxBytes = int64_t{1} << 60;

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

bool TimeOverlap(const BufferPlan& a, const BufferPlan& b) { return a.first <= b.last && b.first <= a.last; }

// Which buffers may not share bytes. One stream: those whose lifetimes overlap. Several (a StreamSchedule): also
// those whose work is not ordered either way round, where every use of one (its definition, its reads and its views')
// must complete before the other is defined.
struct Liveness {
  const std::vector<BufferPlan>* bufs = nullptr;
  const StreamSchedule* sc = nullptr;
  std::vector<std::vector<int32_t>> last_use;  // per buffer, per stream: the last node using it there, -1 none

  bool Before(size_t a, size_t b) const {  // every use of a completes before b is defined
    const std::vector<int32_t>& clock = sc->clock[(*bufs)[b].first];
    for (size_t t = 0; t < last_use[a].size(); ++t)
      if (last_use[a][t] > clock[t]) return false;
    return true;
  }
  bool Conflict(size_t a, size_t b) const {
    if (TimeOverlap((*bufs)[a], (*bufs)[b])) return true;
    return sc && !Before(a, b) && !Before(b, a);
  }
};

struct Placed {
  int64_t offset, size;
  size_t idx;
};

struct Gap {
  int64_t offset;    // bottom of the smallest gap that fits, or -1
  int64_t size;      // that gap's size
  int64_t top_used;  // end of the highest placed buffer live at the same time as `b`
};

// The smallest gap between the placed buffers (sorted by offset) that are live at the same time as `b` and that
// fits `size` bytes; the space above them all is not a gap here (the callers treat it each their own way).
Gap BestGap(const std::vector<Placed>& placed, const Liveness& live, size_t b, int64_t size) {
  Gap g{-1, std::numeric_limits<int64_t>::max(), 0};
  for (const Placed& p : placed) {
    if (p.size == 0 || !live.Conflict(p.idx, b)) continue;
    const int64_t gap = p.offset - g.top_used;
    if (gap >= size && gap < g.size) {
      g.size = gap;
      g.offset = g.top_used;
    }
    g.top_used = std::max(g.top_used, p.offset + p.size);
  }
  return g;
}

// Keeps `placed` sorted by offset.
void Insert(std::vector<Placed>& placed, const Placed& np) {
  auto pos = std::upper_bound(placed.begin(), placed.end(), np,
                              [](const Placed& x, const Placed& y) { return x.offset < y.offset; });
  placed.insert(pos, np);
}

// Places the buffers `order` (indices into `bufs`) one by one: each goes into the smallest gap between the
// already placed buffers that are live at the same time which fits it, or above all of them. Returns the
// arena size; writes the offsets into `offsets`.
int64_t PlaceGreedy(const std::vector<BufferPlan>& bufs, const Liveness& live, const std::vector<size_t>& order,
                    int64_t align, std::vector<int64_t>& offsets) {
  std::vector<Placed> placed;  // kept sorted by offset
  placed.reserve(order.size());
  int64_t arena = 0;
  for (size_t idx : order) {
    const BufferPlan& b = bufs[idx];
    const int64_t size = AlignUp(b.bytes, align);
    auto [best, best_gap, prev_end] = BestGap(placed, live, idx, size);
    const int64_t offset = best >= 0 ? best : prev_end;
    offsets[idx] = offset;
    arena = std::max(arena, offset + size);
    Placed np{offset, size, idx};
    Insert(placed, np);
  }
  return arena;
}

// Places the buffers `order` inside an arena of `limit` bytes: each goes into the smallest gap (among the
// buffers live at the same time) that fits it, at the gap's bottom, except in the gap that reaches the top of
// the arena, where it goes flush against the top. Packing from both ends lets neighbours in time alternate
// between the bottom and the top (a chain then needs only its largest adjacent pair). False when a buffer
// does not fit under `limit`.
bool PlaceBounded(const std::vector<BufferPlan>& bufs, const Liveness& live, const std::vector<size_t>& order,
                  int64_t align, int64_t limit, std::vector<int64_t>& offsets) {
  std::vector<Placed> placed;  // kept sorted by offset
  placed.reserve(order.size());
  for (size_t idx : order) {
    const BufferPlan& b = bufs[idx];
    const int64_t size = AlignUp(b.bytes, align);
    auto [best, best_gap, prev_end] = BestGap(placed, live, idx, size);
    const int64_t top_gap = limit - prev_end;
    if (top_gap >= size && top_gap < best_gap) best = limit - size;
    if (best < 0) return false;
    offsets[idx] = best;
    Placed np{best, size, idx};
    Insert(placed, np);
  }
  return true;
}

// Largest first; ties: earlier definition first.
std::vector<size_t> OrderBySize(const std::vector<BufferPlan>& bufs, const std::vector<size_t>& arena) {
  std::vector<size_t> order = arena;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (bufs[a].bytes != bufs[b].bytes) return bufs[a].bytes > bufs[b].bytes;
    return bufs[a].first < bufs[b].first;
  });
  return order;
}

// "Greedy by breadth": visit the time steps from the one with the most live bytes down; at each, take the
// not yet ordered buffers live there, largest first.
std::vector<size_t> OrderByBreadth(const std::vector<BufferPlan>& bufs, const std::vector<size_t>& arena,
                                   int32_t steps, int64_t align) {
  std::vector<int64_t> live(static_cast<size_t>(steps) + 1, 0);
  for (size_t i : arena) {
    live[bufs[i].first] += AlignUp(bufs[i].bytes, align);
    live[bufs[i].last + 1] -= AlignUp(bufs[i].bytes, align);
  }
  for (size_t t = 1; t < live.size(); ++t) live[t] += live[t - 1];
  std::vector<int32_t> times(static_cast<size_t>(steps));
  std::iota(times.begin(), times.end(), 0);
  std::stable_sort(times.begin(), times.end(), [&](int32_t a, int32_t b) { return live[a] > live[b]; });
  std::vector<size_t> by_size = OrderBySize(bufs, arena);
  std::vector<bool> taken(bufs.size(), false);
  std::vector<size_t> order;
  order.reserve(arena.size());
  for (int32_t t : times) {
    if (live[t] == 0) break;
    for (size_t i : by_size)
      if (!taken[i] && bufs[i].first <= t && t <= bufs[i].last) {
        taken[i] = true;
        order.push_back(i);
      }
  }
  for (size_t i : by_size)
    if (!taken[i]) order.push_back(i);
  return order;
}

// The most arena bytes live at one step: a sweep over the buffers' start and end events (sized by the number of
// buffers, not by the step numbers, which a loaded engine could make anything).
int64_t PeakLive(const std::vector<BufferPlan>& bufs, int64_t align) {
  std::vector<std::pair<int64_t, int64_t>> events;  // (step, +bytes at first / -bytes after last)
  for (const auto& b : bufs) {
    if (b.kind != BufferPlan::Kind::kArena) continue;
    events.emplace_back(b.first, AlignUp(b.bytes, align));
    events.emplace_back(static_cast<int64_t>(b.last) + 1, -AlignUp(b.bytes, align));
  }
  std::sort(events.begin(), events.end());  // at one step, frees (negative) come before allocations
  int64_t cur = 0, peak = 0;
  for (const auto& [step, d] : events) {
    cur += d;
    peak = std::max(peak, cur);
  }
  return peak;
}

// Per buffer and stream, the last node that uses the buffer there (its definition, its reads, and those of its views,
// which count for their root).
std::vector<std::vector<int32_t>> LastUses(const Graph& g, const StreamSchedule& sc,
                                           const std::unordered_map<const Value*, size_t>& index,
                                           const std::unordered_map<std::string, size_t>& by_name,
                                           const std::vector<BufferPlan>& bufs) {
  const auto& nodes = g.nodes();
  auto root = [&](size_t i) {
    if (bufs[i].kind != BufferPlan::Kind::kView) return i;
    auto it = by_name.find(bufs[i].alias_of);
    return it == by_name.end() ? i : it->second;
  };
  std::vector<std::vector<int32_t>> last_use(bufs.size(), std::vector<int32_t>(sc.num_streams, -1));
  for (size_t k = 0; k < nodes.size(); ++k) {
    auto use = [&](const Value* v) {
      if (!v) return;
      auto it = index.find(v);
      if (it == index.end()) return;
      int32_t& m = last_use[root(it->second)][sc.stream[k]];
      m = std::max(m, static_cast<int32_t>(k));
    };
    for (const Value* v : nodes[k]->inputs) use(v);
    for (const Value* v : nodes[k]->outputs) use(v);
  }
  return last_use;
}

std::string Mib(int64_t b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1024.0 * 1024.0)); }

}  // namespace

bool IsViewOp(const Node& n) { return TraitsOf(n).view; }

Result<int64_t> StaticValueBytes(const Value& v) {
  if (!v.has_shape || !IsStatic(v.shape))
    return Err(StatusCode::kInvalidArgument,
               "value '{}' ({}) has no static shape: import with fixed input shapes (--shapes) or plan memory "
               "with the profile's max shapes",
               v.name, v.TypeString());
  const size_t es = DataTypeSize(v.dtype);
  if (es == 0)
    return Err(StatusCode::kUnsupported, "value '{}' has type {}, which has no fixed element size", v.name,
               DataTypeName(v.dtype));
  int64_t n = static_cast<int64_t>(es);
  for (const Dim& d : v.shape) {
    if (d.value != 0 && n > kMaxBytes / d.value)
      return Err(StatusCode::kOutOfRange, "value '{}' ({}) is larger than 2^60 bytes", v.name, v.TypeString());
    n *= d.value;
  }
  return n;
}

Result<MemoryPlan> PlanMemoryStatic(const Graph& g, const MemoryPlanOptions& opts) {
  return PlanMemory(g, StaticValueBytes, opts);
}

Result<MemoryPlan> PlanMemory(const Graph& g, const ValueBytesFn& bytes_of, const MemoryPlanOptions& opts) {
  const int64_t align = opts.alignment;
  if (align <= 0 || (align & (align - 1)) != 0)
    return Err(StatusCode::kInvalidArgument, "memory plan alignment {} is not a power of two", align);
  const auto& nodes = g.nodes();
  if (nodes.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() - 2))
    return Err(StatusCode::kOutOfRange, "the graph has too many nodes ({}) to plan", nodes.size());
  const int32_t steps = static_cast<int32_t>(nodes.size());

  MemoryPlan plan;
  plan.alignment = align;
  std::unordered_map<const Value*, size_t> index;
  std::vector<int64_t> view_root_bytes;  // per buffer: the size of the root of a view
  auto add = [&](const Value* v, int32_t def) -> Status {
    if (!v || v->is_const() || index.count(v)) return Status::Ok();
    KILN_ASSIGN_OR_RETURN(int64_t b, bytes_of(*v));
    if (b < 0 || b > kMaxBytes)
      return Err(StatusCode::kInvalidArgument, "value '{}': size {} bytes is out of range", v->name, b);
    BufferPlan bp;
    bp.name = v->name;
    bp.value = v;
    bp.bytes = b;
    bp.first = def;
    bp.last = def;
    bp.kind = (v->is_graph_input || v->is_graph_output) ? BufferPlan::Kind::kExternal : BufferPlan::Kind::kArena;
    index[v] = plan.buffers.size();
    plan.buffers.push_back(std::move(bp));
    view_root_bytes.push_back(-1);
    return Status::Ok();
  };
  std::unordered_map<const Value*, bool> pinned;
  for (const Value* v : g.inputs) pinned[v] = true;
  for (const Value* v : g.outputs) pinned[v] = true;
  for (const Value* v : g.inputs) KILN_RETURN_IF_ERROR(add(v, 0));

  for (int32_t i = 0; i < steps; ++i) {
    const Node& n = *nodes[i];
    for (const Value* in : n.inputs) {
      if (!in || in->is_const()) continue;
      auto it = index.find(in);
      if (it == index.end())
        return Err(StatusCode::kInvalidModel,
                   "{}: input '{}' is used before any node defines it (the nodes are not in execution order)",
                   n.Where(), in->name);
      plan.buffers[it->second].last = std::max(plan.buffers[it->second].last, i);
    }
    for (const Value* out : n.outputs) {
      if (out && !out->is_const() && index.count(out))
        return Err(StatusCode::kInvalidModel, "{}: output '{}' is defined twice (by an earlier node or as a graph "
                   "input)", n.Where(), out->name);
      KILN_RETURN_IF_ERROR(add(out, i));
    }
    // A view: the output uses the input's memory (unless the output is pinned: then the kernel copies).
    const Value* in0 = n.input(0);
    const Value* out0 = n.output(0);
    if (IsViewOp(n) && in0 && out0 && !out0->is_const() && !pinned.count(out0)) {
      BufferPlan& ob = plan.buffers[index.at(out0)];
      std::string root = in0->name;
      int64_t root_bytes = -1;
      if (!in0->is_const()) {
        const size_t ii = index.at(in0);
        const BufferPlan& ib = plan.buffers[ii];
        root = ib.kind == BufferPlan::Kind::kView ? ib.alias_of : ib.name;
        root_bytes = ib.kind == BufferPlan::Kind::kView ? view_root_bytes[ii] : ib.bytes;
      } else {
        root_bytes = static_cast<int64_t>(in0->const_value->nbytes());
      }
      if (ob.bytes <= root_bytes) {
        ob.kind = BufferPlan::Kind::kView;
        ob.alias_of = root;
        view_root_bytes[index.at(out0)] = root_bytes;
      }
    }
  }
  for (const Value* v : g.outputs) {
    if (!v || v->is_const()) continue;
    if (!index.count(v))
      return Err(StatusCode::kInvalidModel, "graph output '{}' is neither a graph input nor any node's output",
                 v->name);
    plan.buffers[index.at(v)].last = std::max(plan.buffers[index.at(v)].last, steps > 0 ? steps - 1 : 0);
  }

  // Extend every root's lifetime over its views' (views are later in the list than their roots).
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < plan.buffers.size(); ++i) by_name[plan.buffers[i].name] = i;
  for (const BufferPlan& b : plan.buffers) {
    if (b.kind != BufferPlan::Kind::kView) continue;
    auto it = by_name.find(b.alias_of);
    if (it != by_name.end()) plan.buffers[it->second].last = std::max(plan.buffers[it->second].last, b.last);
  }

  Liveness live;
  live.bufs = &plan.buffers;
  if (opts.schedule && opts.schedule->num_streams > 1) {
    if (opts.schedule->stream.size() != nodes.size())
      return Err(StatusCode::kInternal, "memory plan: a stream schedule of {} nodes for {} nodes",
                 opts.schedule->stream.size(), nodes.size());
    live.sc = opts.schedule;
    live.last_use = LastUses(g, *opts.schedule, index, by_name, plan.buffers);
  }

  std::vector<size_t> arena;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferPlan& b = plan.buffers[i];
    if (b.kind == BufferPlan::Kind::kArena) {
      arena.push_back(i);
      plan.naive_bytes += AlignUp(b.bytes, align);
    } else if (b.kind == BufferPlan::Kind::kExternal) {
      plan.external_bytes += b.bytes;
    }
  }
  std::vector<int64_t> off_a(plan.buffers.size(), -1), off_b(plan.buffers.size(), -1);
  const int64_t size_a = PlaceGreedy(plan.buffers, live, OrderBySize(plan.buffers, arena), align, off_a);
  const int64_t size_b =
      PlaceGreedy(plan.buffers, live, OrderByBreadth(plan.buffers, arena, std::max(steps, 1), align), align, off_b);
  std::vector<int64_t> off = size_b < size_a ? off_b : off_a;
  plan.arena_bytes = std::min(size_a, size_b);
  plan.peak_live_bytes = PeakLive(plan.buffers, align);
  // Two-ended packing under a limit, binary-searched between the peak live bytes (a lower bound) and the
  // best greedy result.
  {
    const std::vector<size_t> by_size = OrderBySize(plan.buffers, arena);
    const std::vector<size_t>& by_time = arena;  // in order of definition
    std::vector<int64_t> trial(plan.buffers.size(), -1);
    int64_t lo = plan.peak_live_bytes / align, hi = plan.arena_bytes / align;  // in alignment units
    for (int iter = 0; iter < 14 && lo < hi; ++iter) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (PlaceBounded(plan.buffers, live, by_size, align, mid * align, trial) ||
          PlaceBounded(plan.buffers, live, by_time, align, mid * align, trial)) {
        hi = mid;
        off = trial;
        plan.arena_bytes = mid * align;
      } else {
        lo = mid + 1;
      }
    }
  }
  // The arena ends where its highest buffer ends (two-ended packing may leave the limit's top unused).
  int64_t top = 0;
  for (size_t i : arena) top = std::max(top, off[i] + AlignUp(plan.buffers[i].bytes, align));
  plan.arena_bytes = top;
  for (size_t i : arena) plan.buffers[i].offset = off[i];
  for (BufferPlan& b : plan.buffers) {
    if (b.kind != BufferPlan::Kind::kView) continue;
    auto it = by_name.find(b.alias_of);
    if (it != by_name.end() && plan.buffers[it->second].kind == BufferPlan::Kind::kArena)
      b.offset = plan.buffers[it->second].offset;
  }
  KILN_RETURN_IF_ERROR(plan.Validate());
  if (live.sc) KILN_RETURN_IF_ERROR(CheckPlanForStreams(plan, g, *live.sc));
  return plan;
}

Status CheckPlanForStreams(const MemoryPlan& plan, const Graph& g, const StreamSchedule& sc) {
  if (sc.stream.size() != g.nodes().size())
    return Err(StatusCode::kInternal, "memory plan: a stream schedule of {} nodes for {} nodes", sc.stream.size(),
               g.nodes().size());
  // The plan's buffers by the graph's values (a loaded plan names values; the planner's kept their pointers).
  std::unordered_map<const Value*, size_t> index;
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < plan.buffers.size(); ++i) by_name[plan.buffers[i].name] = i;
  for (const Value* v : g.values())
    if (auto it = by_name.find(v->name); it != by_name.end()) index[v] = it->second;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferPlan& b = plan.buffers[i];
    if (b.kind == BufferPlan::Kind::kArena && (b.first < 0 || b.first >= static_cast<int32_t>(sc.stream.size())))
      return Err(StatusCode::kInvalidModel, "memory plan: buffer '{}' is defined at node {}, outside the graph", b.name,
                 b.first);
  }
  Liveness live;
  live.bufs = &plan.buffers;
  live.sc = &sc;
  live.last_use = LastUses(g, sc, index, by_name, plan.buffers);
  std::vector<size_t> arena;
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].kind == BufferPlan::Kind::kArena && plan.buffers[i].bytes > 0) arena.push_back(i);
  std::sort(arena.begin(), arena.end(),
            [&](size_t a, size_t b) { return plan.buffers[a].offset < plan.buffers[b].offset; });
  for (size_t x = 0; x < arena.size(); ++x) {
    const BufferPlan& a = plan.buffers[arena[x]];
    const int64_t a_end = a.offset + AlignUp(a.bytes, plan.alignment);
    for (size_t y = x + 1; y < arena.size() && plan.buffers[arena[y]].offset < a_end; ++y)
      if (live.Conflict(arena[x], arena[y]))
        return Err(StatusCode::kInvalidModel,
                   "memory plan: '{}' and '{}' share memory but run on different streams without an order between "
                   "them; rebuild the engine",
                   a.name, plan.buffers[arena[y]].name);
  }
  return Status::Ok();
}

const BufferPlan* MemoryPlan::Find(const std::string& name) const {
  for (const BufferPlan& b : buffers)
    if (b.name == name) return &b;
  return nullptr;
}

Status MemoryPlan::Validate() const {
  using K = BufferPlan::Kind;
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    return Err(StatusCode::kInternal, "memory plan: alignment {} is not a power of two", alignment);
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (!by_name.emplace(buffers[i].name, i).second)
      return Err(StatusCode::kInternal, "memory plan: value '{}' has two buffers", buffers[i].name);
  int64_t naive = 0, top = 0;
  std::vector<size_t> arena;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferPlan& b = buffers[i];
    if (b.bytes < 0 || b.bytes > kMaxBytes || b.first < 0 || b.last < b.first)
      return Err(StatusCode::kInternal, "memory plan: value '{}' has size {} and lifetime [{}, {}]", b.name,
                 b.bytes, b.first, b.last);
    if (b.kind == K::kArena) {
      if (b.offset < 0 || b.offset % alignment != 0 || b.offset > kMaxBytes)
        return Err(StatusCode::kInternal, "memory plan: value '{}' has offset {}, not a multiple of {}", b.name,
                   b.offset, alignment);
      const int64_t end = b.offset + AlignUp(b.bytes, alignment);
      if (end > arena_bytes)
        return Err(StatusCode::kInternal, "memory plan: value '{}' ends at {}, beyond the arena of {} bytes",
                   b.name, end, arena_bytes);
      top = std::max(top, end);
      naive += AlignUp(b.bytes, alignment);
      arena.push_back(i);
    } else if (b.kind == K::kExternal) {
      if (b.offset != -1)
        return Err(StatusCode::kInternal, "memory plan: graph input/output '{}' has an arena offset", b.name);
    } else if (b.kind == K::kView) {
      auto it = by_name.find(b.alias_of);
      if (it == by_name.end()) {  // a view of a constant
        if (b.offset != -1)
          return Err(StatusCode::kInternal, "memory plan: view '{}' of '{}' has an arena offset", b.name,
                     b.alias_of);
        continue;
      }
      const BufferPlan& r = buffers[it->second];
      if (r.kind == K::kView)
        return Err(StatusCode::kInternal, "memory plan: view '{}' names another view '{}' as its root", b.name,
                   r.name);
      if (b.bytes > r.bytes || r.first > b.first || r.last < b.last)
        return Err(StatusCode::kInternal,
                   "memory plan: view '{}' ({} bytes, [{}, {}]) is not covered by its root '{}' ({} bytes, [{}, {}])",
                   b.name, b.bytes, b.first, b.last, r.name, r.bytes, r.first, r.last);
      if (b.offset != (r.kind == K::kArena ? r.offset : -1))
        return Err(StatusCode::kInternal, "memory plan: view '{}' has offset {}, its root '{}' has {}", b.name,
                   b.offset, r.name, r.offset);
    } else {
      return Err(StatusCode::kInternal, "memory plan: value '{}' has an unknown buffer kind", b.name);
    }
  }
  if (top != arena_bytes && !(arena.empty() && arena_bytes == 0))
    return Err(StatusCode::kInternal, "memory plan: arena is {} bytes but its buffers end at {}", arena_bytes, top);
  if (naive != naive_bytes)
    return Err(StatusCode::kInternal, "memory plan: naive sum is {} bytes but the buffers add up to {}",
               naive_bytes, naive);
  // Sweep in address order: only buffers whose address ranges overlap need a time check.
  std::sort(arena.begin(), arena.end(), [&](size_t a, size_t b) { return buffers[a].offset < buffers[b].offset; });
  for (size_t x = 0; x < arena.size(); ++x) {
    const BufferPlan& a = buffers[arena[x]];
    const int64_t a_end = a.offset + AlignUp(a.bytes, alignment);
    for (size_t y = x + 1; y < arena.size() && buffers[arena[y]].offset < a_end; ++y) {
      const BufferPlan& b = buffers[arena[y]];
      if (a.bytes == 0 || b.bytes == 0) continue;
      if (TimeOverlap(a, b))
        return Err(StatusCode::kInternal,
                   "memory plan: '{}' [{}, {}) and '{}' [{}, {}) overlap in memory while both are live (nodes "
                   "{}..{} and {}..{})",
                   a.name, a.offset, a_end, b.name, b.offset, b.offset + AlignUp(b.bytes, alignment), a.first,
                   a.last, b.first, b.last);
    }
  }
  if (PeakLive(buffers, alignment) > arena_bytes)
    return Err(StatusCode::kInternal, "memory plan: arena of {} bytes is below the peak live bytes", arena_bytes);
  return Status::Ok();
}

std::string MemoryPlan::Summary() const {
  size_t views = 0, arena = 0, external = 0;
  for (const BufferPlan& b : buffers) {
    views += b.kind == BufferPlan::Kind::kView;
    arena += b.kind == BufferPlan::Kind::kArena;
    external += b.kind == BufferPlan::Kind::kExternal;
  }
  const double pct = naive_bytes > 0 ? 100.0 * static_cast<double>(arena_bytes) / static_cast<double>(naive_bytes) : 0;
  return fmt::format("arena {} (naive {}, {:.1f}%; peak live {}), {} arena buffers, {} views, {} inputs/outputs ({})",
                     Mib(arena_bytes), Mib(naive_bytes), pct, Mib(peak_live_bytes), arena, views, external,
                     Mib(external_bytes));
}

}  // namespace kiln
