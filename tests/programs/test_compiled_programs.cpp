// Random programs (generator.h) compiled against eager on the CPU: the same function, run once
// eagerly and twice compiled (the first call captures it, the second runs the graph on fresh copies
// of the inputs, and its gradients come from the captured backward graph: Note [Joint graph]).
// Outputs and gradients must be bitwise equal (the graph runs the same kernels in the same order),
// an error must be the same error, and most programs must run as graphs with a backward graph (the
// test fails when the compiler falls back for more than a few, so that it cannot pass by not
// compiling). TESSERA_COMPILED_PROGRAMS sets the count (default 2000, about a second).
// The same programs through the codegen backend (fusion groups as generated C++ kernels) must equal
// eager within the dtype's rounding (near(): a fused chain rounds as the eager ops do, but its float
// math may differ by an ulp where libm's and the compiler's contractions differ), raise the same
// errors, and have generated kernels in most programs; TESSERA_CODEGEN_PROGRAMS sets that count
// (default 500: the programs' kernels are compiled once and then come from the kernel cache).
// CompiledProgramsCuda runs the codegen programs on the GPU (NVRTC kernels against the eager CUDA ones).
// The bitwise comparison runs twice: with the backward reading what eager autograd saves, and with
// the min-cut partition's saved values and recomputations (Note [Min-cut partition]); the partition
// must never keep more bytes than eager autograd would.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <utility>
#include <typeinfo>
#include <string>

#include "programs/generator.h"
#include "programs/interpreter.h"
#include "tessera/compile.h"
#include "tessera/cuda.h"

namespace ts = tessera;
namespace tp = tessera::programs;

namespace {

int program_count() {
  const char* s = std::getenv("TESSERA_COMPILED_PROGRAMS");
  return s ? std::atoi(s) : 2000;
}
// The first seed (TESSERA_COMPILED_PROGRAMS_FIRST, default 0), to replay a failure alone.
int first_seed() {
  const char* s = std::getenv("TESSERA_COMPILED_PROGRAMS_FIRST");
  return s ? std::atoi(s) : 0;
}

std::vector<ts::Tensor> inputs_of(const tp::Program& p, ts::Device device) {
  std::vector<ts::Tensor> in;
  for (const tp::Step& s : p.steps)
    if (s.op == "input") in.push_back(tp::materialize_input(s, device));
  return in;
}

struct ProgramRun {
  std::vector<ts::Tensor> outputs, grads;
  std::string error;  // the error's class, empty when none
};

// `in64`: the floating inputs in float64 (the reference run of near_truth()).
template <class Fn>
ProgramRun run(const tp::Program& p, Fn&& fn, bool in64 = false, ts::Device device = ts::kCPU) {
  ProgramRun r;
  std::vector<ts::Tensor> in = inputs_of(p, device);
  if (in64)
    for (ts::Tensor& x : in)
      if (x.is_floating_point()) x = x.detach().to(ts::kFloat64).requires_grad_(x.requires_grad());
  try {
    r.outputs = fn(in);
  } catch (const ts::Error& e) {
    r.error = typeid(e).name();
    if (std::getenv("TESSERA_COMPILED_PROGRAMS_VERBOSE")) std::cout << "raised: " << e.what() << std::endl;
    return r;
  }
  // The gradient of sum_j sum(out_j * w_j) for fixed weights drawn from the program's seed.
  ts::Generator g(p.seed);
  ts::Tensor loss;
  for (const ts::Tensor& o : r.outputs) {
    if (!o.requires_grad() || !o.is_floating_point()) continue;
    ts::Tensor w = ts::randn(o.sizes(), ts::kFloat64, &g).to(o.device());
    ts::Tensor t = (o.to(ts::kFloat64) * w).sum();
    loss = loss.defined() ? loss + t : t;
  }
  if (loss.defined()) {
    loss.backward();
    for (const ts::Tensor& x : in) r.grads.push_back(x.requires_grad() ? x.grad() : ts::Tensor());
  }
  for (ts::Tensor& o : r.outputs) o = o.detach();
  return r;
}

// Bitwise equal, NaN where the other has NaN (a program may compute NaN on both sides).
bool same(const ts::Tensor& a, const ts::Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  if (ts::equal(a, b)) return true;
  return a.is_floating_point() && ts::allclose(a, b, 0.0, 0.0, /*equal_nan=*/true);
}

// Within the dtype's rounding of the largest magnitude: |a - b| <= k u (1 + max |b|), NaN and
// infinities where the other has them; integers and bools exactly.
bool near(const ts::Tensor& a, const ts::Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  if (same(a, b)) return true;
  if (!a.is_floating_point()) return false;
  const double u = a.dtype() == ts::kFloat64 ? 1.1e-16 : a.dtype() == ts::kFloat32 ? 6e-8
                   : a.dtype() == ts::kBFloat16 ? 3.9e-3 : 4.9e-4;
  ts::Tensor a64 = a.to(ts::kFloat64), b64 = b.to(ts::kFloat64);
  ts::Tensor finite = b64.isfinite();
  const double scale = ts::where(finite, b64.abs(), ts::zeros_like(b64)).max().item<double>();
  return ts::allclose(a64, b64, 0.0, 64 * u * (1 + scale), /*equal_nan=*/true);
}

// Where near() fails: a is no further from the float64 reference `ref` than eager's b, up to a factor
// of 4 and near()'s bound. A fused reduction adds in another order than the eager kernel; where the
// terms cancel (a softmax's gradient sums to zero) both are rounding noise of the terms' size, and
// only the truth can tell whether the fused one is worse.
bool near_truth(const ts::Tensor& a, const ts::Tensor& b, const ts::Tensor& ref) {
  if (!ref.defined() || !a.is_floating_point() || ref.sizes() != a.sizes()) return false;
  const double u = a.dtype() == ts::kFloat64 ? 1.1e-16 : a.dtype() == ts::kFloat32 ? 6e-8
                   : a.dtype() == ts::kBFloat16 ? 3.9e-3 : 4.9e-4;
  ts::Tensor a64 = a.to(ts::kFloat64), b64 = b.to(ts::kFloat64), r64 = ref.detach().to(ts::kFloat64);
  const double scale = ts::where(b64.isfinite(), b64.abs(), ts::zeros_like(b64)).max().item<double>();
  // A float64 program's reference is eager itself: nothing more accurate exists here, so the bound
  // is 1e-12 of the largest magnitude (a wrong kernel is off by far more; a sum whose terms cancel to
  // 1e-7 of their size is not, in another order).
  const double bound = a.dtype() == ts::kFloat64 && ref.dtype() == ts::kFloat64 ? 1e-12 * (1 + scale) : 64 * u * (1 + scale);
  ts::Tensor ok = (a64 - r64).abs() <= (b64 - r64).abs() * 4 + bound;
  ok = ok | (a64.isnan() & b64.isnan()) | (a64 == b64);
  return ok.all().item<bool>();
}

template <class Eq>
std::string differs(const ProgramRun& a, const ProgramRun& b, Eq eq) {
  if (a.error != b.error) return "error '" + a.error + "' against '" + b.error + "'";
  if (a.outputs.size() != b.outputs.size()) return "output count";
  for (size_t j = 0; j < a.outputs.size(); ++j)
    if (!eq(a.outputs[j], b.outputs[j])) return "output " + std::to_string(j);
  if (a.grads.size() != b.grads.size()) return "gradient count";
  for (size_t j = 0; j < a.grads.size(); ++j) {
    if (a.grads[j].defined() != b.grads[j].defined()) return "gradient " + std::to_string(j) + " defined on one side";
    if (a.grads[j].defined() && !eq(a.grads[j], b.grads[j])) return "gradient " + std::to_string(j);
  }
  return "";
}
std::string differs(const ProgramRun& a, const ProgramRun& b) { return differs(a, b, same); }

// The programs compiled with `options` against eager, bitwise. Returns how many have a captured
// backward graph, and how many of those recompute forward nodes in it (Note [Min-cut partition]).
std::pair<int, int> check_compiled_programs(const ts::CompileOptions& options) {
  const int n = program_count();
  int graphs = 0, eager = 0, errors = 0, failed = 0, with_grad = 0, joint = 0, recomputing = 0, fake_traced = 0;
  int64_t saved_bytes = 0, eager_saved_bytes = 0;
  std::map<std::string, int> fallbacks, no_joint;
  ts::set_compile_warning_handler([&](const std::string& m) {
    // "compile(function): the op X has no replay ...": count by reason, without the op count
    fallbacks[m.substr(0, m.find(" after "))]++;
  });
  for (int seed = first_seed(); seed < first_seed() + n; ++seed) {
    const tp::Program p = tp::generate_program(static_cast<uint64_t>(seed));
    auto body = [&p](const std::vector<ts::Tensor>& in) { return tp::run_ops(p, in, ts::kCPU); };
    const ProgramRun want = run(p, body);
    auto f = ts::compile(body, options);
    const ProgramRun first = run(p, f), second = run(p, f);
    std::string why = differs(first, want);
    if (!why.empty()) why = "the capturing call: " + why;
    else if (!(why = differs(second, want)).empty()) why = "the graph's call: " + why;
    if (!why.empty()) {
      ++failed;
      ADD_FAILURE() << tp::summary(p) << ": compiled differs from eager (" << why << ")\n" << f.last_graph();
      if (failed > 5) break;
    }
    if (!want.error.empty()) {
      ++errors;
      continue;
    }
    const ts::CompileStats s = f.stats();
    graphs += s.graph_calls == 1;
    eager += s.eager_calls > 0;
    if (!want.grads.empty()) {  // the program differentiates: its backward should be a graph too
      ++with_grad;
      joint += s.joint_variants == 1;
      fake_traced += s.fake_backward_traces == 1;
      recomputing += s.recomputed_nodes > 0;
      saved_bytes += s.saved_bytes;
      eager_saved_bytes += s.eager_saved_bytes;
      EXPECT_LE(s.saved_bytes, s.eager_saved_bytes) << tp::summary(p);
      for (const std::string& why : s.no_backward_reasons) no_joint[why.substr(0, why.find(" after "))]++;
    }
    if (s.eager_calls > 0 && std::getenv("TESSERA_COMPILED_PROGRAMS_VERBOSE"))
      std::cout << "eager: " << tp::summary(p) << std::endl;
  }
  ts::set_compile_warning_handler(nullptr);
  std::string reasons;
  for (const auto& [why, count] : fallbacks) reasons += "\n  " + std::to_string(count) + "x " + why;
  std::string joint_reasons;
  for (const auto& [why, count] : no_joint) joint_reasons += "\n  " + std::to_string(count) + "x " + why;
  const int ran = n - errors;
  std::cout << "compiled programs: " << n << ", " << errors << " raise eagerly too, " << graphs
            << " ran as graphs, " << eager << " fell back to eager" << reasons << "\n"
            << with_grad << " differentiate, " << joint << " with a captured backward graph (" << fake_traced
            << " traced over fake data)" << joint_reasons
            << "\n" << recomputing << " recompute forward nodes in their backward; saved " << saved_bytes
            << " bytes beyond the inputs in all, eager autograd's " << eager_saved_bytes << std::endl;
  EXPECT_GE(graphs, ran * 95 / 100) << "too many programs fell back to eager:" << reasons;
  EXPECT_GE(joint, with_grad * 80 / 100) << "too many backward passes were not captured:" << joint_reasons;
  // Note [Fake data]: a backward traced again for real is the exception, not the rule.
  EXPECT_GE(fake_traced, joint * 95 / 100) << "too many backward traces fell back from fake data to real";
  return {joint, recomputing};
}

// The backward reads what eager autograd saves (the partition off).
TEST(CompiledPrograms, EqualEagerBitwise) {
  ts::CompileOptions o;
  o.min_cut_partition = false;
  EXPECT_EQ(check_compiled_programs(o).second, 0);
}

// Note [Min-cut partition]: the backward reads what the cut saves and recomputes the rest on the
// CPU, where running an op again on the same inputs gives the same bits: still bitwise eager's.
TEST(CompiledPrograms, WithTheMinCutPartitionEqualEagerBitwise) {
  ts::CompileOptions o;
  o.min_cut_partition = true;
  const auto [joint, recomputing] = check_compiled_programs(o);
  // 1259 of the 1422 joint programs of the default 2000 recompute something.
  EXPECT_GE(recomputing, joint / 2) << "too few programs recompute anything: the test would not test the partition";
}

int codegen_count() {
  const char* s = std::getenv("TESSERA_CODEGEN_PROGRAMS");
  return s ? std::atoi(s) : 500;
}

// The programs on `device` through the codegen backend against eager on the same device.
void check_codegen_programs(ts::Device device) {
  const int n = codegen_count();
  int failed = 0, ran = 0, with_kernels = 0, kernels = 0, fused = 0;
  ts::set_compile_warning_handler([](const std::string&) {});
  ts::CompileOptions o;
  o.backend = "codegen";
  for (int seed = first_seed(); seed < first_seed() + n; ++seed) {
    const tp::Program p = tp::generate_program(static_cast<uint64_t>(seed));
    auto body = [&p, device](const std::vector<ts::Tensor>& in) { return tp::run_ops(p, in, device); };
    const ProgramRun want = run(p, body, false, device);
    auto f = ts::compile(body, o);
    const ProgramRun first = run(p, f, false, device), second = run(p, f, false, device);
    std::optional<ProgramRun> truth;
    auto close = [&](const ProgramRun& got) {
      std::string why = differs(got, want, near);
      if (why.empty() || got.error != want.error || got.outputs.size() != want.outputs.size() ||
          got.grads.size() != want.grads.size())
        return why;
      for (size_t j = 0; j < got.grads.size(); ++j)
        if (got.grads[j].defined() != want.grads[j].defined()) return why;
      if (!truth) truth = run(p, body, /*in64=*/true, device);
      // Each tensor that is not near() eager must be no further from float64 than eager is.
      for (size_t j = 0; j < got.outputs.size(); ++j)
        if (!near(got.outputs[j], want.outputs[j]) &&
            !(j < truth->outputs.size() && near_truth(got.outputs[j], want.outputs[j], truth->outputs[j])))
          return "output " + std::to_string(j) + " (against float64 too)";
      for (size_t j = 0; j < got.grads.size(); ++j)
        if (got.grads[j].defined() && !near(got.grads[j], want.grads[j]) &&
            !(j < truth->grads.size() && near_truth(got.grads[j], want.grads[j], truth->grads[j])))
          return "gradient " + std::to_string(j) + " (against float64 too)";
      return std::string();
    };
    std::string why = close(first);
    if (!why.empty()) why = "the capturing call: " + why;
    else if (!(why = close(second)).empty()) why = "the graph's call: " + why;
    if (!why.empty()) {
      ++failed;
      ADD_FAILURE() << tp::summary(p) << ": codegen differs from eager (" << why << ")\n" << f.last_graph();
      if (failed > 5) break;
    }
    if (!want.error.empty()) continue;
    ++ran;
    const ts::CompileStats s = f.stats();
    with_kernels += s.kernels > 0;
    kernels += s.kernels;
    fused += s.fused_nodes;
  }
  ts::set_compile_warning_handler(nullptr);
  std::cout << "codegen programs on " << device.str() << ": " << n << ", " << ran << " ran, " << with_kernels << " with generated kernels ("
            << kernels << " kernels holding " << fused << " nodes)" << std::endl;
  EXPECT_GE(with_kernels, ran / 4) << "too few programs fused anything: the test would not test code generation";
}

TEST(CompiledPrograms, CodegenEqualsEagerWithinRounding) { check_codegen_programs(ts::kCPU); }

// The same programs as generated CUDA kernels (NVRTC) against the eager CUDA kernels (label gpu).
TEST(CompiledProgramsCuda, CodegenEqualsEagerWithinRounding) {
  if (!ts::cuda::is_available()) GTEST_SKIP() << (ts::cuda::is_built() ? "no CUDA GPU found" : "tessera built without CUDA");
  check_codegen_programs(ts::Device::cuda());
}

}  // namespace
