// A user-defined nn::Module: its own parameters (gain, bias), a submodule (a Linear) and a buffer
// (a running mean of its inputs, updated in training mode), all registered by name in the
// constructor so that named_parameters(), state_dict() and to() see them. Prints the names, saves
// the state_dict to a .safetensors file, loads it into a fresh module and checks both agree.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <tessera/tessera.h>

namespace ts = tessera;
namespace nn = ts::nn;
using ts::operator<<;  // Shape is a std::vector, so its printer is not found by argument lookup

// y = gain * tanh(proj(x - running_mean)) + bias
struct ScaledProjection : nn::Module {
  nn::Linear proj;
  ts::Tensor gain, bias;
  ts::Tensor running_mean;  // a buffer: saved in the state_dict, not trained
  double momentum = 0.1;

  ScaledProjection(int64_t in, int64_t out) : proj(in, out) {
    register_module("proj", proj);
    register_parameter("gain", gain = ts::ones({out}));
    register_parameter("bias", bias = ts::zeros({out}));
    register_buffer("running_mean", running_mean = ts::zeros({in}));
  }

  ts::Tensor forward(ts::Tensor x) override {
    if (is_training()) {
      ts::NoGradGuard no_grad;  // buffer updates are not part of the graph
      running_mean.mul_(1 - momentum).add_(x.mean(0) * momentum);
    }
    return gain * proj(x - running_mean).tanh() + bias;
  }
};

int main() {
  ts::manual_seed(0);
  ScaledProjection m(4, 3);
  std::printf("named_parameters:\n");
  for (const auto& [name, p] : m.named_parameters())
    std::cout << "  " << name << " " << p.sizes() << " requires_grad=" << p.requires_grad() << "\n";
  std::printf("named_buffers:\n");
  for (const auto& [name, b] : m.named_buffers()) std::printf("  %s\n", name.c_str());

  // One training step's worth of use: forward (updates the buffer) and backward.
  ts::Tensor x = ts::randn({8, 4}) + 1.0;
  m(x).pow(2).mean().backward();
  std::printf("after one forward in training mode, running_mean[0] = %.4f; gain.grad defined: %d\n",
              m.running_mean[0].item<double>(), (int)m.gain.grad().defined());

  nn::StateDict sd = m.state_dict();
  std::printf("state_dict keys:");
  for (const auto& [k, v] : sd) std::printf(" %s", k.c_str());
  std::printf("\n");

  const std::string path = (std::filesystem::temp_directory_path() / "custom_module_example.safetensors").string();
  ts::save_safetensors(sd, path, {{"format", "pt"}});
  std::printf("saved %zu tensors to %s\n", sd.size(), path.c_str());

  ScaledProjection fresh(4, 3);
  fresh.load_state_dict(ts::load_safetensors(path));  // strict: every key must match
  std::filesystem::remove(path);

  m.eval();
  fresh.eval();
  ts::NoGradGuard no_grad;
  ts::Tensor probe = ts::randn({5, 4});
  const double diff = (m(probe) - fresh(probe)).abs().max().item<double>();
  std::printf("loaded module vs original on new inputs: max |difference| = %g\n", diff);
  if (diff != 0.0) {
    std::printf("FAILED: the loaded module differs\n");
    return 1;
  }
  return 0;
}
