// torch.autograd.functional in C++ (tessera/autograd/functional.h): everything is built from
// autograd::grad, so it runs on any device and, with create_graph, differentiates again.
//
// Note [Functional inputs]: as PyTorch's _grad_preprocess, every input is given to `fn` as a new
// tensor object: a differentiable alias (a view) when create_graph is set and the input requires
// grad, so that results reach the caller's graph; otherwise a detached alias that requires grad.
// A new object distinguishes the inputs from the same tensors captured by `fn` itself. Without
// create_graph the results are detached on the way out.
//
// vectorize=true computes every row of a Jacobian (or a Hessian's outer Jacobian) in one backward
// pass with batched grad_outputs (autograd::grad's is_grads_batched) where PyTorch uses vmap; the
// values are those of vectorize=false. strategy="forward-mode" is computed by the double-backward
// trick over batched directions (jacobian_columns_vectorized).
#include "tessera/autograd/functional.h"

#include <string>

#include "tessera/autograd.h"
#include "tessera/functions.h"

namespace tessera::autograd::functional {
namespace {

using V = std::vector<Tensor>;

// Which backward a missing gradient came from, for strict mode's message (PyTorch's stages).
enum class Stage { Back, BackTrick, DoubleBack, DoubleBackTrick };

V preprocess(const V& inputs, bool create_graph, bool need_graph, const char* op) {
  V out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    TS_CHECK(in.defined(), ValueError, op, ": input ", i, " is an undefined tensor");
    TS_CHECK(is_floating_point(in.dtype()), DTypeError, op, ": input ", i,
             " must be a floating-point tensor to be differentiated, got ", dtype_name(in.dtype()));
    if (create_graph && in.requires_grad()) out.push_back(in.view(in.sizes()));
    else out.push_back(in.detach().requires_grad_(need_graph));
  }
  return out;
}

V postprocess(V ts, bool create_graph) {
  if (!create_graph)
    for (Tensor& t : ts)
      if (t.defined()) t = t.detach();
  return ts;
}

// autograd::grad over the outputs that require grad; undefined for inputs nothing reached. batched:
// grad_outputs carry a leading dim of vectors (Note [Batched gradients]).
V grad_of(const V& outputs, const V& inputs, const V& grad_outputs, bool create_graph, bool batched = false) {
  V outs, gos;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || !outputs[i].requires_grad()) continue;
    outs.push_back(outputs[i]);
    gos.push_back(grad_outputs.empty() ? Tensor() : grad_outputs[i]);
  }
  if (outs.empty()) return V(inputs.size());
  return grad(outs, inputs, gos, /*retain_graph=*/true, create_graph, /*allow_unused=*/true, batched);
}

V fill_in_zeros(V grads, const V& refs, bool strict, Stage stage, const char* op) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined()) continue;
    if (strict) {
      switch (stage) {
        case Stage::Back:
          TS_THROW(ValueError, op, ": The output of the user-provided function is independent of input ", i,
                   ". This is not allowed in strict mode.");
        case Stage::BackTrick:
          TS_THROW(ValueError, op, ": The gradient with respect to the input is independent of entry ", i,
                   " in the grad_outputs when using the double backward trick to compute forward mode gradients. "
                   "This is not allowed in strict mode.");
        case Stage::DoubleBack:
          TS_THROW(ValueError, op, ": The jacobian of the user-provided function is independent of input ", i,
                   ". This is not allowed in strict mode.");
        case Stage::DoubleBackTrick:
          TS_THROW(ValueError, op, ": The hessian of the user-provided function is independent of entry ", i,
                   " in the grad_jacobian. This is not allowed in strict mode as it prevents from using the double "
                   "backward trick to replace forward mode AD.");
      }
    }
    grads[i] = zeros_like(refs[i]);
  }
  return grads;
}

void check_outputs(const V& outputs, const char* op) {
  TS_CHECK(!outputs.empty(), ValueError, op, ": the user-provided function returned no tensor");
  for (size_t i = 0; i < outputs.size(); ++i) {
    TS_CHECK(outputs[i].defined(), ValueError, op, ": output ", i, " of the user-provided function is undefined");
    TS_CHECK(is_floating_point(outputs[i].dtype()), DTypeError, op, ": output ", i,
             " of the user-provided function must be a floating-point tensor, got ", dtype_name(outputs[i].dtype()));
  }
}

// v must pair one tensor with each of `refs`, of the same shape.
void validate_v(const V& v, const V& refs, const char* op, const char* what) {
  TS_CHECK(v.size() == refs.size(), ValueError, op, ": v is a tuple of invalid length: should be ", refs.size(),
           " but got ", v.size(), ".");
  for (size_t i = 0; i < v.size(); ++i)
    TS_CHECK(v[i].defined() && v[i].sizes() == refs[i].sizes(), ShapeError, op, ": Entry ", i,
             " in v has invalid size: should be ", refs[i].sizes(), " but got ",
             v[i].defined() ? v[i].sizes() : Shape{}, " (one entry per ", what, ", of its shape).");
}

// The unit vector of element k of a tensor like `t`.
Tensor seed_like(const Tensor& t, int64_t k) {
  Tensor s = zeros({t.numel()}, TensorOptions(t.dtype(), t.device()));
  {
    NoGradGuard g;
    s.select(0, k).fill_(1);
  }
  return s.view(t.sizes());
}

Shape concat(const Shape& a, const Shape& b) {
  Shape s = a;
  s.insert(s.end(), b.begin(), b.end());
  return s;
}

// Reverse mode, one output element at a time; J[i][j] of shape outputs[i] + inputs[j].
std::vector<V> jacobian_rows(const V& outputs, const V& inputs, bool create_graph, bool strict, const char* op) {
  std::vector<V> jac(outputs.size(), V(inputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    std::vector<V> rows(inputs.size());  // rows[j][k]: d out[k] / d inputs[j]
    for (int64_t k = 0; k < out.numel(); ++k) {
      V g = grad_of({out}, inputs, {seed_like(out, k)}, create_graph);
      for (size_t j = 0; j < inputs.size(); ++j) {
        TS_CHECK(!(strict && !g[j].defined()), ValueError, op, ": Output ", i,
                 " of the user-provided function is independent of input ", j, ". This is not allowed in strict mode.");
        rows[j].push_back(g[j].defined() ? g[j] : zeros_like(inputs[j]));
      }
    }
    for (size_t j = 0; j < inputs.size(); ++j) {
      const Shape shape = concat(out.sizes(), inputs[j].sizes());
      jac[i][j] = rows[j].empty() ? zeros(shape, TensorOptions(out.dtype(), out.device()))
                                  : stack(rows[j], 0).reshape(shape);
    }
  }
  return jac;
}

Shape prepend(int64_t n, const Shape& s) {
  Shape r = {n};
  r.insert(r.end(), s.begin(), s.end());
  return r;
}

// The standard basis over the elements of all of `ts` (n = their total count): one (n, numel_i)
// tensor per t_i, the identity in rows [offset_i, offset_i + numel_i), zeros elsewhere, as PyTorch's
// _construct_standard_basis_for.
V standard_basis(const V& ts, int64_t n) {
  V out;
  int64_t offset = 0;
  for (const Tensor& t : ts) {
    const int64_t k = t.numel();
    const TensorOptions o(t.dtype(), t.device());
    out.push_back(cat({zeros({offset, k}, o), eye(k, std::nullopt, o), zeros({n - offset - k, k}, o)}, 0));
    offset += k;
  }
  return out;
}

int64_t total_numel(const V& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.numel();
  return n;
}

// vectorize=true, reverse mode: all rows of the Jacobian in one batched backward whose vectors are
// the standard basis of the outputs' elements (PyTorch's vmap over autograd.grad).
std::vector<V> jacobian_rows_vectorized(const V& outputs, const V& inputs, bool create_graph) {
  const int64_t n = total_numel(outputs);
  V g(inputs.size());
  if (n > 0) {
    V flat, basis = standard_basis(outputs, n);
    for (size_t i = 0; i < outputs.size(); ++i) {
      flat.push_back(outputs[i].reshape({-1}));
      basis[i] = basis[i].reshape(prepend(n, flat.back().sizes()));
    }
    g = grad_of(flat, inputs, basis, create_graph, /*batched=*/true);
  }
  std::vector<V> jac(outputs.size(), V(inputs.size()));
  int64_t offset = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int64_t k = outputs[i].numel();
    for (size_t j = 0; j < inputs.size(); ++j) {
      const Shape shape = concat(outputs[i].sizes(), inputs[j].sizes());
      jac[i][j] = g[j].defined() ? g[j].narrow(0, offset, k).reshape(shape)
                                 : zeros(shape, TensorOptions(inputs[j].dtype(), inputs[j].device()));
    }
    offset += k;
  }
  return jac;
}

// strategy="forward-mode" (vectorize=true): the columns J e of every input element e in one batched
// pass. tessera has no forward-mode AD; a column is the derivative of u -> J^T u (linear in u) in the
// direction e, which reverse mode gives twice over (the double-backward trick jvp uses), so the values
// are those of forward mode while the cost is that of two reverse passes.
std::vector<V> jacobian_columns_vectorized(const V& outputs, const V& inputs) {
  V us;
  for (const Tensor& o : outputs) us.push_back(zeros_like(o).requires_grad_());
  V vjps = grad_of(outputs, inputs, us, /*create_graph=*/true);  // J^T u, one per input
  const int64_t n = total_numel(inputs);
  V cols(outputs.size());
  if (n > 0) {
    V basis = standard_basis(inputs, n), seeds, dirs;
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (!vjps[j].defined() || !vjps[j].requires_grad()) continue;  // J^T u does not depend on u: zero columns
      seeds.push_back(vjps[j]);
      dirs.push_back(basis[j].reshape(prepend(n, inputs[j].sizes())));
    }
    if (!seeds.empty()) cols = grad(seeds, us, dirs, true, false, /*allow_unused=*/true, /*is_grads_batched=*/true);
  }
  std::vector<V> jac(outputs.size(), V(inputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    int64_t offset = 0;
    for (size_t j = 0; j < inputs.size(); ++j) {
      const int64_t k = inputs[j].numel();
      const Shape shape = concat(outputs[i].sizes(), inputs[j].sizes());
      if (cols[i].defined()) {
        // (k, *out_i): column e of input j is row e; the Jacobian wants the output's dims first.
        jac[i][j] = cols[i].narrow(0, offset, k).reshape({k, outputs[i].numel()}).t().reshape(shape);
      } else {
        jac[i][j] = zeros(shape, TensorOptions(outputs[i].dtype(), outputs[i].device()));
      }
      offset += k;
    }
  }
  return jac;
}

// PyTorch's checks of vectorize / strategy, in its order and words.
void check_jacobian_options(const char* op, bool create_graph, bool strict, bool vectorize, const std::string& strategy) {
  TS_CHECK(strategy == "forward-mode" || strategy == "reverse-mode", ValueError, op,
           ": Expected strategy to be either \"forward-mode\" or \"reverse-mode\". Hint: If your function has more "
           "outputs than inputs, \"forward-mode\" tends to be more performant. Otherwise, prefer to use "
           "\"reverse-mode\". (got \"", strategy, "\")");
  if (strategy == "forward-mode") {
    TS_CHECK(!create_graph, NotImplementedError, op, ": `create_graph=True` and `strategy=\"forward-mode\"` are not "
             "supported together (yet). Please either set `create_graph=False` or `strategy=\"reverse-mode\"`.");
    TS_CHECK(!strict, ValueError, op, ": `strict=True` and `strategy=\"forward-mode\"` are not supported together "
             "(yet). Please either set `strict=False` or `strategy=\"reverse-mode\"`.");
    TS_CHECK(vectorize, NotImplementedError, op, ": Computing Jacobian using forward-AD or forward-over-reverse "
             "Hessian is only implemented for `vectorize=True`.");
    return;
  }
  TS_CHECK(!(vectorize && strict), ValueError, op, ": `strict=True` and `vectorized=True` are not supported "
           "together. Please either set `strict=False` or `vectorize=False`.");
}

Tensor single_element_output(const ScalarFn& fn, const V& inputs, const char* op) {
  Tensor out = fn(inputs);
  TS_CHECK(out.defined(), ValueError, op, ": The function given to ", op, " should return a single Tensor");
  TS_CHECK(out.numel() == 1, ValueError, op, ": The Tensor returned by the function given to ", op,
           " should contain a single element");
  check_outputs({out}, op);
  return out.reshape({});
}

}  // namespace

std::vector<V> jacobian(const Fn& fn, const V& inputs, bool create_graph, bool strict, bool vectorize,
                        const std::string& strategy) {
  check_jacobian_options("jacobian", create_graph, strict, vectorize, strategy);
  EnableGradGuard grad_on;
  V in = preprocess(inputs, create_graph, true, "jacobian");
  V outputs = fn(in);
  check_outputs(outputs, "jacobian");
  std::vector<V> jac = strategy == "forward-mode" ? jacobian_columns_vectorized(outputs, in)
                       : vectorize              ? jacobian_rows_vectorized(outputs, in, create_graph)
                                                : jacobian_rows(outputs, in, create_graph, strict, "jacobian");
  for (V& row : jac) row = postprocess(std::move(row), create_graph);
  return jac;
}

Tensor jacobian(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, bool create_graph, bool strict,
                bool vectorize, const std::string& strategy) {
  return jacobian([&](const V& in) { return V{fn(in[0])}; }, {input}, create_graph, strict, vectorize, strategy)[0][0];
}

std::vector<V> hessian(const ScalarFn& fn, const V& inputs, bool create_graph, bool strict, bool vectorize,
                       const std::string& outer_jacobian_strategy) {
  check_jacobian_options("hessian", create_graph, strict, vectorize, outer_jacobian_strategy);
  EnableGradGuard grad_on;
  V in = preprocess(inputs, create_graph, true, "hessian");
  Tensor out = single_element_output(fn, in, "hessian");
  // The outer Jacobian is of the gradient, which must keep its graph.
  V g = fill_in_zeros(grad_of({out}, in, {}, /*create_graph=*/true), in, strict, Stage::Back, "hessian");
  if (vectorize) {
    // The Jacobian of the gradient, all of it in one batched pass (forward mode: its columns).
    std::vector<V> hes = outer_jacobian_strategy == "forward-mode" ? jacobian_columns_vectorized(g, in)
                                                                   : jacobian_rows_vectorized(g, in, create_graph);
    for (V& row : hes) row = postprocess(std::move(row), create_graph);
    return hes;
  }
  std::vector<V> hes(in.size(), V(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    for (size_t j = 0; j < in.size(); ++j) {
      std::vector<Tensor> rows;
      for (int64_t k = 0; k < g[i].numel(); ++k) {
        Tensor r;
        if (g[i].requires_grad()) r = grad_of({g[i]}, {in[j]}, {seed_like(g[i], k)}, create_graph)[0];
        TS_CHECK(!(strict && !r.defined()), ValueError, "hessian: The jacobian of the user-provided function is "
                 "independent of input ", j, ". This is not allowed in strict mode.");
        rows.push_back(r.defined() ? r : zeros_like(in[j]));
      }
      const Shape shape = concat(in[i].sizes(), in[j].sizes());
      hes[i][j] = rows.empty() ? zeros(shape, TensorOptions(in[j].dtype(), in[j].device())) : stack(rows, 0).reshape(shape);
    }
    hes[i] = postprocess(std::move(hes[i]), create_graph);
  }
  return hes;
}

Tensor hessian(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, bool create_graph, bool strict,
               bool vectorize, const std::string& outer_jacobian_strategy) {
  return hessian([&](const V& in) { return fn(in[0]); }, {input}, create_graph, strict, vectorize,
                 outer_jacobian_strategy)[0][0];
}

std::pair<V, V> vjp(const Fn& fn, const V& inputs, const V& v, bool create_graph, bool strict) {
  EnableGradGuard grad_on;
  V in = preprocess(inputs, create_graph, true, "vjp");
  V outputs = fn(in);
  check_outputs(outputs, "vjp");
  V vs = v;
  if (vs.empty()) {
    TS_CHECK(outputs.size() == 1 && outputs[0].numel() == 1, ValueError, "vjp: The vector v can only be None if the "
             "user-provided function returns a single Tensor with a single element.");
    vs = {ones_like(outputs[0])};
  }
  validate_v(vs, outputs, "vjp", "output");
  V res = fill_in_zeros(grad_of(outputs, in, vs, create_graph), in, strict, Stage::Back, "vjp");
  return {postprocess(outputs, create_graph), postprocess(res, create_graph)};
}

std::pair<V, V> jvp(const Fn& fn, const V& inputs, const V& v, bool create_graph, bool strict) {
  EnableGradGuard grad_on;
  V in = preprocess(inputs, create_graph, true, "jvp");
  V vs = v;
  if (vs.empty()) {
    TS_CHECK(in.size() == 1 && in[0].numel() == 1, ValueError, "jvp: The vector v can only be None if the input to "
             "the user-provided function is a single Tensor with a single element.");
    vs = {ones_like(in[0])};
  }
  validate_v(vs, in, "jvp", "input");
  V outputs = fn(in);
  check_outputs(outputs, "jvp");
  // The double-backward trick: u -> J^T u is linear in u, so differentiating it with respect to u in
  // the direction v gives J v.
  V grad_outputs;
  for (const Tensor& o : outputs) grad_outputs.push_back(zeros_like(o).requires_grad_());
  V grad_inputs = grad_of(outputs, in, grad_outputs, /*create_graph=*/true);
  grad_inputs = fill_in_zeros(grad_inputs, in, strict, Stage::Back, "jvp");
  V res = grad_of(grad_inputs, grad_outputs, vs, create_graph);
  res = fill_in_zeros(res, outputs, strict, Stage::BackTrick, "jvp");
  return {postprocess(outputs, create_graph), postprocess(res, create_graph)};
}

std::pair<Tensor, V> vhp(const ScalarFn& fn, const V& inputs, const V& v, bool create_graph, bool strict) {
  EnableGradGuard grad_on;
  V in = preprocess(inputs, create_graph, true, "vhp");
  Tensor out = single_element_output(fn, in, "vhp");
  V vs = v;
  if (vs.empty()) {
    TS_CHECK(in.size() == 1 && in[0].numel() == 1, ValueError, "vhp: The vector v can only be None if the input to "
             "the user-provided function is a single Tensor with a single element.");
    vs = {ones_like(in[0])};
  }
  validate_v(vs, in, "vhp", "input");
  V jac = fill_in_zeros(grad_of({out}, in, {}, /*create_graph=*/true), in, strict, Stage::Back, "vhp");
  V res = fill_in_zeros(grad_of(jac, in, vs, create_graph), in, strict, Stage::DoubleBack, "vhp");
  return {postprocess({out}, create_graph)[0], postprocess(res, create_graph)};
}

std::pair<Tensor, V> hvp(const ScalarFn& fn, const V& inputs, const V& v, bool create_graph, bool strict) {
  EnableGradGuard grad_on;
  V in = preprocess(inputs, create_graph, true, "hvp");
  Tensor out = single_element_output(fn, in, "hvp");
  V vs = v;
  if (vs.empty()) {
    TS_CHECK(in.size() == 1 && in[0].numel() == 1, ValueError, "hvp: The vector v can only be None if the input to "
             "the user-provided function is a single Tensor with a single element.");
    vs = {ones_like(in[0])};
  }
  validate_v(vs, in, "hvp", "input");
  // As PyTorch: H v through the double-backward trick, u -> H^T u differentiated in u.
  V jac = fill_in_zeros(grad_of({out}, in, {}, /*create_graph=*/true), in, strict, Stage::Back, "hvp");
  V grad_jac;
  for (const Tensor& t : in) grad_jac.push_back(zeros_like(t).requires_grad_());
  V double_back = fill_in_zeros(grad_of(jac, in, grad_jac, /*create_graph=*/true), in, strict, Stage::DoubleBack, "hvp");
  V res = fill_in_zeros(grad_of(double_back, grad_jac, vs, create_graph), in, strict, Stage::DoubleBackTrick, "hvp");
  return {postprocess({out}, create_graph)[0], postprocess(res, create_graph)};
}

}  // namespace tessera::autograd::functional
