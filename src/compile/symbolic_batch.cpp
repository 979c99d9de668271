// Symbolic batch sizes (symbolic_batch.h, Note [Symbolic batch]).
#include "compile/symbolic_batch.h"

#include <algorithm>
#include <sstream>

#include "ops/table/op_table.h"

namespace tessera::compiler {
namespace {

// Where an integer of a graph sits, for describe() and unify_graphs' reasons.
struct IntSite {
  bool is_value = true;  // a value's metadata; otherwise a node's attributes
  int id = 0;            // the value or node
  const char* field = "";
  size_t index = 0;
};

std::string site_text(const Graph& g, const IntSite& s) {
  std::ostringstream os;
  if (s.is_value) os << "%" << s.id;
  else os << "node " << s.id << " (" << op_name(g.nodes[s.id].op) << ")";
  os << " " << s.field << "[" << s.index << "]";
  return os.str();
}

template <class M, class F>
void visit_meta(M& m, int id, F&& f) {
  for (size_t i = 0; i < m.sizes.size(); ++i) f(m.sizes[i], IntSite{true, id, "sizes", i});
  for (size_t i = 0; i < m.strides.size(); ++i) f(m.strides[i], IntSite{true, id, "strides", i});
  f(m.offset, IntSite{true, id, "offset", 0});
}

// Every batch-dependent integer of `g` in a fixed order. For a const graph, f receives const refs.
template <class G, class F>
void visit_graph(G& g, F&& f) {
  for (size_t v = 0; v < g.values.size(); ++v) visit_meta(g.values[v].meta, static_cast<int>(v), f);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    auto& a = g.nodes[n].attrs;
    const int id = static_cast<int>(n);
    for (size_t i = 0; i < a.ints.size(); ++i) f(a.ints[i], IntSite{false, id, "ints", i});
    for (size_t i = 0; i < a.scalars.size(); ++i) {
      if (!a.scalars[i].is_integral()) continue;
      int64_t x = a.scalars[i].to_int();
      f(x, IntSite{false, id, "scalars", i});
      if constexpr (!std::is_const_v<G>) a.scalars[i] = Scalar(x);
    }
    if (auto* norm = std::get_if<NormAttrs>(&a.typed))
      for (size_t i = 0; i < norm->normalized_shape.size(); ++i)
        f(norm->normalized_shape[i], IntSite{false, id, "normalized_shape", i});
  }
}

}  // namespace

std::optional<AffineInt> fit_affine(int64_t b1, int64_t v1, int64_t b2, int64_t v2) {
  if (v1 == v2) return AffineInt{0, v1};
  if (b1 == b2) return std::nullopt;
  const int64_t dv = v2 - v1, db = b2 - b1;
  if (dv % db != 0) return std::nullopt;
  const int64_t a = dv / db;
  return AffineInt{a, v1 - a * b1};
}

std::vector<int64_t> batch_ints(const Graph& g) {
  std::vector<int64_t> out;
  visit_graph(g, [&](const int64_t& x, const IntSite&) { out.push_back(x); });
  return out;
}

void set_batch_ints(Graph& g, const std::vector<int64_t>& ints) {
  size_t k = 0;
  visit_graph(g, [&](int64_t& x, const IntSite&) {
    TS_CHECK(k < ints.size(), ValueError, "set_batch_ints: ", ints.size(), " integers for a graph that has more");
    x = ints[k++];
  });
  TS_CHECK(k == ints.size(), ValueError, "set_batch_ints: ", ints.size(), " integers for a graph of ", k);
}

std::vector<int64_t> batch_ints(const TensorMeta& m) {
  std::vector<int64_t> out;
  visit_meta(m, 0, [&](const int64_t& x, const IntSite&) { out.push_back(x); });
  return out;
}

void set_batch_ints(TensorMeta& m, const std::vector<int64_t>& ints) {
  size_t k = 0;
  visit_meta(m, 0, [&](int64_t& x, const IntSite&) { x = ints.at(k++); });
  TS_CHECK(k == ints.size(), ValueError, "set_batch_ints: ", ints.size(), " integers for a tensor of ", k);
}

Graph SymbolicGraph::at(int64_t batch) const {
  Graph g = base;
  std::vector<int64_t> v(ints.size());
  for (size_t i = 0; i < ints.size(); ++i) {
    v[i] = ints[i].at(batch);
    TS_CHECK(ints[i].a == 0 || v[i] >= 2, ValueError, "an integer that depends on the batch size is ", v[i],
             " at batch size ", batch, " (sizes 0 and 1 are specialized: this batch size is captured)");
  }
  set_batch_ints(g, v);
  return g;
}

std::string SymbolicGraph::describe() const {
  std::ostringstream os;
  size_t k = 0;
  visit_graph(base, [&](const int64_t&, const IntSite& s) {
    const AffineInt& a = ints[k++];
    if (a.a == 0) return;
    os << "  " << site_text(base, s) << " = " << (a.a == 1 ? std::string() : std::to_string(a.a) + "*") << "B";
    if (a.b) os << (a.b > 0 ? " + " : " - ") << (a.b > 0 ? a.b : -a.b);
    os << "\n";
  });
  return os.str();
}

std::optional<SymbolicGraph> unify_graphs(const Graph& g1, int64_t b1, const Graph& g2, int64_t b2, std::string* why) {
  auto fail = [&](const std::string& m) -> std::optional<SymbolicGraph> {
    if (why) *why = m;
    return std::nullopt;
  };
  if (g1.values.size() != g2.values.size() || g1.nodes.size() != g2.nodes.size() || g1.inputs.size() != g2.inputs.size())
    return fail("the graphs differ in size (" + std::to_string(g1.nodes.size()) + " and " +
                std::to_string(g2.nodes.size()) + " nodes)");
  std::vector<int64_t> i1 = batch_ints(g1), i2 = batch_ints(g2);
  if (i1.size() != i2.size()) return fail("the graphs' shapes or attributes differ in rank");
  // Structure: the two graphs with every batch-dependent integer zeroed print the same, and hold the
  // same constants.
  Graph m1 = g1, m2 = g2;
  set_batch_ints(m1, std::vector<int64_t>(i1.size(), 0));
  set_batch_ints(m2, std::vector<int64_t>(i2.size(), 0));
  const std::string t1 = m1.to_text(), t2 = m2.to_text();
  if (t1 != t2) {
    size_t line = 1, p = 0;
    while (p < t1.size() && p < t2.size() && t1[p] == t2[p]) line += t1[p++] == '\n';
    auto line_of = [](const std::string& t, size_t at) {
      const size_t s = at == 0 ? std::string::npos : t.rfind('\n', at - 1);
      const size_t b = s == std::string::npos ? 0 : s + 1;
      return t.substr(b, t.find('\n', b) - b);
    };
    return fail("line " + std::to_string(line) + " of the graphs differs by more than their integers: '" +
                line_of(t1, p) + "' against '" + line_of(t2, p) + "' (integers shown as 0)");
  }
  for (size_t i = 0; i < g1.inputs.size(); ++i)
    if (g1.inputs[i].kind == InputKind::Constant &&
        g1.inputs[i].constant.impl() != g2.inputs[i].constant.impl())
      return fail("input %" + std::to_string(g1.inputs[i].value) + " is another constant tensor in each capture");
  SymbolicGraph s;
  s.base = g1;
  s.ints.reserve(i1.size());
  size_t k = 0;
  std::string bad;
  visit_graph(g1, [&](const int64_t&, const IntSite& site) {
    const size_t j = k++;
    std::optional<AffineInt> a = fit_affine(b1, i1[j], b2, i2[j]);
    if (!a) {
      if (bad.empty())
        bad = site_text(g1, site) + " is " + std::to_string(i1[j]) + " at batch size " + std::to_string(b1) + " and " +
              std::to_string(i2[j]) + " at " + std::to_string(b2) + ": not a whole-number line in the batch size";
      a = AffineInt{};
    }
    // An integer that depends on B and is 0 or 1 in a capture: specialized there (a size 1 broadcasts,
    // a squeeze drops it), so not a line.
    if (a->a != 0 && bad.empty() && (i1[j] < 2 || i2[j] < 2))
      bad = site_text(g1, site) + " depends on the batch size and is " + std::to_string(std::min(i1[j], i2[j])) +
            " in a capture: sizes 0 and 1 are specialized";
    s.symbolic += a->a != 0;
    s.ints.push_back(*a);
  });
  if (!bad.empty()) return fail(bad);
  return s;
}

int64_t batch_size_of(const std::vector<Tensor>& args) {
  for (const Tensor& t : args)
    if (t.defined() && t.dim() >= 1) return t.size(0);
  return -1;
}

}  // namespace tessera::compiler
