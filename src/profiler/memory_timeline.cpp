// export_memory_timeline: an SVG plot, written by hand, of allocated and reserved bytes over time, one
// panel per device (in the order devices first appear). Each panel has a time axis (ms from the start of
// the profile) and a bytes axis (in the unit that suits the peak), with "nice" ticks (1, 2 or 5 times a
// power of ten) and grid lines, a step line per series, a legend and a title. Values are the totals
// the memory events carry after each allocation or free; before the first event of a device its
// allocated total is the first event's minus its size.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "profiler/export.h"
#include "tessera/error.h"

namespace tessera::profiler::detail {
namespace {

constexpr double kWidth = 960, kPanelHeight = 320;
constexpr double kLeft = 90, kRight = 30, kTop = 44, kBottom = 56;

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// A tick step of 1, 2 or 5 times a power of ten giving at most ~8 intervals over [0, hi].
double nice_step(double hi) {
  if (hi <= 0) return 1;
  const double raw = hi / 8;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

std::string tick_label(double v, double step) {
  char buf[32];
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct Series {
  std::vector<std::pair<double, double>> alloc, reserved;  // (ms, bytes)
};

}  // namespace

std::string memory_timeline_svg(const std::vector<MemoryEvent>& memory, int64_t duration_ns) {
  std::vector<std::string> order;
  std::map<std::string, Series> series;
  for (const MemoryEvent& m : memory) {
    const std::string d = m.device.str();
    auto it = series.find(d);
    const double t = static_cast<double>(m.time_ns) / 1e6;
    if (it == series.end()) {
      order.push_back(d);
      it = series.emplace(d, Series{}).first;
      it->second.alloc.push_back({0.0, static_cast<double>(std::max<int64_t>(m.total_allocated - m.bytes, 0))});
      // The CPU counts reserved as allocated; a device's reserved total before its first event is unknown.
      it->second.reserved.push_back(
          {0.0, m.device.is_cpu() ? it->second.alloc.front().second : static_cast<double>(m.total_reserved)});
    }
    it->second.alloc.push_back({t, static_cast<double>(m.total_allocated)});
    it->second.reserved.push_back({t, static_cast<double>(m.total_reserved)});
  }
  double t_end = static_cast<double>(duration_ns) / 1e6;
  for (const MemoryEvent& m : memory) t_end = std::max(t_end, static_cast<double>(m.time_ns) / 1e6);
  if (t_end <= 0) t_end = 1e-3;

  const size_t panels = std::max<size_t>(order.size(), 1);
  const double height = kPanelHeight * static_cast<double>(panels);
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(kWidth) << "\" height=\"" << num(height)
    << "\" viewBox=\"0 0 " << num(kWidth) << " " << num(height) << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect x=\"0\" y=\"0\" width=\"" << num(kWidth) << "\" height=\"" << num(height) << "\" fill=\"white\"/>\n";
  if (order.empty()) {
    o << "<text x=\"" << num(kWidth / 2) << "\" y=\"" << num(kPanelHeight / 2)
      << "\" text-anchor=\"middle\">no memory events (profile with profile_memory = true)</text>\n";
  }
  for (size_t p = 0; p < order.size(); ++p) {
    const Series& s = series[order[p]];
    const double y0 = kPanelHeight * static_cast<double>(p);
    const double pw = kWidth - kLeft - kRight, ph = kPanelHeight - kTop - kBottom;
    double peak = 0;
    for (auto& [t, v] : s.alloc) peak = std::max(peak, v);
    for (auto& [t, v] : s.reserved) peak = std::max(peak, v);
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double scale = 1;
    while (u < 4 && peak / scale >= 1024) { scale *= 1024; ++u; }
    const double ystep = nice_step(std::max(peak / scale, 1.0));
    const double ymax = std::ceil(std::max(peak / scale, 1.0) / ystep) * ystep;
    const double xstep = nice_step(t_end);
    const double xmax = std::ceil(t_end / xstep) * xstep;
    auto X = [&](double t) { return kLeft + pw * t / xmax; };
    auto Y = [&](double bytes) { return y0 + kTop + ph * (1 - bytes / scale / ymax); };

    o << "<g class=\"panel\" id=\"memory-" << xml_escape(order[p]) << "\">\n";
    o << "<text x=\"" << num(kWidth / 2) << "\" y=\"" << num(y0 + 24) << "\" text-anchor=\"middle\" font-size=\"15\">"
      << "Memory timeline: " << xml_escape(order[p]) << "</text>\n";
    // Grid, ticks and tick labels.
    for (double v = 0; v <= ymax + ystep * 1e-9; v += ystep) {
      const double y = Y(v * scale);
      o << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(y) << "\" x2=\"" << num(kLeft + pw) << "\" y2=\"" << num(y)
        << "\" stroke=\"#e0e0e0\"/>\n";
      o << "<line x1=\"" << num(kLeft - 5) << "\" y1=\"" << num(y) << "\" x2=\"" << num(kLeft) << "\" y2=\"" << num(y)
        << "\" stroke=\"black\"/>\n";
      o << "<text x=\"" << num(kLeft - 8) << "\" y=\"" << num(y + 4) << "\" text-anchor=\"end\">" << tick_label(v, ystep)
        << "</text>\n";
    }
    for (double t = 0; t <= xmax + xstep * 1e-9; t += xstep) {
      const double x = X(t);
      o << "<line x1=\"" << num(x) << "\" y1=\"" << num(y0 + kTop) << "\" x2=\"" << num(x) << "\" y2=\"" << num(y0 + kTop + ph)
        << "\" stroke=\"#f0f0f0\"/>\n";
      o << "<line x1=\"" << num(x) << "\" y1=\"" << num(y0 + kTop + ph) << "\" x2=\"" << num(x) << "\" y2=\""
        << num(y0 + kTop + ph + 5) << "\" stroke=\"black\"/>\n";
      o << "<text x=\"" << num(x) << "\" y=\"" << num(y0 + kTop + ph + 18) << "\" text-anchor=\"middle\">"
        << tick_label(t, xstep) << "</text>\n";
    }
    // Axes and their labels.
    o << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(y0 + kTop) << "\" x2=\"" << num(kLeft) << "\" y2=\""
      << num(y0 + kTop + ph) << "\" stroke=\"black\"/>\n";
    o << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(y0 + kTop + ph) << "\" x2=\"" << num(kLeft + pw) << "\" y2=\""
      << num(y0 + kTop + ph) << "\" stroke=\"black\"/>\n";
    o << "<text x=\"" << num(kLeft + pw / 2) << "\" y=\"" << num(y0 + kPanelHeight - 14)
      << "\" text-anchor=\"middle\">time (ms)</text>\n";
    const double ly = y0 + kTop + ph / 2;
    o << "<text x=\"20\" y=\"" << num(ly) << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " << num(ly)
      << ")\">memory (" << units[u] << ")</text>\n";
    // The series as step lines.
    auto polyline = [&](const std::vector<std::pair<double, double>>& pts, const char* color, const char* cls) {
      o << "<polyline class=\"" << cls << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
      double prev = pts.front().second;
      o << num(X(pts.front().first)) << "," << num(Y(prev));
      for (size_t i = 1; i < pts.size(); ++i) {
        o << " " << num(X(pts[i].first)) << "," << num(Y(prev));
        prev = pts[i].second;
        o << " " << num(X(pts[i].first)) << "," << num(Y(prev));
      }
      o << " " << num(X(t_end)) << "," << num(Y(prev)) << "\"/>\n";
    };
    polyline(s.reserved, "#ff7f0e", "reserved");
    polyline(s.alloc, "#1f77b4", "allocated");
    // Legend.
    const double lx = kLeft + pw - 150, lg = y0 + kTop + 8;
    o << "<rect x=\"" << num(lx) << "\" y=\"" << num(lg) << "\" width=\"140\" height=\"44\" fill=\"white\" stroke=\"#999\"/>\n";
    o << "<line x1=\"" << num(lx + 8) << "\" y1=\"" << num(lg + 14) << "\" x2=\"" << num(lx + 32) << "\" y2=\"" << num(lg + 14)
      << "\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n";
    o << "<text x=\"" << num(lx + 38) << "\" y=\"" << num(lg + 18) << "\">allocated</text>\n";
    o << "<line x1=\"" << num(lx + 8) << "\" y1=\"" << num(lg + 32) << "\" x2=\"" << num(lx + 32) << "\" y2=\"" << num(lg + 32)
      << "\" stroke=\"#ff7f0e\" stroke-width=\"2\"/>\n";
    o << "<text x=\"" << num(lx + 38) << "\" y=\"" << num(lg + 36) << "\">reserved</text>\n";
    o << "</g>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void write_memory_timeline(const SessionResult& r, const std::string& path) {
  const std::string svg = memory_timeline_svg(r.memory, r.stop_ns - r.start_ns);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TS_CHECK(f.good(), IOError, "export_memory_timeline: cannot open '", path, "' for writing");
  f << svg;
  f.close();
  TS_CHECK(!f.fail(), IOError, "export_memory_timeline: writing '", path, "' failed");
}

}  // namespace tessera::profiler::detail
