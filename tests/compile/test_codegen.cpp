// ts::compile's codegen backend on the CPU: the fusion pass's groups (golden), generated kernels
// against eager for every dtype and odd layouts (primes, size-1 dims, broadcasts, transposed and
// channels-last inputs), the twin CUDA source of every kernel compiled by NVRTC for sm_90 (no GPU
// needed), the kernel cache (a second process, damaged entries, keys), the compiler's error, and the
// debug folder.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "compile/codegen/compiled_kernels.h"
#include "compile/codegen_testing.h"
#include "compile/codegen/cuda_library.h"
#include "compile/codegen/kernel_cache.h"
#include "compile/codegen/kernel_source.h"
#include "compile/fusion.h"
#include "compile/graph.h"
#include "tessera/compile.h"

namespace ts = tessera;
namespace tc = tessera::compiler;
namespace fs = std::filesystem;

namespace {

ts::CompileOptions codegen() {
  ts::CompileOptions o;
  o.backend = "codegen";
  return o;
}

// A scratch folder for the kernel cache, removed at the end of the test; TESSERA_CACHE_DIR points
// to it meanwhile.
struct ScratchCache {
  std::string dir;
  std::string old;
  bool had_old = false;
  explicit ScratchCache(const std::string& name) {
    dir = (fs::temp_directory_path() / ("tessera-codegen-" + name + "-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    if (const char* o = std::getenv("TESSERA_CACHE_DIR")) old = o, had_old = true;
    ::setenv("TESSERA_CACHE_DIR", dir.c_str(), 1);
    tc::forget_loaded_kernels();
  }
  ~ScratchCache() {
    if (had_old) ::setenv("TESSERA_CACHE_DIR", old.c_str(), 1);
    else ::unsetenv("TESSERA_CACHE_DIR");
    tc::forget_loaded_kernels();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::vector<std::string> files(const std::string& ext) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir + "/kernels"))
      if (e.path().extension() == ext) out.push_back(e.path().string());
    return out;
  }
};

// The fusion groups of a program's graph, as fusion_text prints them.
template <class F, class... T>
std::string groups_of(F body, const T&... args) {
  auto f = ts::compile(body);
  f(args...);
  const tc::Graph g = tc::parse_graph(f.last_graph());
  return tc::fusion_text(g, tc::plan_fusion(g));
}

using tessera::testing::close;
ts::Tensor chain(const ts::Tensor& x, const ts::Tensor& y) { return tessera::testing::pointwise_chain(x, y); }

// Every op with a generated expression, in one program over two inputs of `dt`.
std::vector<ts::Tensor> every_op(const ts::Tensor& a, const ts::Tensor& b) {
  ts::Tensor p = a.abs() + 0.5;  // positive, for log and sqrt
  std::vector<ts::Tensor> out;
  out.push_back(-a + a.abs() * a.exp() - p.log() + a.exp2() / (p.log2() + 3.0));
  out.push_back(p.log1p() + a.expm1() + p.sqrt() + p.rsqrt() + a.sin() * a.cos() + (a * 0.3).tan());
  out.push_back(a.tanh() + a.sigmoid() + a.relu() + ts::gelu(a) + ts::gelu(a, "tanh") + ts::silu(a) + ts::softplus(a, 2.0, 5.0));
  out.push_back(ts::hardswish(a) + a.erf() + a.floor() + a.ceil() + (a * 3.0).round() + a.trunc() + a.sign() + p.reciprocal());
  out.push_back(ts::pow(p, b) + ts::maximum(a, b) + ts::minimum(a, b) + ts::fmod(a, p) + ts::remainder(a, p) +
                ts::atan2(a, b) + ts::logaddexp(a, b) + ts::sub(a, b, 0.5) + ts::add(a, b, 2.0));
  out.push_back(ts::where((a > b).logical_and(a != b).logical_or(a <= 0.2).logical_xor(b >= a), a, b) +
                ts::lerp(a, b, 0.3) + ts::addcmul(a, a, b, 0.5) + ts::addcdiv(a, a, p, 2.0) + a.clamp(-0.5, 0.5));
  out.push_back(ts::threshold_backward(a, b, 0.1) * (a == b).logical_not() + a.isnan() + a.isinf() + a.isfinite());
  return out;
}

TEST(CodegenFusion, AChainWithBroadcastsIsOneGroupAndScalarsAreLiterals) {
  const std::string text = groups_of(chain, ts::randn({4, 8}), ts::randn({8}));
  // sigmoid(y) is over [8], not the chain's [4,8]: it runs on its own and the group reads it.
  EXPECT_EQ(text,
            "group 0 [4,8] cpu: mul %3, add %4, relu %5, gt %8, where %9, clamp %12, div %14, tanh %15, exp %16, "
            "gelu %17, add %18, sub %19 <- %0 %1 %6 %2=2 %7=0.5 %10=0.1 %11=0.9 %13=3 -> %19 (saves 3008 B)\n");
}

TEST(CodegenFusion, ValuesReadAfterTheGroupAreItsOutputs) {
  auto body = [](const ts::Tensor& x) {
    ts::Tensor h = (x * 3.0).exp();
    ts::Tensor s = h.cumsum(1);  // a scan (never fused) reads h: h is an output of the group
    return (h + 1.0).log() / s;  // the division reads the scan: in the group, it would make a cycle
  };
  EXPECT_EQ(groups_of(body, ts::randn({4, 8})),
            "group 0 [4,8] cpu: mul %2, exp %3, add %6, log %7 <- %0 %1=3 %5=1 -> %3 %7 (saves 640 B)\n");
}

TEST(CodegenFusion, AnInPlaceWriteBetweenTwoChainsKeepsThemApart) {
  auto body = [](const ts::Tensor& x, ts::Tensor w) {
    ts::Tensor a = (x * 2.0).exp();
    w.add_(1.0);  // a write to an argument: no group spans it
    return (a + w).tanh().neg();
  };
  const std::string text = groups_of(body, ts::randn({4, 8}), ts::randn({4, 8}));
  EXPECT_EQ(text,
            "group 0 [4,8] cpu: mul %3, exp %4 <- %0 %2=2 -> %4 (saves 256 B)\n"
            "group 1 [4,8] cpu: add %7, tanh %8, neg %9 <- %4 %6 -> %9 (saves 512 B)\n");
}

TEST(CodegenFusion, SiblingsReadingOneInputFuseHorizontally) {
  auto body = [](const ts::Tensor& x) { return std::vector<ts::Tensor>{x.exp(), x.sin(), x.cos()}; };
  const std::string text = groups_of(body, ts::randn({16}));
  EXPECT_EQ(text, "group 0 [16] cpu: exp %1, sin %2, cos %3 <- %0 -> %1 %2 %3 (saves 128 B)\n");
}

TEST(CodegenFusion, AGroupNeverDependsOnItselfThroughAnOutsideNode) {
  // x -> a (pointwise) -> sum (outside) -> b (pointwise, reads a and the sum): fusing a with b would
  // make a cycle through the sum, so b stays apart from a.
  auto body = [](const ts::Tensor& x) {
    ts::Tensor a = x.exp();
    ts::Tensor s = a.sum();
    return (a * s).tanh();
  };
  const std::string text = groups_of(body, ts::randn({4, 8}));
  EXPECT_EQ(text.find("exp %1, mul"), std::string::npos) << text;
  EXPECT_NE(text.find("mul %3, tanh %4"), std::string::npos) << text;
}

TEST(Codegen, GeneratedKernelsEqualEagerForEveryDtype) {
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
    ts::manual_seed(3);
    ts::Tensor a = ts::randn({37, 13}).to(dt), b = ts::randn({37, 13}).to(dt);
    auto f = ts::compile(every_op, codegen());
    f(a, b);
    std::vector<ts::Tensor> got = f(a, b), want = every_op(a, b);
    EXPECT_GT(f.stats().kernels, 0) << ts::dtype_name(dt);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(got[i], want[i])) << ts::dtype_name(dt) << " output " << i;
  }
}

TEST(Codegen, OddLayoutsGoThroughTheKernelsStrides) {
  auto body = [](const ts::Tensor& x, const ts::Tensor& y) { return ((x * y).exp() + x).sigmoid() * 3.0; };
  ts::manual_seed(4);
  struct Case { const char* what; ts::Tensor x, y; };
  ts::Tensor base = ts::randn({5, 7, 11});
  ts::Tensor cl = ts::randn({2, 3, 5, 7}).contiguous(ts::MemoryFormat::ChannelsLast);
  std::vector<Case> cases = {
      {"primes", ts::randn({7, 13, 3}), ts::randn({7, 13, 3})},
      {"size-1 dims", ts::randn({1, 9, 1, 5}), ts::randn({1, 9, 1, 5})},
      {"broadcast", ts::randn({6, 1, 4}), ts::randn({5, 1})},
      {"transposed", base.transpose(0, 2), ts::randn({11, 7, 5})},
      {"sliced", base.slice(2, 1, 10, 2), base.slice(2, 0, 9, 2)},
      {"channels-last", cl, cl * 0.5},
      {"one element", ts::randn({1}), ts::randn({})},
  };
  for (const Case& c : cases) {
    auto f = ts::compile(body, codegen());
    f(c.x, c.y);
    ts::Tensor got = f(c.x, c.y), want = body(c.x, c.y);
    EXPECT_EQ(f.stats().kernels, 1) << c.what;
    EXPECT_TRUE(close(got, want)) << c.what;
    EXPECT_EQ(got.strides(), want.strides()) << c.what << ": the output keeps eager's layout";
  }
}

TEST(Codegen, ManyElementsRunOnEveryThread) {
  ts::Tensor x = ts::randn({300, 1001}), y = ts::randn({1001});
  auto f = ts::compile(chain, codegen());
  f(x, y);
  EXPECT_TRUE(close(f(x, y), chain(x, y)));
}

TEST(Codegen, GradientsOfAJointGraphWithKernelsEqualEager) {
  ts::manual_seed(5);
  ts::Tensor x = ts::randn({16, 24}).requires_grad_(), y = ts::randn({24}).requires_grad_();
  ts::Tensor xe = x.detach().requires_grad_(), ye = y.detach().requires_grad_();
  auto f = ts::compile(chain, codegen());
  for (int call = 0; call < 2; ++call) {
    x.zero_grad(), y.zero_grad(), xe.zero_grad(), ye.zero_grad();
    ts::Tensor got = f(x, y), want = chain(xe, ye);
    EXPECT_TRUE(close(got.detach(), want.detach()));
    got.pow(2).sum().backward();
    want.pow(2).sum().backward();
    EXPECT_TRUE(close(x.grad(), xe.grad())) << "call " << call;
    EXPECT_TRUE(close(y.grad(), ye.grad())) << "call " << call;
  }
  EXPECT_EQ(f.stats().joint_variants, 1);
  EXPECT_GE(f.stats().kernels, 2) << "the forward and the backward graphs have kernels";
}

TEST(Codegen, EveryKernelsCudaTwinCompilesWithNvrtcForSm90) {
  if (!tc::cuda_codegen_available()) GTEST_SKIP() << "this build has no CUDA (NVRTC)";
  int compiled = 0;
  auto twin = [&](const std::string& graph_text) {
    const tc::Graph g = tc::parse_graph(graph_text);
    const tc::FusionPlan plan = tc::plan_fusion(g);
    for (size_t k = 0; k < plan.groups.size(); ++k) {
      const tc::KernelSpec spec = tc::make_kernel_spec(g, plan.groups[k], tc::KernelTarget::Cuda, static_cast<int>(k));
      const std::string cubin = tc::nvrtc_compile(tc::translation_unit(tc::KernelTarget::Cuda, {&spec}), spec.name + ".cu", 90);
      EXPECT_GT(cubin.size(), 0u);
      ++compiled;
    }
  };
  for (ts::DType dt : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
    auto f = ts::compile(every_op);
    ts::Tensor a = ts::randn({37, 13}).to(dt);
    f(a, a);
    twin(f.last_graph());
  }
  auto g = ts::compile(chain);
  g(ts::randn({3, 5}).transpose(0, 1), ts::randn({3}));
  twin(g.last_graph());
  EXPECT_GE(compiled, 5);
}

// Note [Vectorized pointwise kernels]: V elements per CUDA thread where every operand moves along the
// innermost dimension with stride 1 or 0 and the lengths divide; the scalar loop otherwise.
TEST(CodegenVector, TheCudaKernelTakesSixteenBytesPerOperandWhereTheLayoutAllows) {
  // period: the vectors of one row, where y (one value per column) is loaded and sigmoid(y) computed
  // once per thread (Note [Invariant columns]).
  struct Case { const char* what; ts::Tensor x, y; int width; int64_t period; };
  std::vector<Case> cases = {
      {"bfloat16 channels-last, per-channel", ts::randn({2, 16, 3, 3}).to(ts::kBFloat16).contiguous(ts::MemoryFormat::ChannelsLast),
       ts::randn({16, 1, 1}).to(ts::kBFloat16), 8, 2},
      {"float32 rows", ts::randn({5, 12}), ts::randn({12}), 4, 3},
      {"float64 rows", ts::randn({5, 12}).to(ts::kFloat64), ts::randn({12}).to(ts::kFloat64), 2, 6},
      {"rows of 6 floats", ts::randn({5, 6}), ts::randn({6}), 2, 3},
      {"rows of 7 floats", ts::randn({5, 7}), ts::randn({7}), 1, 1},
      {"transposed", ts::randn({12, 5}).transpose(0, 1), ts::randn({12}), 1, 1},
      {"no column operand", ts::randn({5, 12}), ts::randn({5, 12}), 4, 1},
  };
  for (const Case& c : cases) {
    auto f = ts::compile(chain);
    f(c.x, c.y);
    const tc::Graph g = tc::parse_graph(f.last_graph());
    const tc::FusionPlan plan = tc::plan_fusion(g);
    ASSERT_EQ(plan.groups.size(), 1u) << c.what;
    const tc::KernelSpec spec = tc::make_kernel_spec(g, plan.groups[0], tc::KernelTarget::Cuda, 0);
    EXPECT_EQ(spec.vector_width, c.width) << c.what;
    EXPECT_EQ(spec.thread_period, c.period) << c.what << "\n" << spec.function;
    EXPECT_EQ(spec.function.find(" ih = ") != std::string::npos, c.period > 1) << c.what;
    EXPECT_EQ(spec.function.find("ts_vec<") != std::string::npos, c.width > 1) << c.what << "\n" << spec.function;
    const tc::KernelSpec cpu = tc::make_kernel_spec(g, plan.groups[0], tc::KernelTarget::Cpu, 0);
    EXPECT_EQ(cpu.vector_width, 1) << c.what << ": the CPU kernel's vectors are the compiler's";
    if (tc::cuda_codegen_available()) {
      EXPECT_GT(tc::nvrtc_compile(tc::translation_unit(tc::KernelTarget::Cuda, {&spec}), "vec.cu", 90).size(), 0u) << c.what;
    }
  }
}

TEST(Codegen, A64BitIndexKernelIsGeneratedPast2To31Elements) {
  // The source only (running it would need 8 GiB): the CUDA kernel indexes with 64 bits.
  const tc::Graph g = tc::parse_graph(
      "graph\n  input %0 : float32[3000000000]{1}+0@cpu arg 0\n  %1 = exp(%0) {} : float32[3000000000]{1}+0@cpu\n"
      "  %2 = neg(%1) {} : float32[3000000000]{1}+0@cpu\n  output %2\n");
  const tc::FusionPlan plan = tc::plan_fusion(g);
  ASSERT_EQ(plan.groups.size(), 1u);
  const tc::KernelSpec big = tc::make_kernel_spec(g, plan.groups[0], tc::KernelTarget::Cuda, 0);
  EXPECT_TRUE(big.index64);
  EXPECT_NE(big.function.find("for (int64_t i"), std::string::npos) << big.function;
  if (tc::cuda_codegen_available()) {
    EXPECT_GT(tc::nvrtc_compile(tc::translation_unit(tc::KernelTarget::Cuda, {&big}), "big.cu", 90).size(), 0u);
  }
}

TEST(CodegenCache, ASecondProcessLoadsTheKernelsFromDisk) {
  if (std::getenv("TESSERA_CODEGEN_CHILD")) {
    // The second process: the same program finds its library on the disk and compiles nothing.
    auto f = ts::compile(chain, codegen());
    f(ts::randn({4, 8}), ts::randn({8}));
    const tc::KernelCacheStats s = tc::kernel_cache_stats();
    // CompileStats says the same about this function: no build, its library from the cache.
    const ts::CompileStats cs = f.stats();
    std::exit(s.compiled == 0 && s.disk_hits >= 1 && cs.builds == 0 && cs.cache_hits == 1 ? 0 : 3);
  }
  ScratchCache cache("second-process");
  const int64_t before = tc::kernel_cache_stats().compiled;
  auto f = ts::compile(chain, codegen());
  f(ts::randn({4, 8}), ts::randn({8}));
  EXPECT_EQ(tc::kernel_cache_stats().compiled - before, 1);
  EXPECT_EQ(f.stats().builds, 1);
  EXPECT_EQ(f.stats().cache_hits, 0);
  EXPECT_GT(f.stats().codegen_ms, 0.0);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string cmd = "TESSERA_CODEGEN_CHILD=1 '" + self + "' --gtest_filter=CodegenCache.ASecondProcessLoadsTheKernelsFromDisk > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "the second process compiled the kernels again";
}

TEST(CodegenCache, ADamagedEntryIsRebuiltNeverLoaded) {
  ScratchCache cache("damaged");
  ts::Tensor x = ts::randn({4, 8}), y = ts::randn({8});
  {
    auto f = ts::compile(chain, codegen());
    f(x, y);
  }
  std::vector<std::string> libs = cache.files(".so");
  ASSERT_EQ(libs.size(), 1u);
  const std::string good = tc::read_file(libs[0]).value();
  // The damage replaces the file (this process has the library mapped: writing into it in place
  // would change the code it runs, which no writer of the cache does).
  for (int damage = 0; damage < 3; ++damage) {
    tc::forget_loaded_kernels();
    if (damage == 0) tc::write_file_atomic(libs[0], good.substr(0, good.size() / 2));  // truncated
    if (damage == 1) {                                                                  // one byte changed
      std::string bad = good;
      bad[bad.size() / 3] ^= 0x5a;
      tc::write_file_atomic(libs[0], bad);
    }
    if (damage == 2) fs::remove(libs[0] + ".sum");  // its sum lost
    const tc::KernelCacheStats before = tc::kernel_cache_stats();
    auto f = ts::compile(chain, codegen());
    f(x, y);
    EXPECT_TRUE(close(f(x, y), chain(x, y))) << "damage " << damage;
    const tc::KernelCacheStats after = tc::kernel_cache_stats();
    EXPECT_EQ(after.compiled - before.compiled, 1) << "damage " << damage << ": rebuilt";
    EXPECT_EQ(after.disk_hits - before.disk_hits, 0) << "damage " << damage << ": never loaded";
    if (damage < 2) {
      EXPECT_EQ(after.rejected - before.rejected, 1) << "damage " << damage;
    }
  }
}

TEST(CodegenCache, AnotherSourceIsAnotherKey) {
  ScratchCache cache("keys");
  auto f1 = ts::compile([](const ts::Tensor& x) { return (x * 2.0).exp(); }, codegen());
  auto f2 = ts::compile([](const ts::Tensor& x) { return (x * 3.0).exp(); }, codegen());
  ts::Tensor x = ts::randn({8});
  f1(x);
  f2(x);
  EXPECT_EQ(cache.files(".so").size(), 2u);
  EXPECT_EQ(cache.files(".cpp").size(), 2u) << "each library's source is kept beside it";
  EXPECT_NE(tc::cache_key({"a", "bc"}), tc::cache_key({"ab", "c"}));
}

TEST(CodegenCache, ACompilerFailureRaisesWithItsOutputAndTheSourcePath) {
  ScratchCache cache("failure");
  ::setenv("TESSERA_CXX", "false", 1);
  auto f = ts::compile([](const ts::Tensor& x) { return (x * 5.0).exp().neg(); }, codegen());
  try {
    f(ts::randn({8}));
    ADD_FAILURE() << "no error";
  } catch (const ts::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the C++ compiler failed on the generated kernels"), std::string::npos) << m;
    EXPECT_NE(m.find(cache.dir), std::string::npos) << "names the source: " << m;
  }
  ::unsetenv("TESSERA_CXX");
}

TEST(CodegenDebug, TheDebugFolderHoldsTheGraphTheGroupsAndTheSource) {
  ScratchCache cache("debug");
  const std::string dir = cache.dir + "/debug";
  ::setenv("TESSERA_COMPILE_DEBUG_DIR", dir.c_str(), 1);
  auto f = ts::compile(chain, codegen());
  f(ts::randn({4, 8}), ts::randn({8}));
  ::unsetenv("TESSERA_COMPILE_DEBUG_DIR");
  std::vector<fs::path> graphs;
  for (const auto& e : fs::directory_iterator(dir)) graphs.push_back(e.path());
  ASSERT_EQ(graphs.size(), 1u);
  for (const char* name : {"graph.txt", "fusion.txt", "kernels.cpp"}) EXPECT_TRUE(fs::exists(graphs[0] / name)) << name;
  std::ifstream src(graphs[0] / "kernels.cpp");
  const std::string text((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("extern \"C\" void ts_fused_0_mul_add_relu_gt"), std::string::npos);
  EXPECT_NE(text.find("// gelu"), std::string::npos) << "each node's line names its op";
}

}  // namespace
