// A small CNN built from nn modules (Conv2d, ReLU, MaxPool2d, Flatten, Linear in a Sequential),
// trained with AdamW for one short epoch on a 6000-image subset of Fashion-MNIST, then evaluated on
// 2000 test images. The data is read from /usr/share/datasets/fashion-mnist (or the directory given
// as the first argument); without it the program prints how to get it and exits 0.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include <tessera/tessera.h>

namespace ts = tessera;
namespace nn = ts::nn;
namespace F = ts::nn::functional;

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : ts::data::FashionMNIST::kDefaultRoot;
  if (!std::filesystem::exists(std::filesystem::path(root) / "train-images-idx3-ubyte.gz") &&
      !std::filesystem::exists(std::filesystem::path(root) / "train-images-idx3-ubyte")) {
    std::printf("Fashion-MNIST not found in %s.\n"
                "Download train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and\n"
                "t10k-labels-idx1-ubyte.gz from https://github.com/zalandoresearch/fashion-mnist (data/fashion)\n"
                "into that directory, or pass another directory as the first argument.\n", root.c_str());
    return 0;
  }
  ts::manual_seed(0);

  // Datasets normalized with the training set's mean and std; subsets as TensorDatasets of slices.
  auto norm = ts::data::FashionMNIST::kNormalize;
  ts::data::FashionMNIST train_full(root, ts::data::Split::Train, norm);
  ts::data::FashionMNIST test_full(root, ts::data::Split::Test, norm);
  ts::data::TensorDataset train_set{train_full.images().slice(0, 0, 6000), train_full.labels().slice(0, 0, 6000)};
  ts::data::TensorDataset test_set{test_full.images().slice(0, 0, 2000), test_full.labels().slice(0, 0, 2000)};
  ts::data::DataLoader train_loader(train_set, {.batch_size = 64, .shuffle = true});
  ts::data::DataLoader test_loader(test_set, {.batch_size = 500});
  std::printf("Fashion-MNIST subset: %lld training and %lld test images of 1x28x28\n",
              (long long)train_set.size(), (long long)test_set.size());

  // 1x28x28 -> 16x14x14 -> 32x7x7 -> 10 logits.
  nn::Sequential model(nn::Conv2d(1, 16, 3, 1, 1), nn::ReLU(), nn::MaxPool2d(2),
                       nn::Conv2d(16, 32, 3, 1, 1), nn::ReLU(), nn::MaxPool2d(2),
                       nn::Flatten(), nn::Linear(32 * 7 * 7, 10));
  std::cout << model << "\n";
  ts::optim::AdamW opt(model.parameters(), {.lr = 2e-3, .weight_decay = 1e-2});

  int64_t step = 0;
  double running = 0;
  for (auto& [x, y] : train_loader) {
    opt.zero_grad();
    ts::Tensor loss = F::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    running += loss.item<double>();
    if (++step % 20 == 0) {
      std::printf("step %3lld  mean loss of the last 20 batches %.4f\n", (long long)step, running / 20);
      running = 0;
    }
  }

  ts::NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0, n = 0;
  for (auto& [x, y] : test_loader) {
    correct += ts::argmax(model(x), 1).eq(y).sum().item<int64_t>();
    n += y.size(0);
  }
  std::printf("test accuracy after one epoch: %.2f%% (%lld / %lld)\n", 100.0 * double(correct) / double(n),
              (long long)correct, (long long)n);
  return 0;
}
