// A maximum s-t flow and its minimum cuts (Dinic's algorithm), for the min-cut partition of a joint
// graph (Note [Min-cut partition] in partition.h) and nothing else of the compiler's.
//
// Capacities are bytes (int64). kInfinite stands for an edge no cut may cross; a flow that reaches it
// means that every s-t cut crosses such an edge, and max_flow() returns kInfinite. After max_flow(),
// the residual graph gives the two extreme minimum cuts: the vertices the source still reaches (the
// smallest source side) and the vertices that still reach the sink (the smallest sink side). Every
// minimum cut lies between them; which one a caller takes is its tie-break.
#pragma once
#include <cstdint>
#include <vector>

namespace tessera::compiler {

class FlowNetwork {
 public:
  // Larger than any sum of finite capacities the partition builds (2^60 bytes), small enough that
  // a flow of two of them does not overflow.
  static constexpr int64_t kInfinite = int64_t{1} << 60;

  explicit FlowNetwork(int vertices = 0) : adjacency_(vertices) {}
  int add_vertex();
  int vertices() const { return static_cast<int>(adjacency_.size()); }
  // A directed edge; capacity >= 0, kInfinite or more for an uncuttable one.
  void add_edge(int from, int to, int64_t capacity);

  // The value of a maximum flow from `source` to `sink` (kInfinite when no finite cut exists). Runs
  // once per network.
  int64_t max_flow(int source, int sink);
  // After max_flow: per vertex, whether the source reaches it in the residual graph.
  std::vector<char> reached_from_source() const;
  // After max_flow: per vertex, whether it reaches the sink in the residual graph.
  std::vector<char> reaching_sink() const;

 private:
  struct Edge {
    int to;
    int64_t residual;  // capacity left; the paired reverse edge holds the flow sent
  };
  bool levels_from(int source, int sink);
  int64_t push(int v, int sink, int64_t limit);

  std::vector<Edge> edges_;                 // edge e and its reverse e ^ 1
  std::vector<std::vector<int>> adjacency_;  // per vertex, its edges (both directions)
  std::vector<int> level_, next_edge_;
  int source_ = -1, sink_ = -1;
};

}  // namespace tessera::compiler
