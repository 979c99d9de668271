// ResNet-18 and ResNet-50 against torchvision on the same weights: torchvision builds each with seeded
// weights and BatchNorm statistics (tests/models/torchvision_resnet.py, Debian's python3-torchvision),
// tessera loads its state_dict strictly and computes the eval-mode logits of the same input, which
// must agree within float32 rounding of a deep network. Skips, saying why, where torchvision is
// missing (fails on CI, which installs it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "common/test_util.h"
#include "tessera/safetensors.h"

namespace ts = tessera;
namespace fs = std::filesystem;

TEST(ResNetTorchvision, EvalLogitsAgreeOnTheSameWeights) {
  if (std::system("/usr/bin/python3 -c 'import torchvision' > /dev/null 2>&1") != 0) {
    if (std::getenv("CI") && std::string(std::getenv("CI")) == "true") FAIL() << "torchvision (python3-torchvision) is missing";
    GTEST_SKIP() << "torchvision (python3-torchvision) is missing";
  }
  const fs::path dir = fs::temp_directory_path() / ("tessera_torchvision_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cmd =
      "/usr/bin/python3 " + ts::testing::source_path("tests/models/torchvision_resnet.py") + " " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const char* arch : {"resnet18", "resnet50"}) {
    SCOPED_TRACE(arch);
    std::map<std::string, ts::Tensor> file = ts::load_safetensors((dir / (std::string(arch) + ".safetensors")).string());
    std::map<std::string, ts::Tensor> state;
    for (const auto& [k, v] : file)
      if (k.rfind("model.", 0) == 0) state[k.substr(6)] = v;
    ts::models::ResNet net = std::string(arch) == "resnet18" ? ts::models::resnet18() : ts::models::resnet50();
    net.load_state_dict(state, /*strict=*/true);
    net.eval();
    ts::NoGradGuard no_grad;
    const ts::Tensor got = net(file.at("input"));
    const ts::Tensor want = file.at("logits");
    ASSERT_EQ(got.sizes(), want.sizes());
    const double scale = ts::abs(want).max().item<double>();
    const double err = ts::abs(got - want).max().item<double>();
    // Tens of layers of float32 convolutions summed in another order: relative error of a few 1e-6.
    EXPECT_LE(err, 1e-4 * scale + 1e-5) << "max |tessera - torchvision| = " << err << " of logits up to " << scale;
    EXPECT_GT(scale, 0.0);
    std::printf("%s: max |tessera - torchvision| = %.3g, logits up to %.3g\n", arch, err, scale);
  }
  fs::remove_all(dir);
}
