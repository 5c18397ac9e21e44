// Memory planner: random DAGs checked by an independent liveness sweep, chains (arena = the largest adjacent
// pair), views, pinned inputs/outputs, a ResNet-like graph (arena <= 40% of the naive sum), and error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "plan/memory_plan.h"
#include "plan_testing.h"

namespace kiln {
namespace {

using plan_testing::Act;
using plan_testing::Op;

// Independent check: at every node step, every value that is live then (defined at or before it, used at or
// after it; a view counts as its root's memory) must occupy bytes that no other live value's root occupies.
void CheckNoLiveOverlap(const Graph& g, const MemoryPlan& plan) {
  std::map<const Value*, std::pair<int, int>> life;
  const auto& nodes = g.nodes();
  for (const Value* v : g.inputs) life[v] = {0, 0};
  for (int t = 0; t < static_cast<int>(nodes.size()); ++t) {
    for (const Value* in : nodes[t]->inputs)
      if (in && !in->is_const()) life[in].second = std::max(life[in].second, t);
    for (const Value* o : nodes[t]->outputs)
      if (o) life[o] = {t, t};
  }
  for (int t = 0; t < static_cast<int>(nodes.size()); ++t) {
    std::vector<std::pair<int64_t, int64_t>> ranges;  // arena bytes in use at t, by root
    std::map<std::string, std::pair<int64_t, int64_t>> by_root;
    for (const auto& [v, lt] : life) {
      if (lt.first > t || lt.second < t) continue;
      const BufferPlan* b = plan.Find(v->name);
      ASSERT_NE(b, nullptr) << v->name;
      std::string root = b->kind == BufferPlan::Kind::kView ? b->alias_of : b->name;
      const BufferPlan* rb = plan.Find(root);
      if (!rb || rb->kind != BufferPlan::Kind::kArena || b->bytes == 0) continue;
      auto& r = by_root[root];
      r = {rb->offset, std::max(r.second, rb->offset + b->bytes)};
    }
    for (auto& [name, r] : by_root) ranges.push_back(r);
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      ASSERT_LE(ranges[i - 1].second, ranges[i].first) << "overlap at node step " << t;
  }
}

TEST(MemoryPlan, RandomDagsNeverOverlapLiveValues) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 60; ++trial) {
    plan_testing::RandomDag dag = plan_testing::MakeRandomDag(rng);
    Graph& g = *dag.g;
    const auto& bytes = dag.bytes;
    auto plan = PlanMemory(g, [&](const Value& v) -> Result<int64_t> { return bytes.at(&v); });
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_TRUE(plan->Validate().ok());
    CheckNoLiveOverlap(g, *plan);
    EXPECT_LE(plan->peak_live_bytes, plan->arena_bytes);
    EXPECT_LE(plan->arena_bytes, plan->naive_bytes);
    for (const BufferPlan& b : plan->buffers) {
      if (b.kind == BufferPlan::Kind::kArena) EXPECT_EQ(b.offset % 256, 0);
      if (b.value->is_graph_input || b.value->is_graph_output) EXPECT_EQ(b.kind, BufferPlan::Kind::kExternal);
    }
  }
}

TEST(MemoryPlan, ChainNeedsTheLargestAdjacentPair) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 30; ++trial) {
    Graph g;
    Value* x = Act(g, "x", {1});
    x->is_graph_input = true;
    g.inputs.push_back(x);
    std::map<const Value*, int64_t> bytes{{x, 4096}};
    Value* prev = x;
    std::vector<int64_t> sizes;
    const int n = 4 + static_cast<int>(rng() % 30);
    for (int k = 0; k < n; ++k) {
      Value* v = Act(g, "a" + std::to_string(k), {1});
      bytes[v] = 256 * (1 + static_cast<int64_t>(rng() % 64));
      if (k + 1 < n) sizes.push_back(bytes[v]);
      Op(g, "Relu", {prev}, {v});
      prev = v;
    }
    prev->is_graph_output = true;
    g.outputs.push_back(prev);
    auto plan = PlanMemory(g, [&](const Value& v) -> Result<int64_t> { return bytes.at(&v); });
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    int64_t best = sizes.empty() ? 0 : sizes[0];
    for (size_t i = 1; i < sizes.size(); ++i) best = std::max(best, sizes[i - 1] + sizes[i]);
    EXPECT_EQ(plan->peak_live_bytes, best);
    EXPECT_EQ(plan->arena_bytes, best) << "chain of " << n;
  }
  // Equal sizes: exactly two buffers' worth, whatever the length.
  Graph g;
  Value* prev = Act(g, "x", {1, 1024});
  prev->is_graph_input = true;
  g.inputs.push_back(prev);
  for (int k = 0; k < 50; ++k) {
    Value* v = Act(g, "c" + std::to_string(k), {1, 1024});
    Op(g, "Relu", {prev}, {v});
    prev = v;
  }
  prev->is_graph_output = true;
  g.outputs.push_back(prev);
  auto plan = PlanMemoryStatic(g);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->arena_bytes, 2 * 4096);
  EXPECT_EQ(plan->naive_bytes, 49 * 4096);
}

TEST(MemoryPlan, ViewsShareTheirRootAndExtendItsLifetime) {
  Graph g;
  Value* x = Act(g, "x", {4, 64});
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Value* a = Act(g, "a", {4, 64});
  Value* r = Act(g, "r", {256});
  Value* b = Act(g, "b", {4, 64});
  Value* c = Act(g, "c", {4, 64});
  Value* d = Act(g, "d", {256});
  Value* y = Act(g, "y", {256});
  Value* xv = Act(g, "xv", {256});
  Value* shape = g.AddConstant("shape", Tensor::FromInt64({256}));
  Op(g, "Relu", {x}, {a});            // 0
  Op(g, "Reshape", {a, shape}, {r});  // 1: r views a
  Op(g, "Relu", {x}, {b});            // 2
  Op(g, "Relu", {b}, {c});            // 3: b dies here; c may reuse b's memory but never a's
  Op(g, "Add", {r, c}, {d});          // 4: r used last here, so a lives to 4
  Op(g, "Reshape", {x, shape}, {xv}); // 5: a view of a graph input
  Op(g, "Add", {d, xv}, {y});         // 6
  Op(g, "Reshape", {y, shape}, {});   // a node without outputs is fine
  y->is_graph_output = true;
  g.outputs.push_back(y);
  auto plan = PlanMemoryStatic(g);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const BufferPlan* pa = plan->Find("a");
  const BufferPlan* pr = plan->Find("r");
  const BufferPlan* pc = plan->Find("c");
  ASSERT_TRUE(pa && pr && pc);
  EXPECT_EQ(pr->kind, BufferPlan::Kind::kView);
  EXPECT_EQ(pr->alias_of, "a");
  EXPECT_EQ(pr->offset, pa->offset);
  EXPECT_EQ(pa->last, 4);
  EXPECT_NE(pa->offset, pc->offset);
  EXPECT_EQ(plan->Find("xv")->kind, BufferPlan::Kind::kView);
  EXPECT_EQ(plan->Find("xv")->alias_of, "x");
  EXPECT_EQ(plan->Find("xv")->offset, -1);
  EXPECT_EQ(plan->Find("x")->kind, BufferPlan::Kind::kExternal);
  EXPECT_EQ(plan->Find("y")->kind, BufferPlan::Kind::kExternal);
  EXPECT_EQ(plan->Find("shape"), nullptr);  // constants take no space
  CheckNoLiveOverlap(g, *plan);

  // A view that is a graph output is pinned (the kernel copies into the caller's buffer).
  Graph g2;
  Value* x2 = Act(g2, "x", {8});
  x2->is_graph_input = true;
  g2.inputs.push_back(x2);
  Value* h = Act(g2, "h", {8});
  Value* o = Act(g2, "o", {2, 4});
  Op(g2, "Relu", {x2}, {h});
  Op(g2, "Reshape", {h, g2.AddConstant("s", Tensor::FromInt64({2, 4}))}, {o});
  o->is_graph_output = true;
  g2.outputs.push_back(o);
  auto plan2 = PlanMemoryStatic(g2);
  ASSERT_TRUE(plan2.ok());
  EXPECT_EQ(plan2->Find("o")->kind, BufferPlan::Kind::kExternal);
  EXPECT_EQ(plan2->Find("h")->kind, BufferPlan::Kind::kArena);
}

// ResNet-50-shaped graph at batch 1: stem, 3+4+6+3 bottlenecks with residual adds, pooling, classifier.
TEST(MemoryPlan, ResNetLikeGraphFitsIn40PercentOfNaive) {
  Graph g;
  Value* x = Act(g, "image", {1, 3, 224, 224});
  x->is_graph_input = true;
  g.inputs.push_back(x);
  int id = 0;
  auto conv = [&](Value* in, int64_t c, int64_t h, bool relu) {
    Value* o = Act(g, "conv" + std::to_string(id++), {1, c, h, h});
    Op(g, "Conv", {in, g.AddConstant("w", Tensor(DataType::kFloat32, {1}))}, {o});
    if (!relu) return o;
    Value* r = Act(g, "relu" + std::to_string(id++), {1, c, h, h});
    Op(g, "Relu", {o}, {r});
    return r;
  };
  Value* cur = conv(x, 64, 112, true);
  Value* pooled = Act(g, "pool", {1, 64, 56, 56});
  Op(g, "MaxPool", {cur}, {pooled});
  cur = pooled;
  const int blocks[] = {3, 4, 6, 3};
  int64_t ch = 64, hw = 56;
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < blocks[s]; ++b) {
      const int64_t h = (s > 0 && b == 0) ? hw / 2 : hw;
      Value* t = conv(cur, ch, hw, true);
      t = conv(t, ch, h, true);
      t = conv(t, ch * 4, h, false);
      Value* skip = b == 0 ? conv(cur, ch * 4, h, false) : cur;
      Value* sum = Act(g, "add" + std::to_string(id++), {1, ch * 4, h, h});
      Op(g, "Add", {t, skip}, {sum});
      Value* r = Act(g, "relu" + std::to_string(id++), {1, ch * 4, h, h});
      Op(g, "Relu", {sum}, {r});
      cur = r;
      hw = h;
    }
    ch *= 2;
  }
  Value* gap = Act(g, "gap", {1, 2048, 1, 1});
  Op(g, "GlobalAveragePool", {cur}, {gap});
  Value* flat = Act(g, "flat", {1, 2048});
  Op(g, "Flatten", {gap}, {flat});
  Value* logits = Act(g, "logits", {1, 1000});
  Op(g, "Gemm", {flat, g.AddConstant("fc", Tensor(DataType::kFloat32, {1}))}, {logits});
  logits->is_graph_output = true;
  g.outputs.push_back(logits);

  auto plan = PlanMemoryStatic(g);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->Validate().ok());
  CheckNoLiveOverlap(g, *plan);
  EXPECT_LE(plan->arena_bytes, plan->naive_bytes * 40 / 100) << plan->Summary();
  EXPECT_GE(plan->arena_bytes, plan->peak_live_bytes);
  EXPECT_EQ(plan->Find("flat")->kind, BufferPlan::Kind::kView);
  EXPECT_EQ(plan->external_bytes, 3 * 224 * 224 * 4 + 1000 * 4);
}

TEST(MemoryPlan, Errors) {
  Graph g;
  Value* x = Act(g, "x", {2, 3});
  x->shape[0] = Dim::Symbol("batch");
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Value* y = Act(g, "y", {2, 3});
  Op(g, "Relu", {x}, {y});
  y->is_graph_output = true;
  g.outputs.push_back(y);
  auto r = PlanMemoryStatic(g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'x'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("static"), std::string::npos);

  MemoryPlanOptions bad;
  bad.alignment = 100;
  EXPECT_FALSE(PlanMemory(g, [](const Value&) -> Result<int64_t> { return 4; }, bad).ok());
  EXPECT_FALSE(PlanMemory(g, [](const Value&) -> Result<int64_t> { return -4; }).ok());

  // Nodes out of execution order.
  Graph g2;
  Value* a = Act(g2, "a", {1});
  a->is_graph_input = true;
  g2.inputs.push_back(a);
  Value* b = Act(g2, "b", {1});
  Value* c = Act(g2, "c", {1});
  Op(g2, "Relu", {b}, {c});
  Op(g2, "Relu", {a}, {b});
  EXPECT_FALSE(PlanMemoryStatic(g2).ok());

  // Validate catches a hand-broken plan.
  Graph g3;
  Value* i3 = Act(g3, "i", {1024});
  i3->is_graph_input = true;
  g3.inputs.push_back(i3);
  Value* p = Act(g3, "p", {1024});
  Value* q = Act(g3, "q", {1024});
  Value* o3 = Act(g3, "o", {1024});
  Op(g3, "Relu", {i3}, {p});
  Op(g3, "Relu", {p}, {q});
  Op(g3, "Add", {p, q}, {o3});
  o3->is_graph_output = true;
  g3.outputs.push_back(o3);
  auto plan = PlanMemoryStatic(g3);
  ASSERT_TRUE(plan.ok());
  MemoryPlan broken = *plan;
  for (auto& bp : broken.buffers) bp.offset = bp.kind == BufferPlan::Kind::kArena ? 0 : bp.offset;
  broken.arena_bytes = 4096;
  Status st = broken.Validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("overlap"), std::string::npos) << st.message();
  MemoryPlan misaligned = *plan;
  for (auto& bp : misaligned.buffers)
    if (bp.kind == BufferPlan::Kind::kArena) bp.offset += 4;
  EXPECT_FALSE(misaligned.Validate().ok());
}

}  // namespace
}  // namespace kiln
