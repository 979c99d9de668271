// ResNet-50 training throughput under nn::DataParallel (one process, every visible GPU) against
// nn::DistributedDataParallel (one process per GPU, the nccl backend) on the same total batch: the
// seed's comparison (DataParallel copies every parameter to every GPU and gathers on one each step,
// so its GPUs wait; DDP overlaps the all-reduce with backward). The step is bench_models' resnet50
// row: 224x224 channels-last input, bfloat16 autocast, cross-entropy, SGD momentum 0.9 with weight
// decay 5e-5 (fused).
//
//   bench_data_parallel --mode plain                 one GPU, the whole batch (the reference)
//   bench_data_parallel --mode dp                    DataParallel over every visible GPU
//   mpirun -np N bench_data_parallel --mode ddp      N ranks, batch / N each, rank 0 prints
//     [--batch 256] [--iters 10] [--warmup 3] [--rounds 3]    (batch: the total over the GPUs)
//
// Prints one JSON line per round {"mode", "round", "ms", "images_per_s"} (wall time of `iters` steps
// after synchronizing every GPU, over iters), then {"summary": ...} with the median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/cuda.h"
#include "tessera/distributed.h"
#include "tessera/distributed/ddp.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void synchronize_all() {
  for (int i = 0; i < ts::cuda::device_count(); ++i) ts::cuda::synchronize(i);
}

// Milliseconds per step over `iters` steps (wall time; every GPU synchronized before and after; the
// ranks meet at a barrier in ddp mode so that the slowest one decides).
double time_ms(const std::function<void()>& step, int iters, bool ddp) {
  synchronize_all();
  if (ddp) ts::distributed::barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) step();
  synchronize_all();
  if (ddp) ts::distributed::barrier();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / iters;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "dp";
  int rounds = 3, iters = 10, warmup = 3;
  int64_t batch = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--mode") mode = v;
    else if (a == "--rounds") rounds = std::atoi(v.c_str());
    else if (a == "--iters") iters = std::atoi(v.c_str());
    else if (a == "--warmup") warmup = std::atoi(v.c_str());
    else if (a == "--batch") batch = std::atoll(v.c_str());
    else {
      std::fprintf(stderr, "bench_data_parallel: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (mode != "plain" && mode != "dp" && mode != "ddp") {
    std::fprintf(stderr, "bench_data_parallel: --mode must be plain, dp or ddp, got %s\n", mode.c_str());
    return 2;
  }
  if (!ts::cuda::is_available()) {
    std::fprintf(stderr, "bench_data_parallel: needs a GPU\n");
    return 2;
  }
  try {
    const bool ddp = mode == "ddp";
    int rank = 0, world = 1, gpus = 1;
    if (ddp) {
      ts::distributed::init_process_group("nccl");
      rank = ts::distributed::get_rank();
      world = gpus = ts::distributed::get_world_size();
    } else if (mode == "dp") {
      gpus = ts::cuda::device_count();
    }
    const ts::Device gpu = ts::Device::cuda(ddp ? ts::distributed::get_local_rank() : 0);
    ts::cuda::set_device(gpu.index());
    const int64_t local_batch = ddp ? batch / world : batch;

    ts::manual_seed(1234);
    ts::models::ResNet net = ts::models::resnet50();
    net.to(gpu);
    net.train();
    std::unique_ptr<ts::nn::DataParallel<ts::models::ResNet>> dp;
    std::unique_ptr<ts::nn::DistributedDataParallel> wrapped;
    ts::nn::Module* model = &net;
    if (mode == "dp") {
      dp = std::make_unique<ts::nn::DataParallel<ts::models::ResNet>>(net, [] { return ts::models::resnet50(); });
      model = dp.get();
    } else if (ddp) {
      wrapped = std::make_unique<ts::nn::DistributedDataParallel>(net);
      model = wrapped.get();
    }
    ts::optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-5, .fused = true});
    ts::manual_seed(7 + rank);
    const ts::Tensor x = ts::randn({local_batch, 3, 224, 224}, ts::TensorOptions(ts::kFloat32, gpu))
                             .contiguous(ts::MemoryFormat::ChannelsLast);
    const ts::Tensor y = ts::randint(0, 1000, {local_batch}, ts::TensorOptions(ts::kInt64, gpu));
    auto step = [&] {
      ts::Tensor loss;
      {
        ts::amp::autocast guard(gpu, ts::kBFloat16);
        loss = F::cross_entropy((*model)(x), y);
      }
      loss.backward();
      opt.step();
      opt.zero_grad(true);
    };
    for (int i = 0; i < warmup; ++i) step();
    std::vector<double> ms;
    for (int r = 0; r < rounds; ++r) {
      ms.push_back(time_ms(step, iters, ddp));
      if (rank == 0) {
        std::printf("{\"mode\": \"%s\", \"round\": %d, \"ms\": %.3f, \"images_per_s\": %.1f}\n", mode.c_str(), r,
                    ms.back(), static_cast<double>(local_batch * world) * 1000.0 / ms.back());
        std::fflush(stdout);
      }
    }
    if (rank == 0) {
      const double m = median(ms);
      std::printf("{\"summary\": {\"mode\": \"%s\", \"gpus\": %d, \"batch\": %lld, \"iters\": %d, \"rounds\": %d, "
                  "\"ms\": %.3f, \"ms_min\": %.3f, \"ms_max\": %.3f, \"images_per_s\": %.1f, \"device\": \"%s\"}}\n",
                  mode.c_str(), gpus, static_cast<long long>(local_batch * world), iters, rounds, m,
                  *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()),
                  static_cast<double>(local_batch * world) * 1000.0 / m,
                  ts::cuda::get_device_properties(gpu.index()).name.c_str());
    }
    if (ddp) ts::distributed::destroy_process_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_data_parallel: %s\n", e.what());
    return 1;
  }
  return 0;
}
