#include "metrics_plot.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tessera/error.h"

namespace tessera::app {

void write_metrics_csv(const std::string& path, const std::vector<EpochMetrics>& rows) {
  std::ofstream out(path);
  TS_CHECK(out.good(), IOError, "train: cannot write the metrics file ", path);
  out << "epoch,train_loss,test_loss,test_accuracy,seconds\n";
  for (const auto& r : rows)
    out << r.epoch << ',' << r.train_loss << ',' << r.test_loss << ',' << r.test_accuracy << ',' << r.seconds << '\n';
}

namespace {

struct Panel {
  double x0, y0, w, h;  // pixels
  double ymin, ymax;
  int epochs;
  double px(int epoch) const { return x0 + (epochs > 1 ? (epoch - 1) * w / (epochs - 1) : w / 2); }
  double py(double v) const { return y0 + h - (ymax > ymin ? (v - ymin) / (ymax - ymin) : 0.5) * h; }
};

void polyline(std::ostringstream& s, const Panel& p, const std::vector<EpochMetrics>& rows, double EpochMetrics::*field,
              const char* color, const char* label, int label_row) {
  s << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='";
  for (const auto& r : rows) s << p.px(r.epoch) << ',' << p.py(r.*field) << ' ';
  s << "'/>\n";
  for (const auto& r : rows) s << "<circle r='3' fill='" << color << "' cx='" << p.px(r.epoch) << "' cy='" << p.py(r.*field) << "'/>\n";
  s << "<text x='" << p.x0 + p.w - 110 << "' y='" << p.y0 + 16 + 16 * label_row << "' fill='" << color
    << "' font-size='13'>" << label << "</text>\n";
}

void axes(std::ostringstream& s, const Panel& p, const char* title, const char* fmt_unit) {
  s << "<rect x='" << p.x0 << "' y='" << p.y0 << "' width='" << p.w << "' height='" << p.h
    << "' fill='none' stroke='#888'/>\n";
  s << "<text x='" << p.x0 << "' y='" << p.y0 - 8 << "' font-size='14'>" << title << "</text>\n";
  for (int i = 0; i <= 4; ++i) {
    double v = p.ymin + (p.ymax - p.ymin) * i / 4;
    char buf[32];
    std::snprintf(buf, sizeof buf, fmt_unit, v);
    s << "<text x='" << p.x0 - 6 << "' y='" << p.py(v) + 4 << "' font-size='11' text-anchor='end'>" << buf << "</text>\n";
  }
  for (int e = 1; e <= p.epochs; ++e)
    s << "<text x='" << p.px(e) << "' y='" << p.y0 + p.h + 16 << "' font-size='11' text-anchor='middle'>" << e << "</text>\n";
  s << "<text x='" << p.x0 + p.w / 2 << "' y='" << p.y0 + p.h + 32 << "' font-size='12' text-anchor='middle'>epoch</text>\n";
}

}  // namespace

void write_metrics_svg(const std::string& path, const std::vector<EpochMetrics>& rows) {
  if (rows.empty()) return;
  const int epochs = rows.back().epoch;
  double lmin = 1e30, lmax = -1e30, amin = 1e30, amax = -1e30;
  for (const auto& r : rows) {
    lmin = std::min({lmin, r.train_loss, r.test_loss});
    lmax = std::max({lmax, r.train_loss, r.test_loss});
    amin = std::min(amin, r.test_accuracy);
    amax = std::max(amax, r.test_accuracy);
  }
  Panel loss{60, 40, 360, 240, std::max(0.0, lmin - 0.05), lmax + 0.05, epochs};
  Panel acc{520, 40, 360, 240, std::max(0.0, amin - 1.0), std::min(100.0, amax + 1.0), epochs};
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='920' height='330' font-family='sans-serif'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n";
  axes(s, loss, "loss", "%.2f");
  axes(s, acc, "test accuracy (%)", "%.1f");
  polyline(s, loss, rows, &EpochMetrics::train_loss, "#1f77b4", "train loss", 0);
  polyline(s, loss, rows, &EpochMetrics::test_loss, "#d62728", "test loss", 1);
  polyline(s, acc, rows, &EpochMetrics::test_accuracy, "#2ca02c", "test accuracy", 0);
  s << "</svg>\n";
  std::ofstream out(path);
  TS_CHECK(out.good(), IOError, "train: cannot write the plot ", path);
  out << s.str();
}

}  // namespace tessera::app
