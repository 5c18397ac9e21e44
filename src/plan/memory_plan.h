// Memory planner: assigns every activation of a graph an offset in one arena so that values whose lifetimes
// overlap never share bytes, and values that are never live together reuse the same memory.
//
// Lifetimes run over the execution order (node index of the first definition .. node index of the last use,
// both inclusive, so a node's outputs never overlap its inputs; with auxiliary streams, buffers also share bytes only
// where every use of one is ordered before the other's definition). Constants take no arena space. Graph inputs
// and outputs are pinned: they are bound by the caller (kExternal) and share nothing. Outputs of view ops
// (Reshape, Flatten, Squeeze, Unsqueeze, Identity: the CPU kernels return the input's buffer) are views of
// their input: they take no space of their own and extend the lifetime of the value they view. Offsets are
// aligned (256 bytes by default). Placement is greedy best-fit over free address gaps among the buffers that
// are live at the same time, in two orders (largest first; and "by breadth": the buffers of the busiest
// step first), then a two-ended packing (bottom-up in gaps, flush against the top in the topmost gap; in
// size order and in definition order) under a limit that is binary-searched between the peak live bytes and the best greedy arena; the smallest wins.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln {

struct BufferPlan {
  enum class Kind : int8_t {
    kArena = 0,     // its own region in the arena
    kExternal = 1,  // a graph input or output: memory the caller binds
    kView = 2,      // the same memory as `alias_of` (an arena, external or constant value)
  };
  std::string name;               // the value's name
  const Value* value = nullptr;   // the value in the planned graph (null after loading from an engine)
  Kind kind = Kind::kArena;
  int64_t offset = -1;            // arena offset (kArena, and kView of an arena value); -1 otherwise
  int64_t bytes = 0;              // the value's size at the largest shapes (unaligned)
  int32_t first = -1, last = -1;  // lifetime in node indices (inclusive); a view's root covers its views
  std::string alias_of;           // kView: the name of the value whose memory it uses (the root)
};

struct MemoryPlan {
  std::vector<BufferPlan> buffers;  // one per activation (non-constant value), in execution order of definition
  int64_t alignment = 256;
  int64_t arena_bytes = 0;      // size of the arena (max offset + aligned size)
  int64_t naive_bytes = 0;      // sum of the aligned sizes of every kArena buffer (one buffer per activation)
  int64_t peak_live_bytes = 0;  // max over time of the aligned bytes live at once: a lower bound of arena_bytes
  int64_t external_bytes = 0;   // sum of the graph inputs' and outputs' bytes (bound by the caller)

  // The buffer of value `name`, or nullptr.
  const BufferPlan* Find(const std::string& name) const;
  // Checks the plan: offsets aligned and inside the arena, no two arena buffers that are live at the same
  // time overlap in memory, views point at a known root no smaller than themselves, the reported totals match.
  Status Validate() const;
  // One line: "arena 12.3 MiB (naive 98.1 MiB, 12.5%; peak live 11.9 MiB), 161 buffers, 48 views".
  std::string Summary() const;
};

struct StreamSchedule;

struct MemoryPlanOptions {
  int64_t alignment = 256;  // power of two
  // Nodes on several streams (plan/streams.h): two buffers then share bytes only where every use of one (its
  // definition, reads, and its views') completes before the other is defined. Null: one stream.
  const StreamSchedule* schedule = nullptr;
};

// Bytes a value needs at the largest shapes; an error names the value when it cannot be known.
using ValueBytesFn = std::function<Result<int64_t>(const Value&)>;

// Plans `g` (nodes in execution order). `bytes` is asked for every non-constant value that nodes define or
// graph inputs/outputs name.
Result<MemoryPlan> PlanMemory(const Graph& g, const ValueBytesFn& bytes, const MemoryPlanOptions& opts = {});

// Bytes from the value's inferred static shape and dtype (after import with fixed input shapes); an error
// naming the value when the shape has symbolic or unknown dims or the dtype has no fixed size.
Result<int64_t> StaticValueBytes(const Value& v);
// Checks that `plan` (of `g`) shares bytes only between buffers whose uses are ordered one before the other under
// `sc` (an engine loaded with auxiliary streams); an error names two that are not.
Status CheckPlanForStreams(const MemoryPlan& plan, const Graph& g, const StreamSchedule& sc);

// PlanMemory with StaticValueBytes.
Result<MemoryPlan> PlanMemoryStatic(const Graph& g, const MemoryPlanOptions& opts = {});

// True for op types whose first output may share the first input's buffer (a view).
bool IsViewOp(const Node& n);

}  // namespace kiln
