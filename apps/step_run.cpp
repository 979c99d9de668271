// The step-based trainers' metrics files, profiled window and formatting (step_run.h).
#include "step_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/tessera.h"

namespace tessera::app {
namespace {

std::string field(double v) {
  if (std::isnan(v)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

void write_step_metrics_csv(const std::string& path, const std::vector<StepMetrics>& rows, const std::string& rate_name) {
  std::ofstream out(path);
  TS_CHECK(out.good(), IOError, "train: cannot write the metrics file ", path);
  out << "step,train_loss,val_loss,lr," << rate_name << "\n";
  for (const StepMetrics& r : rows)
    out << r.step << ',' << field(r.train_loss) << ',' << field(r.val_loss) << ',' << field(r.lr) << ','
        << field(r.rate) << '\n';
  out.close();
  TS_CHECK(!out.fail(), IOError, "train: cannot write the metrics file ", path);
}

std::vector<StepMetrics> read_step_metrics_csv(const std::string& path, int64_t up_to_step) {
  std::ifstream in(path);
  TS_CHECK(in.good(), IOError, "train: cannot read the metrics file ", path);
  std::vector<StepMetrics> rows;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (lineno == 1) {
      TS_CHECK(line.rfind("step,train_loss,val_loss,lr,", 0) == 0, IOError, "train: ", path,
               " is not a metrics file of a step-based run (line 1 is '", line,
               "', expected 'step,train_loss,val_loss,lr,...')");
      continue;
    }
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    if (!line.empty() && line.back() == ',') f.emplace_back();
    TS_CHECK(f.size() == 5, IOError, "train: ", path, " line ", lineno, ": expected 5 fields, got ", f.size());
    auto num = [&](const std::string& s) {
      if (s.empty()) return static_cast<double>(NAN);
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(s, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      TS_CHECK(used == s.size() && used > 0, IOError, "train: ", path, " line ", lineno, ": '", s, "' is not a number");
      return v;
    };
    StepMetrics r;
    const double step = num(f[0]);
    TS_CHECK(!std::isnan(step) && step >= 1 && step == std::floor(step), IOError, "train: ", path, " line ", lineno,
             ": the step '", f[0], "' is not a positive integer");
    r.step = static_cast<int64_t>(step);
    r.train_loss = num(f[1]);
    r.val_loss = num(f[2]);
    r.lr = num(f[3]);
    r.rate = num(f[4]);
    if (r.step <= up_to_step) rows.push_back(r);
  }
  return rows;
}

void write_step_metrics_svg(const std::string& path, const std::vector<StepMetrics>& rows) {
  double lo = 1e30, hi = -1e30;
  int64_t last = 1;
  for (const StepMetrics& r : rows) {
    for (double v : {r.train_loss, r.val_loss})
      if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    last = std::max(last, r.step);
  }
  if (lo > hi) lo = 0, hi = 1;
  const double x0 = 60, y0 = 30, w = 560, h = 260;
  auto px = [&](int64_t s) { return x0 + (last > 1 ? static_cast<double>(s - 1) * w / static_cast<double>(last - 1) : w / 2); };
  auto py = [&](double v) { return y0 + h - (hi > lo ? (v - lo) / (hi - lo) : 0.5) * h; };
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='660' height='340' font-family='sans-serif'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n<rect x='" << x0 << "' y='" << y0 << "' width='" << w
    << "' height='" << h << "' fill='none' stroke='#888'/>\n<text x='" << x0 << "' y='" << y0 - 8
    << "' font-size='14'>loss</text>\n";
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4;
    s << "<text x='" << x0 - 6 << "' y='" << py(v) + 4 << "' font-size='11' text-anchor='end'>" << field(std::round(v * 1000) / 1000)
      << "</text>\n";
  }
  s << "<text x='" << x0 + w / 2 << "' y='" << y0 + h + 30 << "' font-size='12' text-anchor='middle'>step (last "
    << last << ")</text>\n";
  const struct {
    double StepMetrics::*field;
    const char* color;
    const char* label;
  } series[] = {{&StepMetrics::train_loss, "#1f77b4", "train loss"}, {&StepMetrics::val_loss, "#d62728", "val loss"}};
  int row = 0;
  for (const auto& [f, color, label] : series) {
    s << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='";
    for (const StepMetrics& r : rows)
      if (!std::isnan(r.*f)) s << px(r.step) << ',' << py(r.*f) << ' ';
    s << "'/>\n<text x='" << x0 + w - 100 << "' y='" << y0 + 16 + 16 * row++ << "' fill='" << color
      << "' font-size='13'>" << label << "</text>\n";
  }
  s << "</svg>\n";
  std::ofstream out(path);
  TS_CHECK(out.good(), IOError, "train: cannot write the plot ", path);
  out << s.str();
}

void write_step_metrics(const std::string& csv, const std::vector<StepMetrics>& rows, const std::string& rate_name,
                        bool announce) {
  write_step_metrics_csv(csv, rows, rate_name);
  std::filesystem::path svg(csv);
  svg.replace_extension(".svg");
  write_step_metrics_svg(svg.string(), rows);
  if (announce) std::printf("metrics: %s, plot: %s\n", csv.c_str(), svg.string().c_str());
}

void finish_profile(profiler::profile& prof, const std::string& path, bool cuda) {
  prof.stop();
  prof.export_chrome_trace(path);
  std::filesystem::path svg(path);
  svg.replace_extension(".memory.svg");
  prof.export_memory_timeline(svg.string());
  std::printf("%s", prof.key_averages().table(cuda ? "self_cuda_time_total" : "self_cpu_time_total", 20).c_str());
  std::printf("profile: trace %s, memory timeline %s\n", path.c_str(), svg.string().c_str());
}

void ProfileWindow::begin_step(int64_t n) {
  if (path_.empty() || n < kFirst || n > kLast) return;
  if (n == kFirst) {
    profiler::ProfileOptions opts{.activities = {profiler::CPU}, .record_shapes = true, .profile_memory = true};
    if (device_.is_cuda()) opts.activities.push_back(profiler::CUDA);
    prof_.emplace(opts);
  }
  if (prof_) range_.emplace("step " + std::to_string(n));
}

void ProfileWindow::end_step(int64_t n) {
  range_.reset();
  if (prof_ && prof_->running() && n == kLast) finish_profile(*prof_, path_, device_.is_cuda());
}

void ProfileWindow::finish() {
  range_.reset();
  if (prof_ && prof_->running()) finish_profile(*prof_, path_, device_.is_cuda());
}

std::string grouped(double v) {
  std::string digits = std::to_string(static_cast<long long>(std::llround(v)));
  std::string out;
  const int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    out += digits[static_cast<size_t>(i)];
    if (digits[static_cast<size_t>(i)] != '-' && (n - 1 - i) % 3 == 0 && i != n - 1) out += ',';
  }
  return out;
}

std::string rate(double v) {
  if (std::fabs(v) >= 100) return grouped(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string device_name(Device device) {
  if (!device.is_cuda()) return "cpu";
  return cuda::get_device_properties(device.index() < 0 ? -1 : device.index()).name;
}

}  // namespace tessera::app
