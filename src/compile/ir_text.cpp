// The IR's text form (graph.h): printed for people and golden tests, parsed back exactly.
//
//   graph
//     input %0 : float32[4,8]{8,1}+0@cpu arg 0
//     input %1 : float32[16,8]{8,1}+0@cpu:grad param fc.weight
//     %2 = linear(%0, %1, _) {} : float32[4,16]{16,1}+0@cpu:grad
//     %3, %4 = max_dim(%2) {attrs=Reduce dims=1 keepdim=0 correction=0 p=2} : float32[4]{1}+0@cpu, int64[4]{1}+0@cpu
//     output %3
//
// `_` is an absent optional input. Attributes are `key=value` words: scalars (i: integer, f: float
// printed with 17 digits, b: bool), ints, str, flag, then the typed struct's name and its fields.
// Values hold no spaces. A parsed graph's constants have their metadata but no data.
#include <cstdio>
#include <sstream>

#include "compile/graph.h"

namespace tessera::compiler {
namespace {

std::string ints_text(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}
std::string double_text(double d) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}
std::string hw_text(const HW& v) { return std::to_string(v.h) + "," + std::to_string(v.w); }
std::string scalar_text(const Scalar& s) {
  if (s.is_bool()) return std::string("b") + (s.to<bool>() ? "1" : "0");
  if (s.is_integral()) return "i" + std::to_string(s.to_int());
  return "f" + double_text(s.to_double());
}

std::string attrs_text(const OpAttrs& a) {
  std::vector<std::string> w;
  if (!a.scalars.empty()) {
    std::string s = "scalars=";
    for (size_t i = 0; i < a.scalars.size(); ++i) s += (i ? "," : "") + scalar_text(a.scalars[i]);
    w.push_back(s);
  }
  if (!a.ints.empty()) w.push_back("ints=" + ints_text(a.ints));
  if (!a.str.empty()) w.push_back("str=" + a.str);
  if (a.flag) w.push_back("flag=1");
  std::visit(
      [&](const auto& t) {
        using T = std::decay_t<decltype(t)>;
        if constexpr (std::is_same_v<T, ConvAttrs>) {
          w.insert(w.end(), {"attrs=Conv", "stride=" + hw_text(t.stride), "padding=" + hw_text(t.padding),
                             "dilation=" + hw_text(t.dilation), "output_padding=" + hw_text(t.output_padding),
                             "groups=" + std::to_string(t.groups), "kernel=" + hw_text(t.kernel)});
        } else if constexpr (std::is_same_v<T, PoolAttrs>) {
          w.insert(w.end(), {"attrs=Pool", "kernel=" + hw_text(t.kernel), "stride=" + hw_text(t.stride),
                             "padding=" + hw_text(t.padding), "dilation=" + hw_text(t.dilation),
                             std::string("ceil_mode=") + (t.ceil_mode ? "1" : "0"),
                             std::string("count_include_pad=") + (t.count_include_pad ? "1" : "0")});
        } else if constexpr (std::is_same_v<T, ReduceAttrs>) {
          w.insert(w.end(), {"attrs=Reduce", "dims=" + ints_text(t.dims), std::string("keepdim=") + (t.keepdim ? "1" : "0"),
                             "correction=" + double_text(t.correction), "p=" + double_text(t.p)});
        } else if constexpr (std::is_same_v<T, NormAttrs>) {
          w.insert(w.end(), {"attrs=Norm", "normalized_shape=" + ints_text(t.normalized_shape), "eps=" + double_text(t.eps)});
        } else if constexpr (std::is_same_v<T, BatchNormAttrs>) {
          w.insert(w.end(), {"attrs=BatchNorm", std::string("training=") + (t.training ? "1" : "0"), "eps=" + double_text(t.eps)});
        } else if constexpr (std::is_same_v<T, IndexAttrs>) {
          w.insert(w.end(), {"attrs=Index", "dim=" + std::to_string(t.dim), "alpha=" + double_text(t.alpha),
                             std::string("accumulate=") + (t.accumulate ? "1" : "0"),
                             "padding_idx=" + std::to_string(t.padding_idx)});
        }
      },
      a.typed);
  std::string s = "{";
  for (size_t i = 0; i < w.size(); ++i) s += (i ? " " : "") + w[i];
  return s + "}";
}

// ---- parsing

[[noreturn]] void bad(int line, const std::string& what) {
  TS_THROW(ValueError, "parse_graph: line ", line, ": ", what);
}

std::vector<int64_t> parse_ints(const std::string& s, int line) {
  std::vector<int64_t> v;
  if (s.empty()) return v;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    try {
      size_t used = 0;
      v.push_back(std::stoll(tok, &used));
      if (used != tok.size()) bad(line, "not an integer: '" + tok + "'");
    } catch (const std::logic_error&) {
      bad(line, "not an integer: '" + tok + "'");
    }
  }
  return v;
}
double parse_double(const std::string& s, int line) {
  try {
    size_t used = 0;
    double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::logic_error&) {
  }
  bad(line, "not a number: '" + s + "'");
}
HW parse_hw(const std::string& s, int line) {
  std::vector<int64_t> v = parse_ints(s, line);
  if (v.size() != 2) bad(line, "expected two integers, got '" + s + "'");
  return HW{v[0], v[1]};
}
bool parse_bool(const std::string& s, int line) {
  if (s == "1") return true;
  if (s == "0") return false;
  bad(line, "expected 0 or 1, got '" + s + "'");
}

DType parse_dtype(const std::string& s, int line) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (s == dtype_name(static_cast<DType>(i))) return static_cast<DType>(i);
  bad(line, "unknown dtype '" + s + "'");
}

TensorMeta parse_meta(const std::string& s, int line) {
  TensorMeta m;
  const size_t lb = s.find('['), rb = s.find(']'), lc = s.find('{'), rc = s.find('}'), plus = s.find('+'),
               at = s.find('@');
  if (lb == std::string::npos || rb == std::string::npos || lc != rb + 1 || rc == std::string::npos ||
      plus != rc + 1 || at == std::string::npos)
    bad(line, "malformed tensor metadata '" + s + "'");
  m.dtype = parse_dtype(s.substr(0, lb), line);
  m.sizes = parse_ints(s.substr(lb + 1, rb - lb - 1), line);
  m.strides = parse_ints(s.substr(lc + 1, rc - lc - 1), line);
  if (m.sizes.size() != m.strides.size()) bad(line, "sizes and strides differ in rank in '" + s + "'");
  m.offset = parse_ints(s.substr(plus + 1, at - plus - 1), line).at(0);
  std::string dev = s.substr(at + 1);
  if (dev.size() > 5 && dev.substr(dev.size() - 5) == ":grad") {
    m.requires_grad = true;
    dev = dev.substr(0, dev.size() - 5);
  }
  try {
    m.device = Device(dev);
  } catch (const Error&) {
    bad(line, "unknown device '" + dev + "'");
  }
  return m;
}

int parse_value_ref(const std::string& s, int line, size_t num_values) {
  if (s.size() < 2 || s[0] != '%') bad(line, "expected a value like %3, got '" + s + "'");
  const int v = static_cast<int>(parse_ints(s.substr(1), line).at(0));
  if (v < 0 || static_cast<size_t>(v) >= num_values) bad(line, "value " + s + " is not defined before its use");
  return v;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (!cur.empty() || !out.empty()) out.push_back(cur);
  return out;
}

// Metadata lists are split at ", " (a list of metas: the commas inside a meta have no space after them).
std::vector<std::string> split_metas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(", ", start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 2;
  }
  return out;
}

OpAttrs parse_attrs(const std::string& body, int line) {
  OpAttrs a;
  std::stringstream ss(body);
  std::string word, typed;
  ConvAttrs conv;
  PoolAttrs pool;
  ReduceAttrs red;
  NormAttrs norm;
  BatchNormAttrs bn;
  IndexAttrs idx;
  while (ss >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) bad(line, "expected key=value in the attributes, got '" + word + "'");
    const std::string k = word.substr(0, eq), v = word.substr(eq + 1);
    if (k == "scalars") {
      for (const std::string& t : split_list(v)) {
        if (t.size() < 2) bad(line, "malformed scalar '" + t + "'");
        const std::string body2 = t.substr(1);
        if (t[0] == 'b') a.scalars.emplace_back(parse_bool(body2, line));
        else if (t[0] == 'i') a.scalars.emplace_back(parse_ints(body2, line).at(0));
        else if (t[0] == 'f') a.scalars.emplace_back(parse_double(body2, line));
        else bad(line, "malformed scalar '" + t + "'");
      }
    } else if (k == "ints") {
      a.ints = parse_ints(v, line);
    } else if (k == "str") {
      a.str = v;
    } else if (k == "flag") {
      a.flag = parse_bool(v, line);
    } else if (k == "attrs") {
      typed = v;
    } else if (typed == "Conv") {
      if (k == "stride") conv.stride = parse_hw(v, line);
      else if (k == "padding") conv.padding = parse_hw(v, line);
      else if (k == "dilation") conv.dilation = parse_hw(v, line);
      else if (k == "output_padding") conv.output_padding = parse_hw(v, line);
      else if (k == "groups") conv.groups = parse_ints(v, line).at(0);
      else if (k == "kernel") conv.kernel = parse_hw(v, line);
      else bad(line, "unknown Conv attribute '" + k + "'");
    } else if (typed == "Pool") {
      if (k == "kernel") pool.kernel = parse_hw(v, line);
      else if (k == "stride") pool.stride = parse_hw(v, line);
      else if (k == "padding") pool.padding = parse_hw(v, line);
      else if (k == "dilation") pool.dilation = parse_hw(v, line);
      else if (k == "ceil_mode") pool.ceil_mode = parse_bool(v, line);
      else if (k == "count_include_pad") pool.count_include_pad = parse_bool(v, line);
      else bad(line, "unknown Pool attribute '" + k + "'");
    } else if (typed == "Reduce") {
      if (k == "dims") red.dims = parse_ints(v, line);
      else if (k == "keepdim") red.keepdim = parse_bool(v, line);
      else if (k == "correction") red.correction = parse_double(v, line);
      else if (k == "p") red.p = parse_double(v, line);
      else bad(line, "unknown Reduce attribute '" + k + "'");
    } else if (typed == "Norm") {
      if (k == "normalized_shape") norm.normalized_shape = parse_ints(v, line);
      else if (k == "eps") norm.eps = parse_double(v, line);
      else bad(line, "unknown Norm attribute '" + k + "'");
    } else if (typed == "BatchNorm") {
      if (k == "training") bn.training = parse_bool(v, line);
      else if (k == "eps") bn.eps = parse_double(v, line);
      else bad(line, "unknown BatchNorm attribute '" + k + "'");
    } else if (typed == "Index") {
      if (k == "dim") idx.dim = parse_ints(v, line).at(0);
      else if (k == "alpha") idx.alpha = parse_double(v, line);
      else if (k == "accumulate") idx.accumulate = parse_bool(v, line);
      else if (k == "padding_idx") idx.padding_idx = parse_ints(v, line).at(0);
      else bad(line, "unknown Index attribute '" + k + "'");
    } else {
      bad(line, "unknown attribute '" + k + "'");
    }
  }
  if (typed == "Conv") a.typed = conv;
  else if (typed == "Pool") a.typed = pool;
  else if (typed == "Reduce") a.typed = red;
  else if (typed == "Norm") a.typed = norm;
  else if (typed == "BatchNorm") a.typed = bn;
  else if (typed == "Index") a.typed = idx;
  else if (!typed.empty()) bad(line, "unknown attribute struct '" + typed + "'");
  return a;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

std::string Graph::to_text() const {
  std::ostringstream os;
  os << "graph\n";
  for (const GraphInput& in : inputs) {
    os << "  input %" << in.value << " : " << to_string(values[in.value].meta) << " " << input_kind_name(in.kind);
    if (in.kind == InputKind::Argument || in.kind == InputKind::Saved) os << " " << in.index;
    if (in.kind == InputKind::Parameter) os << " " << in.name;
    os << "\n";
  }
  for (const Node& n : nodes) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << "%" << n.outputs[i];
    os << " = " << op_name(n.op) << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      os << (i ? ", " : "");
      if (n.inputs[i] < 0) os << "_";
      else os << "%" << n.inputs[i];
    }
    os << ") " << attrs_text(n.attrs) << " : ";
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << to_string(values[n.outputs[i]].meta);
    os << "\n";
  }
  os << "  output";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", %" : " %") << outputs[i];
  os << "\n";
  return os.str();
}

Graph parse_graph(const std::string& text) {
  Graph g;
  std::stringstream ss(text);
  std::string raw;
  int line = 0;
  bool header = false, done = false;
  // Values are numbered as printed; a parsed graph keeps the numbers, so it tracks the largest.
  auto define = [&](int v, const TensorMeta& m, int node, int k) {
    if (v < 0) bad(line, "negative value number");
    if (static_cast<size_t>(v) >= g.values.size()) g.values.resize(v + 1, Value{TensorMeta{}, -2, 0});
    if (g.values[v].node != -2) bad(line, "value %" + std::to_string(v) + " is defined twice");
    g.values[v] = Value{m, node, k};
  };
  auto ref = [&](const std::string& s) {
    const int v = parse_value_ref(s, line, g.values.size());
    if (g.values[v].node == -2) bad(line, "value " + s + " is not defined before its use");
    return v;
  };
  while (std::getline(ss, raw)) {
    ++line;
    const std::string s = trim(raw);
    if (s.empty()) continue;
    if (!header) {
      if (s != "graph") bad(line, "expected 'graph'");
      header = true;
      continue;
    }
    if (done) bad(line, "text after the output line");
    if (s.rfind("input ", 0) == 0) {
      std::stringstream ls(s.substr(6));
      std::string vref, colon, meta, kind, extra;
      ls >> vref >> colon >> meta >> kind;
      if (colon != ":") bad(line, "expected 'input %N : META KIND'");
      if (vref.size() < 2 || vref[0] != '%') bad(line, "expected a value like %0");
      const int v = static_cast<int>(parse_ints(vref.substr(1), line).at(0));
      define(v, parse_meta(meta, line), -1, 0);
      GraphInput in;
      in.value = v;
      if (kind == "arg") {
        in.kind = InputKind::Argument;
        ls >> extra;
        in.index = parse_ints(extra, line).at(0);
      } else if (kind == "param") {
        in.kind = InputKind::Parameter;
        ls >> in.name;
        if (in.name.empty()) bad(line, "a param input needs its name");
      } else if (kind == "const") {
        in.kind = InputKind::Constant;
      } else if (kind == "saved") {
        in.kind = InputKind::Saved;
        ls >> extra;
        in.index = parse_ints(extra, line).at(0);
      } else {
        bad(line, "unknown input kind '" + kind + "'");
      }
      g.inputs.push_back(in);
    } else if (s.rfind("output", 0) == 0) {
      for (const std::string& t : split_list(s.substr(6)))
        if (!t.empty()) g.outputs.push_back(ref(t));
      done = true;
    } else {
      const size_t eq = s.find(" = "), lp = s.find('(', eq), rp = s.find(')', lp), lb = s.find('{', rp),
                   rb = s.find('}', lb), colon = s.find(" : ", rb);
      if (eq == std::string::npos || lp == std::string::npos || rp == std::string::npos || lb == std::string::npos ||
          rb == std::string::npos || colon == std::string::npos)
        bad(line, "expected '%N = op(inputs) {attrs} : META'");
      Node n;
      const std::string name = s.substr(eq + 3, lp - eq - 3);
      std::optional<OpId> op = op_from_name(name);
      if (!op) bad(line, "unknown op '" + name + "'");
      n.op = *op;
      for (const std::string& t : split_list(s.substr(lp + 1, rp - lp - 1))) n.inputs.push_back(t == "_" ? -1 : ref(t));
      n.attrs = parse_attrs(s.substr(lb + 1, rb - lb - 1), line);
      const std::vector<std::string> outs = split_list(s.substr(0, eq));
      const std::vector<std::string> metas = split_metas(s.substr(colon + 3));
      if (outs.size() != metas.size()) bad(line, "the node has " + std::to_string(outs.size()) + " outputs and " +
                                                     std::to_string(metas.size()) + " metadata entries");
      const int node = static_cast<int>(g.nodes.size());
      for (size_t k = 0; k < outs.size(); ++k) {
        if (outs[k].size() < 2 || outs[k][0] != '%') bad(line, "expected an output like %3");
        const int v = static_cast<int>(parse_ints(outs[k].substr(1), line).at(0));
        define(v, parse_meta(metas[k], line), node, static_cast<int>(k));
        n.outputs.push_back(v);
      }
      g.nodes.push_back(std::move(n));
    }
  }
  if (!header) bad(line, "empty text");
  if (!done) bad(line, "no output line");
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].node == -2) g.values[v].node = -1;  // unused numbers (removed nodes): left undefined
  return g;
}

}  // namespace tessera::compiler
