// The random program generator (see generator.h). Each emit_* function adds one op (sometimes a short
// run: a domain guard before a log, a factory and the op that uses it) to the program and returns
// false when the chosen operand does not suit it, so that the main loop draws again.
//
// Values carry their shape, dtype, a rough bound of their magnitude (to keep exp, pow and products
// finite) and whether they are known positive (so log, sqrt and division get a guard only when they
// need one).
#include "programs/generator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace tessera::programs {
namespace {

struct Val {
  Shape shape;
  DType dtype;
  double mag;      // rough bound of |value|
  bool positive;   // known > 0
  bool is_input;
};

int64_t prod_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

bool is_float(DType d) { return d == kFloat64 || d == kFloat32 || d == kBFloat16 || d == kFloat16; }

class Gen {
 public:
  Gen(uint64_t seed, const GeneratorOptions& o) : rng_(seed * 0x9E3779B97F4A7C15ull + 12345), o_(o) {
    p_.seed = seed;
  }

  Program run() {
    pick_dtype();
    const int rank = chance(0.08) ? 0 : static_cast<int>(uniform(1, 4));
    first_ = add_input(random_shape(rank), p_.dtype, main_kind());
    const int target = static_cast<int>(uniform(o_.min_ops, o_.max_ops));
    int attempts = 0;
    while (ops_ < target && attempts < 400) {
      ++attempts;
      emit_one();
    }
    choose_outputs();
    return p_;
  }

 private:
  // ---- randomness (portable: only the engine's raw output is used) -------------------------------
  uint64_t next() { return rng_(); }
  int64_t uniform(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  bool chance(double p) { return unit() < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[static_cast<size_t>(uniform(0, static_cast<int64_t>(v.size()) - 1))]; }

  // ---- the program under construction ----------------------------------------------------------
  void pick_dtype() {
    std::vector<std::pair<DType, double>> w = {{kFloat32, 0.38}, {kFloat64, 0.27}};
    if (o_.allow_bfloat16) w.push_back({kBFloat16, 0.25});
    if (o_.allow_int64) w.push_back({kInt64, 0.10});
    double total = 0;
    for (auto& [d, x] : w) total += x;
    double u = unit() * total;
    for (auto& [d, x] : w) {
      if (u < x) {
        p_.dtype = d;
        return;
      }
      u -= x;
    }
    p_.dtype = w.back().first;
  }
  bool int_program() const { return p_.dtype == kInt64; }
  InputKind main_kind() const { return int_program() ? InputKind::Int : InputKind::Normal; }

  int64_t size_choice() {
    static const std::vector<int64_t> sizes = {1, 1, 2, 3, 4, 5, 7, 8, 11, 13, 16};
    return pick(sizes);
  }
  Shape random_shape(int rank) {
    Shape s;
    for (int i = 0; i < rank; ++i) s.push_back(size_choice());
    while (prod_of(s) > o_.max_numel / 4) {
      auto it = std::max_element(s.begin(), s.end());
      *it = std::max<int64_t>(1, *it / 2);
    }
    return s;
  }

  int add_input(const Shape& shape, DType dtype, InputKind kind, int64_t lo = -5, int64_t hi = 5) {
    Step s;
    s.op = "input";
    s.shape = shape;
    s.dtype = dtype;
    s.kind = kind;
    s.lo = lo;
    s.hi = hi;
    std::vector<Layout> layouts = {Layout::Contiguous, Layout::Contiguous};
    if (shape.size() >= 2) layouts.push_back(Layout::Transposed);
    if (!shape.empty()) layouts.push_back(Layout::Sliced);
    s.layout = pick(layouts);
    s.requires_grad = o_.grads && kind == InputKind::Normal && is_float(dtype) && chance(0.85);
    s.seed = next() % 1000000007ull;
    p_.steps.push_back(s);
    double mag = kind == InputKind::Normal ? 4.0 : static_cast<double>(std::max(std::abs(lo), std::abs(hi)));
    vals_.push_back(Val{shape, dtype, mag, false, true});
    return static_cast<int>(p_.steps.size()) - 1;
  }

  int add_op(const std::string& op, std::vector<int> in, Json attrs, Shape shape, DType dtype, double mag,
             bool positive = false) {
    Step s;
    s.op = op;
    s.in = std::move(in);
    s.attrs = std::move(attrs);
    p_.steps.push_back(s);
    vals_.push_back(Val{std::move(shape), dtype, std::min(mag, 1e30), positive, false});
    ++ops_;
    return static_cast<int>(p_.steps.size()) - 1;
  }

  // The operand of the next op: most often the newest value, so that chains grow deep; of the
  // program's dtype but for a few (index tensors and argmax results meet float ops: type promotion,
  // and errors both sides must raise).
  int operand(bool want_float = false) {
    std::vector<int> ok;
    const bool any_dtype = chance(0.03);
    for (int i = 0; i < static_cast<int>(vals_.size()); ++i)
      if (vals_[i].dtype != kBool && (!want_float || is_float(vals_[i].dtype)) &&
          (any_dtype || vals_[i].dtype == p_.dtype))
        ok.push_back(i);
    if (ok.empty()) return -1;
    if (chance(0.6)) return ok.back();
    return pick(ok);
  }
  const Val& val(int i) const { return vals_[i]; }
  int rank(int i) const { return static_cast<int>(vals_[i].shape.size()); }
  int64_t wrap_or_neg(int64_t d, int64_t r) { return (r > 0 && chance(0.25)) ? d - r : d; }

  // ---- the op families -----------------------------------------------------------------------
  void emit_one() {
    struct F { bool (Gen::*fn)(); double w; bool in_int; };
    static const F fams[] = {
        {&Gen::emit_unary, 16, true},      {&Gen::emit_scalar, 8, true},   {&Gen::emit_binary, 15, true},
        {&Gen::emit_compare, 6, true},     {&Gen::emit_reduce, 12, true},  {&Gen::emit_argreduce, 3, true},
        {&Gen::emit_softmax_like, 8, true}, {&Gen::emit_layer_norm, 3, false}, {&Gen::emit_view, 20, true},
        {&Gen::emit_cat, 5, true},         {&Gen::emit_matmul, 6, false},  {&Gen::emit_index, 6, true},
        {&Gen::emit_factory, 4, true},
    };
    double total = 0;
    for (const F& f : fams)
      if (!int_program() || f.in_int) total += f.w;
    double u = unit() * total;
    for (const F& f : fams) {
      if (int_program() && !f.in_int) continue;
      if (u < f.w) {
        (this->*f.fn)();
        return;
      }
      u -= f.w;
    }
  }

  // A value that is > 0 for the domain of log, sqrt, reciprocal and division: abs(x) + c.
  int positive_of(int x) {
    if (val(x).positive) return x;
    const Val v = val(x);
    int a = add_op("abs", {x}, {}, v.shape, v.dtype, v.mag);
    const double c = pick(std::vector<double>{0.5, 1.0, 2.0});
    return add_op("add_scalar", {a}, {{"value", c}}, v.shape, v.dtype, v.mag + c, true);
  }

  bool emit_unary() {
    int x = operand();
    if (x < 0) return false;
    const Val v = val(x);
    if (!is_float(v.dtype)) {
      const std::string op = pick(std::vector<std::string>{"neg", "abs"});
      add_op(op, {x}, {}, v.shape, v.dtype, v.mag, op == "abs" && v.positive);
      return true;
    }
    struct U { const char* op; int kind; };  // 0 any, 1 needs > 0, 2 needs small magnitude
    static const U ops[] = {{"neg", 0},  {"abs", 0},     {"exp", 2},    {"expm1", 2},  {"log", 1},
                            {"log1p", 1}, {"sqrt", 1},   {"rsqrt", 1},  {"reciprocal", 1}, {"tanh", 0},
                            {"sigmoid", 0}, {"sin", 0},  {"cos", 0},    {"relu", 0},   {"silu", 0},
                            {"erf", 0},  {"floor", 0},   {"gelu", 0},   {"gelu_tanh", 0}, {"softplus", 0},
                            {"pow2", 0}, {"pow3", 2},    {"clamp", 0}};
    const U u = ops[uniform(0, static_cast<int64_t>(std::size(ops)) - 1)];
    std::string op = u.op;
    if (u.kind == 2 && v.mag > 8) {
      x = add_op("tanh", {x}, {}, v.shape, v.dtype, 1.0);
    }
    if (u.kind == 1) x = positive_of(x);
    const Val w = val(x);
    Json a = Json::object();
    double mag = w.mag;
    bool pos = false;
    if (op == "exp") mag = std::exp(std::min(w.mag, 30.0)), pos = true;
    else if (op == "expm1") mag = std::exp(std::min(w.mag, 30.0));
    else if (op == "log") mag = std::max(1.0, std::log(std::max(w.mag, 1.0)) + 2);
    else if (op == "log1p") mag = std::log1p(w.mag) + 1, pos = true;
    else if (op == "sqrt") mag = std::sqrt(w.mag), pos = true;
    else if (op == "rsqrt" || op == "reciprocal") mag = 2.0, pos = true;
    else if (op == "tanh" || op == "sin" || op == "cos" || op == "erf") mag = 1.0;
    else if (op == "sigmoid") mag = 1.0, pos = true;
    else if (op == "softplus") mag = w.mag + 1, pos = true;
    else if (op == "abs") pos = w.positive;
    else if (op == "gelu" || op == "gelu_tanh") {
      a["approximate"] = op == "gelu" ? "none" : "tanh";
      op = "gelu";
    } else if (op == "pow2" || op == "pow3") {
      a["exponent"] = op == "pow2" ? 2 : 3;
      mag = std::pow(w.mag, op == "pow2" ? 2 : 3);
      pos = op == "pow2" && w.positive;
      op = "pow_scalar";
    } else if (op == "clamp") {
      double lo = pick(std::vector<double>{-2.0, -1.0, -0.5, 0.0});
      a["min"] = lo;
      a["max"] = lo + pick(std::vector<double>{0.75, 1.5, 3.0});
      mag = 3.0;
    }
    add_op(op, {x}, a, w.shape, w.dtype, mag, pos);
    return true;
  }

  bool emit_scalar() {
    int x = operand();
    if (x < 0) return false;
    const Val v = val(x);
    const std::string op = pick(std::vector<std::string>{"add_scalar", "sub_scalar", "mul_scalar", "div_scalar"});
    Json value;
    double c;
    if (int_program()) {
      int64_t ci = pick(std::vector<int64_t>{-3, -1, 2, 3});
      if (op == "div_scalar") {  // true division of integers gives a float: keep integer programs integer
        add_op("mul_scalar", {x}, {{"value", ci}}, v.shape, v.dtype, v.mag * 3);
        return true;
      }
      value = ci;
      c = static_cast<double>(ci);
    } else {
      c = pick(std::vector<double>{-2.0, -0.5, 0.25, 1.5, 3.0});
      value = c;
    }
    double mag = (op == "mul_scalar") ? v.mag * std::abs(c) : (op == "div_scalar") ? v.mag / std::abs(c) : v.mag + std::abs(c);
    bool pos = v.positive && ((op == "add_scalar" && c > 0) || ((op == "mul_scalar" || op == "div_scalar") && c > 0));
    add_op(op, {x}, {{"value", value}}, v.shape, v.dtype, mag, pos);
    return true;
  }

  // A shape that broadcasts with `s`: the same, a suffix with some dims set to 1, or a larger one.
  Shape partner_shape(const Shape& s) {
    const int r = static_cast<int>(s.size());
    const int mode = static_cast<int>(uniform(0, 3));
    Shape b;
    if (mode == 0 || r == 0) {
      b = s;
      if (r == 0 && chance(0.3)) b = random_shape(static_cast<int>(uniform(1, 2)));  // a scalar meets a tensor
    } else if (mode == 1) {
      const int drop = static_cast<int>(uniform(0, r));
      b.assign(s.begin() + drop, s.end());
      for (int64_t& d : b)
        if (chance(0.4)) d = 1;
    } else if (mode == 2) {
      b = s;
      for (int64_t& d : b)
        if (chance(0.5)) d = 1;
    } else {
      b = s;
      for (size_t i = 0; i < b.size(); ++i)
        if (b[i] == 1 && chance(0.6)) b[i] = size_choice();
      if (r < 4 && chance(0.5)) b.insert(b.begin(), size_choice());
    }
    return b;
  }
  static bool broadcastable(const Shape& a, const Shape& b, Shape* out) {
    const size_t r = std::max(a.size(), b.size());
    Shape o(r);
    for (size_t i = 0; i < r; ++i) {
      int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
      int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
      if (x != y && x != 1 && y != 1) return false;
      o[i] = x == 1 ? y : x;
    }
    if (out) *out = o;
    return true;
  }
  // A second operand for `x`: an existing value of the same dtype that broadcasts, or a new input.
  int partner(int x, bool positive = false) {
    const Val v = val(x);
    if (chance(0.4)) {
      std::vector<int> ok;
      for (int i = 0; i < static_cast<int>(vals_.size()); ++i) {
        Shape o;
        if (i != x && vals_[i].dtype == v.dtype && broadcastable(v.shape, vals_[i].shape, &o) &&
            prod_of(o) <= o_.max_numel)
          ok.push_back(i);
      }
      if (!ok.empty()) return positive ? positive_of(pick(ok)) : pick(ok);
      if (chance(0.3)) return positive ? positive_of(x) : x;  // x op x
    }
    Shape b = partner_shape(v.shape);
    Shape o;
    if (!broadcastable(v.shape, b, &o) || prod_of(o) > o_.max_numel) b = v.shape;
    int y = add_input(b, v.dtype, main_kind());
    return positive ? positive_of(y) : y;
  }

  bool emit_binary() {
    int x = operand();
    if (x < 0) return false;
    std::vector<std::string> ops = {"add", "sub", "mul", "maximum", "minimum"};
    if (!int_program()) {
      ops.push_back("div");
      ops.push_back("lerp");
    }
    const std::string op = pick(ops);
    int y = partner(x, op == "div");
    Shape o;
    if (!broadcastable(val(x).shape, val(y).shape, &o)) return false;
    const Val a = val(x), b = val(y);
    double mag = op == "mul" ? a.mag * b.mag : op == "div" ? a.mag * 2 : a.mag + b.mag;
    Json attrs = Json::object();
    if (op == "lerp") attrs["weight"] = pick(std::vector<double>{0.25, 0.5, 1.5});
    bool swap = chance(0.3) && op != "div";
    add_op(op, swap ? std::vector<int>{y, x} : std::vector<int>{x, y}, attrs, o, a.dtype, mag,
           (op == "mul" || op == "add" || op == "maximum") && a.positive && b.positive);
    return true;
  }

  // A comparison, then a use of its mask: where, masked_fill, logical ops or a cast back to numbers.
  bool emit_compare() {
    int x = operand();
    if (x < 0) return false;
    const Val v = val(x);
    int mask;
    Shape ms;
    if (chance(0.5)) {
      double c = int_program() ? static_cast<double>(uniform(-2, 2)) : pick(std::vector<double>{-0.5, 0.0, 0.3, 1.0});
      Json value = int_program() ? Json(static_cast<int64_t>(c)) : Json(c);
      mask = add_op(chance(0.5) ? "gt_scalar" : "lt_scalar", {x}, {{"value", value}}, v.shape, kBool, 1);
      ms = v.shape;
    } else {
      int y = partner(x);
      if (!broadcastable(v.shape, val(y).shape, &ms)) return false;
      std::vector<std::string> cmp = {"gt", "lt"};
      if (int_program()) cmp.push_back("eq");
      mask = add_op(pick(cmp), {x, y}, {}, ms, kBool, 1);
    }
    if (chance(0.15)) mask = add_op("logical_not", {mask}, {}, ms, kBool, 1);
    const int use = static_cast<int>(uniform(0, 2));
    if (use == 0) {
      int b = partner(x);
      Shape o1, o2;
      if (!broadcastable(ms, v.shape, &o1) || !broadcastable(o1, val(b).shape, &o2) || prod_of(o2) > o_.max_numel)
        return true;
      add_op("where", {mask, x, b}, {}, o2, v.dtype, std::max(v.mag, val(b).mag));
    } else if (use == 1) {
      Shape o;
      if (!broadcastable(v.shape, ms, &o) || o != v.shape) return true;
      Json value = int_program() ? Json(int64_t{7}) : Json(-1.25);
      add_op("masked_fill", {x, mask}, {{"value", value}}, v.shape, v.dtype, std::max(v.mag, 7.0));
    } else {
      add_op("to_dtype", {mask}, {{"dtype", dtype_name(p_.dtype)}}, ms, p_.dtype, 1);
    }
    return true;
  }

  // A random subset of dims (never empty for a tensor of rank > 0; "all" written out).
  std::vector<int64_t> random_dims(int r, bool allow_rank0_dim = true) {
    std::vector<int64_t> d;
    if (r == 0) {
      if (allow_rank0_dim && chance(0.3)) d.push_back(chance(0.5) ? 0 : -1);
      return d;
    }
    for (int i = 0; i < r; ++i)
      if (chance(0.45)) d.push_back(i);
    if (d.empty()) d.push_back(uniform(0, r - 1));
    for (int64_t& x : d) x = wrap_or_neg(x, r);
    return d;
  }
  Shape reduced(const Shape& s, const std::vector<int64_t>& dims, bool keepdim, int64_t* count) {
    const int r = static_cast<int>(s.size());
    std::vector<bool> red(r, dims.empty());
    for (int64_t d : dims)
      if (r > 0) red[(d + r) % r] = true;
    Shape o;
    *count = 1;
    for (int i = 0; i < r; ++i) {
      if (red[i]) {
        *count *= s[i];
        if (keepdim) o.push_back(1);
      } else {
        o.push_back(s[i]);
      }
    }
    return o;
  }

  bool emit_reduce() {
    int x = operand();
    if (x < 0) return false;
    const Val v = val(x);
    std::vector<std::string> ops = {"sum", "amax", "amin", "prod"};
    if (!int_program()) {
      for (const char* o : {"sum", "mean", "mean", "var", "std", "logsumexp", "norm"}) ops.push_back(o);
    }
    const std::string op = pick(ops);
    std::vector<int64_t> dims = random_dims(rank(x), op != "logsumexp");
    if (op == "logsumexp" && dims.empty()) dims.push_back(0);  // a 0-d input: dim 0
    const bool keepdim = chance(0.35);
    int64_t count = 1;
    Shape o = reduced(v.shape, dims, keepdim, &count);
    if (op == "prod" && (count > 6 || v.mag > 4)) return false;
    Json a = {{"dims", dims}, {"keepdim", keepdim}};
    double mag = v.mag;
    bool pos = false;
    if (op == "sum") mag = v.mag * static_cast<double>(count), pos = v.positive;
    else if (op == "prod") mag = std::pow(std::max(v.mag, 1.0), static_cast<double>(count));
    else if (op == "logsumexp") mag = v.mag + std::log(static_cast<double>(count)) + 1;
    else if (op == "norm") mag = v.mag * std::sqrt(static_cast<double>(count)), pos = true;
    else if (op == "var" || op == "std") {
      if (count < 2) return false;  // a single element has no spread (and std's gradient at 0 is not finite)
      a["correction"] = chance(0.5) ? 1.0 : 0.0;
      mag = op == "var" ? v.mag * v.mag : v.mag;
    }
    add_op(op, {x}, a, o, v.dtype, mag, pos);
    return true;
  }

  bool emit_argreduce() {
    int x = operand();
    if (x < 0) return false;
    const Val v = val(x);
    Json a = Json::object();
    Shape o;
    if (rank(x) == 0 || chance(0.3)) {
      a["dim"] = nullptr;
      a["keepdim"] = false;
    } else {
      int64_t d = uniform(0, rank(x) - 1);
      bool keep = chance(0.4);
      a["dim"] = wrap_or_neg(d, rank(x));
      a["keepdim"] = keep;
      int64_t c;
      o = reduced(v.shape, {d}, keep, &c);
    }
    int idx = add_op(chance(0.5) ? "argmax" : "argmin", {x}, a, o, kInt64, static_cast<double>(prod_of(v.shape)));
    // Feed the indices back into the numbers (a float program casts them).
    if (!int_program() && chance(0.7)) add_op("to_dtype", {idx}, {{"dtype", dtype_name(p_.dtype)}}, o, p_.dtype, val(idx).mag);
    return true;
  }

  bool emit_softmax_like() {
    int x = operand();
    if (x < 0) return false;
    const Val v = val(x);
    const int r = rank(x);
    int64_t dim = r == 0 ? (chance(0.5) ? 0 : -1) : wrap_or_neg(uniform(0, r - 1), r);
    std::string op;
    if (int_program()) op = "cumsum";
    else op = pick(std::vector<std::string>{"softmax", "log_softmax", "cumsum"});
    double mag = op == "softmax" ? 1.0 : op == "log_softmax" ? v.mag * 2 + 3 : v.mag * (r ? v.shape[(dim + r) % r] : 1);
    add_op(op, {x}, {{"dim", dim}}, v.shape, v.dtype, mag, op == "softmax");
    return true;
  }

  bool emit_layer_norm() {
    int x = operand(true);
    if (x < 0 || rank(x) == 0) return false;
    const Val v = val(x);
    const int k = static_cast<int>(uniform(1, std::min(2, rank(x))));
    Shape ns(v.shape.end() - k, v.shape.end());
    // Over one element the output is the bias and the input's gradient is rounding noise times
    // 1 / sqrt(eps): nothing to compare.
    if (prod_of(ns) < 2) return false;
    std::vector<int> in = {x};
    if (chance(0.6)) {
      in.push_back(add_input(ns, v.dtype, InputKind::Normal));
      if (chance(0.7)) in.push_back(add_input(ns, v.dtype, InputKind::Normal));
    }
    add_op("layer_norm", in, {{"normalized_shape", ns}}, v.shape, v.dtype, 4.0 * 4 + 4);
    return true;
  }

  // A random shape of `n` elements (its prime factors dealt into up to four dims, ones inserted).
  Shape shape_with_numel(int64_t n) {
    std::vector<int64_t> f;
    for (int64_t p = 2; n > 1 && p * p <= n; ++p)
      while (n % p == 0) f.push_back(p), n /= p;
    if (n > 1) f.push_back(n);
    const int r = static_cast<int>(uniform(f.empty() ? 0 : 1, 4));
    if (r == 0) return {};
    Shape s(r, 1);
    for (int64_t p : f) s[uniform(0, r - 1)] *= p;
    return s;
  }

  bool emit_view() {
    int x = operand();
    if (x < 0) return false;
    const Val v = val(x);
    const int r = rank(x);
    const Shape& s = v.shape;
    const int which = static_cast<int>(uniform(0, 14));
    auto same = [&](const std::string& op, Json a, Shape o) {
      add_op(op, {x}, std::move(a), std::move(o), v.dtype, v.mag, v.positive);
      return true;
    };
    switch (which) {
      case 0:
      case 1: {  // reshape (sometimes with -1)
        Shape o = shape_with_numel(prod_of(s));
        Shape arg = o;
        if (!arg.empty() && chance(0.3)) arg[uniform(0, static_cast<int64_t>(arg.size()) - 1)] = -1;
        return same(chance(0.2) ? "view" : "reshape", {{"shape", arg}}, o);
      }
      case 2: {  // permute
        if (r < 2) return false;
        std::vector<int64_t> perm(r);
        std::iota(perm.begin(), perm.end(), 0);
        for (int i = r - 1; i > 0; --i) std::swap(perm[i], perm[uniform(0, i)]);
        Shape o;
        for (int64_t d : perm) o.push_back(s[d]);
        for (int64_t& d : perm) d = wrap_or_neg(d, r);
        return same("permute", {{"dims", perm}}, o);
      }
      case 3: {  // transpose / t
        if (r == 0) return false;
        if (r <= 2 && chance(0.3)) {
          Shape o = s;
          std::reverse(o.begin(), o.end());
          return same("t", Json::object(), o);
        }
        int64_t a = uniform(0, r - 1), b = uniform(0, r - 1);
        Shape o = s;
        std::swap(o[a], o[b]);
        return same("transpose", {{"dim0", wrap_or_neg(a, r)}, {"dim1", wrap_or_neg(b, r)}}, o);
      }
      case 4: {  // slice with a step
        if (r == 0) return false;
        int64_t d = uniform(0, r - 1), n = s[d];
        int64_t start = uniform(0, n - 1);
        int64_t end = chance(0.2) ? n + 3 : uniform(start + 1, n);
        int64_t step = pick(std::vector<int64_t>{1, 1, 2, 3});
        Shape o = s;
        o[d] = (std::min(end, n) - start + step - 1) / step;
        return same("slice", {{"dim", wrap_or_neg(d, r)}, {"start", start}, {"end", end}, {"step", step}}, o);
      }
      case 5: {  // narrow
        if (r == 0) return false;
        int64_t d = uniform(0, r - 1), n = s[d];
        int64_t start = uniform(0, n - 1), len = uniform(1, n - start);
        Shape o = s;
        o[d] = len;
        return same("narrow", {{"dim", wrap_or_neg(d, r)}, {"start", start}, {"length", len}}, o);
      }
      case 6: {  // select
        if (r == 0) return false;
        int64_t d = uniform(0, r - 1), n = s[d];
        int64_t i = uniform(-n, n - 1);
        Shape o = s;
        o.erase(o.begin() + d);
        return same("select", {{"dim", wrap_or_neg(d, r)}, {"index", i}}, o);
      }
      case 7: {  // unsqueeze
        if (r >= 4) return false;
        int64_t d = uniform(0, r);
        Shape o = s;
        o.insert(o.begin() + d, 1);
        return same("unsqueeze", {{"dim", chance(0.25) ? d - (r + 1) : d}}, o);
      }
      case 8: {  // squeeze one dim (a no-op where its size is not 1) or all
        if (chance(0.3) || r == 0) {
          Shape o;
          for (int64_t x2 : s)
            if (x2 != 1) o.push_back(x2);
          return same("squeeze", Json::object(), o);
        }
        int64_t d = uniform(0, r - 1);
        Shape o = s;
        if (o[d] == 1) o.erase(o.begin() + d);
        return same("squeeze", {{"dim", wrap_or_neg(d, r)}}, o);
      }
      case 9: {  // flatten
        int64_t a = r == 0 ? 0 : uniform(0, r - 1), b = r == 0 ? 0 : uniform(a, r - 1);
        Shape o;
        if (r == 0) {
          o = {1};
        } else {
          o.assign(s.begin(), s.begin() + a);
          int64_t m = 1;
          for (int64_t i = a; i <= b; ++i) m *= s[i];
          o.push_back(m);
          o.insert(o.end(), s.begin() + b + 1, s.end());
        }
        return same("flatten", {{"start", wrap_or_neg(a, r)}, {"end", wrap_or_neg(b, r)}}, o);
      }
      case 10: {  // expand size-1 dims (and maybe a new leading one)
        Shape o = s, arg = s;
        for (size_t i = 0; i < o.size(); ++i) {
          if (o[i] == 1 && chance(0.7)) o[i] = arg[i] = size_choice();
          else if (chance(0.3)) arg[i] = -1;
        }
        if (r < 4 && chance(0.4)) {
          int64_t n = size_choice();
          o.insert(o.begin(), n);
          arg.insert(arg.begin(), n);
        }
        if (prod_of(o) > o_.max_numel) return false;
        return same("expand", {{"shape", arg}}, o);
      }
      case 11: return same(chance(0.5) ? "contiguous" : "clone", Json::object(), s);
      case 12: {  // flip
        if (r == 0) return false;
        return same("flip", {{"dims", random_dims(r)}}, s);
      }
      case 13: {  // repeat
        const int extra = r < 4 ? static_cast<int>(uniform(0, 1)) : 0;
        std::vector<int64_t> reps;
        for (int i = 0; i < r + extra; ++i) reps.push_back(pick(std::vector<int64_t>{1, 1, 2, 3}));
        if (reps.empty()) reps.push_back(2);
        Shape o(reps.size());
        const size_t off = reps.size() - s.size();
        for (size_t i = 0; i < reps.size(); ++i) o[i] = reps[i] * (i < off ? 1 : s[i - off]);
        if (prod_of(o) > o_.max_numel) return false;
        return same("repeat", {{"repeats", reps}}, o);
      }
      default: {  // a view of a transposed value: its strides are not row-major
        if (r < 2) return false;
        Shape o = s;
        std::swap(o[r - 1], o[r - 2]);
        int t = add_op("transpose", {x}, {{"dim0", -1}, {"dim1", -2}}, o, v.dtype, v.mag, v.positive);
        Shape flat = {prod_of(o)};
        add_op(chance(0.5) ? "view" : "reshape", {t}, {{"shape", flat}}, flat, v.dtype, v.mag, v.positive);
        return true;
      }
    }
  }

  bool emit_cat() {
    int x = operand();
    if (x < 0 || rank(x) == 0) return false;
    const Val v = val(x);
    const int r = rank(x);
    if (chance(0.65) || r >= 4) {  // (stack would pass rank 4)
      const int64_t d = uniform(0, r - 1);
      std::vector<int> in = {x};
      Shape o = v.shape;
      const int n = static_cast<int>(uniform(1, 2));
      for (int k = 0; k < n; ++k) {
        if (chance(0.3)) {
          in.push_back(x);
          o[d] += v.shape[d];
        } else {
          Shape b = v.shape;
          b[d] = pick(std::vector<int64_t>{1, 2, 3, 5});
          in.push_back(add_input(b, v.dtype, main_kind()));
          o[d] += b[d];
        }
      }
      if (prod_of(o) > o_.max_numel) return false;
      if (chance(0.5)) std::rotate(in.begin(), in.begin() + 1, in.end());
      add_op("cat", in, {{"dim", wrap_or_neg(d, r)}}, o, v.dtype, v.mag);
    } else {
      const int64_t d = uniform(0, r);
      int y = chance(0.3) ? x : add_input(v.shape, v.dtype, main_kind());
      Shape o = v.shape;
      o.insert(o.begin() + d, 2);
      if (prod_of(o) > o_.max_numel) return false;
      add_op("stack", {x, y}, {{"dim", chance(0.25) ? d - (r + 1) : d}}, o, v.dtype, std::max(v.mag, val(y).mag));
    }
    return true;
  }

  bool emit_matmul() {
    int x = operand(true);
    if (x < 0 || rank(x) == 0) return false;
    const Val v = val(x);
    const int r = rank(x);
    const Shape& s = v.shape;
    const int64_t k = pick(std::vector<int64_t>{1, 2, 3, 5, 8, 13});
    const int mode = static_cast<int>(uniform(0, 3));
    Shape o;
    if (mode == 0 && r >= 2) {  // x @ x^T: one input on both sides
      Shape ts = s;
      std::swap(ts[r - 1], ts[r - 2]);
      int t = add_op("transpose", {x}, {{"dim0", -1}, {"dim1", -2}}, ts, v.dtype, v.mag);
      o = s;
      o[r - 1] = s[r - 2];
      if (prod_of(o) > o_.max_numel) return false;
      add_op("matmul", {x, t}, {}, o, v.dtype, v.mag * v.mag * static_cast<double>(s[r - 1]));
      return true;
    }
    if (mode == 1 && r >= 2) {  // w @ x
      Shape ws = {k, s[r - 2]};
      int w = add_input(ws, v.dtype, InputKind::Normal);
      o = s;
      o[r - 2] = k;
      if (prod_of(o) > o_.max_numel) return false;
      add_op("matmul", {w, x}, {}, o, v.dtype, v.mag * 4 * static_cast<double>(s[r - 2]));
      return true;
    }
    // x @ w, w a vector, a matrix or a batch that broadcasts against x's batch dims
    Shape ws;
    if (chance(0.2)) {
      ws = {s[r - 1]};
      o.assign(s.begin(), s.end() - 1);
    } else {
      ws = {s[r - 1], k};
      if (r >= 3 && chance(0.5)) {
        Shape batch(s.begin(), s.end() - 2);
        for (int64_t& b : batch)
          if (chance(0.4)) b = 1;
        ws.insert(ws.begin(), batch.begin(), batch.end());
      }
      o = s;
      o[r - 1] = k;
      if (r == 1) o = {k};
    }
    if (prod_of(o) > o_.max_numel) return false;
    int w = add_input(ws, v.dtype, InputKind::Normal);
    add_op("matmul", {x, w}, {}, o, v.dtype, v.mag * 4 * static_cast<double>(s[r - 1]));
    return true;
  }

  bool emit_index() {
    int x = operand();
    if (x < 0 || rank(x) == 0) return false;
    const Val v = val(x);
    const int r = rank(x);
    const Shape& s = v.shape;
    const int which = static_cast<int>(uniform(0, 2));
    if (which == 0) {  // index_select
      int64_t d = uniform(0, r - 1);
      int64_t len = uniform(1, 7);
      int idx = add_input({len}, kInt64, InputKind::Int, 0, s[d]);
      Shape o = s;
      o[d] = len;
      if (prod_of(o) > o_.max_numel) return false;
      add_op("index_select", {x, idx}, {{"dim", wrap_or_neg(d, r)}}, o, v.dtype, v.mag, v.positive);
    } else if (which == 1) {  // gather
      int64_t d = uniform(0, r - 1);
      Shape is = s;
      for (int i = 0; i < r; ++i) is[i] = i == d ? uniform(1, 5) : uniform(1, s[i]);
      int idx = add_input(is, kInt64, InputKind::Int, 0, s[d]);
      add_op("gather", {x, idx}, {{"dim", wrap_or_neg(d, r)}}, is, v.dtype, v.mag, v.positive);
    } else {  // x[idx], negative indices included
      Shape is = random_shape(static_cast<int>(uniform(1, 2)));
      int idx = add_input(is, kInt64, InputKind::Int, -s[0], s[0]);
      Shape o = is;
      o.insert(o.end(), s.begin() + 1, s.end());
      if (prod_of(o) > o_.max_numel) return false;
      add_op("index", {x, idx}, {}, o, v.dtype, v.mag, v.positive);
    }
    return true;
  }

  // A factory whose values follow from its arguments, combined with a value so that it matters.
  bool emit_factory() {
    int x = operand();
    if (x < 0) return false;
    const Val v = val(x);
    const int r = rank(x);
    const int64_t n = r ? v.shape[r - 1] : 1;
    const std::string dt = dtype_name(v.dtype);
    int f;
    Shape fs = r ? Shape{n} : Shape{};
    const int which = static_cast<int>(uniform(0, 4));
    if (which == 0 && is_float(v.dtype)) {
      double start = pick(std::vector<double>{-2.0, 0.0, 0.5}), end = pick(std::vector<double>{1.0, 3.0, -1.0});
      f = add_op("linspace", {}, {{"start", start}, {"end", end}, {"steps", n}, {"dtype", dt}}, {n}, v.dtype, 3);
      fs = {n};
    } else if (which == 1) {
      Json a;
      if (is_float(v.dtype)) {
        double start = pick(std::vector<double>{-1.5, 0.0, 0.25}), step = pick(std::vector<double>{0.5, 1.0, -0.75});
        a = {{"start", start}, {"end", start + step * (static_cast<double>(n) - 0.5)}, {"step", step}, {"dtype", dt}};
      } else {
        int64_t start = uniform(-3, 3), step = pick(std::vector<int64_t>{1, 2, -1});
        a = {{"start", start}, {"end", start + step * n}, {"step", step}, {"dtype", dt}};
      }
      f = add_op("arange", {}, a, {n}, v.dtype, 3.0 * static_cast<double>(n) + 3);
      fs = {n};
    } else if (which == 2) {
      Json value = is_float(v.dtype) ? Json(0.75) : Json(int64_t{2});
      f = add_op("full", {}, {{"shape", fs}, {"value", value}, {"dtype", dt}}, fs, v.dtype, 2);
    } else {
      const std::string op = pick(std::vector<std::string>{"zeros_like", "ones_like", "full_like"});
      Json a = Json::object();
      if (op == "full_like") a["value"] = is_float(v.dtype) ? Json(-1.5) : Json(int64_t{3});
      f = add_op(op, {x}, a, v.shape, v.dtype, 2, op == "ones_like");
      fs = v.shape;
    }
    Shape o;
    if (!broadcastable(v.shape, fs, &o)) return true;
    add_op(pick(std::vector<std::string>{"add", "mul", "sub"}), {x, f}, {}, o, v.dtype, v.mag * 4 + 4);
    return true;
  }

  void choose_outputs() {
    const int last = static_cast<int>(p_.steps.size()) - 1;
    std::vector<bool> used(p_.steps.size(), false);
    for (const Step& s : p_.steps)
      for (int i : s.in) used[i] = true;
    p_.outputs.push_back(last);
    for (int i = last - 1; i >= 0 && p_.outputs.size() < 3; --i)
      if (!used[i] && p_.steps[i].op != "input" && chance(0.6)) p_.outputs.push_back(i);
    if (p_.steps[last].op == "input") p_.outputs = {last};
  }

  std::mt19937_64 rng_;
  GeneratorOptions o_;
  Program p_;
  std::vector<Val> vals_;
  int ops_ = 0;
  int first_ = 0;
};

}  // namespace

Program generate_program(uint64_t seed, const GeneratorOptions& opts) { return Gen(seed, opts).run(); }

}  // namespace tessera::programs
