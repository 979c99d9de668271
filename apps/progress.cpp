#include "progress.h"

#include <cstdio>

namespace tessera::app {

ProgressBar::ProgressBar(std::string label, int64_t total_items, bool enabled)
    : label_(std::move(label)), total_(total_items), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

double ProgressBar::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::update(int64_t done, double loss) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  const double s = seconds();
  const double rate = s > 0 ? done / s : 0.0;
  const double eta = rate > 0 ? (total_ - done) / rate : 0.0;
  constexpr int kWidth = 30;
  int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %lld/%lld  %.0f items/s  loss %.4f  ETA %.0fs   ", label_.c_str(), bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), rate, loss, eta);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (enabled_) std::fprintf(stderr, "\r%*s\r", 110, "");
}

}  // namespace tessera::app
