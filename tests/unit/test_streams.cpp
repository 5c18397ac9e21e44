// Auxiliary streams (plan/streams.h): branches go to their own streams, the waits order every consumer after its
// producers, and the memory plan with a schedule never lets two buffers share bytes unless every use of one is
// ordered before the other is written (checked on random DAGs by an independent happens-before closure).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "plan/memory_plan.h"
#include "plan/streams.h"
#include "plan_testing.h"

namespace kiln {
namespace {

using plan_testing::Act;
using plan_testing::Op;

// x -> q -> {a1 -> a2, b1 -> b2} -> j(a2, b2): the diamond of two branches.
struct Diamond {
  Graph g;
  Value *x, *q, *a1, *a2, *b1, *b2, *j;
  explicit Diamond(bool depth_first = true) {
    x = Act(g, "x", {4});
    x->is_graph_input = true;
    g.inputs.push_back(x);
    q = Act(g, "q", {4});
    a1 = Act(g, "a1", {4});
    a2 = Act(g, "a2", {4});
    b1 = Act(g, "b1", {4});
    b2 = Act(g, "b2", {4});
    j = Act(g, "j", {4});
    Op(g, "Relu", {x}, {q});
    if (depth_first) {
      Op(g, "Relu", {q}, {a1});
      Op(g, "Relu", {a1}, {a2});
      Op(g, "Sigmoid", {q}, {b1});
      Op(g, "Sigmoid", {b1}, {b2});
    } else {
      Op(g, "Relu", {q}, {a1});
      Op(g, "Sigmoid", {q}, {b1});
      Op(g, "Relu", {a1}, {a2});
      Op(g, "Sigmoid", {b1}, {b2});
    }
    Op(g, "Add", {a2, b2}, {j});
    j->is_graph_output = true;
    g.outputs.push_back(j);
  }
};

TEST(Streams, NoAuxiliaryStreamsKeepsEveryNodeOnTheMainStream) {
  Diamond d;
  EXPECT_EQ(AssignStreams(d.g, 0), std::vector<int32_t>(6, 0));
  auto sc = ScheduleStreams(d.g, std::vector<int32_t>(6, 0), 1);
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->events, 0);
  EXPECT_EQ(sc->AuxUsed(), 0);
  for (size_t u = 0; u < 6; ++u)
    for (size_t p = u; p < 6; ++p) EXPECT_TRUE(sc->Ordered(u, p));
}

TEST(Streams, TwoBranchesRunOnTwoStreamsInEitherOrder) {
  for (bool depth_first : {true, false}) {
    Diamond d(depth_first);
    const std::vector<int32_t> s = AssignStreams(d.g, 1);
    // Nodes: q, then the two branches (a on the main stream, b beside it), then the join on the main stream.
    std::map<std::string, int32_t> by_output;
    for (size_t k = 0; k < s.size(); ++k) by_output[d.g.nodes()[k]->outputs[0]->name] = s[k];
    EXPECT_EQ(by_output["q"], 0);
    EXPECT_EQ(by_output["a1"], 0);
    EXPECT_EQ(by_output["a2"], 0);
    EXPECT_EQ(by_output["b1"], 1);
    EXPECT_EQ(by_output["b2"], 1);
    EXPECT_EQ(by_output["j"], 0);
    auto sc = ScheduleStreams(d.g, s, 2);
    ASSERT_TRUE(sc.ok()) << sc.status().ToString();
    EXPECT_EQ(sc->events, 2);  // after q (b1 waits) and after b2 (the join waits)
    EXPECT_EQ(sc->AuxUsed(), 1);
    auto pos = [&](const std::string& out) {
      for (size_t k = 0; k < d.g.nodes().size(); ++k)
        if (d.g.nodes()[k]->outputs[0]->name == out) return k;
      return size_t{0};
    };
    EXPECT_TRUE(sc->Ordered(pos("q"), pos("b1")));
    EXPECT_TRUE(sc->Ordered(pos("b2"), pos("j")));
    EXPECT_TRUE(sc->Ordered(pos("a2"), pos("j")));
    EXPECT_FALSE(sc->Ordered(pos("a1"), pos("b1")));
    EXPECT_FALSE(sc->Ordered(pos("a2"), pos("b2")));
    EXPECT_EQ(sc->waits[pos("b1")].size(), 1u);
    EXPECT_EQ(sc->waits[pos("j")].size(), 1u);
    EXPECT_GE(sc->record[pos("q")], 0);
    EXPECT_GE(sc->record[pos("b2")], 0);
    EXPECT_EQ(sc->record[pos("a1")], -1);
  }
}

TEST(Streams, MoreBranchesThanStreamsShareTheLeastRecentlyUsedOne) {
  // x -> q -> three independent Relu chains of two -> Sum(all three).
  Graph g;
  Value* x = Act(g, "x", {4});
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Value* q = Act(g, "q", {4});
  Op(g, "Relu", {x}, {q});
  std::vector<Value*> ends;
  for (int b = 0; b < 3; ++b) {
    Value* v1 = Act(g, "c" + std::to_string(b) + "_1", {4});
    Value* v2 = Act(g, "c" + std::to_string(b) + "_2", {4});
    Op(g, "Relu", {q}, {v1});
    Op(g, "Relu", {v1}, {v2});
    ends.push_back(v2);
  }
  Value* y = Act(g, "y", {4});
  Op(g, "Sum", ends, {y});
  y->is_graph_output = true;
  g.outputs.push_back(y);
  EXPECT_EQ(AssignStreams(g, 1), (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 0}));
  EXPECT_EQ(AssignStreams(g, 2), (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 2, 0}));
  EXPECT_EQ(AssignStreams(g, 8), (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 2, 0}));  // only what it can use
  auto sc = ScheduleStreams(g, AssignStreams(g, 2), 3);
  ASSERT_TRUE(sc.ok());
  EXPECT_EQ(sc->AuxUsed(), 2);
  EXPECT_EQ(sc->waits[7].size(), 2u);  // the sum waits for both auxiliary chains
  EXPECT_FALSE(sc->Ordered(3, 5));
  EXPECT_FALSE(sc->Ordered(1, 6));
  EXPECT_TRUE(sc->Ordered(6, 7));
}

TEST(Streams, BadAssignmentsAreErrors) {
  Diamond d;
  EXPECT_FALSE(ScheduleStreams(d.g, {0, 0}, 2).ok());                    // too few
  EXPECT_FALSE(ScheduleStreams(d.g, {0, 0, 0, 2, 0, 0}, 2).ok());        // stream 2 of 2
  EXPECT_FALSE(ScheduleStreams(d.g, {0, 0, 0, -1, 0, 0}, 2).ok());       // negative
  EXPECT_FALSE(ScheduleStreams(d.g, std::vector<int32_t>(6, 0), 0).ok());   // no stream
  EXPECT_FALSE(ScheduleStreams(d.g, std::vector<int32_t>(6, 0), 66).ok());  // past 64 auxiliary
  auto bad = ScheduleStreams(d.g, {0, 0, 0, 5, 0, 0}, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("stream 5"), std::string::npos) << bad.status().message();
}

// Two towers of 40 Relus each, interleaved or one after the other, joined by an Add: with an auxiliary stream each
// tower still reuses its own memory (its buffers are ordered by its stream), so the arena stays a few buffers, not
// one per value; a plan made for one stream is refused for the schedule.
TEST(Streams, TowersReuseTheirOwnMemoryBesideEachOther) {
  for (bool interleaved : {true, false}) {
    SCOPED_TRACE(interleaved);
    Graph g;
    Value* x = Act(g, "x", {256});
    x->is_graph_input = true;
    g.inputs.push_back(x);
    Value* a = x;
    Value* b = x;
    std::vector<Value*> va, vb;
    for (int i = 0; i < 40; ++i) {
      va.push_back(Act(g, "a" + std::to_string(i), {256}));
      vb.push_back(Act(g, "b" + std::to_string(i), {256}));
    }
    for (int i = 0; i < 40; ++i) {
      if (interleaved) {
        Op(g, "Relu", {a}, {va[i]});
        Op(g, "Relu", {b}, {vb[i]});
      } else {
        Op(g, "Relu", {a}, {va[i]});
      }
      a = va[i];
      b = interleaved ? vb[i] : b;
    }
    if (!interleaved)
      for (int i = 0; i < 40; ++i) {
        Op(g, "Relu", {b}, {vb[i]});
        b = vb[i];
      }
    Value* y = Act(g, "y", {256});
    Op(g, "Add", {a, b}, {y});
    y->is_graph_output = true;
    g.outputs.push_back(y);
    const std::vector<int32_t> streams = AssignStreams(g, 1);
    auto sc = ScheduleStreams(g, streams, 2);
    ASSERT_TRUE(sc.ok());
    EXPECT_EQ(sc->AuxUsed(), 1);
    MemoryPlanOptions mo;
    mo.schedule = &*sc;
    auto plan = PlanMemoryStatic(g, mo);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_LE(plan->arena_bytes, 6 * 1024) << plan->Summary();  // 1 KiB values: two or three live per tower
    EXPECT_TRUE(CheckPlanForStreams(*plan, g, *sc).ok());
    auto one_stream = PlanMemoryStatic(g);
    ASSERT_TRUE(one_stream.ok());
    Status refused = CheckPlanForStreams(*one_stream, g, *sc);
    EXPECT_FALSE(refused.ok());  // the sequential plan shares bytes between the towers
    EXPECT_NE(refused.message().find("different streams"), std::string::npos) << refused.message();
  }
}

TEST(Streams, ShapeArithmeticDoesNotEndAChain) {
  // h = Relu(x); s = Shape(h); r = Relu(Relu(h)); y = Reshape(r, s): one chain, one stream, no waits.
  Graph g;
  Value* x = Act(g, "x", {2, 8});
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Value* h = Act(g, "h", {2, 8});
  Value* s = Act(g, "s", {2}, DataType::kInt64);
  Value* r1 = Act(g, "r1", {2, 8});
  Value* r2 = Act(g, "r2", {2, 8});
  Value* y = Act(g, "y", {2, 8});
  Op(g, "Relu", {x}, {h});
  Op(g, "Shape", {h}, {s});
  Op(g, "Relu", {h}, {r1});
  Op(g, "Relu", {r1}, {r2});
  Op(g, "Reshape", {r2, s}, {y});
  y->is_graph_output = true;
  g.outputs.push_back(y);
  EXPECT_EQ(AssignStreams(g, 2), std::vector<int32_t>(5, 0));
}

// Independent of the schedule's clocks// Independent of the schedule's clocks: the transitive closure of the edges a run has (each stream in order, each
// wait after the recorded producer).
std::vector<std::vector<bool>> Closure(const Graph& g, const StreamSchedule& sc) {
  const size_t n = g.nodes().size();
  std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));  // before[u][p]: u completes before p
  std::map<int32_t, size_t> recorded_after;
  for (size_t k = 0; k < n; ++k)
    if (sc.record[k] >= 0) recorded_after[sc.record[k]] = k;
  for (size_t p = 0; p < n; ++p) {
    before[p][p] = true;
    std::vector<size_t> preds;
    for (size_t u = 0; u < p; ++u)
      if (sc.stream[u] == sc.stream[p]) preds.push_back(u);
    for (int32_t e : sc.waits[p]) preds.push_back(recorded_after.at(e));
    for (size_t u : preds)
      for (size_t w = 0; w <= u; ++w)
        if (before[w][u]) before[w][p] = true;
  }
  return before;
}

TEST(Streams, RandomDagsOrderConsumersAndNeverShareBytesAcrossUnorderedWork) {
  std::mt19937 rng(99);
  int shared_across_streams = 0, parallel_pairs = 0;
  for (int trial = 0; trial < 80; ++trial) {
    plan_testing::RandomDag dag = plan_testing::MakeRandomDag(rng);
    Graph& g = *dag.g;
    const auto& bytes = dag.bytes;
    const int aux = static_cast<int>(rng() % 4);
    const std::vector<int32_t> streams = AssignStreams(g, aux);
    const int32_t ns = 1 + *std::max_element(streams.begin(), streams.end());
    auto sc = ScheduleStreams(g, streams, ns);
    ASSERT_TRUE(sc.ok()) << sc.status().ToString();
    const auto before = Closure(g, *sc);
    const size_t n = g.nodes().size();
    std::map<const Node*, size_t> pos;
    for (size_t k = 0; k < n; ++k) pos[g.nodes()[k].get()] = k;
    // Every consumer is ordered after its producers, and the clocks say exactly what the closure says.
    for (size_t p = 0; p < n; ++p) {
      for (const Value* v : g.nodes()[p]->inputs)
        if (v && v->producer) ASSERT_TRUE(before[pos.at(v->producer)][p]) << "trial " << trial;
      for (size_t u = 0; u <= p; ++u) {
        ASSERT_EQ(sc->Ordered(u, p), before[u][p]) << "trial " << trial << " u " << u << " p " << p;
        parallel_pairs += !before[u][p];
      }
    }
    MemoryPlanOptions mo;
    mo.schedule = &*sc;
    auto plan = PlanMemory(g, [&](const Value& v) -> Result<int64_t> { return bytes.at(&v); }, mo);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_TRUE(plan->Validate().ok());
    // Uses of each arena root (views' uses count for their root): its definition and its reads.
    std::map<std::string, std::set<size_t>> uses;
    std::map<std::string, size_t> def;
    auto root_of = [&](const Value* v) {
      const BufferPlan* b = plan->Find(v->name);
      return b && b->kind == BufferPlan::Kind::kView ? b->alias_of : v->name;
    };
    for (size_t k = 0; k < n; ++k) {
      for (const Value* v : g.nodes()[k]->inputs)
        if (v) uses[root_of(v)].insert(k);
      for (const Value* v : g.nodes()[k]->outputs) {
        uses[root_of(v)].insert(k);
        if (!def.count(v->name)) def[v->name] = k;
      }
    }
    std::vector<const BufferPlan*> arena;
    for (const BufferPlan& b : plan->buffers)
      if (b.kind == BufferPlan::Kind::kArena && b.bytes > 0) arena.push_back(&b);
    for (const BufferPlan* a : arena)
      for (const BufferPlan* b : arena) {
        if (a == b) continue;
        const int64_t a_end = a->offset + (a->bytes + 255) / 256 * 256, b_end = b->offset + (b->bytes + 255) / 256 * 256;
        if (a->offset >= b_end || b->offset >= a_end) continue;
        // Shared bytes: every use of one completes before the other is written (either way round).
        auto all_before = [&](const BufferPlan* x, const BufferPlan* y) {
          for (size_t u : uses[x->name])
            if (!before[u][def.at(y->name)]) return false;
          return true;
        };
        ASSERT_TRUE(all_before(a, b) || all_before(b, a))
            << "trial " << trial << ": '" << a->name << "' and '" << b->name << "' share bytes without an order";
        shared_across_streams += sc->stream[def.at(a->name)] != sc->stream[def.at(b->name)];
      }
  }
  EXPECT_GT(parallel_pairs, 0);         // the trials did put work side by side
  EXPECT_GT(shared_across_streams, 0);  // and memory still moved between streams where ordered
}

}  // namespace
}  // namespace kiln
