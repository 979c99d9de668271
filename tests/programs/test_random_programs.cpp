// The random program tester's C++ side (program.h, generator.h, interpreter.h; the PyTorch side is
// program_oracle.py).
//
//   test_random_programs --write DIR [--count N] [--first-seed S] [--regressions FOLDER] [--program F]...
//       writes DIR/programs.jsonl (N generated programs, seeds S.., each F as one of them, and every
//       FOLDER/*.json as a kept case)
//       and DIR/inputs.safetensors (each input step's values) for the oracle;
//   test_random_programs   (GoogleTest; TESSERA_PROGRAMS_DIR=DIR, after the oracle wrote DIR/outputs)
//       RandomPrograms.shard_<k>            tessera on the CPU, the generated programs k, k + shards, ...
//       RandomProgramsRegression.<name>     each kept case of tests/programs/regressions
//       RandomProgramsCuda.*                the same on the GPU (skip without one)
//       RandomPrograms.summary              how many ran, were rejected or raised; fails when the oracle
//                                           rejected too many (a tester that rejects all tests nothing)
// A failing program is written to DIR/failures/<id>.json: copy it into tests/programs/regressions/
// with a "note" to keep it, beside the fix.
//
// Note [Program tolerances]: tessera's value y is compared with PyTorch's float64 run r of the same
// program (inputs upcast exactly), elementwise, against one bound per output:
//   float64 programs: |y - r| <= 4 err + 1e-9 (1 + scale) + 64 u64 pert / 1e-7
//   float32, bfloat16: |y - r| <= 4 err + k u (1 + scale) + the float64 bound
// scale is max |r|; pert is how far r moves when the inputs move by 1e-7 relative (the program's
// conditioning); u is the dtype's unit roundoff, k = 16 for float32 and 2 for bfloat16; err is the
// distance from r of PyTorch's own run in the program's dtype, or of any of four float64 runs whose
// every intermediate is moved by up to u of itself and of its operands' magnitude and rounded to the
// dtype (the gradient through it scaled likewise), whichever is largest (program_oracle.py). So a low-precision result may be no further from float64
// than a run in that dtype is, times a small factor. The rounded runs are there because one run of
// PyTorch can be lucky where the program cancels (a layer norm's input gradient summed over a
// broadcast is exactly 0, and PyTorch's float32 gave 1.7e-7 where another order of sums gives
// 1.5e-5), or can miss a tie that rounding makes in another implementation (maximum(a, b) with
// a == b in bfloat16 splits the gradient). The k u term is a floor for exact zeros (layer norm over one
// element); the 1e-9 floor covers float64 noise that the move cannot see, such as x - mean(x) over
// equal copies of x, amplified by layer norm's 1 / sqrt(eps). Integer and boolean values are exact.
// The oracle rejects, and nobody counts, programs whose r is not finite, jumps under the move (a
// comparison or a clamp on a tie), or moves by a quarter of its scale under rounding alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

#include "programs/generator.h"
#include "common/test_util.h"
#include "programs/interpreter.h"

namespace ts = tessera;
namespace tp = tessera::programs;
using tessera::operator<<;
namespace fs = std::filesystem;
using tp::Json;

namespace {

constexpr int kShards = 20;
constexpr double kMaxRejected = 0.35;  // of the generated programs

struct Entry {
  std::string id;
  tp::Program program;
  bool regression = false;
};

std::string dir_from_env() {
  const char* d = std::getenv("TESSERA_PROGRAMS_DIR");
  return d ? d : "";
}

// ---- --write ---------------------------------------------------------------------------------------
int write_batch(int argc, char** argv) {
  std::string dir;
  int64_t count = 2000;
  uint64_t first = 1;
  std::vector<std::string> files, kept;  // --program files run as generated ones, --regressions as kept cases
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "test_random_programs: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--write") dir = next();
    else if (a == "--count") count = std::stoll(next());
    else if (a == "--first-seed") first = std::stoull(next());
    else if (a == "--program") files.push_back(next());
    else if (a == "--regressions") {
      std::string folder = next();
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(folder))
        if (e.path().extension() == ".json") found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      kept.insert(kept.end(), found.begin(), found.end());
    } else {
      std::cerr << "test_random_programs: unknown argument '" << a << "'\n";
      return 2;
    }
  }
  fs::create_directories(dir);
  fs::remove(fs::path(dir) / "outputs.safetensors");
  std::vector<Entry> entries;
  for (int64_t k = 0; k < count; ++k) {
    uint64_t seed = first + static_cast<uint64_t>(k);
    entries.push_back({"g" + std::to_string(seed), tp::generate_program(seed), false});
  }
  for (const std::string& f : files) entries.push_back({"p_" + fs::path(f).stem().string(), tp::load_program(f), false});
  for (const std::string& f : kept) entries.push_back({"r_" + fs::path(f).stem().string(), tp::load_program(f), true});
  std::map<std::string, ts::Tensor> tensors;
  std::ofstream out(fs::path(dir) / "programs.jsonl");
  int64_t ops = 0;
  for (const Entry& e : entries) {
    Json j = tp::to_json(e.program);
    j["id"] = e.id;
    j["regression"] = e.regression;
    out << j.dump() << "\n";
    for (size_t i = 0; i < e.program.steps.size(); ++i) {
      const tp::Step& s = e.program.steps[i];
      if (s.op == "input") tensors[e.id + "/s" + std::to_string(i)] = tp::input_values(s);
      else ++ops;
    }
  }
  out.close();
  TS_CHECK(out.good(), IOError, "test_random_programs: writing ", dir, "/programs.jsonl failed");
  ts::save_safetensors(tensors, (fs::path(dir) / "inputs.safetensors").string());
  std::cout << "wrote " << entries.size() << " programs (" << kept.size() << " kept cases, " << ops
            << " ops) to " << dir << "\n";
  return 0;
}

// ---- the batch, read once -----------------------------------------------------------------------------
struct Stats {
  double err = 0, scale = 0, pert = 0;
  std::string dtype;
};
Stats stats_of(const Json& j) { return {j.at("err").get<double>(), j.at("scale").get<double>(), j.at("pert").get<double>(), j.value("dtype", "")}; }

struct Batch {
  std::vector<Entry> entries;
  std::map<std::string, ts::Tensor> outputs;
  std::map<std::string, Json> meta;
  std::string error;  // why the batch could not be read
};

Batch& batch() {
  static Batch b = [] {
    Batch r;
    const std::string dir = dir_from_env();
    if (dir.empty()) {
      r.error = "TESSERA_PROGRAMS_DIR is not set (ctest sets it after the oracle step)";
      return r;
    }
    std::ifstream f(fs::path(dir) / "programs.jsonl");
    if (!f) {
      r.error = "no " + dir + "/programs.jsonl (the step test_random_programs --write did not run)";
      return r;
    }
    std::string line;
    while (std::getline(f, line)) {
      Json j = Json::parse(line);
      r.entries.push_back({j.at("id").get<std::string>(), tp::from_json(j), j.value("regression", false)});
    }
    const fs::path outs = fs::path(dir) / "outputs.safetensors";
    if (!fs::exists(outs)) {
      r.error = "no " + outs.string() + " (the PyTorch oracle did not run: is python3-torch installed?)";
      return r;
    }
    ts::SafetensorsFile file(outs.string());
    for (const std::string& name : file.keys()) r.outputs[name] = file.get(name);
    for (const auto& [k, v] : file.metadata())
      if (k != "torch_version" && k != "device") r.meta[k] = Json::parse(v);
    return r;
  }();
  return b;
}

bool under_ci() { return std::getenv("CI") && std::string(std::getenv("CI")) == "true"; }

double unit_roundoff(const std::string& dtype) {
  if (dtype == "float64") return std::ldexp(1.0, -53);
  if (dtype == "float32") return std::ldexp(1.0, -24);
  if (dtype == "bfloat16") return std::ldexp(1.0, -8);
  if (dtype == "float16") return std::ldexp(1.0, -11);
  return 0;
}

// Note [Program tolerances].
double allowed(const Stats& s, const std::string& dtype) {
  const double u64 = std::ldexp(1.0, -53);
  const double f64 = 1e-9 * (1 + s.scale) + 64 * u64 * s.pert / 1e-7;
  if (dtype == "float64") return 4 * s.err + f64;
  const double k = dtype == "float32" ? 16 : 2;
  return 4 * s.err + k * unit_roundoff(dtype) * (1 + s.scale) + f64;
}

// "" when `got` matches `ref` under `s`, else what differs.
std::string mismatch(const ts::Tensor& got, const ts::Tensor& ref, const Stats& s, const std::string& what) {
  std::ostringstream o;
  if (got.sizes() != ref.sizes()) {
    o << what << ": sizes " << got.sizes() << ", PyTorch " << ref.sizes();
    return o.str();
  }
  if (!s.dtype.empty() && s.dtype != ts::dtype_name(got.dtype())) {
    o << what << ": dtype " << ts::dtype_name(got.dtype()) << ", PyTorch " << s.dtype;
    return o.str();
  }
  if (got.numel() == 0) return "";
  ts::Tensor g = got.cpu().to(ts::kFloat64), r = ref.cpu().to(ts::kFloat64);
  if (!ref.is_floating_point()) {
    if (!ts::equal(g, r)) {
      ts::Tensor bad = ts::nonzero(ts::ne(g, r).reshape({-1}));
      int64_t i = bad.reshape({-1})[0].item<int64_t>();
      o << what << ": " << bad.size(0) << " of " << got.numel() << " values differ; first at flat index " << i
        << ": " << g.reshape({-1})[i].item<double>() << ", PyTorch " << r.reshape({-1})[i].item<double>();
      return o.str();
    }
    return "";
  }
  ts::Tensor d = ts::abs(g - r);
  if (!ts::isfinite(g).all().item<bool>()) {
    o << what << ": tessera's value is not finite where PyTorch's float64 run is";
    return o.str();
  }
  const double worst = ts::amax(d).item<double>();
  const double tol = allowed(s, s.dtype.empty() ? ts::dtype_name(got.dtype()) : s.dtype);
  if (worst <= tol) return "";
  int64_t i = ts::argmax(d.reshape({-1})).item<int64_t>();
  o << what << ": max |tessera - float64| = " << worst << " > allowed " << tol << " (PyTorch's own error "
    << s.err << ", scale " << s.scale << ", conditioning " << s.pert << "); at flat index " << i << ": "
    << g.reshape({-1})[i].item<double>() << ", float64 " << r.reshape({-1})[i].item<double>();
  return o.str();
}

std::string tensor_key(const std::string& id, const std::string& name) { return id + "/" + name; }

// "" when tessera agrees with the oracle on this program, else the first disagreement.
std::string check_program(const Entry& e, ts::Device dev, int* outcome /* 0 ran, 1 rejected, 2 raised */) {
  Batch& b = batch();
  auto m = b.meta.find(e.id);
  if (m == b.meta.end()) return "the oracle wrote nothing for this program";
  const Json& meta = m->second;
  const std::string status = meta.at("status").get<std::string>();
  if (status == "rejected") {
    *outcome = 1;
    return "";
  }
  std::vector<ts::Tensor> weights(e.program.outputs.size());
  for (size_t j = 0; j < weights.size(); ++j) {
    auto w = b.outputs.find(tensor_key(e.id, "w" + std::to_string(j)));
    if (w != b.outputs.end()) weights[j] = w->second;
  }
  tp::RunResult r;
  try {
    r = tp::run_program(e.program, dev, weights);
  } catch (const std::exception& ex) {
    return std::string("the interpreter failed: ") + ex.what();
  }
  if (status == "error") {
    *outcome = 2;
    const int step = meta.at("step").get<int>();
    const std::string torch_error = meta.at("error").get<std::string>();
    if (!r.error_step)
      return "PyTorch raised at step " + std::to_string(step) + " (" + torch_error + "); tessera did not raise";
    if (*r.error_step != step)
      return "PyTorch raised at step " + std::to_string(step) + " (" + torch_error + "); tessera at step " +
             std::to_string(*r.error_step) + " (" + r.error + ")";
    return "";
  }
  *outcome = 0;
  if (r.error_step)
    return "tessera raised at step " + std::to_string(*r.error_step) + " (" + r.error + "); PyTorch did not";
  const Json& outs = meta.at("out");
  for (size_t j = 0; j < r.outputs.size(); ++j) {
    auto ref = b.outputs.find(tensor_key(e.id, "ref" + std::to_string(j)));
    if (ref == b.outputs.end()) return "the oracle wrote no output " + std::to_string(j);
    std::string bad = mismatch(r.outputs[j], ref->second, stats_of(outs.at(j)),
                               "output " + std::to_string(j) + " (step " + std::to_string(e.program.outputs[j]) + ")");
    if (!bad.empty()) return bad;
  }
  const Json& grads = meta.at("grad");
  if (!grads.empty() && !r.has_loss)
    return "PyTorch differentiates the outputs with respect to the inputs; tessera's outputs do not require grad";
  for (const auto& [k, st] : grads.items()) {
    const int step = std::stoi(k);
    auto ref = b.outputs.find(tensor_key(e.id, "gref" + k));
    if (ref == b.outputs.end()) return "the oracle wrote no gradient for step " + k;
    ts::Tensor g = r.grads.at(step);
    if (!g.defined()) g = ts::zeros(ref->second.sizes(), e.program.steps[step].dtype);  // unused: zeros
    Stats s = stats_of(st);
    if (s.dtype.empty()) s.dtype = ts::dtype_name(e.program.steps[step].dtype);
    std::string bad = mismatch(g, ref->second, s, "the gradient of input step " + k);
    if (!bad.empty()) return bad;
  }
  return "";
}

void record_failure(const Entry& e, const std::string& why) {
  const std::string dir = dir_from_env();
  if (dir.empty()) return;
  fs::create_directories(fs::path(dir) / "failures");
  tp::Program p = e.program;
  p.note = why;
  tp::save_program(p, (fs::path(dir) / "failures" / (e.id + ".json")).string());
}

// Without a batch (the oracle step did not run, or PyTorch is missing) a test skips, saying why; under
// CI=true it fails.
#define TS_REQUIRE_BATCH()                     \
  do {                                         \
    if (!batch().error.empty()) {              \
      if (under_ci()) {                        \
        ADD_FAILURE() << batch().error;        \
        return;                                \
      }                                        \
      GTEST_SKIP() << batch().error;           \
    }                                          \
  } while (0)

void run_entries(const std::vector<const Entry*>& es, ts::Device dev) {
  int failed = 0;
  for (const Entry* e : es) {
    int outcome = 0;
    std::string why = check_program(*e, dev, &outcome);
    if (why.empty()) continue;
    record_failure(*e, why);
    if (++failed <= 5)
      ADD_FAILURE() << "program " << e->id << " on " << dev.str() << ": " << why << "\n  " << tp::summary(e->program)
                    << "\n  kept in " << dir_from_env() << "/failures/" << e->id << ".json";
  }
  if (failed > 5) ADD_FAILURE() << failed << " programs failed in all (the first 5 shown)";
}

void run_shard(int k, ts::Device dev) {
  TS_REQUIRE_BATCH();
  std::vector<const Entry*> mine;
  int n = 0;
  for (const Entry& e : batch().entries)
    if (!e.regression && n++ % kShards == k) mine.push_back(&e);
  run_entries(mine, dev);
}

void summary() {
  TS_REQUIRE_BATCH();
  int ran = 0, rejected = 0, raised = 0, generated = 0;
  std::map<std::string, int> reasons;
  for (const Entry& e : batch().entries) {
    if (e.regression) continue;
    ++generated;
    auto m = batch().meta.find(e.id);
    if (m == batch().meta.end()) continue;
    const std::string st = m->second.at("status").get<std::string>();
    if (st == "ok") ++ran;
    else if (st == "error") ++raised;
    else {
      ++rejected;
      const std::string why = m->second.value("reason", "");
      const char* kind = "other";
      for (const char* k : {"not finite", "jumps", "rounding alone", "changes an integer", "float64 run raised"})
        if (why.find(k) != std::string::npos) kind = k;
      reasons[kind]++;
    }
  }
  std::cout << "random programs: " << generated << " generated; PyTorch ran " << ran << ", rejected " << rejected
            << ", raised in " << raised << "\n";
  for (const auto& [why, n] : reasons) std::cout << "  rejected " << n << ": " << why << "\n";
  EXPECT_EQ(ran + rejected + raised, generated) << "the oracle left programs out";
  EXPECT_LE(rejected, kMaxRejected * generated) << "the oracle rejected too many programs: the generator makes "
                                                   "programs that are not finite or not continuous";
  EXPECT_GE(ran, generated / 2) << "fewer than half the programs ran in PyTorch";
}

template <class F>
void register_test(const char* suite, const std::string& name, F body) {
  ::testing::RegisterTest(suite, name.c_str(), nullptr, nullptr, __FILE__, __LINE__, [body]() -> ::testing::Test* {
    struct T : ::testing::Test {
      F body;
      explicit T(F b) : body(std::move(b)) {}
      void TestBody() override { body(); }
    };
    return new T(body);
  });
}

void require_gpu_then(const std::function<void()>& f) {
  if (!ts::cuda::is_available())
    GTEST_SKIP() << (ts::cuda::is_built() ? "no CUDA GPU found" : "tessera built without CUDA");
  f();
}

// Generator self-checks that need no oracle: determinism, sizes, the op set.
TEST(RandomProgramGenerator, DeterministicValidAndWithinLimits) {
  std::map<std::string, int> seen;
  const std::vector<std::string> known = tp::interpreter_ops();
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    tp::Program p = tp::generate_program(seed);
    EXPECT_EQ(tp::to_json(p), tp::to_json(tp::generate_program(seed))) << "seed " << seed;
    EXPECT_EQ(tp::to_json(tp::from_json(tp::to_json(p))), tp::to_json(p)) << "JSON round trip, seed " << seed;
    int ops = 0;
    for (const tp::Step& s : p.steps) {
      if (s.op == "input") {
        EXPECT_LE(s.shape.size(), 4u);
        continue;
      }
      ++ops;
      ++seen[s.op];
      EXPECT_NE(std::find(known.begin(), known.end(), s.op), known.end()) << "seed " << seed << ": op " << s.op;
    }
    EXPECT_GE(ops, 3) << tp::summary(p);
    // A family may add a guard or a factory after the target is reached, so a few more than 12.
    EXPECT_LE(ops, 16) << tp::summary(p);
  }
  // Over 300 programs every family turns up.
  for (const char* op : {"add", "matmul", "sum", "softmax", "reshape", "permute", "slice", "expand", "cat",
                         "index_select", "layer_norm", "linspace", "where", "log_softmax", "gather"})
    EXPECT_GT(seen[op], 0) << op;
}

TEST(RandomProgramGenerator, MalformedProgramsAreRejectedClearly) {
  Json j = tp::to_json(tp::generate_program(5));
  j["steps"].push_back({{"op", "add"}, {"in", {0, 999}}});
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { tp::from_json(j); }).find("not an earlier step"), std::string::npos);
  Json k = tp::to_json(tp::generate_program(5));
  k["format"] = "something else";
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { tp::from_json(k); }).find("tessera-random-program/1"), std::string::npos);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--write") == 0) return write_batch(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  for (int k = 0; k < kShards; ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "shard_%02d", k);
    register_test("RandomPrograms", name, [k] { run_shard(k, ts::kCPU); });
    register_test("RandomProgramsCuda", name, [k] { require_gpu_then([k] { run_shard(k, ts::Device::cuda(0)); }); });
  }
  register_test("RandomPrograms", "summary", [] { summary(); });
  // The kept cases, one test each, named after their files (listed from the source tree, since ctest
  // lists the tests before the oracle step writes the batch).
  std::vector<std::string> kept;
  for (const auto& f : fs::directory_iterator(TESSERA_PROGRAMS_REGRESSIONS))
    if (f.path().extension() == ".json") kept.push_back(f.path().stem().string());
  std::sort(kept.begin(), kept.end());
  for (const std::string& name : kept) {
    auto body = [id = "r_" + name](ts::Device dev) {
      TS_REQUIRE_BATCH();
      for (const Entry& e : batch().entries)
        if (e.id == id) return run_entries({&e}, dev);
      ADD_FAILURE() << "the batch holds no kept case " << id << " (was it written with --regressions?)";
    };
    register_test("RandomProgramsRegression", name, [body] { body(ts::kCPU); });
    register_test("RandomProgramsCudaRegression", name, [body] { require_gpu_then([body] { body(ts::Device::cuda(0)); }); });
  }
  return RUN_ALL_TESTS();
}
