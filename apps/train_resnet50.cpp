// `tessera train --model resnet50 --data synthetic`: ResNet-50 on one random batch of 224x224 images,
// channels-last, SGD with momentum: the model's training throughput (images/s). --checkpoint saves the
// run at every printed line and where it ends, --resume continues it bitwise (Note [Resuming a step
// run] in train_gpt.cpp: the batch is drawn again from --seed before the checkpoint restores the
// generators), --metrics and --profile as step_run.h says.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "step_run.h"
#include "tessera/tessera.h"
#include "train.h"

namespace tessera::app {

Resnet50RunResult train_resnet50_synthetic(const TrainOptions& o) {
  using Clock = std::chrono::steady_clock;
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  manual_seed(o.seed);
  const Device device = pick_device(o.device);
  const bool amp = o.amp == "bf16";
  auto net = std::make_unique<models::ResNet>(models::resnet50());
  net->to(device);
  net->train();
  optim::SGD opt(net->parameters(), {.lr = o.lr, .momentum = 0.9, .weight_decay = 5e-5});
  // One random batch, channels-last, reused at every step: the throughput of the model alone.
  Tensor x = randn({o.batch_size, 3, 224, 224}, TensorOptions(kFloat32, device)).contiguous(MemoryFormat::ChannelsLast);
  Tensor y = randint(0, 1000, {o.batch_size}, TensorOptions(kInt64, device));
  NamedGenerators generators;
  if (device.is_cuda()) generators.emplace_back("cuda", &default_generator(device));
  Resnet50RunResult result;
  int64_t first_step = 0;
  if (o.resume) {
    first_step = load_checkpoint(o.checkpoint, *net, &opt, nullptr, generators);
    TS_CHECK(first_step <= o.steps, ValueError, "train: --resume: the checkpoint at '", o.checkpoint, "' is at step ",
             first_step, ", past --steps ", o.steps);
    if (!o.metrics.empty() && std::filesystem::exists(o.metrics))
      result.metrics = read_step_metrics_csv(o.metrics, first_step);
    std::printf("resumed from %s after step %lld\n", o.checkpoint.c_str(), static_cast<long long>(first_step));
  }
  const int64_t end_step = o.stop_at > 0 ? std::min(o.stop_at, o.steps) : o.steps;
  std::printf("training ResNet-50 on synthetic 224x224 images (channels-last), batch %lld, on %s (%s)%s, SGD lr %.3g "
              "momentum 0.9 weight decay 5e-5\n",
              static_cast<long long>(o.batch_size), device.str().c_str(), device_name(device).c_str(),
              amp ? ", bf16 autocast" : "", o.lr);
  std::fflush(stdout);
  ProfileWindow profile(o.profile, device);
  Clock::time_point t0 = Clock::now();
  double timed_seconds = 0;
  int64_t timed_images = 0, interval = 0;
  bool first_interval = true;
  Tensor loss;
  for (int64_t step = first_step; step < end_step; ++step) {
    profile.begin_step(step - first_step + 1);
    opt.zero_grad(true);
    {
      profiler::record_function r("forward");
      amp::autocast guard(device, kBFloat16, amp);
      loss = nn::functional::cross_entropy((*net)(x), y);
    }
    {
      profiler::record_function r("backward");
      loss.backward();
    }
    {
      profiler::record_function r("optimizer.step");
      opt.step();
    }
    profile.end_step(step - first_step + 1);
    ++interval;
    const bool stopping = step == end_step - 1;
    if ((step + 1) % o.log_every == 0 || stopping) {
      const double l = loss.item<double>();  // synchronizes (Note [Timing the training loop])
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      const double ips = static_cast<double>(interval * o.batch_size) / std::max(secs, 1e-9);
      if (!first_interval || stopping) {
        timed_seconds += secs;
        timed_images += interval * o.batch_size;
      }
      first_interval = false;
      result.metrics.push_back({.step = step + 1, .train_loss = l, .lr = o.lr, .rate = ips});
      std::printf("step %lld/%lld | loss %.4f | %s images/s\n", static_cast<long long>(step + 1),
                  static_cast<long long>(o.steps), l, rate(ips).c_str());
      std::fflush(stdout);
      if (!o.checkpoint.empty()) save_checkpoint(o.checkpoint, *net, &opt, nullptr, step + 1, generators);
      if (!o.metrics.empty()) write_step_metrics(o.metrics, result.metrics, "images_per_s", false);
      interval = 0;
      t0 = Clock::now();  // the next interval starts after the save
    }
  }
  profile.finish();
  result.images_per_second = timed_seconds > 0 ? static_cast<double>(timed_images) / timed_seconds : 0;
  std::printf("done: %s images/s\n", rate(result.images_per_second).c_str());
  if (!o.metrics.empty()) write_step_metrics(o.metrics, result.metrics, "images_per_s", true);
  if (end_step < o.steps)
    std::printf("stopped after step %lld of %lld (--stop-at)%s\n", static_cast<long long>(end_step),
                static_cast<long long>(o.steps), o.checkpoint.empty() ? "" : "; continue with --resume");
  if (device.is_cuda()) {
    const auto stats = cuda::memory_stats();
    auto it = stats.find("allocated_bytes.all.peak");
    if (it != stats.end())
      std::printf("peak memory allocated: %.2f GiB\n", static_cast<double>(it->second) / (1024.0 * 1024.0 * 1024.0));
  }
  return result;
}

}  // namespace tessera::app
