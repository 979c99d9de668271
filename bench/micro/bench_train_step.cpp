// CPU training-step benchmarks: one SGD-with-momentum step (zero_grad, forward, cross_entropy,
// backward, step) of the MLP (784-512-512-10, batch 128) and of the CNN (28x28, batch 64), the models
// bench/torch times in PyTorch for the side-by-side ratio. Inputs and labels are made once; a few
// warm-up steps run before timing so that the optimizer's momentum buffers and the allocator's caches
// exist, as they do in a training loop. The _forward / _backward / _step cases time the pieces of a
// step apart, to tell where a slow step spends its time.
#include <benchmark/benchmark.h>

#include "tessera/models.h"
#include "tessera/optim.h"
#include "tessera/tessera.h"

namespace ts = tessera;

namespace {

constexpr int kWarmup = 3;

struct Setup {
  ts::Tensor x, y;
};

Setup make_inputs(const ts::Shape& x_shape) {
  ts::manual_seed(0);
  return {ts::randn(x_shape), ts::randint(0, 10, {x_shape[0]})};
}

// One full training step.
template <class Model>
void train_step(Model& model, ts::optim::SGD& opt, const Setup& s) {
  opt.zero_grad();
  ts::Tensor loss = ts::nn::functional::cross_entropy(model(s.x), s.y);
  loss.backward();
  opt.step();
}

enum class Piece { kStep, kForward, kBackward, kOptimizer };

template <class Model>
void run(benchmark::State& state, Model& model, const ts::Shape& x_shape, Piece piece) {
  Setup s = make_inputs(x_shape);
  ts::optim::SGD opt(model.parameters(), ts::optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
  for (int i = 0; i < kWarmup; ++i) train_step(model, opt, s);
  for (auto _ : state) {
    switch (piece) {
      case Piece::kStep:
        train_step(model, opt, s);
        break;
      case Piece::kForward: {
        opt.zero_grad();
        benchmark::DoNotOptimize(ts::nn::functional::cross_entropy(model(s.x), s.y));
        break;
      }
      case Piece::kBackward: {  // forward outside the timing, backward inside
        state.PauseTiming();
        opt.zero_grad();
        ts::Tensor loss = ts::nn::functional::cross_entropy(model(s.x), s.y);
        state.ResumeTiming();
        loss.backward();
        break;
      }
      case Piece::kOptimizer:
        opt.step();  // gradients stay from the warm-up
        break;
    }
  }
}

void BM_train_step_mlp_b128(benchmark::State& state) {
  ts::models::MLP model(784, {512, 512}, 10);
  run(state, model, {128, 1, 28, 28}, Piece::kStep);
}
BENCHMARK(BM_train_step_mlp_b128)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_train_step_cnn_b64(benchmark::State& state) {
  ts::models::CNN model(1, 10, 28);
  run(state, model, {64, 1, 28, 28}, Piece::kStep);
}
BENCHMARK(BM_train_step_cnn_b64)->Unit(benchmark::kMillisecond)->UseRealTime();

// The pieces of a step, for profiling.
void BM_train_step_mlp_b128_forward(benchmark::State& state) {
  ts::models::MLP model(784, {512, 512}, 10);
  run(state, model, {128, 1, 28, 28}, Piece::kForward);
}
BENCHMARK(BM_train_step_mlp_b128_forward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_train_step_mlp_b128_backward(benchmark::State& state) {
  ts::models::MLP model(784, {512, 512}, 10);
  run(state, model, {128, 1, 28, 28}, Piece::kBackward);
}
BENCHMARK(BM_train_step_mlp_b128_backward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_train_step_mlp_b128_optimizer(benchmark::State& state) {
  ts::models::MLP model(784, {512, 512}, 10);
  run(state, model, {128, 1, 28, 28}, Piece::kOptimizer);
}
BENCHMARK(BM_train_step_mlp_b128_optimizer)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_train_step_cnn_b64_forward(benchmark::State& state) {
  ts::models::CNN model(1, 10, 28);
  run(state, model, {64, 1, 28, 28}, Piece::kForward);
}
BENCHMARK(BM_train_step_cnn_b64_forward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_train_step_cnn_b64_backward(benchmark::State& state) {
  ts::models::CNN model(1, 10, 28);
  run(state, model, {64, 1, 28, 28}, Piece::kBackward);
}
BENCHMARK(BM_train_step_cnn_b64_backward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_train_step_cnn_b64_optimizer(benchmark::State& state) {
  ts::models::CNN model(1, 10, 28);
  run(state, model, {64, 1, 28, 28}, Piece::kOptimizer);
}
BENCHMARK(BM_train_step_cnn_b64_optimizer)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
