// tessera's side of a random program: one table from op name to a call of the public API. The names
// and attributes match program_oracle.py's OPS table line for line.
#include "programs/interpreter.h"

#include <functional>
#include <map>

#include "tessera/nn/functional.h"

namespace tessera::programs {
namespace {

using Args = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Args&, const Json&, Device)>;

Scalar scalar_of(const Json& v) {
  if (v.is_boolean()) return Scalar(v.get<bool>());
  if (v.is_number_integer()) return Scalar(v.get<int64_t>());
  return Scalar(v.get<double>());
}

Shape shape_of(const Json& v) { return v.get<std::vector<int64_t>>(); }

DType dtype_of(const Json& v) {
  const std::string s = v.get<std::string>();
  for (DType d : {kFloat16, kBFloat16, kFloat32, kFloat64, kInt64, kInt32, kBool})
    if (s == dtype_name(d)) return d;
  TS_CHECK(false, ValueError, "random program: unknown dtype '", s, "'");
  return kFloat32;
}

std::optional<int64_t> opt_dim(const Json& a) {
  if (!a.contains("dim") || a["dim"].is_null()) return std::nullopt;
  return a["dim"].get<int64_t>();
}

using Unary = Tensor (*)(const Tensor&);

OpFn unary(Unary f) {
  return [f](const Args& x, const Json&, Device) { return f(x[0]); };
}

const std::map<std::string, OpFn>& table() {
  static const std::map<std::string, OpFn> t = [] {
    std::map<std::string, OpFn> m;
    namespace F = nn::functional;
    // elementwise, one input
    m["neg"] = unary(&neg);
    m["abs"] = unary(&abs);
    m["exp"] = unary(&exp);
    m["expm1"] = unary(&expm1);
    m["log"] = unary(&log);
    m["log1p"] = unary(&log1p);
    m["sqrt"] = unary(&sqrt);
    m["rsqrt"] = unary(&rsqrt);
    m["reciprocal"] = unary(&reciprocal);
    m["tanh"] = unary(&tanh);
    m["sigmoid"] = unary(&sigmoid);
    m["sin"] = unary(&sin);
    m["cos"] = unary(&cos);
    m["relu"] = unary(&relu);
    m["silu"] = unary(&silu);
    m["erf"] = unary(&erf);
    m["floor"] = unary(&floor);
    m["logical_not"] = unary(&logical_not);
    m["gelu"] = [](const Args& x, const Json& a, Device) { return gelu(x[0], a.value("approximate", "none")); };
    m["softplus"] = [](const Args& x, const Json&, Device) { return softplus(x[0]); };
    m["pow_scalar"] = [](const Args& x, const Json& a, Device) { return pow(x[0], scalar_of(a["exponent"])); };
    m["clamp"] = [](const Args& x, const Json& a, Device) {
      return clamp(x[0], std::optional<Scalar>(scalar_of(a["min"])), std::optional<Scalar>(scalar_of(a["max"])));
    };
    m["add_scalar"] = [](const Args& x, const Json& a, Device) { return add(x[0], scalar_of(a["value"])); };
    m["sub_scalar"] = [](const Args& x, const Json& a, Device) { return sub(x[0], scalar_of(a["value"])); };
    m["mul_scalar"] = [](const Args& x, const Json& a, Device) { return mul(x[0], scalar_of(a["value"])); };
    m["div_scalar"] = [](const Args& x, const Json& a, Device) { return div(x[0], scalar_of(a["value"])); };
    m["gt_scalar"] = [](const Args& x, const Json& a, Device) { return gt(x[0], scalar_of(a["value"])); };
    m["lt_scalar"] = [](const Args& x, const Json& a, Device) { return lt(x[0], scalar_of(a["value"])); };
    m["to_dtype"] = [](const Args& x, const Json& a, Device) { return x[0].to(dtype_of(a["dtype"])); };
    // elementwise, two or three inputs (broadcasting)
    m["add"] = [](const Args& x, const Json&, Device) { return add(x[0], x[1]); };
    m["sub"] = [](const Args& x, const Json&, Device) { return sub(x[0], x[1]); };
    m["mul"] = [](const Args& x, const Json&, Device) { return mul(x[0], x[1]); };
    m["div"] = [](const Args& x, const Json&, Device) { return div(x[0], x[1]); };
    m["maximum"] = [](const Args& x, const Json&, Device) { return maximum(x[0], x[1]); };
    m["minimum"] = [](const Args& x, const Json&, Device) { return minimum(x[0], x[1]); };
    m["gt"] = [](const Args& x, const Json&, Device) { return gt(x[0], x[1]); };
    m["lt"] = [](const Args& x, const Json&, Device) { return lt(x[0], x[1]); };
    m["eq"] = [](const Args& x, const Json&, Device) { return eq(x[0], x[1]); };
    m["logical_and"] = [](const Args& x, const Json&, Device) { return logical_and(x[0], x[1]); };
    m["where"] = [](const Args& x, const Json&, Device) { return where(x[0], x[1], x[2]); };
    m["masked_fill"] = [](const Args& x, const Json& a, Device) { return masked_fill(x[0], x[1], scalar_of(a["value"])); };
    m["lerp"] = [](const Args& x, const Json& a, Device) { return lerp(x[0], x[1], scalar_of(a["weight"])); };
    // reductions
    auto dims = [](const Json& a) { return Dims(a.at("dims").get<std::vector<int64_t>>()); };
    m["sum"] = [dims](const Args& x, const Json& a, Device) { return sum(x[0], dims(a), a.value("keepdim", false)); };
    m["mean"] = [dims](const Args& x, const Json& a, Device) { return mean(x[0], dims(a), a.value("keepdim", false)); };
    m["prod"] = [dims](const Args& x, const Json& a, Device) { return prod(x[0], dims(a), a.value("keepdim", false)); };
    m["amax"] = [dims](const Args& x, const Json& a, Device) { return amax(x[0], dims(a), a.value("keepdim", false)); };
    m["amin"] = [dims](const Args& x, const Json& a, Device) { return amin(x[0], dims(a), a.value("keepdim", false)); };
    m["logsumexp"] = [dims](const Args& x, const Json& a, Device) { return logsumexp(x[0], dims(a), a.value("keepdim", false)); };
    m["var"] = [dims](const Args& x, const Json& a, Device) {
      return var(x[0], std::optional<Dims>(dims(a)), a.at("correction").get<double>(), a.value("keepdim", false));
    };
    m["std"] = [dims](const Args& x, const Json& a, Device) {
      return tessera::std(x[0], std::optional<Dims>(dims(a)), a.at("correction").get<double>(), a.value("keepdim", false));
    };
    m["norm"] = [dims](const Args& x, const Json& a, Device) {
      return norm(x[0], 2.0, std::optional<Dims>(dims(a)), a.value("keepdim", false));
    };
    m["argmax"] = [](const Args& x, const Json& a, Device) { return argmax(x[0], opt_dim(a), a.value("keepdim", false)); };
    m["argmin"] = [](const Args& x, const Json& a, Device) { return argmin(x[0], opt_dim(a), a.value("keepdim", false)); };
    m["cumsum"] = [](const Args& x, const Json& a, Device) { return cumsum(x[0], a.at("dim").get<int64_t>()); };
    m["softmax"] = [](const Args& x, const Json& a, Device) { return softmax(x[0], a.at("dim").get<int64_t>()); };
    m["log_softmax"] = [](const Args& x, const Json& a, Device) { return log_softmax(x[0], a.at("dim").get<int64_t>()); };
    m["layer_norm"] = [](const Args& x, const Json& a, Device) {
      std::optional<Tensor> w, b;
      if (x.size() > 1) w = x[1];
      if (x.size() > 2) b = x[2];
      return F::layer_norm(x[0], shape_of(a.at("normalized_shape")), w, b);
    };
    // views and shape ops
    m["reshape"] = [](const Args& x, const Json& a, Device) { return reshape(x[0], shape_of(a.at("shape"))); };
    m["view"] = [](const Args& x, const Json& a, Device) { return x[0].view(shape_of(a.at("shape"))); };
    m["permute"] = [](const Args& x, const Json& a, Device) { return permute(x[0], shape_of(a.at("dims"))); };
    m["transpose"] = [](const Args& x, const Json& a, Device) {
      return transpose(x[0], a.at("dim0").get<int64_t>(), a.at("dim1").get<int64_t>());
    };
    m["t"] = [](const Args& x, const Json&, Device) { return x[0].t(); };
    m["slice"] = [](const Args& x, const Json& a, Device) {
      return x[0].slice(a.at("dim").get<int64_t>(), a.at("start").get<int64_t>(), a.at("end").get<int64_t>(),
                        a.at("step").get<int64_t>());
    };
    m["narrow"] = [](const Args& x, const Json& a, Device) {
      return narrow(x[0], a.at("dim").get<int64_t>(), a.at("start").get<int64_t>(), a.at("length").get<int64_t>());
    };
    m["select"] = [](const Args& x, const Json& a, Device) {
      return select(x[0], a.at("dim").get<int64_t>(), a.at("index").get<int64_t>());
    };
    m["unsqueeze"] = [](const Args& x, const Json& a, Device) { return unsqueeze(x[0], a.at("dim").get<int64_t>()); };
    m["squeeze"] = [](const Args& x, const Json& a, Device) {
      return a.contains("dim") ? x[0].squeeze(a["dim"].get<int64_t>()) : x[0].squeeze();
    };
    m["flatten"] = [](const Args& x, const Json& a, Device) {
      return flatten(x[0], a.at("start").get<int64_t>(), a.at("end").get<int64_t>());
    };
    m["expand"] = [](const Args& x, const Json& a, Device) { return x[0].expand(shape_of(a.at("shape"))); };
    m["contiguous"] = [](const Args& x, const Json&, Device) { return x[0].contiguous(); };
    m["clone"] = [](const Args& x, const Json&, Device) { return clone(x[0]); };
    m["flip"] = [](const Args& x, const Json& a, Device) { return flip(x[0], shape_of(a.at("dims"))); };
    m["repeat"] = [](const Args& x, const Json& a, Device) { return repeat(x[0], shape_of(a.at("repeats"))); };
    m["cat"] = [](const Args& x, const Json& a, Device) { return cat(x, a.at("dim").get<int64_t>()); };
    m["stack"] = [](const Args& x, const Json& a, Device) { return stack(x, a.at("dim").get<int64_t>()); };
    // products and indexing
    m["matmul"] = [](const Args& x, const Json&, Device) { return matmul(x[0], x[1]); };
    m["index_select"] = [](const Args& x, const Json& a, Device) { return index_select(x[0], a.at("dim").get<int64_t>(), x[1]); };
    m["gather"] = [](const Args& x, const Json& a, Device) { return gather(x[0], a.at("dim").get<int64_t>(), x[1]); };
    m["index"] = [](const Args& x, const Json&, Device) { return index(x[0], {x[1]}); };
    // factories (on the program's device)
    m["zeros_like"] = [](const Args& x, const Json&, Device) { return zeros_like(x[0]); };
    m["ones_like"] = [](const Args& x, const Json&, Device) { return ones_like(x[0]); };
    m["full_like"] = [](const Args& x, const Json& a, Device) { return full_like(x[0], scalar_of(a.at("value"))); };
    m["arange"] = [](const Args&, const Json& a, Device d) {
      return arange(scalar_of(a.at("start")), scalar_of(a.at("end")), scalar_of(a.at("step")), {dtype_of(a.at("dtype")), d});
    };
    m["linspace"] = [](const Args&, const Json& a, Device d) {
      return linspace(a.at("start").get<double>(), a.at("end").get<double>(), a.at("steps").get<int64_t>(),
                      {dtype_of(a.at("dtype")), d});
    };
    m["full"] = [](const Args&, const Json& a, Device d) {
      return full(shape_of(a.at("shape")), scalar_of(a.at("value")), {dtype_of(a.at("dtype")), d});
    };
    return m;
  }();
  return t;
}

const char* error_class(const Error& e) {
  if (dynamic_cast<const ShapeError*>(&e)) return "ShapeError";
  if (dynamic_cast<const DTypeError*>(&e)) return "DTypeError";
  if (dynamic_cast<const DeviceError*>(&e)) return "DeviceError";
  if (dynamic_cast<const IndexError*>(&e)) return "IndexError";
  if (dynamic_cast<const ValueError*>(&e)) return "ValueError";
  if (dynamic_cast<const NotImplementedError*>(&e)) return "NotImplementedError";
  return "Error";
}

}  // namespace

std::vector<std::string> interpreter_ops() {
  std::vector<std::string> r;
  for (const auto& [name, fn] : table()) r.push_back(name);
  return r;
}

namespace {

// Op step k of `p` on the values of the steps before it.
Tensor run_step(const Program& p, int k, const std::vector<Tensor>& v, Device device) {
  const Step& s = p.steps[k];
  auto it = table().find(s.op);
  TS_CHECK(it != table().end(), ValueError, "random program: unknown op '", s.op, "' at step ", k);
  Args args;
  for (int i : s.in) args.push_back(v[i]);
  return it->second(args, s.attrs, device);
}

}  // namespace

std::vector<Tensor> run_ops(const Program& p, const std::vector<Tensor>& inputs, Device device) {
  std::vector<Tensor> v(p.steps.size());
  size_t next_input = 0;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    if (s.op == "input") {
      TS_CHECK(next_input < inputs.size(), ValueError, "run_ops: the program has more input steps than the ",
               inputs.size(), " values given");
      v[k] = inputs[next_input++];
      continue;
    }
    v[k] = run_step(p, static_cast<int>(k), v, device);
  }
  std::vector<Tensor> out;
  for (int o : p.outputs) out.push_back(v[o]);
  return out;
}

RunResult run_program(const Program& p, Device device, const std::vector<Tensor>& weights) {
  RunResult r;
  std::vector<Tensor> v(p.steps.size());
  std::vector<int> leaves;
  int k = 0;
  try {
    for (k = 0; k < static_cast<int>(p.steps.size()); ++k) {
      const Step& s = p.steps[k];
      if (s.op == "input") {
        v[k] = materialize_input(s, device);
        if (s.requires_grad) leaves.push_back(k);
        continue;
      }
      v[k] = run_step(p, k, v, device);
    }
  } catch (const Error& e) {
    r.error_step = k;
    r.error = std::string(error_class(e)) + ": " + e.what();
    return r;
  }
  for (int o : p.outputs) r.outputs.push_back(v[o]);
  r.grads.resize(p.steps.size());
  if (weights.empty() || leaves.empty()) {
    for (Tensor& t : r.outputs) t = t.detach();
    return r;
  }
  Tensor loss;
  for (size_t j = 0; j < r.outputs.size(); ++j) {
    const Tensor& o = r.outputs[j];
    if (j >= weights.size() || !weights[j].defined() || !o.is_floating_point() || !o.requires_grad()) continue;
    TS_CHECK(weights[j].sizes() == o.sizes(), ShapeError, "random program: output ", j, " has sizes ", o.sizes(),
             " but PyTorch's has ", weights[j].sizes());
    Tensor w = weights[j].to(device);
    Tensor term = (o.to(kFloat64) * w).sum();
    loss = loss.defined() ? loss + term : term;
  }
  if (loss.defined()) {
    r.has_loss = true;
    std::vector<Tensor> wrt;
    for (int i : leaves) wrt.push_back(v[i]);
    try {
      std::vector<Tensor> g = autograd::grad({loss}, wrt, {}, std::nullopt, false, /*allow_unused=*/true);
      for (size_t i = 0; i < leaves.size(); ++i) r.grads[leaves[i]] = g[i];
    } catch (const Error& e) {
      r.error_step = static_cast<int>(p.steps.size());  // the backward
      r.error = std::string(error_class(e)) + " in backward: " + e.what();
    }
  }
  for (Tensor& t : r.outputs) t = t.detach();
  return r;
}

}  // namespace tessera::programs
