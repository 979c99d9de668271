// The `tessera` command. Subcommands: train (train.cpp), info.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "tessera/tessera.h"
#include "train.h"

namespace {

// `tessera info`: the build (CUDA libraries and architectures) and every GPU.
void print_info() {
  namespace cuda = tessera::cuda;
  std::printf("tessera %s, CPU threads %d\n", "0.1.0", tessera::get_num_threads());
  if (!cuda::is_built()) {
    std::printf("CUDA: not built (configure with the cuda preset)\n");
    return;
  }
  const cuda::BuildInfo b = cuda::build_info();
  auto or_none = [](const std::string& v) { return v.empty() ? std::string("none") : v; };
  std::printf("CUDA runtime %s, driver %s, cuDNN %s, cuBLAS %s, NCCL %s\n", or_none(b.cuda_runtime).c_str(),
              or_none(b.driver).c_str(), or_none(b.cudnn).c_str(), or_none(b.cublas).c_str(),
              or_none(b.nccl).c_str());
  std::string archs;
  for (int a : b.architectures) archs += (archs.empty() ? "sm_" : ", sm_") + std::to_string(a);
  for (int a : b.ptx_architectures) archs += (archs.empty() ? "compute_" : ", compute_") + std::to_string(a) + " (PTX)";
  std::printf("architectures: %s\n", archs.empty() ? "chosen at build time (native or all)" : archs.c_str());
  const int n = cuda::device_count();
  if (n == 0) std::printf("GPUs: none found\n");
  for (int i = 0; i < n; ++i) {
    const cuda::DeviceProperties p = cuda::get_device_properties(i);
    std::printf("GPU %d: %s, sm_%d%d, %.2f GiB, %d SMs\n", i, p.name.c_str(), p.major, p.minor,
                static_cast<double>(p.total_memory) / (1024.0 * 1024.0 * 1024.0), p.multi_processor_count);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera: deep learning in C++"};
  app.require_subcommand(1);

  tessera::app::TrainOptions t;
  CLI::App* train = app.add_subcommand("train", "train a model on a dataset");
  train->add_option("--model", t.model, "mlp | cnn | resnet18")->check(CLI::IsMember({"mlp", "cnn", "resnet18"}));
  train->add_option("--data", t.data, "fashion-mnist or fashion-mnist:DIR");
  train->add_option("--epochs", t.epochs, "number of epochs")->check(CLI::PositiveNumber);
  train->add_option("--batch-size", t.batch_size, "examples per step")->check(CLI::PositiveNumber);
  train->add_option("--lr", t.lr, "learning rate (default: 0.05 for sgd, 1e-3 for adamw)")->check(CLI::NonNegativeNumber);
  train->add_option("--optimizer", t.optimizer, "sgd | adamw")->check(CLI::IsMember({"sgd", "adamw"}));
  train->add_option("--device", t.device, "cpu | cuda | auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  train->add_option("--seed", t.seed, "random seed");
  train->add_option("--checkpoint", t.checkpoint, "checkpoint directory, saved after every epoch");
  train->add_flag("--resume", t.resume, "continue from --checkpoint if it exists");
  train->add_option("--metrics", t.metrics, "CSV of per-epoch metrics (an SVG plot is written next to it)");
  train->add_option("--limit-train", t.limit_train, "use only the first N training examples");
  train->add_option("--threads", t.threads, "CPU threads (default: all)");
  train->add_option("--profile", t.profile,
                    "profile steps 3-5 of the first epoch: Chrome trace to this path (open in Perfetto), memory "
                    "timeline SVG next to it, table of ops on stdout");
  train->add_option("--amp", t.amp, "mixed precision: bf16 | fp16 | off (fp16 scales the loss)")
      ->check(CLI::IsMember({"bf16", "fp16", "off"}));

  app.add_subcommand("info", "print the build and the devices");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      std::fprintf(stderr, "tessera: %s\n", e.what());
      std::fprintf(stderr, "%s", app.help().c_str());
      return e.get_exit_code();
    }
    return app.exit(e);
  }
  try {
    if (*train) return tessera::app::run_train(t);
    print_info();
    return 0;
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "tessera: %s\n", e.what());
    return 1;
  }
}
