// Checkpoints: resuming gives bitwise the same training as running straight through; PyTorch loads
// the model file and computes the same outputs; saving is atomic and bad checkpoints raise IOError.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/test_util.h"

namespace ts = tessera;
namespace fs = std::filesystem;
using ts::testing::message_of;

namespace {

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tessera_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

// One deterministic batch per step, independent of any generator state the training consumes.
std::pair<ts::Tensor, ts::Tensor> batch(int step) {
  ts::Generator g(1000 + step);
  return {ts::randn({16, 1, 28, 28}, {}, &g), ts::randint(0, 10, {16}, {}, &g)};
}

std::vector<double> train_steps(ts::nn::Module& m, ts::optim::Optimizer& opt, ts::optim::LRScheduler& sched,
                                int first, int last) {
  std::vector<double> losses;
  for (int s = first; s < last; ++s) {
    auto [x, y] = batch(s);
    opt.zero_grad();
    ts::Tensor loss = ts::nn::functional::cross_entropy(m(x), y);
    loss.backward();
    opt.step();
    sched.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

}  // namespace

TEST(Checkpoint, ResumeIsBitwiseIdentical) {
  fs::path dir = scratch("resume");
  ts::manual_seed(7);
  ts::models::CNN straight(1, 10, 28);
  ts::optim::AdamW opt(straight.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
  ts::optim::CosineAnnealingLR sched(opt, 10);
  train_steps(straight, opt, sched, 0, 5);
  ts::save_checkpoint(dir.string(), straight, &opt, &sched, 5);
  std::vector<double> expected = train_steps(straight, opt, sched, 5, 10);

  ts::manual_seed(123);  // a different initialization, overwritten by the checkpoint
  ts::models::CNN resumed(1, 10, 28);
  ts::optim::AdamW opt2(resumed.parameters(), {.lr = 1e-3, .weight_decay = 0.01});
  ts::optim::CosineAnnealingLR sched2(opt2, 10);
  EXPECT_EQ(ts::load_checkpoint(dir.string(), resumed, &opt2, &sched2), 5);
  std::vector<double> got = train_steps(resumed, opt2, sched2, 5, 10);
  EXPECT_EQ(got, expected);  // bitwise
  EXPECT_EQ(sched2.get_last_lr(), sched.get_last_lr());
  fs::remove_all(dir);
}

TEST(Checkpoint, SaveReplacesAtomicallyAndLeavesNoTemporaries) {
  fs::path dir = scratch("atomic");
  ts::models::MLP m(4, {8}, 2);
  ts::save_checkpoint(dir.string(), m, nullptr, nullptr, 1);
  ts::save_checkpoint(dir.string(), m, nullptr, nullptr, 2);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.parent_path()))
    if (e.path().filename().string().rfind(dir.filename().string(), 0) == 0) ++entries;
  EXPECT_EQ(entries, 1);  // no .tmp or .old left
  ts::models::MLP m2(4, {8}, 2);
  EXPECT_EQ(ts::load_checkpoint(dir.string(), m2), 2);
  EXPECT_TRUE(ts::equal(m2.layers.parameters()[0], m.layers.parameters()[0]));
  fs::remove_all(dir);
}

TEST(Checkpoint, BadCheckpointsRaiseIOError) {
  ts::models::MLP m(4, {8}, 2);
  EXPECT_THROW(ts::load_checkpoint("/nonexistent/checkpoint", m), ts::IOError);
  fs::path dir = scratch("bad");
  ts::save_checkpoint(dir.string(), m);
  { std::ofstream(dir / "checkpoint.json") << "{not json"; }
  EXPECT_THROW(ts::load_checkpoint(dir.string(), m), ts::IOError);
  ts::save_checkpoint(dir.string(), m);
  { std::ofstream(dir / "model.safetensors", std::ios::binary) << "truncated"; }
  EXPECT_THROW(ts::load_checkpoint(dir.string(), m), ts::IOError);
  ts::save_checkpoint(dir.string(), m);
  ts::models::MLP other(4, {9}, 2);
  EXPECT_THROW(ts::load_checkpoint(dir.string(), other), ts::ShapeError);
  fs::remove_all(dir);
}

// The generators a training loop names are saved and restored with the checkpoint; asking for one the
// checkpoint lacks is an IOError that changes nothing.
TEST(Checkpoint, NamedGeneratorsRoundTrip) {
  fs::path dir = scratch("generators");
  ts::models::MLP m(4, {8}, 2);
  ts::Generator batches(11), evals(12);
  batches.set_offset(1234);
  evals.set_offset(99);
  ts::save_checkpoint(dir.string(), m, nullptr, nullptr, 7, {{"batches", &batches}, {"evals", &evals}});
  ts::Generator b2(0), e2(0), missing(5);
  EXPECT_EQ(ts::load_checkpoint(dir.string(), m, nullptr, nullptr, {{"batches", &b2}, {"evals", &e2}}), 7);
  EXPECT_EQ(b2.seed(), 11u);
  EXPECT_EQ(b2.offset(), 1234u);
  EXPECT_EQ(e2.seed(), 12u);
  EXPECT_EQ(e2.offset(), 99u);
  ts::Generator b3(0);
  EXPECT_NE(message_of<ts::IOError>([&] {
              ts::load_checkpoint(dir.string(), m, nullptr, nullptr, {{"batches", &b3}, {"other", &missing}});
            }).find("holds no state for generator 'other'"),
            std::string::npos);
  EXPECT_EQ(b3.seed(), 0u);  // untouched by the failed load
  fs::remove_all(dir);
}

// A checkpoint.json whose fields have the wrong types or ranges is an IOError naming the file and the
// field (parse_checkpoint_meta; fuzzed by fuzz/fuzz_checkpoint_meta.cpp).
TEST(Checkpoint, MalformedMetadataRaisesIOErrorNamingTheField) {
  ts::models::MLP m(4, {8}, 2);
  fs::path dir = scratch("meta");
  const std::pair<const char*, const char*> cases[] = {
      {R"({"format": "tessera-checkpoint", "step": "three"})", "step must be a non-negative integer"},
      {R"({"format": "tessera-checkpoint", "step": -1})", "step must be a non-negative integer"},
      {R"({"format": "tessera-checkpoint", "generator": {"seed": -4, "offset": 0}})", "generator must be an object"},
      {R"({"format": "tessera-checkpoint", "generators": {"g": 3}})", "generators.g must be an object"},
      {R"({"format": "tessera-checkpoint", "scheduler": 5})", "scheduler must be a string"},
      {R"([1, 2])", "is not a tessera checkpoint"},
  };
  for (const auto& [text, expect] : cases) {
    SCOPED_TRACE(text);
    ts::save_checkpoint(dir.string(), m);
    { std::ofstream(dir / "checkpoint.json") << text; }
    const std::string msg = message_of<ts::IOError>([&] { ts::load_checkpoint(dir.string(), m); });
    EXPECT_NE(msg.find(expect), std::string::npos) << msg;
    EXPECT_NE(msg.find("checkpoint.json"), std::string::npos) << msg;
  }
  fs::remove_all(dir);
}

TEST(Checkpoint, PyTorchLoadsTheModelAndAgrees) {
  const std::string script = ts::testing::source_path("tests/models/torch_load_checkpoint.py");
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0) {
    if (std::getenv("CI") && std::string(std::getenv("CI")) == "true") FAIL() << "PyTorch (python3-torch) is missing";
    GTEST_SKIP() << "PyTorch (python3-torch) is missing";
  }
  fs::path dir = scratch("torch");
  ts::manual_seed(3);
  ts::models::CNN m(1, 10, 28);
  ts::save_checkpoint(dir.string(), m);
  ts::Tensor x = ts::randn({2, 1, 28, 28});
  ts::save_safetensors({{"x", x}, {"y", m(x).detach()}}, (dir / "io.safetensors").string());
  std::string cmd = "/usr/bin/python3 " + script + " " + dir.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  fs::remove_all(dir);
}
