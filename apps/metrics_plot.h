// Metrics of a training run as CSV, and the loss and accuracy curves as an SVG plot.
#pragma once
#include <string>
#include <vector>

namespace tessera::app {

struct EpochMetrics {
  int epoch;
  double train_loss, test_loss, test_accuracy, seconds;
};

void write_metrics_csv(const std::string& path, const std::vector<EpochMetrics>& rows);
// Two panels side by side: train/test loss, and test accuracy, against the epoch.
void write_metrics_svg(const std::string& path, const std::vector<EpochMetrics>& rows);

}  // namespace tessera::app
