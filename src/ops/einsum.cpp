// einsum: Einstein summation over single-letter subscripts, as torch.einsum.
//
// The equation is parsed into labels (A-Z then a-z, ASCII order, as PyTorch sorts the implicit
// output) plus at most one ellipsis per term. Every operand is then aligned to one "global" rank G:
// output dims first in output order, then the dims that are summed. A label repeated within a term
// becomes a diagonal view; a label an operand lacks becomes a size-1 dim, so broadcasting is by size 1.
//
// Operands contract left to right. Each pairwise contraction sorts the G dims into batch (kept, in
// both), left-only and right-only (kept, in one) and contracted (summed, in both), and runs one bmm
// over views reshaped to (batch, left, contracted) x (batch, contracted, right). A dim that is summed
// and lives in one operand only is summed first (a bmm against a ones vector), as is every dim that
// appears in a single operand and not in the output. No loops over data here: all the arithmetic is
// bmm, so every dtype bmm takes works, with its accumulation rules.
//
// Errors: malformed equations raise ValueError, size or rank mismatches ShapeError; both quote the
// equation.
#include <algorithm>
#include <array>
#include <numeric>
#include <string>
#include <vector>

#include "ops/autocast_hook.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tessera/functions.h"

namespace tessera {
namespace {

constexpr int kNumLabels = 52;
constexpr int kEllipsis = -1;

int label_index(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : c - 'a' + 26; }
char label_char(int l) { return static_cast<char>(l < 26 ? 'A' + l : 'a' + (l - 26)); }
bool is_label(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

struct Equation {
  std::vector<std::vector<int>> terms;  // per operand: label indices, kEllipsis for "..."
  std::vector<int> output;              // label indices, kEllipsis for "..."
  bool explicit_output = false;
};

Equation parse(const std::string& eq, size_t num_operands) {
  Equation e;
  e.terms.emplace_back();
  std::vector<int>* cur = &e.terms.back();
  bool in_output = false;
  auto where = [&]() { return in_output ? std::string("the output") : "operand " + std::to_string(e.terms.size() - 1); };
  for (size_t i = 0; i < eq.size(); ++i) {
    const char c = eq[i];
    if (c == ' ') continue;
    if (is_label(c)) {
      cur->push_back(label_index(c));
    } else if (c == '.') {
      TS_CHECK(i + 2 < eq.size() && eq[i + 1] == '.' && eq[i + 2] == '.', ValueError, "einsum(): found '.' for ",
               where(), " that is not part of any ellipsis in the equation '", eq, "'");
      TS_CHECK(std::find(cur->begin(), cur->end(), kEllipsis) == cur->end(), ValueError,
               "einsum(): found more than one ellipsis for ", where(), " in the equation '", eq, "'");
      cur->push_back(kEllipsis);
      i += 2;
    } else if (c == ',' && !in_output) {
      e.terms.emplace_back();
      cur = &e.terms.back();
    } else if (c == '-' && !in_output && i + 1 < eq.size() && eq[i + 1] == '>') {
      in_output = true;
      e.explicit_output = true;
      cur = &e.output;
      ++i;
    } else {
      TS_THROW(ValueError, "einsum(): invalid subscript given at index ", i, " in the equation string '", eq,
               "', subscripts must be in [a-zA-Z]");
    }
  }
  TS_CHECK(e.terms.size() <= num_operands, ValueError,
           "einsum(): fewer operands were provided than specified in the equation '", eq, "' (", e.terms.size(),
           " terms, ", num_operands, " operands)");
  TS_CHECK(e.terms.size() >= num_operands, ValueError,
           "einsum(): more operands were provided than specified in the equation '", eq, "' (", e.terms.size(),
           " terms, ", num_operands, " operands)");
  return e;
}

// Permutes `t` so its dims are in increasing global order and inserts size-1 dims for the global dims
// it lacks. gmap[d] is the (distinct) global index of t's dim d.
Tensor align(const Tensor& t, const std::vector<int>& gmap, int G) {
  Shape perm(gmap.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](int64_t x, int64_t y) { return gmap[x] < gmap[y]; });
  Tensor r = t.dim() > 1 ? t.permute(perm) : t;
  std::vector<bool> present(G, false);
  for (int g : gmap) present[g] = true;
  for (int g = 0; g < G; ++g)
    if (!present[g]) r = r.unsqueeze(g);
  return r;
}

// Sums the G-rank tensor `t` over `dims` (keeping them as size 1) as a bmm against a ones vector.
Tensor sum_dims(const Tensor& t, const std::vector<int>& dims) {
  std::vector<int> summed;
  for (int g : dims)
    if (t.size(g) != 1) summed.push_back(g);
  if (summed.empty()) return t;
  const int G = static_cast<int>(t.dim());
  std::vector<int> keep, gmap;
  Shape perm, keep_sizes;
  int64_t K = 1, R = 1;
  for (int g = 0; g < G; ++g)
    if (std::find(summed.begin(), summed.end(), g) == summed.end()) {
      perm.push_back(g);
      keep.push_back(g);
      keep_sizes.push_back(t.size(g));
      K *= t.size(g);
    }
  for (int g : summed) {
    perm.push_back(g);
    R *= t.size(g);
  }
  Tensor x = t.permute(perm).reshape({1, K, R});
  Tensor y = bmm(x, ones({1, R, 1}, TensorOptions(t.dtype(), t.device())));
  return align(y.view(keep_sizes), keep, G);
}

// Contracts two G-rank aligned tensors, summing `to_sum` dims; returns a G-rank tensor whose summed dims
// have size 1.
Tensor contract(Tensor a, Tensor b, const std::vector<bool>& to_sum) {
  const int G = static_cast<int>(a.dim());
  std::vector<int> batch, lo, ro, sum, only_a, only_b;
  for (int g = 0; g < G; ++g) {
    const bool ha = a.size(g) != 1, hb = b.size(g) != 1;
    if (to_sum[g]) {
      if (ha && hb) sum.push_back(g);
      else if (ha) only_a.push_back(g);
      else if (hb) only_b.push_back(g);
    } else {
      if (ha && hb) batch.push_back(g);
      else if (hb) ro.push_back(g);
      else lo.push_back(g);
    }
  }
  a = sum_dims(a, only_a);
  b = sum_dims(b, only_b);
  auto prod = [](const Tensor& t, const std::vector<int>& ds) {
    int64_t p = 1;
    for (int g : ds) p *= t.size(g);
    return p;
  };
  const int64_t nb = prod(a, batch), nl = prod(a, lo), nk = prod(a, sum), nr = prod(b, ro);
  // The dims a given tensor does not use (size 1 there) go last, where the reshape ignores them.
  auto order = [&](std::initializer_list<const std::vector<int>*> groups) {
    Shape perm;
    std::vector<bool> used(G, false);
    for (const auto* grp : groups)
      for (int g : *grp) {
        perm.push_back(g);
        used[g] = true;
      }
    for (int g = 0; g < G; ++g)
      if (!used[g]) perm.push_back(g);
    return perm;
  };
  Tensor a3 = a.permute(order({&batch, &lo, &sum})).reshape({nb, nl, nk});
  Tensor b3 = b.permute(order({&batch, &sum, &ro})).reshape({nb, nk, nr});
  Tensor c = bmm(a3, b3);  // (batch, left, right)
  std::vector<int> gmap;
  Shape sizes;
  for (int g : batch) gmap.push_back(g), sizes.push_back(a.size(g));
  for (int g : lo) gmap.push_back(g), sizes.push_back(a.size(g));
  for (int g : ro) gmap.push_back(g), sizes.push_back(b.size(g));
  return align(c.view(sizes), gmap, G);
}

}  // namespace

Tensor einsum(const std::string& eq, const std::vector<Tensor>& operands) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::einsum, operands); c) return einsum(eq, c.tensors());
  // Gradients are recorded by the ops einsum lowers onto (views and bmm).
  OpScope scope(OpId::einsum, operands);
  TS_CHECK(!operands.empty(), ValueError, "einsum(): must provide at least one operand (equation '", eq, "')");
  for (size_t i = 0; i < operands.size(); ++i) check_defined("einsum", operands[i], "operands");
  for (const Tensor& t : operands) check_same_device("einsum", {&operands[0], &t});
  for (size_t i = 1; i < operands.size(); ++i)
    TS_CHECK(operands[i].dtype() == operands[0].dtype(), DTypeError,
             "einsum(): expected all operands to have the same dtype, but operand 0 is ",
             dtype_name(operands[0].dtype()), " and operand ", i, " is ", dtype_name(operands[i].dtype()));
  Equation e = parse(eq, operands.size());
  const size_t n = operands.size();

  // Ranks, ellipsis widths and label counts.
  std::array<int, kNumLabels> count{};
  int64_t ell_dims = 0;
  bool any_ellipsis = false;
  for (size_t i = 0; i < n; ++i) {
    const auto& term = e.terms[i];
    const bool has_ell = std::find(term.begin(), term.end(), kEllipsis) != term.end();
    const int64_t nlabels = static_cast<int64_t>(term.size()) - (has_ell ? 1 : 0);
    const int64_t nd = operands[i].dim();
    if (has_ell) {
      TS_CHECK(nlabels <= nd, ShapeError, "einsum(): the number of subscripts in the equation (", nlabels,
               ") is more than the number of dimensions (", nd, ") for operand ", i, " in the equation '", eq, "'");
      ell_dims = std::max(ell_dims, nd - nlabels);
      any_ellipsis = true;
    } else {
      TS_CHECK(nlabels == nd, ShapeError, "einsum(): the number of subscripts in the equation (", nlabels,
               ") does not match the number of dimensions (", nd, ") for operand ", i,
               " and no ellipsis was given in the equation '", eq, "'");
    }
    for (int l : term)
      if (l != kEllipsis) ++count[l];
  }

  // The output: explicit, or the ellipsis then the labels seen once, in ASCII order.
  std::vector<int> out = e.output;
  if (e.explicit_output) {
    std::array<bool, kNumLabels> seen{};
    bool seen_ell = false;
    for (int l : out) {
      if (l == kEllipsis) {
        TS_CHECK(!seen_ell, ValueError, "einsum(): found more than one ellipsis in the output of '", eq, "'");
        seen_ell = true;
        continue;
      }
      TS_CHECK(count[l] > 0, ValueError, "einsum(): output subscript ", label_char(l),
               " does not appear in the equation for any input operand ('", eq, "')");
      TS_CHECK(!seen[l], ValueError, "einsum(): output subscript ", label_char(l),
               " appears more than once in the output ('", eq, "')");
      seen[l] = true;
    }
  } else {
    if (any_ellipsis) out.push_back(kEllipsis);
    for (int l = 0; l < kNumLabels; ++l)
      if (count[l] == 1) out.push_back(l);
  }

  // Global dims: the output's, then the ellipsis if the output drops it, then the summed labels.
  std::array<int, kNumLabels> gpos;
  gpos.fill(-1);
  int G = 0, ell_pos = -1;
  for (int l : out) {
    if (l == kEllipsis) {
      ell_pos = G;
      G += static_cast<int>(ell_dims);
    } else {
      gpos[l] = G++;
    }
  }
  const int num_out = G;
  if (ell_pos < 0) {
    ell_pos = G;
    G += static_cast<int>(ell_dims);
  }
  for (int l = 0; l < kNumLabels; ++l)
    if (count[l] > 0 && gpos[l] < 0) gpos[l] = G++;

  std::vector<int> glabel(G, -1);  // label of each global dim; -1 under the ellipsis
  for (int l = 0; l < kNumLabels; ++l)
    if (gpos[l] >= 0) glabel[gpos[l]] = l;
  auto dim_name = [&](int g) {
    return glabel[g] >= 0 ? std::string("subscript ") + label_char(glabel[g])
                          : "ellipsis dimension " + std::to_string(g - ell_pos);
  };

  // Align every operand to rank G: diagonals for repeated labels, size-1 dims for missing ones.
  std::vector<Tensor> ops(n);
  std::vector<std::vector<bool>> present(n, std::vector<bool>(G, false));
  Shape seen_size(G, 1);
  for (size_t i = 0; i < n; ++i) {
    const auto& term = e.terms[i];
    Tensor t = operands[i];
    std::vector<int> gmap;
    const int64_t ne = t.dim() - (static_cast<int64_t>(term.size()) - 1);  // dims under the ellipsis
    for (int l : term) {
      if (l == kEllipsis) {
        for (int64_t j = 0; j < ne; ++j) gmap.push_back(ell_pos + static_cast<int>(ell_dims - ne + j));
      } else {
        gmap.push_back(gpos[l]);
      }
    }
    // A repeated label takes the diagonal; diagonal() moves it last, so gmap follows.
    for (bool again = true; again;) {
      again = false;
      for (size_t x = 0; x < gmap.size() && !again; ++x)
        for (size_t y = x + 1; y < gmap.size() && !again; ++y) {
          if (gmap[x] != gmap[y]) continue;
          const int g = gmap[x];
          TS_CHECK(t.size(x) == t.size(y), ShapeError, "einsum(): ", dim_name(g),
                   " is repeated for operand ", i, " but the sizes don't match, ", t.size(y), " != ", t.size(x),
                   " (equation '", eq, "')");
          t = t.diagonal(0, static_cast<int64_t>(x), static_cast<int64_t>(y));
          gmap.erase(gmap.begin() + y);
          gmap.erase(gmap.begin() + x);
          gmap.push_back(g);
          again = true;
        }
    }
    for (size_t d = 0; d < gmap.size(); ++d) {
      const int g = gmap[d];
      const int64_t s = t.size(static_cast<int64_t>(d));
      present[i][g] = true;
      if (s == 1) continue;
      TS_CHECK(seen_size[g] == 1 || seen_size[g] == s, ShapeError, "einsum(): ", dim_name(g), " has size ", s,
               " for operand ", i, " which does not broadcast with previously seen size ", seen_size[g],
               " (equation '", eq, "')");
      seen_size[g] = s;
    }
    ops[i] = align(t, gmap, G);
  }

  // A dim summed away that only one operand has is summed before any product.
  for (size_t i = 0; i < n; ++i) {
    std::vector<int> own;
    for (int g = num_out; g < G; ++g) {
      bool elsewhere = false;
      for (size_t j = 0; j < n; ++j) elsewhere = elsewhere || (j != i && present[j][g]);
      if (present[i][g] && !elsewhere) own.push_back(g);
    }
    ops[i] = sum_dims(ops[i], own);
  }

  // Left to right: after operand i joins, a non-output dim no later operand has is summed.
  Tensor result = ops[0];
  for (size_t i = 1; i < n; ++i) {
    std::vector<bool> to_sum(G, false);
    for (int g = num_out; g < G; ++g) {
      bool later = false;
      for (size_t j = i + 1; j < n; ++j) later = later || present[j][g];
      to_sum[g] = !later;
    }
    result = contract(result, ops[i], to_sum);
  }
  // Every non-output dim now has size 1; drop them.
  Shape out_sizes(result.sizes().begin(), result.sizes().begin() + num_out);
  return result.reshape(out_sizes);
}

}  // namespace tessera
