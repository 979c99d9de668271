// The conformance suite's C++ side. Run with `--write-inputs FILE` it writes every case's inputs and
// torch expression to a safetensors file (the oracle step of ctest, see CMakeLists.txt, then runs
// PyTorch once over them). Run as a test, it registers one GoogleTest per case, computes the tessera
// result and compares sizes, dtype and values with PyTorch's outputs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "conformance/cases.h"

namespace ts = tessera;
using tessera::conformance::Case;

namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

// A case takes part in the gradient comparison when it compares values, has a floating input and
// its op gives a floating output: PyTorch and tessera then differentiate the same weighted sum of
// the outputs (weights written by the C++ side as "<case>/w<j>") with respect to the floating inputs.
bool is_grad_case(const Case& c) {
  if (!c.compare_values) return false;
  bool float_in = false;
  for (const ts::Tensor& t : c.inputs) float_in = float_in || t.is_floating_point();
  return float_in;
}

std::vector<ts::Tensor> float_outputs(const std::vector<ts::Tensor>& outs) {
  std::vector<ts::Tensor> r;
  for (const ts::Tensor& o : outs) r.push_back(o.is_floating_point() ? o : ts::Tensor());
  return r;
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
  std::map<std::string, ts::Tensor> outputs;
  std::map<std::string, ts::Tensor> weights;  // "<case>/w<j>", from the inputs file
  std::map<std::string, std::string> meta;
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
    r.available = true;
    return r;
  }();
  return o;
}

void run_case(const Case& c) {
  const Oracle& o = oracle();
  if (!o.available) {
    if (std::getenv("CI") && std::string(std::getenv("CI")) == "true") FAIL() << o.why;
    GTEST_SKIP() << o.why;
  }
  auto err = o.meta.find("error:" + c.name);
  if (err != o.meta.end()) {
    EXPECT_THROW(c.run(c.inputs), ts::Error) << "PyTorch raised " << err->second << " but tessera did not";
    return;
  }
  std::vector<ts::Tensor> got = c.run(c.inputs);
  for (size_t j = 0;; ++j) {
    auto it = o.outputs.find(c.name + "/out" + std::to_string(j));
    if (it == o.outputs.end()) {
      EXPECT_EQ(got.size(), j) << "tessera returned " << got.size() << " outputs, PyTorch " << j;
      break;
    }
    ASSERT_LT(j, got.size()) << "PyTorch returned more outputs than tessera";
    const ts::Tensor& want = it->second;
    const ts::Tensor& have = got[j];
    EXPECT_EQ(ts::dtype_name(have.dtype()), std::string(ts::dtype_name(want.dtype()))) << "output " << j << " dtype";
    ASSERT_EQ(have.sizes(), want.sizes()) << "output " << j << " sizes";
    if (!c.compare_values) continue;
    ts::testing::Tolerance tol = ts::testing::tolerance_for(have.dtype());
    if (c.tol) tol = {std::max(tol.rtol, c.tol->rtol), std::max(tol.atol, c.tol->atol)};
    EXPECT_TRUE(ts::testing::all_close(have, want, tol)) << "output " << j << " of " << c.torch_expr;
  }
}

void run_grad_case(const Case& c) {
  const Oracle& o = oracle();
  if (!o.available) {
    if (std::getenv("CI") && std::string(std::getenv("CI")) == "true") FAIL() << o.why;
    GTEST_SKIP() << o.why;
  }
  if (o.meta.count("error:" + c.name) || o.meta.count("grad_error:" + c.name)) {
    GTEST_SKIP() << "PyTorch computes no gradient here: "
                 << (o.meta.count("grad_error:" + c.name) ? o.meta.at("grad_error:" + c.name) : o.meta.at("error:" + c.name));
  }
  std::vector<ts::Tensor> inputs, wrt;
  std::vector<size_t> wrt_index;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    ts::Tensor x = c.inputs[i].detach();
    if (x.is_floating_point()) {
      x = x.clone().requires_grad_();
      wrt.push_back(x);
      wrt_index.push_back(i);
    }
    inputs.push_back(x);
  }
  std::vector<ts::Tensor> outs = float_outputs(c.run(inputs));
  ts::Tensor loss;
  for (size_t j = 0; j < outs.size(); ++j) {
    auto w = o.weights.find(c.name + "/w" + std::to_string(j));
    if (!outs[j].defined() || w == o.weights.end() || !outs[j].requires_grad()) continue;
    ts::Tensor term = (outs[j] * w->second).sum().to(ts::kFloat64);
    loss = loss.defined() ? loss + term : term;
  }
  bool torch_has_grads = false;
  for (size_t i = 0; i < c.inputs.size(); ++i) torch_has_grads |= o.outputs.count(c.name + "/grad" + std::to_string(i)) > 0;
  if (!loss.defined() || !loss.requires_grad()) {
    if (torch_has_grads) FAIL() << "PyTorch differentiates " << c.torch_expr << " but tessera recorded no gradient";
    GTEST_SKIP() << "neither PyTorch nor tessera differentiates this op";
  }
  std::vector<ts::Tensor> grads = ts::autograd::grad({loss}, wrt, {}, std::nullopt, false, true);
  for (size_t k = 0; k < wrt.size(); ++k) {
    auto want = o.outputs.find(c.name + "/grad" + std::to_string(wrt_index[k]));
    if (want == o.outputs.end()) {
      EXPECT_TRUE(!grads[k].defined() || ts::equal(grads[k], ts::zeros_like(grads[k])))
          << "PyTorch gives input " << wrt_index[k] << " no gradient, tessera a nonzero one";
      continue;
    }
    ts::Tensor have = grads[k].defined() ? grads[k] : ts::zeros_like(wrt[k]);
    EXPECT_EQ(ts::dtype_name(have.dtype()), std::string(ts::dtype_name(want->second.dtype()))) << "grad " << wrt_index[k] << " dtype";
    ASSERT_EQ(have.sizes(), want->second.sizes()) << "grad " << wrt_index[k] << " sizes";
    // Gradients go through more roundings than outputs: twice the output tolerance, at least 1e-5.
    ts::testing::Tolerance tol = ts::testing::tolerance_for(have.dtype());
    if (c.tol) tol = {std::max(tol.rtol, c.tol->rtol), std::max(tol.atol, c.tol->atol)};
    tol = {std::max(2 * tol.rtol, 1e-5), std::max(2 * tol.atol, 1e-5)};
    // tessera's derivatives of 16-bit inputs run in the 16-bit dtype, op by op, where PyTorch's fused
    // CPU backward kernels keep float32 inside: elements whose gradient nearly cancels differ by more
    // than a relative ulp, so 16-bit gradients are compared relative to the gradient's scale.
    if (have.dtype() == ts::kFloat16 || have.dtype() == ts::kBFloat16)
      tol.atol = std::max(tol.atol, tol.rtol * want->second.abs().max().to(ts::kFloat64).item<double>());
    EXPECT_TRUE(ts::testing::all_close(have, want->second, tol)) << "gradient of input " << wrt_index[k] << " of " << c.torch_expr;
  }
}

}  // namespace

int main(int argc, char** argv) {
  static std::vector<Case> cases = tessera::conformance::all_cases();
  if (argc == 3 && std::strcmp(argv[1], "--write-inputs") == 0) return write_inputs(argv[2], cases);
  ::testing::InitGoogleTest(&argc, argv);
  for (const Case& c : cases) {
    const Case* cp = &c;
    ::testing::RegisterTest("Conformance", c.name.c_str(), nullptr, c.op.c_str(), __FILE__, __LINE__,
                            [cp]() -> ::testing::Test* {
                              struct T : ::testing::Test {
                                const Case* c;
                                explicit T(const Case* c) : c(c) {}
                                void TestBody() override { run_case(*c); }
                              };
                              return new T(cp);
                            });
  }
  for (const Case& c : cases) {
    if (!is_grad_case(c)) continue;
    const Case* cp = &c;
    ::testing::RegisterTest("ConformanceGrad", c.name.c_str(), nullptr, c.op.c_str(), __FILE__, __LINE__,
                            [cp]() -> ::testing::Test* {
                              struct T : ::testing::Test {
                                const Case* c;
                                explicit T(const Case* c) : c(c) {}
                                void TestBody() override { run_grad_case(*c); }
                              };
                              return new T(cp);
                            });
  }
  return RUN_ALL_TESTS();
}
