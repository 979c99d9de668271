// The pieces of `tessera train` (apps/): option parsing and checking (every flag acted on or refused), the MFU
// peak table, the text data's split and windows, the learning-rate schedule, and a tiny end-to-end
// training run on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <set>
#include <string>

#include <unistd.h>

#include "common/test_util.h"
#include "gpu_peak.h"
#include "tessera/tessera.h"
#include "text_data.h"
#include "train.h"
#include "train_cli.h"

namespace ts = tessera;
using tessera::testing::message_of;
using namespace tessera::app;

namespace {

// Parses `args` (after "train") into options, as the command does.
TrainOptions parse(std::vector<std::string> args) {
  CLI::App app;
  TrainOptions t;
  add_train_options(app, t);
  std::vector<std::string> rev(args.rbegin(), args.rend());
  app.parse(rev);  // CLI11 takes the arguments reversed
  return t;
}

std::string temp_file(const std::string& name, const std::string& contents) {
  auto path = std::filesystem::temp_directory_path() / ("tessera_apps_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path, std::ios::binary) << contents;
  return path.string();
}

}  // namespace

TEST(TrainCli, ParsesGptOptions) {
  TrainOptions t = parse({"--model", "gpt2", "--data", "text:x.txt", "--layers", "2", "--heads", "4", "--embd",
                          "128", "--context", "32", "--accum", "3", "--top-k", "40", "--temperature", "0.5"});
  EXPECT_EQ(t.model, "gpt2");
  EXPECT_EQ(t.data, "text:x.txt");
  EXPECT_EQ(t.layers, 2);
  EXPECT_EQ(t.heads, 4);
  EXPECT_EQ(t.embd, 128);
  EXPECT_EQ(t.context, 32);
  EXPECT_EQ(t.accum, 3);
  EXPECT_EQ(t.top_k, 40);
  EXPECT_DOUBLE_EQ(t.temperature, 0.5);
}

TEST(TrainCli, RejectsBadValues) {
  EXPECT_THROW(parse({"--model", "gpt3"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--model", "gpt2", "--accum", "0"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--model", "gpt2", "--top-k", "300"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--model", "gpt2", "--amp", "fp8"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--model", "gpt2", "--layers", "-1"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--model", "gpt2", "--nonsense", "1"}), CLI::ParseError);
}

TEST(TrainCli, ResolvesModelDefaults) {
  TrainOptions t;
  t.model = "gpt2";
  t.data = "text:bible.txt";
  TrainOptions gpu = resolve_options(t, true), cpu = resolve_options(t, false);
  EXPECT_EQ(gpu.amp, "bf16");
  EXPECT_EQ(cpu.amp, "off");
  EXPECT_EQ(gpu.optimizer, "adamw");
  EXPECT_EQ(gpu.batch_size, 64);
  EXPECT_EQ(gpu.steps, 3000);
  EXPECT_DOUBLE_EQ(gpu.lr, 1e-3);
  EXPECT_DOUBLE_EQ(gpu.min_lr, 1e-4);

  TrainOptions r;
  r.model = "resnet50";
  EXPECT_EQ(resolve_options(r, true).batch_size, 256);
  EXPECT_EQ(resolve_options(r, true).data, "synthetic");
  EXPECT_EQ(resolve_options(r, true).optimizer, "sgd");
  EXPECT_EQ(resolve_options(r, true).amp, "bf16");

  TrainOptions c;  // the Fashion-MNIST models keep their defaults
  EXPECT_EQ(resolve_options(c, true).data, "fashion-mnist");
  EXPECT_EQ(resolve_options(c, true).amp, "off");
  EXPECT_EQ(resolve_options(c, true).batch_size, 64);
}

TEST(TrainCli, RejectsBadCombinations) {
  TrainOptions t;
  t.model = "gpt2";
  EXPECT_NE(message_of<ts::ValueError>([&] { resolve_options(t, false); }).find("needs --data text:FILE"),
            std::string::npos);
  t.data = "text:";
  EXPECT_THROW(resolve_options(t, false), ts::ValueError);
  t.data = "text:a.txt";
  t.embd = 100;
  t.heads = 6;
  EXPECT_NE(message_of<ts::ValueError>([&] { resolve_options(t, false); }).find("not a multiple of --heads"),
            std::string::npos);
  t.embd = 96;
  t.optimizer = "sgd";
  EXPECT_THROW(resolve_options(t, false), ts::ValueError);
  t.optimizer = "";
  t.amp = "fp16";
  EXPECT_THROW(resolve_options(t, false), ts::ValueError);
  t.amp = "auto";
  t.lr = 1e-3;
  t.min_lr = 1e-2;  // above lr
  EXPECT_THROW(resolve_options(t, false), ts::ValueError);

  TrainOptions r;
  r.model = "resnet50";
  r.data = "fashion-mnist";
  EXPECT_THROW(resolve_options(r, false), ts::ValueError);
  r.data = "synthetic";
  r.optimizer = "adamw";
  EXPECT_THROW(resolve_options(r, false), ts::ValueError);

  TrainOptions c;
  c.model = "cnn";
  c.data = "text:a.txt";
  EXPECT_THROW(resolve_options(c, false), ts::ValueError);
  c.data = "";
  c.model = "vgg";
  EXPECT_THROW(resolve_options(c, false), ts::ValueError);
}

// Note [No flag silently ignored]: a flag the chosen model does not act on fails before training
// starts, naming the flag and the model, also when its value is the default.
TEST(TrainCli, FlagsAModelDoesNotActOnRaiseNamingFlagAndModel) {
  const std::vector<std::vector<std::string>> cases = {
      {"--model", "cnn", "--layers", "2"},           {"--model", "cnn", "--steps", "10"},
      {"--model", "mlp", "--stop-at", "3"},          {"--model", "resnet18", "--prompt", "hi"},
      {"--model", "gpt2", "--data", "text:a.txt", "--epochs", "3"},  // 3 is the default: still refused
      {"--model", "gpt2", "--data", "text:a.txt", "--limit-train", "100"},
      {"--model", "resnet50", "--eval-every", "5"},  {"--model", "resnet50", "--epochs", "2"},
      {"--model", "resnet50", "--temperature", "0.8"}};
  for (const auto& args : cases) {
    const TrainOptions t = parse(args);
    SCOPED_TRACE(args[1] + " " + args[args.size() - 2]);
    const std::string msg = message_of<ts::ValueError>([&] { resolve_options(t, false); });
    EXPECT_NE(msg.find(args[args.size() - 2] + " does not apply to --model " + args[1]), std::string::npos) << msg;
  }
  // Set in code rather than parsed: a value other than the default counts as given.
  TrainOptions c;
  c.model = "cnn";
  c.top_k = 5;
  EXPECT_NE(message_of<ts::ValueError>([&] { resolve_options(c, false); }).find("--top-k does not apply to --model cnn (it applies to gpt2)"),
            std::string::npos);
  // The flags a model acts on pass.
  EXPECT_NO_THROW(resolve_options(parse({"--model", "gpt2", "--data", "text:a.txt", "--steps", "10", "--stop-at", "4",
                                         "--checkpoint", "c", "--metrics", "m.csv", "--profile", "p.json"}),
                                  false));
  EXPECT_NO_THROW(resolve_options(parse({"--model", "resnet50", "--steps", "10", "--log-every", "2", "--checkpoint",
                                         "c", "--metrics", "m.csv", "--profile", "p.json"}),
                                  false));
  EXPECT_NO_THROW(resolve_options(parse({"--model", "cnn", "--epochs", "2", "--limit-train", "64"}), false));
  EXPECT_NE(message_of<ts::ValueError>([&] {
              resolve_options(parse({"--model", "resnet50", "--steps", "10", "--stop-at", "11"}), false);
            }).find("--stop-at 11 is past --steps 10"),
            std::string::npos);
}

// Every option of the command is either one every model acts on or a row of the per-model table.
TEST(TrainCli, EveryOptionHasARowInTheFlagTable) {
  CLI::App app;
  TrainOptions t;
  add_train_options(app, t);
  std::set<std::string> known(flags_for_every_model().begin(), flags_for_every_model().end());
  for (const std::string& f : model_specific_flags()) known.insert(f);
  int checked = 0;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames().front() == "help") continue;
    EXPECT_TRUE(known.count("--" + opt->get_lnames().front())) << "--" << opt->get_lnames().front();
    ++checked;
  }
  EXPECT_GT(checked, 30);
}

// --resume without a checkpoint to resume is an error, not a fresh start, for every model.
TEST(TrainCli, ResumeWithoutACheckpointRaises) {
  const std::filesystem::path missing = std::filesystem::temp_directory_path() /
                                        ("tessera_no_checkpoint_" + std::to_string(::getpid()));
  for (const char* model : {"cnn", "gpt2", "resnet50"}) {
    SCOPED_TRACE(model);
    TrainOptions c;
    c.model = model;
    if (c.model == "gpt2") c.data = "text:a.txt";
    c.resume = true;
    EXPECT_NE(message_of<ts::ValueError>([&] { resolve_options(c, false); }).find("--resume needs --checkpoint"),
              std::string::npos);
    c.checkpoint = missing.string();
    EXPECT_NE(message_of<ts::IOError>([&] { resolve_options(c, false); }).find("no checkpoint at"), std::string::npos);
    std::filesystem::create_directories(missing);
    EXPECT_NO_THROW(resolve_options(c, false));
    std::filesystem::remove_all(missing);
  }
}

TEST(Mfu, PeakTableKnowsTheGpus) {
  EXPECT_DOUBLE_EQ(peak_bf16_flops("NVIDIA H200").value(), 989e12);
  EXPECT_DOUBLE_EQ(peak_bf16_flops("NVIDIA H100 80GB HBM3").value(), 989e12);
  EXPECT_DOUBLE_EQ(peak_bf16_flops("NVIDIA H100 PCIe").value(), 756e12);
  EXPECT_DOUBLE_EQ(peak_bf16_flops("NVIDIA A100-SXM4-80GB").value(), 312e12);
  EXPECT_DOUBLE_EQ(peak_bf16_flops("NVIDIA L4").value(), 121e12);
  EXPECT_DOUBLE_EQ(peak_bf16_flops("NVIDIA GeForce RTX 4090").value(), 165e12);
  EXPECT_FALSE(peak_bf16_flops("NVIDIA L40S").has_value());  // whole words: not the L4
  EXPECT_FALSE(peak_bf16_flops("NVIDIA GeForce RTX 3090").has_value());
  EXPECT_FALSE(peak_bf16_flops("").has_value());
  EXPECT_FALSE(mfu(1e9, 1e5, "Some GPU").has_value());
}

TEST(Mfu, FlopsPerTokenAsNanoGpt) {
  // GPT-2 small: 124,439,808 parameters, 786,432 of them in wpe; 12 layers, 12 heads of 64, context 1024.
  ts::models::GPT2Config cfg;
  const int64_t n = cfg.num_parameters() - cfg.n_positions * cfg.n_embd;
  EXPECT_EQ(n, 124439808 - 786432);
  const double f = gpt_flops_per_token(n, 12, 12, 64, 1024);
  EXPECT_DOUBLE_EQ(f, 6.0 * 123653376 + 12.0 * 12 * 12 * 64 * 1024);
  // 500k tokens/s on an H200: ~0.45 of the peak.
  EXPECT_NEAR(mfu(f, 5e5, "NVIDIA H200").value(), f * 5e5 / 989e12, 1e-12);
}

TEST(TextBytes, SplitsNinetyTen) {
  TextBytes t(std::string(1000, 'a'));
  EXPECT_EQ(t.size(), 1000);
  EXPECT_EQ(t.train_size(), 900);
  EXPECT_EQ(t.val_size(), 100);
  EXPECT_THROW(TextBytes("", 0.9), ts::ValueError);
  EXPECT_THROW(TextBytes("abc", 1.0), ts::ValueError);
  EXPECT_THROW(TextBytes::from_file("/nonexistent/tessera.txt"), ts::IOError);
}

TEST(TextBytes, WindowsStayInTheirPartAndShiftByOne) {
  // Byte i of the text is i % 251, so a window's position in the text is known from its first byte.
  std::string s;
  for (int i = 0; i < 2000; ++i) s += static_cast<char>(i % 251);
  const std::string path = temp_file("windows.txt", s);
  TextBytes t = TextBytes::from_file(path);
  ASSERT_EQ(t.train_size(), 1800);
  ts::Generator gen(7);
  for (bool val : {false, true}) {
    auto [x, y] = t.batch(val, 64, 16, gen);
    ASSERT_EQ(x.sizes(), (ts::Shape{64, 16}));
    ASSERT_EQ(y.sizes(), (ts::Shape{64, 16}));
    EXPECT_EQ(x.dtype(), ts::kInt64);
    const int64_t* px = x.data_ptr<int64_t>();
    const int64_t* py = y.data_ptr<int64_t>();
    for (int64_t b = 0; b < 64; ++b) {
      for (int64_t k = 0; k < 16; ++k) {
        EXPECT_EQ(py[b * 16 + k], (px[b * 16 + k] + 1) % 251);  // y is x shifted by one byte
        if (k + 1 < 16) {
          EXPECT_EQ(px[b * 16 + k + 1], py[b * 16 + k]);
        }
      }
    }
  }
  // The same seed gives the same windows; another seed others.
  ts::Generator a(3), b(3), c(4);
  EXPECT_TRUE(ts::equal(t.batch(false, 8, 16, a).first, t.batch(false, 8, 16, b).first));
  EXPECT_FALSE(ts::equal(t.batch(false, 8, 16, a).first, t.batch(false, 8, 16, c).first));
  // Validation windows come from the last 200 bytes: their first byte is one of bytes 1800..1983.
  TextBytes small(std::string(s.begin(), s.end()));
  ts::Generator g(1);
  for (int rep = 0; rep < 20; ++rep) {
    auto [x, y] = small.batch(true, 4, 16, g);
    for (int64_t b = 0; b < 4; ++b) {
      const int64_t first = x.data_ptr<int64_t>()[b * 16];
      bool found = false;
      for (int i = 1800; i <= 2000 - 17; ++i) found = found || (i % 251) == first;
      EXPECT_TRUE(found);
    }
  }
  EXPECT_THROW(t.batch(true, 4, 200, gen), ts::ValueError);  // the 200 validation bytes hold no 201-byte window
  std::filesystem::remove(path);
}

TEST(TextBytes, DecodesBytes) {
  EXPECT_EQ(decode_bytes(ts::tensor(std::vector<int64_t>{72, 105, 10})), "Hi\n");
}

TEST(WarmupCosine, RisesThenDecaysToMin) {
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(0, 10, 100, 1e-3, 1e-4), 1e-4);
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(9, 10, 100, 1e-3, 1e-4), 1e-3);
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(10, 10, 100, 1e-3, 1e-4), 1e-3);  // the decay starts at lr
  EXPECT_NEAR(warmup_cosine_lr(54, 10, 100, 1e-3, 1e-4),
              1e-4 + 0.5 * (1 + std::cos(std::numbers::pi * 44.0 / 89.0)) * 9e-4, 1e-15);
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(99, 10, 100, 1e-3, 1e-4), 1e-4);
  double prev = 1;
  for (int64_t s = 10; s < 100; ++s) {
    const double lr = warmup_cosine_lr(s, 10, 100, 1e-3, 1e-4);
    EXPECT_LE(lr, prev);
    prev = lr;
  }
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(0, 0, 1, 1e-3, 1e-4), 1e-3);  // one step: no room to decay
}

// A tiny run of the whole command on the CPU: the loss falls and a sample comes out.
TEST(TrainGpt, TinyRunOnTheCpuLearns) {
  std::string text;
  const char* words[] = {"the ", "lord ", "said ", "unto ", "moses ", "and ", "israel ", "land "};
  uint32_t state = 1;
  for (int i = 0; i < 6000; ++i) {
    state = state * 1664525u + 1013904223u;
    text += words[(state >> 16) % 8];
    if (i % 9 == 8) text += ".\n";
  }
  const std::string path = temp_file("tiny.txt", text);
  TrainOptions o;
  o.model = "gpt2";
  o.data = "text:" + path;
  o.device = "cpu";
  o.layers = 1;
  o.heads = 2;
  o.embd = 32;
  o.context = 32;
  o.batch_size = 8;
  o.steps = 30;
  o.log_every = 10;
  o.eval_every = 30;
  o.eval_iters = 2;
  o.accum = 2;
  o.warmup = 3;
  o.lr = 3e-3;
  o.sample_tokens = 20;
  o.threads = 2;
  const GptRunResult r = train_gpt(resolve_options(o, false));
  EXPECT_EQ(r.steps, 30);
  EXPECT_TRUE(std::isfinite(r.final_val_loss));
  EXPECT_LT(r.final_train_loss, r.first_train_loss);
  EXPECT_LT(r.final_val_loss, std::log(256.0) - 1.0);  // well below the uniform byte's 5.55 nats
  EXPECT_EQ(r.sample.size(), 21u);                      // the newline prompt and 20 bytes
  std::filesystem::remove(path);
}

namespace {

std::string words_file(const std::string& name) {
  std::string text;
  const char* words[] = {"the ", "lord ", "said ", "unto ", "moses ", "and ", "israel ", "land "};
  uint32_t state = 1;
  for (int i = 0; i < 3000; ++i) {
    state = state * 1664525u + 1013904223u;
    text += words[(state >> 16) % 8];
    if (i % 9 == 8) text += ".\n";
  }
  return temp_file(name, text);
}

TrainOptions tiny_gpt(const std::string& path) {
  TrainOptions o;
  o.model = "gpt2";
  o.data = "text:" + path;
  o.device = "cpu";
  o.layers = 1;
  o.heads = 2;
  o.embd = 32;
  o.context = 16;
  o.batch_size = 4;
  o.steps = 6;
  o.log_every = 1;
  o.eval_every = 3;
  o.eval_iters = 2;
  o.warmup = 2;
  o.lr = 3e-3;
  o.dropout = 0.1;  // draws from the default CPU generator at every step
  o.sample_tokens = 0;
  o.threads = 2;
  return o;
}

// The rows compared bitwise: everything but the rate, which is a timing.
void expect_same_curve(const std::vector<StepMetrics>& got, const std::vector<StepMetrics>& want) {
  ASSERT_EQ(got.size(), want.size());
  auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    EXPECT_EQ(got[i].step, want[i].step);
    EXPECT_TRUE(same(got[i].train_loss, want[i].train_loss)) << got[i].train_loss << " vs " << want[i].train_loss;
    EXPECT_TRUE(same(got[i].val_loss, want[i].val_loss)) << got[i].val_loss << " vs " << want[i].val_loss;
    EXPECT_TRUE(same(got[i].lr, want[i].lr));
  }
}

}  // namespace

// Note [Resuming a step run]: a run stopped at step 2 (between evaluations) and resumed gives the loss
// curve of the uninterrupted run bitwise, validation losses included; its metrics file holds the whole
// curve, and --profile works in the resumed run.
TEST(TrainGpt, ResumedRunContinuesTheLossCurveBitwise) {
  const std::string path = words_file("resume.txt");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tessera_gpt_resume_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const GptRunResult straight = train_gpt(resolve_options(tiny_gpt(path), false));
  ASSERT_EQ(straight.metrics.size(), 6u);
  EXPECT_TRUE(std::isnan(straight.metrics[1].val_loss));
  EXPECT_FALSE(std::isnan(straight.metrics[2].val_loss));

  TrainOptions first = tiny_gpt(path);
  first.checkpoint = (dir / "ckpt").string();
  first.metrics = (dir / "m.csv").string();
  first.stop_at = 2;
  const GptRunResult a = train_gpt(resolve_options(first, false));
  EXPECT_EQ(a.steps, 2);
  ASSERT_TRUE(std::filesystem::exists(dir / "ckpt" / "checkpoint.json"));

  ts::manual_seed(999);  // whatever the process drew since, the checkpoint's generators decide
  TrainOptions second = tiny_gpt(path);
  second.checkpoint = first.checkpoint;
  second.metrics = first.metrics;
  second.profile = (dir / "trace.json").string();
  second.resume = true;
  const GptRunResult b = train_gpt(resolve_options(second, false));
  EXPECT_EQ(b.steps, 6);
  expect_same_curve(b.metrics, straight.metrics);
  expect_same_curve(read_step_metrics_csv(first.metrics, 100), straight.metrics);  // the file round-trips
  EXPECT_TRUE(std::filesystem::exists(dir / "m.svg"));
  EXPECT_TRUE(std::filesystem::exists(dir / "trace.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "trace.memory.svg"));

  // A checkpoint of another model shape is refused, naming what disagrees.
  TrainOptions other = second;
  other.embd = 64;
  other.profile.clear();
  EXPECT_THROW(train_gpt(resolve_options(other, false)), ts::Error);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(path);
}

// ResNet-50 on the CPU at batch 1 (a few seconds a step on two cores): a run stopped after step 1 and
// resumed equals the straight run, and the checkpoint and metrics flags write their files. (--profile
// needs three steps in a run; it is the step window the GPT test covers.)
TEST(TrainResnet50, ResumedRunContinuesBitwise) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tessera_r50_resume_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  TrainOptions o;
  o.model = "resnet50";
  o.device = "cpu";
  o.batch_size = 1;
  o.steps = 2;
  o.log_every = 1;
  o.threads = 2;
  o.lr = 0.01;
  const Resnet50RunResult straight = train_resnet50_synthetic(resolve_options(o, false));
  ASSERT_EQ(straight.metrics.size(), 2u);
  TrainOptions first = o;
  first.checkpoint = (dir / "ckpt").string();
  first.metrics = (dir / "m.csv").string();
  first.stop_at = 1;
  train_resnet50_synthetic(resolve_options(first, false));
  TrainOptions second = first;
  second.stop_at = 0;
  second.resume = true;
  const Resnet50RunResult b = train_resnet50_synthetic(resolve_options(second, false));
  expect_same_curve(b.metrics, straight.metrics);
  EXPECT_TRUE(std::filesystem::exists(dir / "m.svg"));
  std::filesystem::remove_all(dir);
}
