// The `tessera` command. Subcommands: train (train.cpp), info.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "tessera/tessera.h"
#include "launch.h"
#include "train.h"
#include "train_cli.h"

namespace {

// `tessera info`: the CPU (name, extensions, the level of the CPU kernels, oneDNN), the build (CUDA libraries
// and architectures) and every GPU.
void print_info() {
  namespace cuda = tessera::cuda;
  std::printf("tessera %s, CPU threads %d\n", "0.1.0", tessera::get_num_threads());
  const tessera::cpu::CpuInfo& c = tessera::cpu::cpu_info();
  std::string features;
  for (const std::string& f : c.features) features += (features.empty() ? "" : " ") + f;
  std::printf("CPU: %s (%s)\n", c.name.c_str(), c.vendor.c_str());
  std::printf("CPU features: %s\n", features.empty() ? "none beyond x86-64" : features.c_str());
  std::printf("CPU kernels: %s (supported: %s%s%s)\n", tessera::cpu::isa_level_name(c.level),
              tessera::cpu::isa_level_name(c.supported), c.cap.empty() ? "" : ", TESSERA_CPU_ISA=",
              c.cap.c_str());
  if (tessera::cpu::onednn_built()) {
    std::printf("oneDNN %s: %s\n", tessera::cpu::onednn_version().c_str(),
                tessera::cpu::onednn_enabled() ? "on (convolutions, pooling, batch norm, matmuls of 2^20 multiply-adds and more)" : "off (TESSERA_ONEDNN=0)");
  } else {
    std::printf("oneDNN: not built (configure with TESSERA_ONEDNN=ON and libdnnl-dev installed)\n");
  }
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
  tessera::app::add_train_options(*train, t);

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
    if (*train) {
      if (t.nproc > 1 && !tessera::app::started_by_launcher()) {
        tessera::app::check_flags_for_model(t);  // before starting N processes that would all refuse
        tessera::app::exec_under_mpirun(static_cast<int>(t.nproc), argc, argv);
      }
      return tessera::app::run_train(t);
    }
    print_info();
    return 0;
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "tessera: %s\n", e.what());
    return 1;
  }
}
