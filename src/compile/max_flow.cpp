// Dinic's maximum flow (max_flow.h): breadth-first levels from the source, then a blocking flow of
// depth-first pushes along strictly increasing levels, until the sink is out of reach. O(V^2 E) at
// worst; a joint graph's network (a few thousand vertices, each with a handful of edges) takes
// milliseconds.
#include "compile/max_flow.h"

#include <algorithm>
#include <queue>

#include "tessera/error.h"

namespace tessera::compiler {

int FlowNetwork::add_vertex() {
  adjacency_.emplace_back();
  return static_cast<int>(adjacency_.size()) - 1;
}

void FlowNetwork::add_edge(int from, int to, int64_t capacity) {
  TS_CHECK(from >= 0 && from < vertices() && to >= 0 && to < vertices(), ValueError, "FlowNetwork: edge ", from,
           " -> ", to, " names a vertex that does not exist (", vertices(), " vertices)");
  TS_CHECK(capacity >= 0, ValueError, "FlowNetwork: edge ", from, " -> ", to, " has a negative capacity ", capacity);
  adjacency_[from].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({to, std::min(capacity, kInfinite)});
  adjacency_[to].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({from, 0});
}

bool FlowNetwork::levels_from(int source, int sink) {
  level_.assign(adjacency_.size(), -1);
  std::queue<int> q;
  level_[source] = 0;
  q.push(source);
  while (!q.empty()) {
    const int v = q.front();
    q.pop();
    for (int e : adjacency_[v]) {
      const Edge& ed = edges_[e];
      if (ed.residual > 0 && level_[ed.to] < 0) {
        level_[ed.to] = level_[v] + 1;
        q.push(ed.to);
      }
    }
  }
  return level_[sink] >= 0;
}

int64_t FlowNetwork::push(int v, int sink, int64_t limit) {
  if (v == sink) return limit;
  for (int& i = next_edge_[v]; i < static_cast<int>(adjacency_[v].size()); ++i) {
    const int e = adjacency_[v][i];
    Edge& ed = edges_[e];
    if (ed.residual <= 0 || level_[ed.to] != level_[v] + 1) continue;
    const int64_t sent = push(ed.to, sink, std::min(limit, ed.residual));
    if (sent > 0) {
      ed.residual -= sent;
      edges_[e ^ 1].residual += sent;
      return sent;
    }
  }
  return 0;
}

int64_t FlowNetwork::max_flow(int source, int sink) {
  TS_CHECK(source_ < 0, ValueError, "FlowNetwork: max_flow runs once per network");
  TS_CHECK(source >= 0 && source < vertices() && sink >= 0 && sink < vertices() && source != sink, ValueError,
           "FlowNetwork: source ", source, " and sink ", sink, " must be two vertices of the ", vertices());
  source_ = source;
  sink_ = sink;
  int64_t flow = 0;
  while (levels_from(source, sink)) {
    next_edge_.assign(adjacency_.size(), 0);
    while (const int64_t sent = push(source, sink, kInfinite)) {
      flow += sent;
      if (flow >= kInfinite) return kInfinite;
    }
  }
  return flow;
}

std::vector<char> FlowNetwork::reached_from_source() const {
  TS_CHECK(source_ >= 0, ValueError, "FlowNetwork: the cut is known after max_flow");
  std::vector<char> seen(adjacency_.size(), 0);
  std::vector<int> stack{source_};
  seen[source_] = 1;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    for (int e : adjacency_[v])
      if (edges_[e].residual > 0 && !seen[edges_[e].to]) {
        seen[edges_[e].to] = 1;
        stack.push_back(edges_[e].to);
      }
  }
  return seen;
}

std::vector<char> FlowNetwork::reaching_sink() const {
  TS_CHECK(sink_ >= 0, ValueError, "FlowNetwork: the cut is known after max_flow");
  // u reaches v in the residual graph over edge e (u -> v) when e has residual: walk the edges
  // backwards from the sink, through each vertex's reverse edges (e ^ 1 leaves v towards u).
  std::vector<char> seen(adjacency_.size(), 0);
  std::vector<int> stack{sink_};
  seen[sink_] = 1;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    for (int r : adjacency_[v]) {
      const int e = r ^ 1;  // the edge into v that r pairs with
      const int u = edges_[r].to;
      if (edges_[e].residual > 0 && !seen[u]) {
        seen[u] = 1;
        stack.push_back(u);
      }
    }
  }
  return seen;
}

}  // namespace tessera::compiler
