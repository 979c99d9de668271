// The MLP and the CNN of the train command.
#include "tessera/models.h"

#include "tessera/functions.h"

namespace tessera::models {

MLP::MLP(int64_t in_features, const std::vector<int64_t>& hidden, int64_t num_classes) {
  TS_CHECK(in_features > 0 && num_classes > 0, ValueError, "MLP: in_features and num_classes must be positive, got ",
           in_features, " and ", num_classes);
  int64_t prev = in_features;
  for (int64_t h : hidden) {
    TS_CHECK(h > 0, ValueError, "MLP: hidden sizes must be positive, got ", h);
    layers.push_back(nn::Linear(prev, h));
    layers.push_back(nn::ReLU());
    prev = h;
  }
  layers.push_back(nn::Linear(prev, num_classes));
  register_module("layers", layers);
}

Tensor MLP::forward(Tensor x) { return layers(x.flatten(1)); }

namespace {
int64_t pooled(int64_t size) { return ((size - 2) / 2 - 2) / 2; }  // conv3, pool2, conv3, pool2
}  // namespace

CNN::CNN(int64_t in_channels, int64_t num_classes, int64_t image_size)
    : conv1(in_channels, 32, 3), conv2(32, 64, 3), fc1(64 * pooled(image_size) * pooled(image_size), 128),
      fc2(128, num_classes) {
  TS_CHECK(pooled(image_size) > 0, ValueError, "CNN: image_size ", image_size, " is too small (at least 10)");
  register_modules({{"conv1", conv1}, {"conv2", conv2}, {"fc1", fc1}, {"fc2", fc2}});
}

Tensor CNN::forward(Tensor x) {
  x = max_pool2d(conv1(x).relu(), 2);
  x = max_pool2d(conv2(x).relu(), 2);
  return fc2(fc1(x.flatten(1)).relu());
}

}  // namespace tessera::models
