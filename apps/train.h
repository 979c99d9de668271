// `tessera train`: options and the training loop over Fashion-MNIST (the apps layer only wires
// library pieces together: models, data, optim, checkpoints).
#pragma once
#include <cstdint>
#include <string>

namespace tessera::app {

struct TrainOptions {
  std::string model = "cnn";           // mlp | cnn | resnet18
  std::string data = "fashion-mnist";  // fashion-mnist[:DIR]
  int64_t epochs = 3;
  int64_t batch_size = 64;
  double lr = 0.0;                     // 0: the optimizer's default for the model
  std::string optimizer = "adamw";     // sgd | adamw
  std::string device = "auto";         // cpu | cuda | auto
  uint64_t seed = 0;
  std::string checkpoint;              // directory; saved after every epoch when set
  bool resume = false;
  std::string metrics = "";            // CSV path (an SVG plot is written next to it)
  int64_t limit_train = 0;             // use only the first N training examples (0: all)
  int64_t threads = 0;                 // 0: OpenMP's default
  std::string profile;                 // Chrome trace path: profiles steps 3-5 of the first epoch run
  std::string amp = "off";             // bf16 | fp16 | off: autocast (fp16 with a GradScaler)
};

int run_train(const TrainOptions& opts);

}  // namespace tessera::app
