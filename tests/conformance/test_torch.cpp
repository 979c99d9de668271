// The conformance suite's C++ side. Run with `--write-inputs FILE` it writes every case's inputs and
// torch expression to a safetensors file (the oracle step of ctest, see CMakeLists.txt, then runs
// PyTorch once over them). Run as a test, it registers one GoogleTest per case and suite:
//   Conformance.<case>, ConformanceGrad.<case>          tessera on the CPU against PyTorch (ctest label
//                                                       `conformance`);
//   ConformanceBatchedGrad.<case>                       its backward over a batch of grad_outputs against
//                                                       one backward per vector (no oracle needed);
//   ConformanceCuda.<case>, ConformanceCudaGrad.<case>  the same case with its inputs moved to the GPU
//                                                       (same layouts), compared after .cpu() with
//                                                       PyTorch's outputs and, when the oracle saw a GPU,
//                                                       with PyTorch's CUDA outputs (label `gpu`);
//   ConformanceCudaSummary.cases_run_on_cuda            runs every case on the GPU in one process and
//                                                       prints how many ran there, and which kernels
//                                                       are missing.
// The GPU suites skip without a GPU (also under CI=true: CI has no GPU). On the GPU, a missing kernel
// (NotImplementedError) is a failure, never an expected error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "conformance/cases.h"
#include "ops/table/op_table.h"

namespace ts = tessera;
using tessera::conformance::Case;

namespace {

const ts::Device kGpu = ts::Device::cuda(0);

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

bool under_ci() { return std::getenv("CI") && std::string(std::getenv("CI")) == "true"; }

// A case takes part in the gradient comparison when it compares values, has a floating input and
// its op gives a floating output: PyTorch and tessera then differentiate the same weighted sum of
// the outputs (weights written by the C++ side as "<case>/w<j>") with respect to the floating inputs.
// A gradient case: values compared, a floating input, a case not marked as taking no gradient, and an
// op that the table does not mark as having none (predicates, bitwise ops, argmax... get no
// ConformanceGrad test, rather than a skipped one).
bool is_grad_case(const Case& c) {
  if (!c.compare_values || c.expect_error || !c.differentiable) return false;
  if (const auto id = ts::op_from_name(c.op); id && ts::op_info(*id).grad == ts::OpGrad::None) return false;
  bool float_in = false;
  for (const ts::Tensor& t : c.inputs) float_in = float_in || t.is_floating_point();
  return float_in;
}

std::vector<ts::Tensor> float_outputs(const std::vector<ts::Tensor>& outs) {
  std::vector<ts::Tensor> r;
  for (const ts::Tensor& o : outs) r.push_back(o.is_floating_point() ? o : ts::Tensor());
  return r;
}

// The same values on `dev`, stored with the same sizes, strides and storage offset, so that a GPU
// kernel sees the transposed, stepped and offset layouts the CPU kernel saw (Tensor::to would make
// non-dense views contiguous). Expanded dims (stride 0) are expanded again on the device.
ts::Tensor to_device_keep_layout(const ts::Tensor& t, ts::Device dev) {
  if (!t.defined() || t.device() == dev) return t;
  if (t.numel() == 0 || t.is_contiguous()) return t.to(dev);
  ts::Tensor base = t;
  bool expanded = false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) {
      base = base.narrow(d, 0, 1);
      expanded = true;
    }
  }
  int64_t extent = base.storage_offset() + 1;
  for (int64_t d = 0; d < base.dim(); ++d) {
    if (base.stride(d) < 0) return t.to(dev);
    extent += (base.size(d) - 1) * base.stride(d);
  }
  ts::Tensor host = ts::zeros({extent}, base.dtype());
  host.as_strided(base.sizes(), base.strides(), base.storage_offset()).copy_(base);
  ts::Tensor v = host.to(dev).as_strided(base.sizes(), base.strides(), base.storage_offset());
  return expanded ? v.expand(t.sizes()) : v;
}

std::vector<ts::Tensor> to_device(const std::vector<ts::Tensor>& in, ts::Device dev) {
  std::vector<ts::Tensor> r;
  for (const ts::Tensor& t : in) r.push_back(to_device_keep_layout(t, dev));
  return r;
}

// Runs a case with its own factories on `dev` (Note [Case device]).
std::vector<ts::Tensor> run_on(const Case& c, const std::vector<ts::Tensor>& inputs, ts::Device dev) {
  ts::conformance::CaseDevice guard(dev);
  return c.run(inputs);
}

// Whether the case raises NotImplementedError on the CPU as well: then it is the op's answer (as
// PyTorch's NotImplementedError would be), not a kernel missing on the GPU.
bool cpu_raises_not_implemented(const Case& c) {
  try {
    run_on(c, c.inputs, ts::kCPU);
  } catch (const ts::NotImplementedError&) {
    return true;
  } catch (const ts::Error&) {
  }
  return false;
}

std::string missing_kernel(const Case& c, const ts::NotImplementedError& e) {
  return "no CUDA implementation for op '" + c.op + "' yet (a failure: every op must run on the GPU): " + e.what();
}

int write_inputs(const std::string& path, const std::vector<Case>& cases) {
  std::map<std::string, ts::Tensor> tensors;
  std::map<std::string, std::string> meta;
  for (const Case& c : cases) {
    for (size_t i = 0; i < c.inputs.size(); ++i) tensors[c.name + "/in" + std::to_string(i)] = c.inputs[i];
    if (is_grad_case(c)) {
      try {
        std::vector<ts::Tensor> outs = float_outputs(c.run(c.inputs));
        for (size_t j = 0; j < outs.size(); ++j)
          if (outs[j].defined() && outs[j].numel() > 0)
            tensors[c.name + "/w" + std::to_string(j)] = ts::testing::test_data(outs[j].sizes(), outs[j].dtype(), 97 + j);
      } catch (const ts::Error&) {
        // a case where tessera raises has no gradient to compare
      }
    }
    meta["case:" + c.name] = "{\"expr\": \"" + json_escape(c.torch_expr) + "\", \"n\": " + std::to_string(c.inputs.size()) + "}";
  }
  ts::save_safetensors(tensors, path, meta);
  std::set<std::string> ops;
  for (const Case& c : cases) ops.insert(c.op);
  std::cout << "wrote " << cases.size() << " conformance cases over " << ops.size() << " ops to " << path << "\n";
  return 0;
}

struct Oracle {
  bool available = false;
  std::string why;
  std::map<std::string, ts::Tensor> outputs;  // "<case>/out<j>", "<case>/grad<i>", "<case>/cuda_out<j>", ...
  std::map<std::string, ts::Tensor> weights;  // "<case>/w<j>", from the inputs file
  std::map<std::string, std::string> meta;
  bool cuda = false;                          // PyTorch also evaluated every case on its GPU
  std::string cuda_device;

  const std::string* find_meta(const std::string& key) const {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  }
};

const Oracle& oracle() {
  static Oracle o = [] {
    Oracle r;
    const char* path = std::getenv("TESSERA_CONFORMANCE_OUTPUTS");
    if (!path || !std::filesystem::exists(path)) {
      r.why = std::string("no PyTorch outputs at ") + (path ? path : "(TESSERA_CONFORMANCE_OUTPUTS unset)") +
              ": the oracle step (ctest test conformance.oracle) did not run or PyTorch is missing";
      return r;
    }
    ts::SafetensorsFile f(path);
    for (const auto& k : f.keys()) r.outputs[k] = f.get(k);
    r.meta = f.metadata();
    ts::SafetensorsFile in((std::filesystem::path(path).parent_path() / "inputs.safetensors").string());
    for (const auto& k : in.keys())
      if (k.find("/w") != std::string::npos) r.weights[k] = in.get(k);
    auto dev = r.meta.find("cuda_device");
    r.cuda = dev != r.meta.end() && !dev->second.empty();
    if (r.cuda) r.cuda_device = dev->second;
    r.available = true;
    return r;
  }();
  return o;
}

// Compares tessera's outputs (any device) with PyTorch's "<case>/<key><j>" outputs.
void compare_outputs(const Case& c, const Oracle& o, const std::vector<ts::Tensor>& got, const std::string& key,
                     const std::string& who) {
  for (size_t j = 0;; ++j) {
    auto it = o.outputs.find(c.name + "/" + key + std::to_string(j));
    if (it == o.outputs.end()) {
      EXPECT_EQ(got.size(), j) << "tessera returned " << got.size() << " outputs, " << who << " " << j;
      break;
    }
    ASSERT_LT(j, got.size()) << who << " returned more outputs than tessera";
    const ts::Tensor& want = it->second;
    ts::Tensor have = got[j].cpu();
    EXPECT_EQ(ts::dtype_name(have.dtype()), std::string(ts::dtype_name(want.dtype())))
        << "output " << j << " dtype (against " << who << ")";
    ASSERT_EQ(have.sizes(), want.sizes()) << "output " << j << " sizes (against " << who << ")";
    if (!c.compare_values) continue;
    ts::testing::Tolerance tol = ts::testing::tolerance_for(have.dtype());
    if (c.tol) tol = {std::max(tol.rtol, c.tol->rtol), std::max(tol.atol, c.tol->atol)};
    EXPECT_TRUE(ts::testing::all_close(have, want, tol)) << "output " << j << " of " << c.torch_expr << " against " << who;
  }
}

// Skips a GPU test without a GPU (also under CI=true), and any test without the oracle (a failure
// under CI=true, where PyTorch must be installed).
#define TS_CONFORMANCE_PRECONDITIONS(dev, o)                                                                   \
  do {                                                                                                         \
    if ((dev).is_cuda() && !ts::cuda::is_available())                                                          \
      GTEST_SKIP() << (ts::cuda::is_built() ? "no CUDA GPU found" : "no CUDA GPU found (tessera built without CUDA)"); \
    if (!(o).available) {                                                                                      \
      if (under_ci()) FAIL() << (o).why;                                                                       \
      GTEST_SKIP() << (o).why;                                                                                 \
    }                                                                                                          \
  } while (0)

// Whether tessera's error `e` is of the class that answers PyTorch's `torch_error` ("Class: message").
// PyTorch's specific classes map one to one (IndexError, ValueError, NotImplementedError; TypeError to
// DTypeError); its generic RuntimeError is split by what its message is about (shapes, dtypes,
// indices), and accepts any tessera error when the message says none of these.
bool same_error_class(const std::string& torch_error, const ts::Error& e) {
  const std::string cls = torch_error.substr(0, torch_error.find(':'));
  const auto has = [&](const char* w) { return torch_error.find(w) != std::string::npos; };
  if (cls == "IndexError") return dynamic_cast<const ts::IndexError*>(&e) != nullptr;
  if (cls == "ValueError") return dynamic_cast<const ts::ValueError*>(&e) != nullptr;
  if (cls == "NotImplementedError") return dynamic_cast<const ts::NotImplementedError*>(&e) != nullptr;
  if (cls == "TypeError") return dynamic_cast<const ts::DTypeError*>(&e) != nullptr;
  if (has("size of tensor") || has("shape") || has("must match") || has("dimension") || has("broadcast"))
    return dynamic_cast<const ts::ShapeError*>(&e) != nullptr;
  if (has("dtype") || has("not implemented for") || has("type "))
    return dynamic_cast<const ts::DTypeError*>(&e) != nullptr;
  if (has("out of range") || has("out of bounds")) return dynamic_cast<const ts::IndexError*>(&e) != nullptr;
  return true;
}

// The outputs PyTorch gave are not all zeros (or all false): a case whose every expected output is
// zero cannot tell a kernel that writes nothing from a right one. Cases whose op makes zeros by
// definition are listed.
void expect_informative(const Case& c, const Oracle& o) {
  static const std::set<std::string> zeros_by_definition = {"zeros__f32", "zeros_like__f16", "sum__empty",
                                                            "equal__diff"};
  if (!c.compare_values || zeros_by_definition.count(c.name)) return;
  bool any = false, nonzero = false;
  for (size_t j = 0;; ++j) {
    auto it = o.outputs.find(c.name + "/out" + std::to_string(j));
    if (it == o.outputs.end()) break;
    if (it->second.numel() == 0) continue;
    any = true;
    nonzero = nonzero || !ts::equal(it->second.to(ts::kFloat64), ts::zeros(it->second.sizes(), ts::kFloat64));
  }
  EXPECT_TRUE(!any || nonzero) << c.name << ": every output PyTorch gives is zero; choose inputs that make it nonzero";
}

void run_case(const Case& c, ts::Device dev) {
  const Oracle& o = oracle();
  TS_CONFORMANCE_PRECONDITIONS(dev, o);
  const bool gpu = dev.is_cuda();
  std::vector<ts::Tensor> inputs = to_device(c.inputs, dev);
  if (const std::string* err = o.find_meta("error:" + c.name)) {
    try {
      run_on(c, inputs, dev);
      // On the GPU an index out of range is found by the kernel and raised at the next point where
      // the host waits for the device (Note [Deferred device checks]): wait here, so the error
      // belongs to this case and not to the next one.
      if (gpu) ts::cuda::synchronize(dev.index());
      ADD_FAILURE() << "PyTorch raised " << *err << " but tessera did not";
    } catch (const ts::NotImplementedError& e) {
      if (gpu && !cpu_raises_not_implemented(c)) FAIL() << missing_kernel(c, e);
      EXPECT_TRUE(same_error_class(*err, e)) << "PyTorch raised " << *err << ", tessera NotImplementedError: " << e.what();
    } catch (const ts::Error& e) {
      EXPECT_TRUE(same_error_class(*err, e)) << "PyTorch raised " << *err << ", tessera another class: " << e.what();
    }
    return;
  }
  ASSERT_FALSE(c.expect_error) << c.torch_expr << ": the case expects PyTorch to raise, and it did not";
  std::vector<ts::Tensor> got;
  try {
    got = run_on(c, inputs, dev);
  } catch (const ts::NotImplementedError& e) {
    if (gpu) FAIL() << missing_kernel(c, e);
    throw;
  }
  if (gpu) {
    for (size_t j = 0; j < got.size(); ++j)
      EXPECT_TRUE(got[j].is_cuda()) << "output " << j << " is on " << got[j].device().str() << ", not on the GPU";
  }
  compare_outputs(c, o, got, "out", "PyTorch");
  expect_informative(c, o);
  if (!gpu) return;
  if (!o.cuda) {
    std::cout << "PyTorch did not see a GPU when the oracle ran: compared with its CPU outputs only\n";
    return;
  }
  if (const std::string* cerr = o.find_meta("cuda_error:" + c.name)) {
    std::cout << "PyTorch on " << o.cuda_device << " raised " << *cerr << " (its CPU did not): compared with its CPU outputs only\n";
    return;
  }
  compare_outputs(c, o, got, "cuda_out", "PyTorch on " + o.cuda_device);
}

// Compares tessera's gradients with PyTorch's "<case>/<key><i>".
void compare_grads(const Case& c, const Oracle& o, const std::vector<ts::Tensor>& grads, const std::vector<ts::Tensor>& wrt,
                   const std::vector<size_t>& wrt_index, const std::string& key, const std::string& who) {
  for (size_t k = 0; k < wrt.size(); ++k) {
    auto want = o.outputs.find(c.name + "/" + key + std::to_string(wrt_index[k]));
    if (want == o.outputs.end()) {
      EXPECT_TRUE(!grads[k].defined() || ts::equal(grads[k], ts::zeros_like(grads[k])))
          << who << " gives input " << wrt_index[k] << " no gradient, tessera a nonzero one";
      continue;
    }
    ts::Tensor have = (grads[k].defined() ? grads[k] : ts::zeros_like(wrt[k])).cpu();
    EXPECT_EQ(ts::dtype_name(have.dtype()), std::string(ts::dtype_name(want->second.dtype())))
        << "grad " << wrt_index[k] << " dtype (against " << who << ")";
    ASSERT_EQ(have.sizes(), want->second.sizes()) << "grad " << wrt_index[k] << " sizes (against " << who << ")";
    // Gradients go through more roundings than outputs: twice the output tolerance, at least 1e-5.
    ts::testing::Tolerance tol = ts::testing::tolerance_for(have.dtype());
    if (c.tol) tol = {std::max(tol.rtol, c.tol->rtol), std::max(tol.atol, c.tol->atol)};
    tol = {std::max(2 * tol.rtol, 1e-5), std::max(2 * tol.atol, 1e-5)};
    // tessera's derivatives of 16-bit inputs run in the 16-bit dtype, op by op, where PyTorch's fused
    // CPU backward kernels keep float32 inside: elements whose gradient nearly cancels differ by more
    // than a relative ulp, so 16-bit gradients are compared relative to the gradient's scale.
    if (have.dtype() == ts::kFloat16 || have.dtype() == ts::kBFloat16)
      tol.atol = std::max(tol.atol, tol.rtol * want->second.abs().max().to(ts::kFloat64).item<double>());
    EXPECT_TRUE(ts::testing::all_close(have, want->second, tol))
        << "gradient of input " << wrt_index[k] << " of " << c.torch_expr << " against " << who;
  }
}

void run_grad_case(const Case& c, ts::Device dev) {
  const Oracle& o = oracle();
  TS_CONFORMANCE_PRECONDITIONS(dev, o);
  const bool gpu = dev.is_cuda();
  if (o.meta.count("error:" + c.name) || o.meta.count("grad_error:" + c.name)) {
    GTEST_SKIP() << "PyTorch computes no gradient here: "
                 << (o.meta.count("grad_error:" + c.name) ? o.meta.at("grad_error:" + c.name) : o.meta.at("error:" + c.name));
  }
  std::vector<ts::Tensor> inputs, wrt, grads;
  std::vector<size_t> wrt_index;
  ts::Tensor loss;
  try {
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      ts::Tensor x = to_device_keep_layout(c.inputs[i].detach(), dev);
      if (x.is_floating_point()) {
        x = x.clone().requires_grad_();
        wrt.push_back(x);
        wrt_index.push_back(i);
      }
      inputs.push_back(x);
    }
    std::vector<ts::Tensor> outs = float_outputs(run_on(c, inputs, dev));
    for (size_t j = 0; j < outs.size(); ++j) {
      auto w = o.weights.find(c.name + "/w" + std::to_string(j));
      if (!outs[j].defined() || w == o.weights.end() || !outs[j].requires_grad()) continue;
      ts::Tensor term = (outs[j] * w->second.to(dev)).sum().to(ts::kFloat64);
      loss = loss.defined() ? loss + term : term;
    }
    bool torch_has_grads = false;
    for (size_t i = 0; i < c.inputs.size(); ++i) torch_has_grads |= o.outputs.count(c.name + "/grad" + std::to_string(i)) > 0;
    if (!loss.defined() || !loss.requires_grad()) {
      if (torch_has_grads) FAIL() << "PyTorch differentiates " << c.torch_expr << " but tessera recorded no gradient";
      GTEST_SKIP() << "neither PyTorch nor tessera differentiates this op";
    }
    grads = ts::autograd::grad({loss}, wrt, {}, std::nullopt, false, true);
  } catch (const ts::NotImplementedError& e) {
    if (gpu) FAIL() << missing_kernel(c, e);
    throw;
  }
  compare_grads(c, o, grads, wrt, wrt_index, "grad", "PyTorch");
  if (!gpu || !o.cuda) return;
  for (const char* k : {"cuda_error:", "cuda_grad_error:"}) {
    if (const std::string* cerr = o.find_meta(k + c.name)) {
      std::cout << "PyTorch on " << o.cuda_device << " raised " << *cerr << " (its CPU did not): compared with its CPU gradients only\n";
      return;
    }
  }
  compare_grads(c, o, grads, wrt, wrt_index, "cuda_grad", "PyTorch on " + o.cuda_device);
}

// Note [Batched gradients] (src/autograd/graph.h), over every gradient case on the CPU: one backward of
// three grad_output vectors at once (autograd::grad with is_grads_batched) gives what one backward per
// vector gives, whether the derivatives met take the batch as it comes or run per vector. Needs no
// oracle: the per-vector backward is the reference (itself compared with PyTorch by ConformanceGrad).
void run_batched_grad_case(const Case& c) {
  constexpr int64_t kBatch = 3;
  std::vector<ts::Tensor> inputs, wrt, outs;
  for (const ts::Tensor& t : c.inputs) {
    ts::Tensor x = t.detach();
    if (x.is_floating_point()) {
      x = x.clone().requires_grad_();
      wrt.push_back(x);
    }
    inputs.push_back(x);
  }
  std::vector<ts::Tensor> batched_go;
  std::vector<std::vector<ts::Tensor>> per_vector(kBatch);
  try {
    for (const ts::Tensor& y : float_outputs(run_on(c, inputs, ts::kCPU)))
      if (y.defined() && y.requires_grad()) outs.push_back(y);
    if (outs.empty()) GTEST_SKIP() << "no output of this case takes a gradient";
    for (size_t j = 0; j < outs.size(); ++j) {
      ts::Shape s = outs[j].sizes();
      s.insert(s.begin(), kBatch);
      batched_go.push_back(ts::testing::test_data(s, outs[j].dtype(), 100 + j, -1, 1));
    }
    for (int64_t b = 0; b < kBatch; ++b) {
      std::vector<ts::Tensor> go;
      for (const ts::Tensor& g : batched_go) go.push_back(g.select(0, b));
      per_vector[b] = ts::autograd::grad(outs, wrt, go, /*retain_graph=*/true, false, /*allow_unused=*/true);
    }
  } catch (const ts::Error& e) {
    GTEST_SKIP() << "tessera computes no gradient here: " << e.what();
  }
  std::vector<ts::Tensor> batched =
      ts::autograd::grad(outs, wrt, batched_go, /*retain_graph=*/true, false, /*allow_unused=*/true, /*batched=*/true);
  ASSERT_EQ(batched.size(), wrt.size());
  for (size_t i = 0; i < wrt.size(); ++i) {
    for (int64_t b = 0; b < kBatch; ++b) {
      const ts::Tensor& want = per_vector[b][i];
      if (!batched[i].defined()) {
        EXPECT_TRUE(!want.defined() || ts::equal(want, ts::zeros_like(want))) << "input " << i << ", vector " << b;
        continue;
      }
      ASSERT_EQ(batched[i].dim(), wrt[i].dim() + 1) << "input " << i;
      const ts::Tensor have = batched[i].select(0, b).to(ts::kFloat64);
      const ts::Tensor ref = (want.defined() ? want : ts::zeros_like(wrt[i])).to(ts::kFloat64);
      ASSERT_EQ(have.sizes(), ref.sizes()) << "input " << i;
      const ts::DType d = wrt[i].dtype();
      const double rtol = d == ts::kFloat64 ? 1e-10 : d == ts::kFloat32 ? 2e-5 : 2e-2;
      const double scale =
          ref.numel() ? ts::where(ts::isfinite(ref), ts::abs(ref), ts::Scalar(0.0)).max().item<double>() + 1.0 : 1.0;
      EXPECT_TRUE(ts::allclose(have, ref, rtol, rtol * scale, /*equal_nan=*/true))
          << "input " << i << ", vector " << b << " of " << c.torch_expr << "\nbatched:\n" << have << "\nper vector:\n" << ref;
    }
  }
}

// Every case (and, for the gradient cases, its backward with unit weights) on the GPU in one process:
// prints how many ran there and lists the ops whose CUDA kernels are missing. Needs no oracle.
void cuda_summary(const std::vector<Case>& cases) {
  if (!ts::cuda::is_available())
    GTEST_SKIP() << (ts::cuda::is_built() ? "no CUDA GPU found" : "no CUDA GPU found (tessera built without CUDA)");
  int ran = 0, raised = 0, grad_total = 0, grad_ran = 0;
  std::map<std::string, std::string> missing;  // op -> first message
  std::vector<std::string> on_host;
  for (const Case& c : cases) {
    bool grad = is_grad_case(c);
    grad_total += grad;
    try {
      std::vector<ts::Tensor> inputs = to_device(c.inputs, kGpu);
      std::vector<ts::Tensor> outs = run_on(c, inputs, kGpu);
      bool all_gpu = true;
      for (const ts::Tensor& t : outs) all_gpu = all_gpu && (!t.defined() || t.is_cuda());
      if (!all_gpu) {
        on_host.push_back(c.name);
        continue;
      }
      ++ran;
      if (!grad) continue;
      std::vector<ts::Tensor> wrt;
      for (ts::Tensor& x : inputs) {
        if (!x.is_floating_point()) continue;
        x = x.detach().clone();
        x.requires_grad_();
        wrt.push_back(x);
      }
      ts::Tensor loss;
      for (const ts::Tensor& y : float_outputs(run_on(c, inputs, kGpu))) {
        if (!y.defined() || !y.requires_grad()) continue;
        ts::Tensor term = y.sum().to(ts::kFloat64);
        loss = loss.defined() ? loss + term : term;
      }
      if (loss.defined()) ts::autograd::grad({loss}, wrt, {}, std::nullopt, false, true);
      ++grad_ran;
    } catch (const ts::NotImplementedError& e) {
      if (cpu_raises_not_implemented(c)) ++raised;
      else missing.emplace(c.op, e.what());
    } catch (const ts::Error&) {
      ++raised;  // an error PyTorch may expect too: the case's own test decides
    }
  }
  std::ostringstream os;
  os << "conformance on cuda: " << ran << " of " << cases.size() << " cases ran on the GPU (" << raised
     << " raised an error that the case's test checks against PyTorch); " << grad_ran << " of " << grad_total
     << " gradient cases ran forward and backward there; " << missing.size() << " ops lack a CUDA kernel; "
     << on_host.size() << " cases left outputs on the host";
  std::cout << os.str() << "\n";
  ::testing::Test::RecordProperty("cases_on_cuda", ran);
  ::testing::Test::RecordProperty("cases_total", static_cast<int>(cases.size()));
  std::string miss;
  for (const auto& [op, msg] : missing) miss += "\n  " + op + ": " + msg;
  EXPECT_TRUE(missing.empty()) << "ops with no CUDA kernel yet:" << miss;
  std::string host;
  for (const std::string& n : on_host) host += "\n  " + n;
  EXPECT_TRUE(on_host.empty()) << "cases whose outputs are not on the GPU (a case that ignores its device):" << host;
}

template <class F>
void register_test(const char* suite, const std::string& name, const char* op, F body) {
  ::testing::RegisterTest(suite, name.c_str(), nullptr, op, __FILE__, __LINE__, [body]() -> ::testing::Test* {
    struct T : ::testing::Test {
      F body;
      explicit T(F b) : body(std::move(b)) {}
      void TestBody() override { body(); }
    };
    return new T(body);
  });
}

}  // namespace

// The walk over the op table (src/ops/table/op_table.def): every op has a conformance case, except the
// ones listed here with the reason. A new op without a case fails, and so does a listed op that has
// gained one (the list must shrink with the holes).
const std::map<std::string, std::string>& ops_without_cases() {
  static const std::map<std::string, std::string> m = {
#include "conformance/ops_without_cases.inc"
  };
  return m;
}

void coverage(const std::vector<Case>& cases) {
  std::set<std::string> covered;
  for (const Case& c : cases) covered.insert(c.op);
  std::vector<std::string> missing, stale;
  for (int i = 0; i < ts::kNumOps; ++i) {
    const std::string name = ts::op_name(static_cast<ts::OpId>(i));
    const bool listed = ops_without_cases().count(name) > 0;
    if (!covered.count(name) && !listed) missing.push_back(name);
    if (covered.count(name) && listed) stale.push_back(name);
  }
  for (const auto& [name, why] : ops_without_cases())
    if (!ts::op_from_name(name)) stale.push_back(name + " (no such op)");
  std::ostringstream m, s;
  for (const std::string& n : missing) m << " " << n;
  for (const std::string& n : stale) s << " " << n;
  EXPECT_TRUE(missing.empty()) << missing.size() << " op(s) of the table without a conformance case:" << m.str();
  EXPECT_TRUE(stale.empty()) << "listed as without a case, but covered (or unknown):" << s.str();
  std::cout << covered.size() << " ops with cases; " << ops_without_cases().size() << " listed without one\n";
}

int main(int argc, char** argv) {
  static std::vector<Case> cases = tessera::conformance::all_cases();
  if (argc == 3 && std::strcmp(argv[1], "--write-inputs") == 0) return write_inputs(argv[2], cases);
  ::testing::InitGoogleTest(&argc, argv);
  for (const Case& c : cases) register_test("Conformance", c.name, c.op.c_str(), [cp = &c] { run_case(*cp, ts::kCPU); });
  for (const Case& c : cases)
    if (is_grad_case(c)) register_test("ConformanceGrad", c.name, c.op.c_str(), [cp = &c] { run_grad_case(*cp, ts::kCPU); });
  for (const Case& c : cases)
    if (is_grad_case(c)) register_test("ConformanceBatchedGrad", c.name, c.op.c_str(), [cp = &c] { run_batched_grad_case(*cp); });
  for (const Case& c : cases) register_test("ConformanceCuda", c.name, c.op.c_str(), [cp = &c] { run_case(*cp, kGpu); });
  for (const Case& c : cases)
    if (is_grad_case(c)) register_test("ConformanceCudaGrad", c.name, c.op.c_str(), [cp = &c] { run_grad_case(*cp, kGpu); });
  register_test("ConformanceCudaSummary", "cases_run_on_cuda", nullptr, [] { cuda_summary(cases); });
  register_test("ConformanceCoverage", "every_op_of_the_table", nullptr, [] { coverage(cases); });
  return RUN_ALL_TESTS();
}
