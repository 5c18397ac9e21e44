// Auxiliary streams (BuilderConfig::setMaxAuxStreams, kiln build --maxAuxStreams): which stream each node of an
// engine runs on, and the events that order work across streams.
//
// AssignStreams walks the nodes in execution order and keeps chains together: a node goes to the stream whose last
// node is one of its producers; a node that starts a new branch (its producers' streams have moved on to a sibling)
// goes to an auxiliary stream that adds no dependency it does not already have, else to the auxiliary stream used
// longest ago. Independent branches (Inception-style blocks, detector heads, the Q and K/V paths before an
// attention) then run at the same time. Stream 0 is the caller's (main) stream.
//
// ScheduleStreams derives the synchronization from an assignment: before a node, a wait on the event recorded after
// each producer on another stream that it is not already ordered after (through earlier waits), and, per node, a
// vector clock that answers "does u's work complete before p starts". The memory planner uses it (a buffer may be
// reused only by work that is ordered after every use of it), and the CUDA runtime follows the same waits, so the
// build and the run agree. At run time the auxiliary streams also wait for the main stream when an enqueue starts,
// and the main stream for them when it ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln {

// Stream per node: 0 (main) .. max_aux. max_aux <= 0 puts every node on stream 0.
std::vector<int32_t> AssignStreams(const Graph& g, int max_aux);

struct StreamSchedule {
  int32_t num_streams = 1;                  // 1 + the auxiliary streams the assignment may use
  std::vector<int32_t> stream;              // per node
  std::vector<std::vector<int32_t>> waits;  // per node: events its stream waits on before it
  std::vector<int32_t> record;              // per node: the event recorded on its stream after it, or -1
  int32_t events = 0;
  // Per node, per stream: the position of the last node of that stream whose work completes before this node starts
  // (the node itself for its own stream), -1 where none.
  std::vector<std::vector<int32_t>> clock;

  // True where u's work completes before p starts (u == p counts as ordered).
  bool Ordered(size_t u, size_t p) const { return clock[p][stream[u]] >= static_cast<int32_t>(u); }
  // Whether stream s has any node.
  bool Uses(int32_t s) const;
  // Auxiliary streams with at least one node.
  int32_t AuxUsed() const;
};

// The schedule of `streams` (one per node of `g`, each in [0, num_streams)); an error names a bad entry (engines
// loaded from files pass through here).
Result<StreamSchedule> ScheduleStreams(const Graph& g, const std::vector<int32_t>& streams, int32_t num_streams);

}  // namespace kiln
