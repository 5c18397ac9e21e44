// Auxiliary streams (see streams.h): the assignment of nodes to streams and the events between them.
#include "plan/streams.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"

namespace kiln {

namespace {

// Per node, the positions of the nodes producing its non-constant inputs, latest first, without repeats. Values
// folded to constants have no producer to wait for.
std::vector<std::vector<int32_t>> Producers(const Graph& g) {
  const auto& nodes = g.nodes();
  std::unordered_map<const Node*, int32_t> pos;
  for (size_t k = 0; k < nodes.size(); ++k) pos[nodes[k].get()] = static_cast<int32_t>(k);
  std::vector<std::vector<int32_t>> out(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (const Value* v : nodes[k]->inputs) {
      if (!v || v->is_const() || !v->producer) continue;
      auto it = pos.find(v->producer);
      if (it != pos.end() && it->second < static_cast<int32_t>(k)) out[k].push_back(it->second);
    }
    std::sort(out[k].begin(), out[k].end(), std::greater<>());
    out[k].erase(std::unique(out[k].begin(), out[k].end()), out[k].end());
  }
  return out;
}

// Shape arithmetic: Shape and Size, and nodes whose every output is a shape tensor known symbolically. The runtime
// computes them on the host at each set of input shapes, so they launch nothing and must not end a stream's chain.
bool HostShapeNode(const Node& n) {
  if (n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size")) return true;
  if (n.outputs.empty()) return false;
  for (const Value* v : n.outputs)
    if (!v || !v->sym_value) return false;
  return true;
}

}  // namespace

std::vector<int32_t> AssignStreams(const Graph& g, int max_aux) {
  const size_t n = g.nodes().size();
  std::vector<int32_t> stream(n, 0);
  if (max_aux <= 0 || n == 0) return stream;
  const int32_t ns = 1 + max_aux;
  const auto producers = Producers(g);
  std::vector<int32_t> tail(ns, -1);  // the last node given to each stream
  std::vector<std::vector<int32_t>> clock(n);
  for (size_t p = 0; p < n; ++p) {
    // What p is ordered after through its producers alone.
    std::vector<int32_t> pre(ns, -1);
    for (int32_t q : producers[p])
      for (int32_t s = 0; s < ns; ++s) pre[s] = std::max(pre[s], clock[q][s]);
    if (HostShapeNode(*g.nodes()[p])) {
      // On the stream of its latest producer (no wait there), without becoming that stream's last node.
      stream[p] = producers[p].empty() ? 0 : stream[producers[p].front()];
      clock[p] = pre;
      continue;
    }
    int32_t chosen = -1;
    // Continue a chain: a stream whose last node is one of p's producers (the main stream first).
    for (int32_t s = 0; s < ns && chosen < 0; ++s)
      if (tail[s] >= 0 && std::find(producers[p].begin(), producers[p].end(), tail[s]) != producers[p].end())
        chosen = s;
    if (chosen < 0 && tail[0] < 0) chosen = 0;  // the first work of the run
    if (chosen < 0) {
      // A new branch: an auxiliary stream whose work p is ordered after already (no dependency added), else the main
      // stream if so, else the auxiliary stream used longest ago.
      auto free = [&](int32_t s) { return tail[s] < 0 || pre[s] >= tail[s]; };
      for (int32_t s = 1; s < ns && chosen < 0; ++s)
        if (free(s)) chosen = s;
      if (chosen < 0 && free(0)) chosen = 0;
      if (chosen < 0) {
        chosen = 1;
        for (int32_t s = 2; s < ns; ++s)
          if (tail[s] < tail[chosen]) chosen = s;
      }
    }
    stream[p] = chosen;
    std::vector<int32_t> c = tail[chosen] >= 0 ? clock[tail[chosen]] : std::vector<int32_t>(ns, -1);
    for (int32_t s = 0; s < ns; ++s) c[s] = std::max(c[s], pre[s]);
    c[chosen] = static_cast<int32_t>(p);
    clock[p] = std::move(c);
    tail[chosen] = static_cast<int32_t>(p);
  }
  return stream;
}

bool StreamSchedule::Uses(int32_t s) const { return std::find(stream.begin(), stream.end(), s) != stream.end(); }

int32_t StreamSchedule::AuxUsed() const {
  int32_t used = 0;
  for (int32_t s = 1; s < num_streams; ++s) used += Uses(s);
  return used;
}

Result<StreamSchedule> ScheduleStreams(const Graph& g, const std::vector<int32_t>& streams, int32_t num_streams) {
  const size_t n = g.nodes().size();
  if (num_streams < 1 || num_streams > 1 + 64)
    return Err(StatusCode::kInvalidArgument, "{} streams: an engine has the main stream and at most 64 auxiliary ones",
               num_streams);
  if (streams.size() != n)
    return Err(StatusCode::kInvalidArgument, "{} stream assignments for {} nodes", streams.size(), n);
  StreamSchedule sc;
  sc.num_streams = num_streams;
  sc.stream = streams;
  sc.waits.resize(n);
  sc.record.assign(n, -1);
  sc.clock.resize(n);
  for (size_t k = 0; k < n; ++k)
    if (streams[k] < 0 || streams[k] >= num_streams)
      return Err(StatusCode::kInvalidArgument, "{} is assigned stream {}, outside 0..{}", g.nodes()[k]->Where(),
                 streams[k], num_streams - 1);
  const auto producers = Producers(g);
  std::vector<int32_t> last_on(num_streams, -1);
  for (size_t p = 0; p < n; ++p) {
    const int32_t s = streams[p];
    std::vector<int32_t> c = last_on[s] >= 0 ? sc.clock[last_on[s]] : std::vector<int32_t>(num_streams, -1);
    for (int32_t q : producers[p]) {  // latest first: its wait often orders p after the earlier ones too
      const int32_t t = streams[q];
      if (c[t] >= q) continue;  // ordered already (same stream, or through an earlier wait)
      if (sc.record[q] < 0) sc.record[q] = sc.events++;
      sc.waits[p].push_back(sc.record[q]);
      for (int32_t x = 0; x < num_streams; ++x) c[x] = std::max(c[x], sc.clock[q][x]);
    }
    c[s] = static_cast<int32_t>(p);
    sc.clock[p] = std::move(c);
    last_on[s] = static_cast<int32_t>(p);
  }
  return sc;
}

}  // namespace kiln
