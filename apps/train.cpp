// `tessera train`: checks the options (resolve_options), trains an image classifier on Fashion-MNIST
// with a progress bar, evaluates on the test set after every epoch, writes metrics (CSV + SVG) and
// checkpoints, and resumes from a checkpoint. gpt2 and resnet50 train in train_gpt.cpp and
// train_resnet50.cpp; which flag applies to which model is train_flags.cpp's table.
//
// Note [Data-parallel train]: under --nproc N (or any launcher with several ranks, apps/launch.h) each
// process is one rank: the group is MPI on the CPU and NCCL on a GPU (the local rank's), the model is
// wrapped in DistributedDataParallel, and every epoch each rank trains on its DistributedSampler part of
// the (shuffled, seeded) training set with --batch-size examples per step; the printed train loss is
// the average over the ranks. Progress, the test-set evaluation, metrics, the profile and the printed
// lines come from rank 0 only; checkpoints are written by rank 0 (distributed::save_checkpoint) and
// read by every rank on --resume.
#include "train.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "launch.h"
#include "metrics_plot.h"
#include "progress.h"
#include "tessera/tessera.h"
#ifdef TESSERA_APPS_DISTRIBUTED
#include "tessera/distributed.h"
#include "tessera/distributed/checkpoint.h"
#include "tessera/distributed/ddp.h"
#endif

namespace tessera::app {
namespace {

std::unique_ptr<nn::Module> make_model(const std::string& name) {
  if (name == "mlp") return std::make_unique<models::MLP>(784, std::vector<int64_t>{512, 512}, 10);
  if (name == "cnn") return std::make_unique<models::CNN>(1, 10, 28);
  if (name == "resnet18") return std::make_unique<models::ResNet>(models::resnet18(10, 1, true));
  TS_THROW(ValueError, "train: unknown model '", name, "' (expected mlp, cnn or resnet18)");
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name, nn::Module& model, double lr) {
  if (name == "sgd")
    return std::make_unique<optim::SGD>(model.parameters(), optim::SGDOptions{.lr = lr > 0 ? lr : 0.05, .momentum = 0.9});
  if (name == "adamw")
    return std::make_unique<optim::AdamW>(model.parameters(),
                                          optim::AdamWOptions{.lr = lr > 0 ? lr : 1e-3, .weight_decay = 0.01});
  TS_THROW(ValueError, "train: unknown optimizer '", name, "' (expected sgd or adamw)");
}

}  // namespace

Device pick_device(const std::string& want) {
  if (want == "cpu") return kCPU;
  bool have_cuda = true;
  try {
    empty({1}, Device::cuda());
  } catch (const Error&) {
    have_cuda = false;
  }
  if (want == "cuda") {
    TS_CHECK(have_cuda, DeviceError, "train: --device cuda, but tessera was built without the CUDA backend or "
             "finds no GPU");
    return Device::cuda();
  }
  TS_CHECK(want == "auto", ValueError, "train: unknown device '", want, "' (expected cpu, cuda or auto)");
  return have_cuda ? Device::cuda() : kCPU;
}

namespace {

struct Eval {
  double loss, accuracy;
};

// Autocast settings of the run: --amp bf16 | fp16 | off.
struct AmpMode {
  bool enabled = false;
  DType dtype = kBFloat16;
};

Eval evaluate(nn::Module& model, data::DataLoader& loader, Device device, AmpMode amp_mode) {
  NoGradGuard no_grad;
  amp::autocast guard(device, amp_mode.dtype, amp_mode.enabled);
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0, n = 0;
  for (auto& [x, y] : loader) {
    Tensor xd = x.to(device), yd = y.to(device);
    Tensor logits = model(xd);
    loss_sum += nn::functional::cross_entropy(logits, yd, std::nullopt, -100, "sum").item<double>();
    correct += sum(eq(argmax(logits, 1), yd)).item<int64_t>();
    n += y.size(0);
  }
  model.train();
  return {loss_sum / static_cast<double>(n), 100.0 * static_cast<double>(correct) / static_cast<double>(n)};
}

// --profile: steps kProfileFirst..kProfileLast (1-based) of the first epoch run, each in a "step N"
// range; the trace, a memory timeline next to it and the table of ops.
constexpr int64_t kProfileFirst = 3, kProfileLast = 5;

}  // namespace

TrainOptions resolve_options(const TrainOptions& in, bool cuda) {
  TrainOptions o = in;
  const std::string& m = o.model;
  TS_CHECK(m == "mlp" || m == "cnn" || m == "resnet18" || m == "gpt2" || m == "resnet50", ValueError,
           "train: unknown model '", m, "' (expected mlp, cnn, resnet18, gpt2 or resnet50)");
  TS_CHECK(o.batch_size >= 0, ValueError, "train: --batch-size must be positive, got ", o.batch_size);
  TS_CHECK(o.amp == "auto" || o.amp == "off" || o.amp == "bf16" || o.amp == "fp16", ValueError, "train: unknown --amp '",
           o.amp, "' (expected bf16, fp16, off or auto)");
  TS_CHECK(o.steps >= 0 && o.log_every >= 0 && o.stop_at >= 0, ValueError,
           "train: --steps, --log-every and --stop-at must not be negative");
  check_flags_for_model(o);  // Note [No flag silently ignored]
  if (o.resume) {
    TS_CHECK(!o.checkpoint.empty(), ValueError, "train: --resume needs --checkpoint DIR");
    // A missing checkpoint is an error, not a fresh start: a typo in the path must not silently
    // retrain from scratch over the run it meant to continue.
    TS_CHECK(std::filesystem::exists(o.checkpoint), IOError, "train: --resume: no checkpoint at '", o.checkpoint,
             "' (run without --resume to start a new one there)");
  }
  if (m == "gpt2" || m == "resnet50") {
    TS_CHECK(o.amp != "fp16", ValueError, "train: --model ", m, " trains in bfloat16 (--amp bf16) or float32 (--amp off)");
    if (o.amp == "auto") o.amp = cuda ? "bf16" : "off";
  }
  if (m == "gpt2") {
    TS_CHECK(o.data.rfind("text:", 0) == 0 && o.data.size() > 5, ValueError,
             "train: --model gpt2 needs --data text:FILE (any text file; its bytes are the tokens)");
    TS_CHECK(o.optimizer.empty() || o.optimizer == "adamw", ValueError, "train: --model gpt2 trains with AdamW, not '",
             o.optimizer, "'");
    o.optimizer = "adamw";
    TS_CHECK(o.layers > 0 && o.heads > 0 && o.embd > 0 && o.context > 0, ValueError,
             "train: --layers, --heads, --embd and --context must be positive");
    TS_CHECK(o.embd % o.heads == 0, ValueError, "train: --embd ", o.embd, " is not a multiple of --heads ", o.heads);
    TS_CHECK(o.accum > 0, ValueError, "train: --accum must be positive, got ", o.accum);
    TS_CHECK(o.warmup >= 0, ValueError, "train: --warmup must not be negative, got ", o.warmup);
    TS_CHECK(o.eval_every > 0 && o.eval_iters > 0, ValueError, "train: --eval-every and --eval-iters must be positive");
    TS_CHECK(o.dropout >= 0 && o.dropout < 1, ValueError, "train: --dropout must be in [0, 1), got ", o.dropout);
    TS_CHECK(o.grad_clip >= 0 && o.weight_decay >= 0, ValueError, "train: --grad-clip and --weight-decay must not be negative");
    TS_CHECK(o.sample_tokens >= 0, ValueError, "train: --sample-tokens must not be negative");
    TS_CHECK(o.temperature >= 0, ValueError, "train: --temperature must not be negative, got ", o.temperature);
    TS_CHECK(o.top_k >= 0 && o.top_k <= 256, ValueError, "train: --top-k must be in [0, 256] (0: off), got ", o.top_k);
    if (o.batch_size == 0) o.batch_size = 64;
    if (o.steps == 0) o.steps = 3000;
    if (o.log_every == 0) o.log_every = 50;
    if (o.lr == 0) o.lr = 1e-3;
    if (o.min_lr == 0) o.min_lr = o.lr / 10;
    TS_CHECK(o.min_lr > 0 && o.min_lr <= o.lr, ValueError, "train: --min-lr must be in (0, --lr], got ", o.min_lr);
    TS_CHECK(o.stop_at <= o.steps, ValueError, "train: --stop-at ", o.stop_at, " is past --steps ", o.steps);
    return o;
  }
  if (m == "resnet50") {
    TS_CHECK(o.data.empty() || o.data == "synthetic", ValueError, "train: --model resnet50 trains on --data synthetic, not '",
             o.data, "'");
    o.data = "synthetic";
    TS_CHECK(o.optimizer.empty() || o.optimizer == "sgd", ValueError, "train: --model resnet50 trains with SGD, not '",
             o.optimizer, "'");
    o.optimizer = "sgd";
    if (o.batch_size == 0) o.batch_size = cuda ? 256 : 16;
    if (o.steps == 0) o.steps = 100;
    if (o.log_every == 0) o.log_every = 10;
    if (o.lr == 0) o.lr = 0.1;
    TS_CHECK(o.stop_at <= o.steps, ValueError, "train: --stop-at ", o.stop_at, " is past --steps ", o.steps);
    return o;
  }
  // The Fashion-MNIST classifiers.
  if (o.data.empty()) o.data = "fashion-mnist";
  TS_CHECK(o.data == "fashion-mnist" || o.data.rfind("fashion-mnist:", 0) == 0, ValueError, "train: --model ", m,
           " trains on fashion-mnist or fashion-mnist:DIR, not '", o.data, "'");
  if (o.optimizer.empty()) o.optimizer = "adamw";
  TS_CHECK(o.optimizer == "sgd" || o.optimizer == "adamw", ValueError, "train: unknown optimizer '", o.optimizer,
           "' (expected sgd or adamw)");
  if (o.batch_size == 0) o.batch_size = 64;
  if (o.amp == "auto") o.amp = "off";
  TS_CHECK(o.epochs > 0, ValueError, "train: --epochs must be positive, got ", o.epochs);
  return o;
}

int run_train(const TrainOptions& opts) {
  const bool on_gpu = opts.device == "cuda" || (opts.device == "auto" && cuda::is_available());
  const TrainOptions o = resolve_options(opts, on_gpu);
  if (o.model == "gpt2") {
    train_gpt(o);
    return 0;
  }
  if (o.model == "resnet50") {
    train_resnet50_synthetic(o);
    return 0;
  }
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  manual_seed(o.seed);
  Device device = pick_device(o.device);
  // Note [Data-parallel train]
  const bool data_parallel = o.nproc > 1 || started_by_launcher();
  int rank = 0, world = 1;
#ifdef TESSERA_APPS_DISTRIBUTED
  if (data_parallel) {
    distributed::init_process_group(device.is_cuda() ? "nccl" : "mpi");
    rank = distributed::get_rank();
    world = distributed::get_world_size();
    TS_CHECK(o.nproc == 1 || o.nproc == world, ValueError, "train: --nproc ", o.nproc, ", but the launcher started ",
             world, " processes");
    device = distributed::default_group().device();
  }
#else
  TS_CHECK(!data_parallel, ValueError, "train: --nproc and launchers need the distributed layer, and this tessera "
           "was built without MPI");
#endif
  const bool lead = rank == 0;
  const AmpMode amp_mode{o.amp != "off", o.amp == "fp16" ? kFloat16 : kBFloat16};
  // float16 has a narrow exponent range: its gradients need loss scaling; bfloat16's do not.
  amp::GradScaler scaler({.enabled = o.amp == "fp16"});

  std::string root = data::FashionMNIST::kDefaultRoot;
  if (o.data.rfind("fashion-mnist:", 0) == 0) root = o.data.substr(14);
  auto norm = data::FashionMNIST::kNormalize;
  data::FashionMNIST train_set(root, data::Split::Train, norm), test_set(root, data::Split::Test, norm);
  std::shared_ptr<const data::Dataset> train_data;
  if (o.limit_train > 0 && o.limit_train < train_set.size())
    train_data = std::make_shared<data::TensorDataset>(std::vector<Tensor>{
        train_set.images().slice(0, 0, o.limit_train), train_set.labels().slice(0, 0, o.limit_train)});
  else
    train_data = std::make_shared<data::FashionMNIST>(train_set);
  const data::DataLoaderOptions train_opts{.batch_size = o.batch_size, .shuffle = true, .num_workers = 1,
                                           .drop_last = true, .seed = o.seed};
  // One rank's part of an epoch (Note [Data-parallel train]): the sampler's indices, in its order.
  std::optional<data::DistributedSampler> sampler;
  Tensor all_images, all_labels;
  if (world > 1) {
    sampler.emplace(train_data->size(), data::DistributedSamplerOptions{.num_replicas = world, .rank = rank,
                                                                        .shuffle = true, .seed = o.seed});
    all_images = o.limit_train > 0 ? train_set.images().slice(0, 0, train_data->size()) : train_set.images();
    all_labels = o.limit_train > 0 ? train_set.labels().slice(0, 0, train_data->size()) : train_set.labels();
  }
  auto epoch_loader = [&](int64_t epoch) {
    if (!sampler) {
      auto loader = std::make_unique<data::DataLoader>(train_data, train_opts);
      loader->set_epoch(epoch);
      return loader;
    }
    sampler->set_epoch(epoch);
    const Tensor idx = tensor(sampler->indices(), {sampler->size()}).to(kInt64);
    data::DataLoaderOptions part = train_opts;
    part.shuffle = false;  // the sampler shuffled
    return std::make_unique<data::DataLoader>(
        data::TensorDataset(std::vector<Tensor>{all_images.index_select(0, idx), all_labels.index_select(0, idx)}),
        part);
  };
  data::DataLoader test_loader(test_set, {.batch_size = 1000});

  std::unique_ptr<nn::Module> model = make_model(o.model);
  model->to(device);
  nn::Module* net = model.get();  // what trains: the model, or its DistributedDataParallel wrapper
#ifdef TESSERA_APPS_DISTRIBUTED
  std::unique_ptr<nn::DistributedDataParallel> ddp;
  if (data_parallel) {
    ddp = std::make_unique<nn::DistributedDataParallel>(*model);
    net = ddp.get();
  }
#endif
  std::unique_ptr<optim::Optimizer> opt = make_optimizer(o.optimizer, *net, o.lr);
  const int64_t steps_per_epoch = static_cast<int64_t>(epoch_loader(0)->size());
  optim::CosineAnnealingLR sched(*opt, o.epochs * steps_per_epoch);
  auto save = [&](int64_t epoch) {
#ifdef TESSERA_APPS_DISTRIBUTED
    if (data_parallel) {
      distributed::save_checkpoint(o.checkpoint, *model, opt.get(), &sched, epoch);
      return;
    }
#endif
    save_checkpoint(o.checkpoint, *model, opt.get(), &sched, epoch);
  };

  int64_t first_epoch = 0;
  if (o.resume) {
    TS_CHECK(!o.checkpoint.empty(), ValueError, "train: --resume needs --checkpoint DIR");
    first_epoch = load_checkpoint(o.checkpoint, *model, opt.get(), &sched);
    if (lead) std::printf("resumed from %s after epoch %lld\n", o.checkpoint.c_str(), static_cast<long long>(first_epoch));
  }
  if (lead && world > 1)
    std::printf("data parallel: %d processes (%s), %lld examples per process per epoch\n", world,
                device.is_cuda() ? "nccl" : "mpi", static_cast<long long>(sampler->size()));
  if (lead) std::printf("training %s on Fashion-MNIST (%lld examples, %lld steps/epoch) on %s with %s, %lld parameters\n",
              o.model.c_str(), static_cast<long long>(train_data->size()), static_cast<long long>(steps_per_epoch),
              device.str().c_str(), opt->name().c_str(), [&] {
                long long n = 0;
                for (const Tensor& p : model->parameters()) n += p.numel();
                return n;
              }());
  if (amp_mode.enabled && lead)
    std::printf("mixed precision: autocast %s%s\n", o.amp.c_str(), scaler.is_enabled() ? " with loss scaling" : "");

  std::vector<EpochMetrics> rows;
  const bool tty = true;
  std::optional<profiler::profile> prof;
  profiler::ProfileOptions prof_opts{.activities = {profiler::CPU}, .record_shapes = true, .profile_memory = true};
  if (device.is_cuda()) prof_opts.activities.push_back(profiler::CUDA);
  for (int64_t epoch = first_epoch; epoch < o.epochs; ++epoch) {
    std::unique_ptr<data::DataLoader> train_loader = epoch_loader(epoch);
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(o.epochs),
                    steps_per_epoch * o.batch_size, tty && lead);
    double loss_sum = 0;
    int64_t seen = 0, batches = 0;
    for (auto& [x, y] : *train_loader) {
      const int64_t step = batches + 1;
      const bool profiling = lead && !o.profile.empty() && epoch == first_epoch && step >= kProfileFirst && step <= kProfileLast;
      if (profiling && step == kProfileFirst) prof.emplace(prof_opts);
      std::optional<profiler::record_function> range;
      if (profiling) range.emplace("step " + std::to_string(step));
      Tensor xd = x.to(device), yd = y.to(device);
      opt->zero_grad();
      Tensor loss;
      {
        profiler::record_function r("forward");  // user ranges cost one relaxed load unless profiling
        amp::autocast guard(device, amp_mode.dtype, amp_mode.enabled);
        loss = nn::functional::cross_entropy((*net)(xd), yd);
      }
      {
        profiler::record_function r("backward");
        scaler.scale(loss).backward();
      }
      {
        profiler::record_function r("optimizer.step");
        scaler.step(*opt);
        scaler.update();
      }
      sched.step();
      loss_sum += loss.item<double>();
      range.reset();
      if (profiling && step == kProfileLast) finish_profile(*prof, o.profile, device.is_cuda());
      ++batches;
      seen += y.size(0);
      bar.update(seen, loss_sum / static_cast<double>(batches));
    }
    bar.finish();
    if (prof && prof->running()) finish_profile(*prof, o.profile, device.is_cuda());  // a short epoch
    const double train_seconds = bar.seconds();
    double train_loss = loss_sum / static_cast<double>(batches);
#ifdef TESSERA_APPS_DISTRIBUTED
    if (world > 1) {
      Tensor l = full({1}, train_loss, TensorOptions(kFloat64, device));
      distributed::all_reduce(l, distributed::ReduceOp::Avg);
      train_loss = l.item<double>();
    }
#endif
    if (!o.checkpoint.empty()) save(epoch + 1);
    if (!lead) continue;
    Eval ev = evaluate(*model, test_loader, device, amp_mode);
    EpochMetrics m{static_cast<int>(epoch + 1), train_loss, ev.loss, ev.accuracy, train_seconds};
    rows.push_back(m);
    std::printf("epoch %lld/%lld  train loss %.4f  test loss %.4f  test accuracy %.2f%%  %.1fs (%.0f items/s)\n",
                static_cast<long long>(epoch + 1), static_cast<long long>(o.epochs), m.train_loss, m.test_loss,
                m.test_accuracy, train_seconds, static_cast<double>(seen * world) / train_seconds);
    std::fflush(stdout);
  }
  if (!o.metrics.empty() && !rows.empty()) {
    write_metrics_csv(o.metrics, rows);
    std::string svg = o.metrics.size() > 4 && o.metrics.substr(o.metrics.size() - 4) == ".csv"
                          ? o.metrics.substr(0, o.metrics.size() - 4) + ".svg"
                          : o.metrics + ".svg";
    write_metrics_svg(svg, rows);
    std::printf("metrics: %s, plot: %s\n", o.metrics.c_str(), svg.c_str());
  }
  return 0;
}

}  // namespace tessera::app
