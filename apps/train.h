// `tessera train`: options and the training loops: the image classifiers on Fashion-MNIST (train.cpp),
// the byte-level GPT on a text file and ResNet-50 on synthetic images (train_gpt.cpp). The apps layer
// only wires library pieces together: models, data, optim, checkpoints.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "step_run.h"
#include "tessera/device.h"

namespace tessera::app {

struct TrainOptions {
  std::string model = "cnn";           // mlp | cnn | resnet18 | gpt2 | resnet50
  std::string data;                    // fashion-mnist[:DIR] | text:FILE | synthetic; "": the model's default
  int64_t epochs = 3;
  int64_t batch_size = 0;              // 0: the model's default (64; resnet50: 256 on a GPU, 16 on the CPU)
  double lr = 0.0;                     // 0: the optimizer's default for the model
  std::string optimizer;               // sgd | adamw; "": the model's (gpt2 trains with AdamW, resnet50 with SGD)
  std::string device = "auto";         // cpu | cuda | auto
  uint64_t seed = 0;
  std::string checkpoint;              // directory; saved after every epoch (gpt2: every evaluation;
                                       // resnet50: every printed line) and where --stop-at ends the run
  bool resume = false;
  std::string metrics = "";            // CSV path (an SVG plot is written next to it)
  int64_t limit_train = 0;             // use only the first N training examples (0: all)
  int64_t threads = 0;                 // 0: OpenMP's default
  std::string profile;                 // Chrome trace path: profiles steps 3-5 of the first epoch run
  std::string amp = "auto";            // bf16 | fp16 | off | auto (bf16 for gpt2 and resnet50 on a GPU, else off)
  int64_t nproc = 1;                   // data-parallel processes (mpirun; apps/launch.h): mlp, cnn, resnet18

  // gpt2 and resnet50: a number of optimizer steps instead of epochs.
  int64_t steps = 0;                   // 0: the model's default (gpt2 3000, resnet50 100)
  int64_t log_every = 0;               // print a line every N steps (0: the model's default)
  int64_t stop_at = 0;                 // end this run after step N of --steps (0: run them all)
  // gpt2: the model (byte-level: vocabulary 256) and its training.
  int64_t layers = 6, heads = 6, embd = 384, context = 256;
  double dropout = 0.0;
  int64_t accum = 1;                   // micro-batches per optimizer step (gradient accumulation)
  int64_t warmup = 100;                // linear warm-up steps, then cosine decay to min_lr at the last step
  double min_lr = 0.0;                 // 0: lr / 10
  double weight_decay = 0.1;           // AdamW's, on the matrices and embeddings only
  double grad_clip = 1.0;              // clip_grad_norm_ (0: off)
  int64_t eval_every = 250;            // validation loss every N steps (and at the last)
  int64_t eval_iters = 20;             // batches per loss estimate
  int64_t sample_tokens = 500;         // bytes generated at the end (0: none)
  double temperature = 0.8;
  int64_t top_k = 0;                   // 0: no top-k filtering
  std::string prompt = "\n";           // the text generation continues

  // The flags given on the command line ("--epochs", ...), filled by add_train_options' parser: a flag
  // set to its default value is still a flag the model must act on (check_flags_for_model).
  std::set<std::string> given;
};

// Fails, before anything trains, for a flag the chosen model does not act on: ValueError naming the
// flag, the model and the models it applies to. A flag counts as given when it is in `given` or its
// value differs from the default.
void check_flags_for_model(const TrainOptions& opts);
// The flags every model acts on, and those of check_flags_for_model's table (for the test that every
// option of add_train_options is in one of the two).
const std::vector<std::string>& flags_for_every_model();
std::vector<std::string> model_specific_flags();

// The options with the model's defaults filled in ("" data/optimizer, 0 batch size, "auto" amp, 0
// steps), checked: ValueError naming the option for a value the model cannot use. `cuda`: the run goes
// to a GPU.
TrainOptions resolve_options(const TrainOptions& opts, bool cuda);

int run_train(const TrainOptions& opts);

// Per-run summary of the GPT command, for tests and scripts.
struct GptRunResult {
  double first_train_loss = 0, final_train_loss = 0, final_val_loss = 0, tokens_per_second = 0;
  int64_t steps = 0;
  std::string sample;
  std::vector<StepMetrics> metrics;  // the rows of --metrics: a resumed run's start with the previous run's
};
// `tessera train --model gpt2` with resolved options (run_train resolves them and calls this).
GptRunResult train_gpt(const TrainOptions& opts);
struct Resnet50RunResult {
  double images_per_second = 0;  // of the printed intervals after the first
  std::vector<StepMetrics> metrics;
};
// `tessera train --model resnet50 --data synthetic` with resolved options.
Resnet50RunResult train_resnet50_synthetic(const TrainOptions& opts);

// The learning rate at optimizer step `step` (0-based): linear warm-up from lr / warmup to lr over the
// first `warmup` steps, then cosine decay from lr to min_lr, reaching min_lr at step total - 1 (nanoGPT's
// get_lr with lr_decay_iters = total - 1).
double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double lr, double min_lr);

// Picks the device of --device cpu | cuda | auto (DeviceError for cuda without a GPU).
Device pick_device(const std::string& want);

}  // namespace tessera::app
