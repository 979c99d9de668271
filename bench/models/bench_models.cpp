// Model training benchmarks (issue "GPT-2 and ResNet-50 training at PyTorch speed or better"):
//   gpt2      GPT-2 124M (models::GPT2Config's defaults, dropout 0) training step, batch 16 x 1024 tokens,
//             bfloat16 autocast, clip_grad_norm_ 1.0, fused AdamW: tokens/s and peak memory; the loss
//             through GPT2::loss (the chunked classifier + cross-entropy, linear_cross_entropy), or with
//             --gpt-logits through the (B T, V) logits and cross_entropy, as PyTorch's script does;
//             --gpt-vocab N sets the vocabulary (50257, GPT-2's, by default; 50304 pads it to a multiple
//             of 64 as nanoGPT does), --gpt-rows times several such rows in one process;
//   resnet50  ResNet-50, batch 256, 224x224, channels-last, bfloat16 autocast, SGD momentum 0.9 weight
//             decay 5e-5: images/s and peak memory;
//   mlp       the MLP 784-512-512-10 step (batch 128, float32, SGD momentum 0.9): steps/s;
//   attention causal scaled_dot_product_attention forward + backward, bfloat16: ms per call.
// bench/torch/models.py times the same work in PyTorch under the same row names; bench/run_models.py
// runs both and writes bench/results/models.json.
//
// Output: one JSON object per line on stdout: {"name": "...", "unit": "tokens/s", "value": 1.2e5,
// "ms": 33.1, "peak_mem_bytes": 123456789, "samples_ms": [33.0, 33.1, ...], "warmup_s": 2.5}. Timing:
// after --warmup steps, CUDA events around --iters back-to-back steps on the current stream (no host
// synchronization inside); "samples_ms" holds each of the --runs such measurements (ms per step), "ms"
// their median and "value" the row's unit of it; "warmup_s" is the host time of the warm-up steps.
// Peak memory: cuda::memory_stats' "allocated_bytes.all.peak", reset after the warm-up, so it holds the
// parameters, gradients, optimizer state and the step's activations. The token ids of the GPT-2 rows are
// drawn below 50257 (GPT-2's tokenizer) whatever the vocabulary: the padded classes are never a target,
// as in nanoGPT, and bench/torch/models.py draws the same range.
//
// Loss-curve mode (bench/gpt2_loss_parity.py drives it):
//   bench_models --loss-curve N --out-dir DIR [--config small|124m] [--batch B] [--seq T] [--text FILE]
// builds a GPT-2 (small: 4 layers, 4 heads, 256 embd, context 256, vocabulary 256; 124m: the defaults)
// with dropout 0 from --seed, saves its initial weights as DIR/init.safetensors in Hugging Face's
// GPT2LMHeadModel layout (Conv1D weights transposed, Note [GPT-2 Conv1D layout]), writes N batches of
// B x (T + 1) int64 tokens to DIR/batches.bin (the bytes of --text, or a seeded order-2 Markov text),
// trains N steps (bf16 autocast unless --fp32, AdamW betas (0.9, 0.95) eps 1e-8 weight decay 0.1,
// clip 1.0, linear warm-up then cosine to lr / 10) and writes DIR/meta.json (the settings) and
// DIR/tessera_losses.json (the loss of each step). --cpu runs it on the CPU (a smoke test).
// --no-flash (cuda::enable_flash_sdp(false): attention through the composite) and --gpt-logits (the loss
// through the full logits and cross_entropy instead of linear_cross_entropy) swap a fused GPU path for
// its composite, in the loss curve as in the benchmarks, to tell which path a difference comes from;
// so do --unfused (GPT2Config::fused = false: separate residual add and layer norm, GELU as its own op)
// and --unfused-adamw (AdamW's per-parameter steps), in the loss curve only. --lr X and --lr-warmup N
// set the peak learning rate and the warm-up steps (defaults: 1e-3 small, 6e-4 124m; a tenth of N).
//
// usage: bench_models [--only SUBSTR[,SUBSTR...]] [--warmup N] [--runs N] [--iters N] [--gpt-batch 16]
//                     [--gpt-seq 1024] [--gpt-vocab 50257] [--gpt-logits] [--gpt-rows SPEC[,SPEC...]]
//                     [--gpt-chunk 16384] [--gpt-checkpoint] [--profile]
//                     [--resnet-batch 256] [--cudnn-benchmark] [--no-flash]
// --only: the rows whose name contains one of the comma-separated parts.
// --gpt-vocab N: the GPT-2 row's vocabulary; its name ends in _vN unless N is 50257.
// --gpt-rows: instead of the one GPT-2 row of --gpt-vocab and --gpt-logits, one row per SPEC, "VOCAB"
// (GPT2::loss) or "VOCAB:logits" (the full logits), e.g. 50304,50257,50304:logits, in that order; names
// gpt2_124m_train_bBxT[_vVOCAB][_logits] (--gpt-logits alone keeps the name the row always had).
// --gpt-checkpoint: every block checkpointed (GPT2Config::gradient_checkpointing); the row's name ends
// in _checkpointed, its peak memory is the figure to compare.
#include <algorithm>
#include <array>
#include <chrono>
#include <iomanip>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;
namespace cuda = tessera::cuda;
namespace F = tessera::nn::functional;

namespace {

// One GPT-2 row of --gpt-rows: its vocabulary and whether the loss goes through the full logits.
struct GptRow {
  int64_t vocab = 50257;
  bool logits = false;
};

struct Args {
  std::vector<std::string> only;  // --only's comma-separated parts

  int warmup = 5, runs = 7, iters = 3;
  int64_t gpt_batch = 16, gpt_seq = 1024, resnet_batch = 256;
  // loss-curve mode
  int64_t loss_curve = 0;
  std::string out_dir, config = "small", text;
  int64_t batch = 16, seq = 256;
  uint64_t seed = 1337;
  bool fp32 = false;
  bool gpt_logits = false;     // GPT-2's loss through the full logits instead of GPT2::loss
  int64_t gpt_vocab = 50257;   // the GPT-2 row's vocabulary (GPT2Config::vocab_size)
  std::vector<GptRow> gpt_rows;  // --gpt-rows: several GPT-2 rows instead of the one above
  bool gpt_checkpoint = false; // every GPT-2 block checkpointed (GPT2Config::gradient_checkpointing)
  int64_t gpt_chunk = 16384;   // GPT2::loss's chunk_rows (rows of logits held at once; its default)
  double lr = 0;               // the loss curve's peak learning rate; 0: 1e-3 (small), 6e-4 (124m)
  int64_t lr_warmup = 0;       // its warm-up steps; 0: a tenth of the steps
  bool unfused = false;        // GPT2Config::fused = false in the loss curve
  bool unfused_adamw = false;  // AdamW without fused = true in the loss curve
  bool profile = false;  // print the op table of two profiled steps of each model (stderr)
  bool cudnn_benchmark = false;
  bool cpu = false;  // loss-curve mode on the CPU (a smoke test of the files without a GPU)
};
Args g_args;

bool selected(const std::string& name) {
  if (g_args.only.empty()) return true;
  for (const std::string& part : g_args.only)
    if (name.find(part) != std::string::npos) return true;
  return false;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(',', start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A vocabulary of --gpt-vocab or --gpt-rows: an integer of at least 2, else the usage error (exit 2).
int64_t parse_vocab(const std::string& s, const char* flag) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < 2) {
    std::fprintf(stderr, "bench_models: %s: %s is not a vocabulary size (an integer >= 2)\n", flag, s.c_str());
    std::exit(2);
  }
  return v;
}

// --gpt-rows 50304,50257,50304:logits
std::vector<GptRow> parse_gpt_rows(const std::string& spec) {
  std::vector<GptRow> rows;
  for (const std::string& part : split_commas(spec)) {
    const size_t colon = part.find(':');
    GptRow r;
    r.vocab = parse_vocab(part.substr(0, colon), "--gpt-rows");
    if (colon != std::string::npos) {
      const std::string loss = part.substr(colon + 1);
      if (loss != "logits" && loss != "fused") {
        std::fprintf(stderr, "bench_models: --gpt-rows: %s: the loss is 'logits' or 'fused'\n", part.c_str());
        std::exit(2);
      }
      r.logits = loss == "logits";
    }
    rows.push_back(r);
  }
  if (rows.empty()) {
    std::fprintf(stderr, "bench_models: --gpt-rows needs at least one VOCAB[:logits]\n");
    std::exit(2);
  }
  return rows;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t peak_allocated() {
  const auto stats = cuda::memory_stats();
  const auto it = stats.find("allocated_bytes.all.peak");
  return it == stats.end() ? -1 : it->second;
}

struct Timing {
  double ms;             // median milliseconds per step
  int64_t peak_bytes;    // peak allocated bytes over the timed steps
  std::vector<double> samples_ms;  // each run's milliseconds per step
  double warmup_s;       // host seconds of the warm-up steps
};

// Warm-up, then the median over g_args.runs of (CUDA-event time of g_args.iters steps) / iters.
Timing time_steps(const std::function<void()>& step) {
  const auto warm_start = std::chrono::steady_clock::now();
  for (int i = 0; i < g_args.warmup; ++i) step();
  cuda::synchronize();
  const double warmup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_start).count();
  cuda::reset_peak_memory_stats();
  cuda::Event start(true), stop(true);
  std::vector<double> t;
  for (int r = 0; r < g_args.runs; ++r) {
    start.record();
    for (int i = 0; i < g_args.iters; ++i) step();
    stop.record();
    stop.synchronize();
    t.push_back(static_cast<double>(start.elapsed_time(stop)) / g_args.iters);
  }
  return {median(t), peak_allocated(), t, warmup_s};
}

// --profile: two more steps under the profiler (CPU and CUDA), their op table on stderr, sorted by
// GPU time and by host time, and by op and input shapes (stdout keeps the JSON lines).
void profile_steps(const std::string& name, const std::function<void()>& step) {
  if (!g_args.profile) return;
  step();
  cuda::synchronize();
  ts::profiler::profile prof({.activities = {ts::profiler::CPU, ts::profiler::CUDA}, .record_shapes = true});
  for (int i = 0; i < 2; ++i) step();
  cuda::synchronize();
  prof.stop();
  const ts::profiler::KeyAverages avg = prof.key_averages();
  std::fprintf(stderr, "==> profile of 2 steps of %s, by GPU time\n%s\n", name.c_str(),
               avg.table("self_cuda_time_total", 40).c_str());
  std::fprintf(stderr, "==> the same, by host time\n%s\n", avg.table("self_cpu_time_total", 25).c_str());
  std::fprintf(stderr, "==> the same by op and input shapes, by GPU time\n%s\n",
               prof.key_averages(/*group_by_input_shape=*/true).table("self_cuda_time_total", 60).c_str());
}

void emit(const std::string& name, const char* unit, double value, const Timing& t) {
  std::string samples;
  char buf[32];
  for (const double ms : t.samples_ms) {
    std::snprintf(buf, sizeof buf, "%.9g", ms);  // the raw samples keep their precision
    samples += (samples.empty() ? "" : ", ") + std::string(buf);
  }
  std::printf("{\"name\": \"%s\", \"unit\": \"%s\", \"value\": %.6g, \"ms\": %.6g, \"peak_mem_bytes\": %lld, "
              "\"samples_ms\": [%s], \"warmup_s\": %.4g}\n",
              name.c_str(), unit, value, t.ms, static_cast<long long>(t.peak_bytes), samples.c_str(), t.warmup_s);
  std::fflush(stdout);
}

// A row whose work raised (a kernel not there yet, out of memory): its error, and the run goes on.
void emit_error(const std::string& name, const char* what) {
  std::string msg;
  for (const char* c = what; *c; ++c) {
    if (*c == '"' || *c == '\\') msg += '\\';
    msg += static_cast<unsigned char>(*c) < 0x20 ? ' ' : *c;  // no control characters in a JSON string
  }
  std::printf("{\"name\": \"%s\", \"value\": null, \"error\": \"%s\"}\n", name.c_str(), msg.c_str());
  std::fflush(stdout);
}

// Runs one row's work, turning an exception into an error row.
void guarded(const std::string& name, const std::function<void()>& work) {
  if (!selected(name)) return;
  try {
    work();
  } catch (const std::exception& e) {
    emit_error(name, e.what());
  }
  cuda::synchronize();
  cuda::empty_cache();
}

// GPT-2 124M training step: bf16 autocast, loss, backward, clip 1.0, fused AdamW. `logits`: the loss
// through the full (B T, V) logits and cross_entropy instead of GPT2::loss; `logits_suffix`: the name
// says so (the rows of --gpt-rows; --gpt-logits alone keeps the name it always had).
void bench_gpt2(int64_t vocab, bool logits, bool logits_suffix) {
  const int64_t B = g_args.gpt_batch, T = g_args.gpt_seq;
  const std::string name = "gpt2_124m_train_b" + std::to_string(B) + "x" + std::to_string(T) +
                           (vocab != 50257 ? "_v" + std::to_string(vocab) : "") +
                           (logits && logits_suffix ? "_logits" : "") + (g_args.gpt_checkpoint ? "_checkpointed" : "");
  guarded(name, [&] {
    const ts::Device gpu = ts::Device::cuda();
    ts::models::GPT2Config cfg;
    cfg.vocab_size = vocab;
    cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = 0.0;
    cfg.gradient_checkpointing = g_args.gpt_checkpoint;
    cfg.n_positions = std::max<int64_t>(cfg.n_positions, T);
    ts::models::GPT2 model(cfg);
    model.to(gpu);
    model.train();
    const std::vector<ts::Tensor> params = model.parameters();
    ts::optim::AdamW opt(params, {.lr = 6e-4, .betas = {0.9, 0.95}, .eps = 1e-8, .weight_decay = 0.1, .fused = true});
    const ts::TensorOptions i64(ts::kInt64, gpu);
    const int64_t ids = std::min<int64_t>(cfg.vocab_size, 50257);  // GPT-2's tokens; padded classes never a target
    ts::Tensor x = ts::randint(0, ids, {B, T}, i64), y = ts::randint(0, ids, {B, T}, i64);
    auto step = [&] {
      ts::Tensor loss;
      {
        ts::amp::autocast guard(gpu, ts::kBFloat16);
        loss = logits ? model.forward(x, y).second : model.loss(x, y, g_args.gpt_chunk);
      }
      loss.backward();
      ts::nn::utils::clip_grad_norm_(params, 1.0);
      opt.step();
      opt.zero_grad(true);
    };
    const Timing t = time_steps(step);
    emit(name, "tokens/s", static_cast<double>(B * T) * 1000.0 / t.ms, t);
    profile_steps(name, step);
  });
}

// ResNet-50 training step: channels-last input, bf16 autocast, SGD momentum 0.9, weight decay 5e-5.
void bench_resnet50() {
  const int64_t B = g_args.resnet_batch;
  const std::string name = "resnet50_train_b" + std::to_string(B) + "_224_cl_bf16";
  guarded(name, [&] {
    const ts::Device gpu = ts::Device::cuda();
    ts::models::ResNet net = ts::models::resnet50();
    net.to(gpu);
    net.train();
    ts::optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-5, .fused = true});
    ts::Tensor x = ts::randn({B, 3, 224, 224}, ts::TensorOptions(ts::kFloat32, gpu)).contiguous(ts::MemoryFormat::ChannelsLast);
    ts::Tensor y = ts::randint(0, 1000, {B}, ts::TensorOptions(ts::kInt64, gpu));
    auto step = [&] {
      ts::Tensor loss;
      {
        ts::amp::autocast guard(gpu, ts::kBFloat16);
        loss = F::cross_entropy(net(x), y);
      }
      loss.backward();
      opt.step();
      opt.zero_grad(true);
    };
    const Timing t = time_steps(step);
    emit(name, "images/s", static_cast<double>(B) * 1000.0 / t.ms, t);
    profile_steps(name, step);
  });
}

// The MLP 784-512-512-10 step, batch 128, float32, SGD momentum 0.9 (the CUDA graphs suite's eager row).
void bench_mlp() {
  const std::string name = "mlp_784_512_512_10_b128_sgd";
  guarded(name, [&] {
    const ts::Device gpu = ts::Device::cuda();
    ts::models::MLP net(784, {512, 512}, 10);
    net.to(gpu);
    ts::optim::SGD opt(net.parameters(), {.lr = 0.01, .momentum = 0.9});
    ts::Tensor x = ts::randn({128, 784}, ts::TensorOptions(ts::kFloat32, gpu));
    ts::Tensor y = ts::randint(0, 10, {128}, ts::TensorOptions(ts::kInt64, gpu));
    auto step = [&] {
      opt.zero_grad(true);
      ts::Tensor loss = F::cross_entropy(net.forward(x), y);
      loss.backward();
      opt.step();
    };
    // Short steps: time more of them per measurement.
    const int iters = g_args.iters;
    g_args.iters = std::max(iters, 50);
    const Timing t = time_steps(step);
    g_args.iters = iters;
    emit(name, "steps/s", 1000.0 / t.ms, t);
  });
}

// Causal attention forward + backward in bfloat16: q, k, v (B, H, T, D) leaves, out.backward(dout).
void bench_attention(int64_t B, int64_t H, int64_t T, int64_t D) {
  const std::string name = "attention_causal_fwd_bwd_bf16_b" + std::to_string(B) + "_h" + std::to_string(H) + "_t" +
                           std::to_string(T) + "_d" + std::to_string(D);
  guarded(name, [&] {
    const ts::TensorOptions bf16(ts::kBFloat16, ts::Device::cuda());
    ts::Tensor q = ts::randn({B, H, T, D}, bf16).requires_grad_(), k = ts::randn({B, H, T, D}, bf16).requires_grad_(),
               v = ts::randn({B, H, T, D}, bf16).requires_grad_();
    ts::Tensor dout = ts::randn({B, H, T, D}, bf16);
    auto step = [&] {
      ts::Tensor out = F::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, /*is_causal=*/true);
      out.backward(dout);
      for (ts::Tensor* t : {&q, &k, &v}) t->set_grad(ts::Tensor());
    };
    const Timing t = time_steps(step);
    profile_steps(name, step);
    // FLOPs: forward 2 matmuls of 2 B H T^2 D, backward 5; causal halves them.
    const double flops = 7.0 * 2.0 * static_cast<double>(B * H * D) * static_cast<double>(T * T) / 2.0;
    emit(name, "ms", t.ms, t);
    std::printf("{\"name\": \"%s_tflops\", \"unit\": \"TFLOP/s\", \"value\": %.6g}\n", name.c_str(), flops / (t.ms * 1e9));
    std::fflush(stdout);
  });
}

// ---- loss-curve mode --------------------------------------------------------------------------------

// Text for the parity run: the file's bytes, else n bytes of an order-2 Markov chain over 64 printable symbols
// whose every context has four successors of probabilities 0.5, 0.25, 0.15, 0.1 (learnable, seeded).
std::vector<uint8_t> parity_text(int64_t n, uint64_t seed) {
  if (!g_args.text.empty()) {
    std::ifstream in(g_args.text, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (static_cast<int64_t>(bytes.size()) < g_args.seq + 2) {
      std::fprintf(stderr, "bench_models: --text %s holds %zu bytes, a window needs %lld\n", g_args.text.c_str(),
                   bytes.size(), static_cast<long long>(g_args.seq + 2));
      std::exit(2);
    }
    return bytes;
  }
  std::mt19937_64 rng(seed);
  constexpr int kSymbols = 64;
  std::vector<std::array<int, 4>> next(kSymbols * kSymbols);
  for (auto& s : next)
    for (int& c : s) c = static_cast<int>(rng() % kSymbols);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<uint8_t> out(static_cast<size_t>(n));
  int a = 0, b = 1;
  for (int64_t i = 0; i < n; ++i) {
    const double r = u(rng);
    const int pick = r < 0.5 ? 0 : r < 0.75 ? 1 : r < 0.9 ? 2 : 3;
    const int c = next[static_cast<size_t>(a * kSymbols + b)][static_cast<size_t>(pick)];
    out[static_cast<size_t>(i)] = static_cast<uint8_t>(32 + c);
    a = b;
    b = c;
  }
  return out;
}

bool is_conv1d_weight(const std::string& name) {
  for (const char* s : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const std::string suffix = s;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  }
  return false;
}

// The model's parameters keyed by Hugging Face's names, Conv1D weights as (in, out); the tied head
// appears once, as transformer.wte.weight (save_pretrained's layout).
std::map<std::string, ts::Tensor> hf_state(ts::models::GPT2& model) {
  std::map<std::string, ts::Tensor> out;
  for (auto& [name, p] : model.named_parameters()) {
    ts::Tensor t = p.detach().cpu();
    out[name] = is_conv1d_weight(name) ? t.t().contiguous() : t.contiguous();
  }
  return out;
}

double lr_at(int64_t step, int64_t warmup, int64_t total, double lr, double min_lr) {
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const int64_t decay = total - 1 - warmup;
  if (decay <= 0) return lr;
  if (step >= total - 1) return min_lr;
  const double ratio = static_cast<double>(step - warmup) / static_cast<double>(decay);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (lr - min_lr);
}

int run_loss_curve() {
  namespace fs = std::filesystem;
  if (g_args.out_dir.empty()) {
    std::fprintf(stderr, "bench_models: --loss-curve needs --out-dir DIR\n");
    return 2;
  }
  fs::create_directories(g_args.out_dir);
  const fs::path dir(g_args.out_dir);
  const int64_t N = g_args.loss_curve, B = g_args.batch, T = g_args.seq;
  ts::models::GPT2Config cfg;
  if (g_args.config == "small") {
    cfg.n_layer = 4;
    cfg.n_head = 4;
    cfg.n_embd = 256;
    cfg.n_positions = 256;
    cfg.vocab_size = 256;
  } else if (g_args.config != "124m") {
    std::fprintf(stderr, "bench_models: unknown --config %s (small or 124m)\n", g_args.config.c_str());
    return 2;
  }
  cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = 0.0;
  cfg.fused = !g_args.unfused;
  if (T > cfg.n_positions) {
    std::fprintf(stderr, "bench_models: --seq %lld exceeds the context %lld\n", static_cast<long long>(T),
                 static_cast<long long>(cfg.n_positions));
    return 2;
  }
  const double lr = g_args.lr > 0 ? g_args.lr : g_args.config == "small" ? 1e-3 : 6e-4, min_lr = lr / 10;
  const int64_t warmup = g_args.lr_warmup > 0 ? g_args.lr_warmup : std::max<int64_t>(1, N / 10);
  const double wd = 0.1, clip = 1.0, eps = 1e-8, beta1 = 0.9, beta2 = 0.95;

  ts::manual_seed(g_args.seed);
  const ts::Device gpu = g_args.cpu ? ts::kCPU : ts::Device::cuda();
  ts::models::GPT2 model(cfg);
  const std::map<std::string, ts::Tensor> init = hf_state(model);
  ts::save_safetensors(init, (dir / "init.safetensors").string());
  {  // the file loads back through the Hugging Face loader to the same parameters
    ts::models::GPT2 check(cfg);
    check.load_hf_state_dict((dir / "init.safetensors").string());
    auto a = model.named_parameters(), b = check.named_parameters();
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].first != b[i].first || !ts::equal(a[i].second, b[i].second)) {
        std::fprintf(stderr, "bench_models: %s does not load back from the Hugging Face layout\n", a[i].first.c_str());
        return 1;
      }
  }

  // Batches: N windows of B x (T + 1) tokens at seeded random offsets of the text.
  const std::vector<uint8_t> text = parity_text(std::max<int64_t>(1 << 20, 4 * (T + 1)), g_args.seed);
  std::mt19937_64 rng(g_args.seed + 1);
  std::vector<int64_t> tokens(static_cast<size_t>(N * B * (T + 1)));
  for (int64_t s = 0; s < N; ++s)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t off = static_cast<int64_t>(rng() % static_cast<uint64_t>(text.size() - static_cast<size_t>(T) - 1));
      for (int64_t t = 0; t <= T; ++t) tokens[static_cast<size_t>((s * B + b) * (T + 1) + t)] = text[static_cast<size_t>(off + t)];
    }
  {
    std::ofstream f(dir / "batches.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * sizeof(int64_t)));
  }
  {
    std::ofstream f(dir / "meta.json");
    f << std::setprecision(17);  // the PyTorch side reads the same learning rates
    f << "{\"n_layer\": " << cfg.n_layer << ", \"n_head\": " << cfg.n_head << ", \"n_embd\": " << cfg.n_embd
      << ", \"n_positions\": " << cfg.n_positions << ", \"vocab_size\": " << cfg.vocab_size
      << ", \"layer_norm_epsilon\": " << cfg.layer_norm_epsilon << ", \"steps\": " << N << ", \"batch\": " << B
      << ", \"seq\": " << T << ", \"lr\": " << lr << ", \"min_lr\": " << min_lr << ", \"warmup\": " << warmup
      << ", \"betas\": [" << beta1 << ", " << beta2 << "], \"eps\": " << eps << ", \"weight_decay\": " << wd
      << ", \"clip\": " << clip << ", \"amp\": \"" << (g_args.fp32 ? "off" : "bf16") << "\", \"config\": \""
      << g_args.config << "\", \"seed\": " << g_args.seed << "}\n";
  }

  model.to(gpu);
  model.train();
  const std::vector<ts::Tensor> params = model.parameters();
  ts::optim::AdamW opt(params, {.lr = lr, .betas = {beta1, beta2}, .eps = eps, .weight_decay = wd,
                                .fused = !g_args.unfused_adamw});
  ts::Tensor all = ts::tensor(tokens, {N, B, T + 1}).to(gpu);
  std::vector<double> losses;
  for (int64_t s = 0; s < N; ++s) {
    opt.set_lr(0, lr_at(s, warmup, N, lr, min_lr));
    ts::Tensor batch = all.select(0, s);
    ts::Tensor x = batch.slice(1, 0, T).contiguous(), y = batch.slice(1, 1, T + 1).contiguous();
    ts::Tensor loss;
    {
      ts::amp::autocast guard(gpu, ts::kBFloat16, !g_args.fp32);
      loss = g_args.gpt_logits ? model.forward(x, y).second : model.loss(x, y, g_args.gpt_chunk);
    }
    loss.backward();
    ts::nn::utils::clip_grad_norm_(params, clip);
    opt.step();
    opt.zero_grad(true);
    losses.push_back(loss.item<double>());
  }
  {
    std::ofstream f(dir / "tessera_losses.json");
    f << "{\"losses\": [";
    for (size_t i = 0; i < losses.size(); ++i) f << (i ? ", " : "") << losses[i];
    f << "]}\n";
  }
  std::printf("{\"name\": \"gpt2_loss_curve_%s\", \"unit\": \"nats\", \"value\": %.6g, \"first\": %.6g, \"steps\": %lld}\n",
              g_args.config.c_str(), losses.back(), losses.front(), static_cast<long long>(N));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_models: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--only") g_args.only = split_commas(value());
    else if (a == "--warmup") g_args.warmup = std::max(1, std::atoi(value().c_str()));
    else if (a == "--runs") g_args.runs = std::max(1, std::atoi(value().c_str()));
    else if (a == "--iters") g_args.iters = std::max(1, std::atoi(value().c_str()));
    else if (a == "--gpt-batch") g_args.gpt_batch = std::max(1LL, std::atoll(value().c_str()));
    else if (a == "--gpt-seq") g_args.gpt_seq = std::max(1LL, std::atoll(value().c_str()));
    else if (a == "--resnet-batch") g_args.resnet_batch = std::max(1LL, std::atoll(value().c_str()));
    else if (a == "--loss-curve") g_args.loss_curve = std::max(1LL, std::atoll(value().c_str()));
    else if (a == "--out-dir") g_args.out_dir = value();
    else if (a == "--config") g_args.config = value();
    else if (a == "--batch") g_args.batch = std::max(1LL, std::atoll(value().c_str()));
    else if (a == "--seq") g_args.seq = std::max(1LL, std::atoll(value().c_str()));
    else if (a == "--text") g_args.text = value();
    else if (a == "--seed") g_args.seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--fp32") g_args.fp32 = true;
    else if (a == "--gpt-logits") g_args.gpt_logits = true;
    else if (a == "--gpt-vocab") g_args.gpt_vocab = parse_vocab(value(), "--gpt-vocab");
    else if (a == "--gpt-rows") g_args.gpt_rows = parse_gpt_rows(value());
    else if (a == "--gpt-checkpoint") g_args.gpt_checkpoint = true;
    else if (a == "--gpt-chunk") g_args.gpt_chunk = std::max(1LL, std::atoll(value().c_str()));
    else if (a == "--lr") g_args.lr = std::atof(value().c_str());
    else if (a == "--lr-warmup") g_args.lr_warmup = std::max(0LL, std::atoll(value().c_str()));
    else if (a == "--unfused") g_args.unfused = true;
    else if (a == "--unfused-adamw") g_args.unfused_adamw = true;
    else if (a == "--no-flash") ts::cuda::enable_flash_sdp(false);
    else if (a == "--profile") g_args.profile = true;
    else if (a == "--cudnn-benchmark") g_args.cudnn_benchmark = true;
    else if (a == "--cpu") g_args.cpu = true;
    else {
      std::fprintf(stderr, "bench_models: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (g_args.loss_curve > 0 && g_args.cpu) return run_loss_curve();
  if (!cuda::is_available()) {
    std::fprintf(stderr, "bench_models: no CUDA GPU\n");
    return 2;
  }
  if (g_args.loss_curve > 0) return run_loss_curve();
  ts::manual_seed(0);
  // cuDNN's heuristics by default (bench/NOTES.md: timed selection was slower on ResNet-50's 1x1
  // layers); --cudnn-benchmark times the candidates as PyTorch's cudnn.benchmark does.
  cuda::set_cudnn_benchmark(g_args.cudnn_benchmark);
  std::printf("{\"device\": \"%s\"}\n", cuda::get_device_properties().name.c_str());
  if (g_args.gpt_rows.empty()) {
    bench_gpt2(g_args.gpt_vocab, g_args.gpt_logits, /*logits_suffix=*/false);
  } else {
    for (const GptRow& r : g_args.gpt_rows) bench_gpt2(r.vocab, r.logits, /*logits_suffix=*/true);
  }
  bench_resnet50();
  bench_mlp();
  bench_attention(16, 12, 1024, 64);
  bench_attention(8, 16, 2048, 128);
  return 0;
}
