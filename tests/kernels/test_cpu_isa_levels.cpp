// Every instruction-set level of the dispatched CPU kernels (Note [CPU ISA dispatch] in
// runtime/cpu_isa.h) against the baseline level, on the same inputs: bitwise where the order of
// operations does not depend on the vector width (elementwise ops, conversions, the optimizers'
// per-element updates, conv's and matmul's GEMMs), within float32 tolerance where it does (sums,
// softmax's and the norms' row reductions). Each level this CPU supports is registered in turn.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/onednn/onednn.h"
#include "runtime/cpu_isa.h"
#include "tessera/nn/functional.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using ts::cpu::IsaLevel;

namespace {

ts::Tensor rnd(const ts::Shape& s, uint64_t seed) { return tessera::testing::test_data(s, ts::kFloat32, seed, -4, 4).reshape(s); }

struct Case {
  const char* name;
  bool bitwise;
  std::function<std::vector<ts::Tensor>()> run;
};

std::vector<Case> cases() {
  // Odd sizes so that every level's vector loop has a tail.
  const ts::Tensor a = rnd({1031, 67}, 1), b = rnd({1031, 67}, 2), c = rnd({67}, 3);
  return {
      {"add", true, [=] { return std::vector<ts::Tensor>{ts::add(a, b), ts::add(a, c), ts::mul(a, 2.5)}; }},
      {"mul_div", true, [=] { return std::vector<ts::Tensor>{ts::mul(a, b), ts::div(a, b), ts::sub(b, c)}; }},
      {"unary", true,
       [=] {
         return std::vector<ts::Tensor>{ts::exp(a), ts::log(ts::abs(a)), ts::tanh(a), ts::sigmoid(a), ts::gelu(a),
                                        ts::gelu(a, "tanh"), ts::relu(a), ts::sqrt(ts::abs(a))};
       }},
      {"convert", true,
       [=] { return std::vector<ts::Tensor>{a.to(ts::kBFloat16).to(ts::kFloat32), a.to(ts::kFloat16).to(ts::kFloat32),
                                            a.to(ts::kFloat64).to(ts::kFloat32)}; }},
      {"where", true, [=] { return std::vector<ts::Tensor>{ts::where(ts::gt(a, b), a, b)}; }},
      {"reduce", false,
       [=] {
         return std::vector<ts::Tensor>{ts::sum(a), ts::sum(a, {0}), ts::sum(a, {1}), ts::mean(a, {1}),
                                        std::get<0>(ts::max(a, 1)), ts::amax(a, {0}), ts::var(a, {1})};
       }},
      {"softmax", false, [=] { return std::vector<ts::Tensor>{ts::softmax(a, 1), ts::log_softmax(a, 1), ts::softmax(a, 0)}; }},
      {"layer_norm", false,
       [=] { return std::vector<ts::Tensor>{F::layer_norm(a, {67}, c, ts::mul(c, 0.5))}; }},
      {"matmul", false, [=] { return std::vector<ts::Tensor>{ts::matmul(a, b.transpose(0, 1))}; }},
      {"conv_pool", false,
       [=] {
         const ts::Tensor x = rnd({4, 3, 17, 19}, 4), w = rnd({8, 3, 3, 3}, 5);
         ts::Tensor y = ts::conv2d(x, w, std::nullopt, 1, 1);
         return std::vector<ts::Tensor>{y, ts::max_pool2d(y, 2), ts::avg_pool2d(y, 2)};
       }},
      {"backward", false,
       [=] {
         ts::Tensor x = a.detach().requires_grad_(true);
         ts::Tensor w = c.detach().requires_grad_(true);
         ts::Tensor y = ts::sum(ts::mul(F::layer_norm(ts::gelu(x), {67}, w), ts::softmax(x, 1)));
         y.backward();
         return std::vector<ts::Tensor>{y, x.grad(), w.grad()};
       }},
  };
}

std::vector<IsaLevel> supported_levels() {
  std::vector<IsaLevel> v;
  for (IsaLevel l : {IsaLevel::baseline, IsaLevel::avx2, IsaLevel::avx512})
    if (l <= ts::cpu::cpu_info().supported && ts::cpu::isa_level_built(l)) v.push_back(l);
  return v;
}

// Registers a level for the scope of a test, then the start-up level again.
struct LevelScope {
  explicit LevelScope(IsaLevel l) { ts::cpu::register_dispatched_kernels(l); }
  ~LevelScope() {
    IsaLevel l = ts::cpu::cpu_info().level;
    while (!ts::cpu::isa_level_built(l)) l = IsaLevel(int(l) - 1);
    ts::cpu::register_dispatched_kernels(l);
  }
};

TEST(CpuIsaLevels, EveryLevelMatchesBaseline) {
  // The levels of the native kernels: oneDNN (which picks its own instruction set) off.
  ts::cpu::onednn::ScopedOnednn native(false);
  const std::vector<IsaLevel> levels = supported_levels();
  std::printf("CPU %s: levels tested:", ts::cpu::cpu_info().name.c_str());
  for (IsaLevel l : levels) std::printf(" %s", ts::cpu::isa_level_name(l));
  std::printf("\n");
  for (const Case& c : cases()) {
    std::vector<ts::Tensor> ref;
    {
      LevelScope s(IsaLevel::baseline);
      ref = c.run();
    }
    for (IsaLevel l : levels) {
      if (l == IsaLevel::baseline) continue;
      std::vector<ts::Tensor> got;
      {
        LevelScope s(l);
        got = c.run();
      }
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE(std::string(c.name) + " output " + std::to_string(i) + " at " + ts::cpu::isa_level_name(l));
        const std::vector<double> r = ref[i].to(ts::kFloat64).flatten().tolist<double>();
        const std::vector<double> g = got[i].to(ts::kFloat64).flatten().tolist<double>();
        ASSERT_EQ(r.size(), g.size());
        for (size_t j = 0; j < r.size(); ++j) {
          if (c.bitwise) {
            ASSERT_TRUE(r[j] == g[j] || (r[j] != r[j] && g[j] != g[j])) << "element " << j << ": " << g[j] << " vs " << r[j];
          } else {
            ASSERT_NEAR(g[j], r[j], 1e-5 + 1e-5 * std::abs(r[j])) << "element " << j;
          }
        }
      }
    }
  }
}

TEST(CpuIsaLevels, UnsupportedLevelRaises) {
  if (ts::cpu::cpu_info().supported == IsaLevel::avx512) GTEST_SKIP() << "this CPU supports every level";
  EXPECT_THROW(ts::cpu::register_dispatched_kernels(IsaLevel::avx512), ts::ValueError);
}

TEST(CpuIsa, ParseAndCap) {
  using ts::cpu::choose_isa_level;
  using ts::cpu::parse_isa_level;
  EXPECT_EQ(parse_isa_level("AVX2"), IsaLevel::avx2);
  EXPECT_EQ(parse_isa_level("baseline"), IsaLevel::baseline);
  EXPECT_EQ(parse_isa_level("avx512"), IsaLevel::avx512);
  EXPECT_FALSE(parse_isa_level("sse4").has_value());
  std::string w;
  EXPECT_EQ(choose_isa_level(IsaLevel::avx512, "", &w), IsaLevel::avx512);
  EXPECT_EQ(choose_isa_level(IsaLevel::avx512, "avx2", &w), IsaLevel::avx2);
  EXPECT_EQ(choose_isa_level(IsaLevel::avx2, "avx512", &w), IsaLevel::avx2);  // a cap above the CPU: the CPU's
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(choose_isa_level(IsaLevel::avx2, "fast", &w), IsaLevel::avx2);
  EXPECT_NE(w.find("TESSERA_CPU_ISA: expected one of baseline, avx2, avx512, got 'fast'"), std::string::npos) << w;
}

TEST(CpuIsa, InfoIsConsistent) {
  const ts::cpu::CpuInfo& i = ts::cpu::cpu_info();
  EXPECT_FALSE(i.name.empty());
  EXPECT_LE(i.level, i.supported);
  if (i.supported >= IsaLevel::avx2) {
    EXPECT_TRUE(ts::cpu::has_feature("avx2"));
    EXPECT_TRUE(ts::cpu::has_feature("fma"));
  }
  if (i.supported == IsaLevel::avx512) EXPECT_TRUE(ts::cpu::has_feature("avx512bw"));
  std::string w;
  EXPECT_EQ(i.level, ts::cpu::choose_isa_level(i.supported, i.cap, &w));
}

}  // namespace
