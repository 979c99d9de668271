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

int write_inputs(const std::string& path, const std::vector<Case>& cases) {
  std::map<std::string, ts::Tensor> tensors;
  std::map<std::string, std::string> meta;
  for (const Case& c : cases) {
    for (size_t i = 0; i < c.inputs.size(); ++i) tensors[c.name + "/in" + std::to_string(i)] = c.inputs[i];
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
  return RUN_ALL_TESTS();
}
