// `tessera train --model gpt2 --data text:FILE`: a byte-level GPT (vocabulary 256) trained on any text
// file with AdamW, a warm-up + cosine learning rate, gradient clipping, gradient accumulation and
// bfloat16 autocast on the GPU; it reports the training and validation losses, tokens/s and MFU, and
// samples text at the end. --checkpoint saves the run at every evaluation (and where --stop-at ends
// it), --resume continues it (Note [Resuming a step run]), --metrics and --profile as step_run.h says.
// ResNet-50 on synthetic images is in train_resnet50.cpp.
//
// Note [Resuming a step run]: a resumed run continues the uninterrupted one bitwise. The checkpoint
// holds, besides the model and the optimizer, every generator the loop draws from: the default CPU
// one (dropout on the CPU), the training batches', the evaluation batches' and, on a GPU, the device's
// default one (its dropout). The learning rate is a function of the step, and evaluations happen at
// the same steps whether or not the run was interrupted (a --stop-at step does not evaluate, as that
// would draw evaluation batches the uninterrupted run does not draw), so every step after the
// checkpoint sees the same batches, the same masks and the same optimizer state.
//
// Note [Timing the training loop]: the loop does not synchronize the GPU at each step; the loss of each
// micro-batch is accumulated on the device and read (one synchronization) only when a line is printed.
// The rate of an interval is its tokens over the host wall time between two such reads, so it counts
// every kernel of the interval.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "gpu_peak.h"
#include "step_run.h"
#include "tessera/tessera.h"
#include "text_data.h"
#include "train.h"

namespace tessera::app {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A batch on its way to the device: on a GPU through page-locked memory with an asynchronous copy, so
// that the host does not wait for the GPU's queued work at each step (Note [Timing the training loop]).
Tensor to_device(const Tensor& t, Device device) {
  if (!device.is_cuda()) return t;
  return t.pin_memory().to(device, /*non_blocking=*/true);
}

struct LossPair {
  double train, val;
};

// Mean loss over eval_iters batches of each part, in eval mode under no_grad (the caller's mode is
// restored to training).
LossPair estimate_loss(models::GPT2& model, const TextBytes& text, const TrainOptions& o, Device device, bool amp,
                       Generator& gen) {
  NoGradGuard no_grad;
  model.eval();
  double out[2] = {0, 0};
  for (int part = 0; part < 2; ++part) {
    Tensor sum = zeros({}, TensorOptions(kFloat32, device));
    for (int64_t i = 0; i < o.eval_iters; ++i) {
      auto [x, y] = text.batch(part == 1, o.batch_size, o.context, gen);
      amp::autocast guard(device, kBFloat16, amp);
      Tensor loss = model.forward(to_device(x, device), to_device(y, device)).second;
      sum = sum + loss.to(kFloat32);
    }
    out[part] = sum.item<double>() / static_cast<double>(o.eval_iters);
  }
  model.train();
  return {out[0], out[1]};
}

}  // namespace

double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double lr, double min_lr) {
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const int64_t decay_steps = total - 1 - warmup;
  if (decay_steps <= 0) return lr;  // no step left to decay over
  if (step >= total - 1) return min_lr;
  const double ratio = static_cast<double>(step - warmup) / static_cast<double>(decay_steps);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (lr - min_lr);
}

GptRunResult train_gpt(const TrainOptions& o) {
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  manual_seed(o.seed);
  const Device device = pick_device(o.device);
  const bool amp = o.amp == "bf16";
  const std::string path = o.data.substr(5);  // "text:FILE"
  const TextBytes text = TextBytes::from_file(path);
  text.check_context(o.context);

  models::GPT2Config cfg;
  cfg.n_layer = o.layers;
  cfg.n_head = o.heads;
  cfg.n_embd = o.embd;
  cfg.n_positions = o.context;
  cfg.vocab_size = 256;
  cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = o.dropout;
  models::GPT2 model(cfg);
  model.to(device);
  model.train();

  // Weight decay on the matrices and embeddings (2-D), not on the biases and LayerNorm parameters.
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  const optim::AdamWOptions base{.lr = o.lr, .betas = {0.9, 0.95}, .eps = 1e-8, .weight_decay = o.weight_decay};
  optim::AdamWOptions nd = base;
  nd.weight_decay = 0;
  optim::AdamW opt(std::vector<optim::AdamW::ParamGroup>{{decay, base}, {no_decay, nd}}, base);
  const std::vector<Tensor> params = model.parameters();

  const int64_t n_params = cfg.num_parameters();
  const int64_t head_dim = o.embd / o.heads;
  const double flops_per_token =
      gpt_flops_per_token(n_params - cfg.n_positions * cfg.n_embd, o.layers, o.heads, head_dim, o.context);
  const std::string gpu = device_name(device);
  const bool know_peak = device.is_cuda() && peak_bf16_flops(gpu).has_value();
  const int64_t tokens_per_step = o.batch_size * o.context * o.accum;

  std::printf("training a byte-level GPT (%lld layers, %lld heads, %lld embd, context %lld: %s parameters) on %s\n",
              static_cast<long long>(o.layers), static_cast<long long>(o.heads), static_cast<long long>(o.embd),
              static_cast<long long>(o.context), grouped(static_cast<double>(n_params)).c_str(), path.c_str());
  std::printf("data: %s bytes, %s for training, %s for validation; %lld steps of %lld x %lld x %lld tokens\n",
              grouped(static_cast<double>(text.size())).c_str(), grouped(static_cast<double>(text.train_size())).c_str(),
              grouped(static_cast<double>(text.val_size())).c_str(), static_cast<long long>(o.steps),
              static_cast<long long>(o.accum), static_cast<long long>(o.batch_size), static_cast<long long>(o.context));
  std::printf("device %s (%s)%s, AdamW lr %.3g -> %.3g (warm-up %lld), clip %.3g\n", device.str().c_str(), gpu.c_str(),
              amp ? ", bf16 autocast" : "", o.lr, o.min_lr, static_cast<long long>(o.warmup), o.grad_clip);
  if (device.is_cuda() && !know_peak) std::printf("MFU: unknown GPU '%s' (no peak figure)\n", gpu.c_str());
  std::fflush(stdout);

  Generator train_gen(o.seed), eval_gen(o.seed + 1);
  // Note [Resuming a step run]
  NamedGenerators generators = {{"train_batches", &train_gen}, {"eval_batches", &eval_gen}};
  if (device.is_cuda()) generators.emplace_back("cuda", &default_generator(device));
  GptRunResult result;
  int64_t first_step = 0;
  if (o.resume) {
    first_step = load_checkpoint(o.checkpoint, model, &opt, nullptr, generators);
    TS_CHECK(first_step <= o.steps, ValueError, "train: --resume: the checkpoint at '", o.checkpoint, "' is at step ",
             first_step, ", past --steps ", o.steps);
    if (!o.metrics.empty() && std::filesystem::exists(o.metrics))
      result.metrics = read_step_metrics_csv(o.metrics, first_step);
    std::printf("resumed from %s after step %lld\n", o.checkpoint.c_str(), static_cast<long long>(first_step));
  }
  const int64_t end_step = o.stop_at > 0 ? std::min(o.stop_at, o.steps) : o.steps;
  ProfileWindow profile(o.profile, device);
  auto save = [&](int64_t steps_done) {
    if (!o.checkpoint.empty()) save_checkpoint(o.checkpoint, model, &opt, nullptr, steps_done, generators);
    if (!o.metrics.empty()) write_step_metrics(o.metrics, result.metrics, "tokens_per_s", false);
  };
  Tensor loss_acc = zeros({}, TensorOptions(kFloat32, device));  // sum of the interval's step losses
  int64_t interval_steps = 0;
  Clock::time_point interval_start = Clock::now();
  double timed_seconds = 0;
  int64_t timed_tokens = 0;
  bool first_interval = true;
  for (int64_t step = first_step; step < end_step; ++step) {
    profile.begin_step(step - first_step + 1);
    const double lr = warmup_cosine_lr(step, o.warmup, o.steps, o.lr, o.min_lr);
    for (size_t g = 0; g < opt.num_param_groups(); ++g) opt.set_lr(g, lr);

    Tensor step_loss = zeros({}, TensorOptions(kFloat32, device));
    for (int64_t micro = 0; micro < o.accum; ++micro) {
      auto [x, y] = text.batch(false, o.batch_size, o.context, train_gen);
      Tensor loss;
      {
        profiler::record_function r("forward");
        amp::autocast guard(device, kBFloat16, amp);
        loss = model.loss(to_device(x, device), to_device(y, device));
      }
      Tensor scaled = o.accum > 1 ? loss / static_cast<double>(o.accum) : loss;
      {
        profiler::record_function r("backward");
        scaled.backward();
      }
      step_loss = step_loss + scaled.detach().to(kFloat32);
    }
    {
      profiler::record_function r("optimizer.step");
      if (o.grad_clip > 0) nn::utils::clip_grad_norm_(params, o.grad_clip);
      opt.step();
      opt.zero_grad(true);
    }
    loss_acc = loss_acc + step_loss;
    ++interval_steps;
    profile.end_step(step - first_step + 1);

    const bool last = step == o.steps - 1;
    const bool stopping = step == end_step - 1;  // the last step of this run (--stop-at)
    if ((step + 1) % o.log_every == 0 || last || stopping) {
      const double mean_loss = loss_acc.item<double>() / static_cast<double>(interval_steps);  // synchronizes
      const double secs = seconds_since(interval_start);
      const double tps = static_cast<double>(interval_steps * tokens_per_step) / std::max(secs, 1e-9);
      if (result.steps == 0) result.first_train_loss = mean_loss;
      result.final_train_loss = mean_loss;
      result.steps = step + 1;
      result.metrics.push_back({.step = step + 1, .train_loss = mean_loss, .lr = lr, .rate = tps});
      // The first interval holds the warm-up (cuDNN/cuBLAS plans, allocator growth): left out of the
      // average unless it is the only one.
      if (!first_interval || stopping) {
        timed_seconds += secs;
        timed_tokens += interval_steps * tokens_per_step;
      }
      first_interval = false;
      std::string line = "step " + std::to_string(step + 1) + "/" + std::to_string(o.steps);
      char buf[256];
      std::snprintf(buf, sizeof buf, " | loss %.4f | lr %.2e | %s tok/s", mean_loss, lr, rate(tps).c_str());
      line += buf;
      if (know_peak) {
        std::snprintf(buf, sizeof buf, " | MFU %.1f%%", 100.0 * mfu(flops_per_token, tps, gpu).value_or(0));
        line += buf;
      }
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      loss_acc = zeros({}, TensorOptions(kFloat32, device));
      interval_steps = 0;
      interval_start = Clock::now();
    }
    const bool evaluating = (step + 1) % o.eval_every == 0 || last;
    if (evaluating) {
      // The evaluation is not training time: the interval's clock skips it (after the queued training
      // work has finished, so that none of it is skipped).
      if (device.is_cuda()) cuda::synchronize();
      const Clock::time_point eval_start = Clock::now();
      const LossPair l = estimate_loss(model, text, o, device, amp, eval_gen);
      result.final_val_loss = l.val;
      if (!result.metrics.empty() && result.metrics.back().step == step + 1)
        result.metrics.back().val_loss = l.val;
      else
        result.metrics.push_back({.step = step + 1, .val_loss = l.val, .lr = lr});
      std::printf("step %lld: train loss %.4f, val loss %.4f\n", static_cast<long long>(step + 1), l.train, l.val);
      std::fflush(stdout);
      interval_start += Clock::now() - eval_start;
    }
    if (evaluating || stopping) {
      const Clock::time_point save_start = Clock::now();
      save(step + 1);
      interval_start += Clock::now() - save_start;
    }
  }
  profile.finish();
  if (!o.metrics.empty()) write_step_metrics(o.metrics, result.metrics, "tokens_per_s", true);
  if (end_step < o.steps) {
    std::printf("stopped after step %lld of %lld (--stop-at)%s\n", static_cast<long long>(end_step),
                static_cast<long long>(o.steps), o.checkpoint.empty() ? "" : "; continue with --resume");
    std::fflush(stdout);
    return result;
  }
  result.tokens_per_second = timed_seconds > 0 ? static_cast<double>(timed_tokens) / timed_seconds : 0;
  std::printf("done: %s tokens/s", rate(result.tokens_per_second).c_str());
  if (know_peak)
    std::printf(", MFU %.1f%% of %s's %.0f TFLOP/s bf16", 100.0 * mfu(flops_per_token, result.tokens_per_second, gpu).value_or(0),
                gpu.c_str(), peak_bf16_flops(gpu).value_or(0) / 1e12);
  std::printf("\n");

  if (o.sample_tokens > 0) {
    std::vector<int64_t> prompt;
    for (unsigned char c : (o.prompt.empty() ? std::string("\n") : o.prompt)) prompt.push_back(c);
    Tensor idx = tensor(prompt, {1, static_cast<int64_t>(prompt.size())}).to(device);
    models::GenerateOptions g;
    g.temperature = o.temperature;
    if (o.top_k > 0) g.top_k = o.top_k;
    g.seed = o.seed;
    Tensor out = model.generate(idx, o.sample_tokens, g);
    result.sample = decode_bytes(out);
    std::printf("---- sample (%lld bytes, temperature %.2f%s) ----\n%s\n----\n", static_cast<long long>(o.sample_tokens),
                o.temperature, o.top_k > 0 ? (", top-k " + std::to_string(o.top_k)).c_str() : "", result.sample.c_str());
  }
  std::fflush(stdout);
  return result;
}

}  // namespace tessera::app
