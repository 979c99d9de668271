// What the step-based trainers (`tessera train --model gpt2 | resnet50`, train_gpt.cpp and
// train_resnet50.cpp) share: their metrics (one row per printed line, as CSV and an SVG plot of the
// loss against the step), the profiled window of steps, and the formatting of rates.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/device.h"
#include "tessera/profiler.h"

namespace tessera::app {

// One row of a step-based run's metrics; NaN where the quantity was not measured at that step (the
// validation loss between evaluations, the training loss and rate of an evaluation-only row).
struct StepMetrics {
  int64_t step = 0;  // optimizer steps done, 1-based
  double train_loss = NAN, val_loss = NAN, lr = NAN, rate = NAN;
};

// CSV with the header `step,train_loss,val_loss,lr,<rate_name>`, every double printed to round-trip
// exactly (a resumed run's rows compare bitwise with the uninterrupted run's), NaN as an empty field.
void write_step_metrics_csv(const std::string& path, const std::vector<StepMetrics>& rows, const std::string& rate_name);
// The rows of a metrics file written by write_step_metrics_csv with step <= up_to_step: what a
// resumed run keeps of the run it continues. IOError naming the file and the line for a malformed one.
std::vector<StepMetrics> read_step_metrics_csv(const std::string& path, int64_t up_to_step);
// The training and validation losses against the step.
void write_step_metrics_svg(const std::string& path, const std::vector<StepMetrics>& rows);
// Both, the plot next to the CSV (`m.csv` -> `m.svg`); prints where they went when `announce`.
void write_step_metrics(const std::string& csv, const std::vector<StepMetrics>& rows, const std::string& rate_name,
                        bool announce);

// --profile PATH over steps 3-5 of the run (1-based, counted from the run's first step, so a resumed run
// profiles too): a Chrome trace at PATH, a memory timeline next to it and the table of ops on stdout.
// A run shorter than the window writes what it profiled when finish() is called.
class ProfileWindow {
 public:
  static constexpr int64_t kFirst = 3, kLast = 5;
  ProfileWindow(std::string path, Device device) : path_(std::move(path)), device_(device) {}
  // Around the run's step number `n` (1-based).
  void begin_step(int64_t n);
  void end_step(int64_t n);
  void finish();

 private:
  std::string path_;
  Device device_;
  std::optional<profiler::profile> prof_;
  std::optional<profiler::record_function> range_;
};
// Stops `prof` and writes the trace to `path`, the memory timeline next to it, and the table of ops.
void finish_profile(profiler::profile& prof, const std::string& path, bool cuda);

// "123,456" for counts and rates.
std::string grouped(double v);
// A rate: grouped, or "12.3" below 100 (ResNet-50 on a CPU).
std::string rate(double v);
// The GPU's name, or "cpu".
std::string device_name(Device device);

}  // namespace tessera::app
