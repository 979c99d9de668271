// A one-line progress bar for a training epoch: done/total, items/s, running loss, ETA.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace tessera::app {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total_items, bool enabled);
  void update(int64_t items_done, double loss);
  void finish();
  double seconds() const;

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace tessera::app
