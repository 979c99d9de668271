// key_averages(): events aggregated by name (and input shapes when asked), and PyTorch's table of them
// (torch.autograd.profiler_util._build_table: the same columns, widths, time and percent formats).
// Percentages: CPU columns of the sum of self CPU times of all CPU events (the profiled CPU time);
// CUDA columns of the sum of GPU event times.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "profiler/export.h"
#include "tessera/error.h"

namespace tessera::profiler {

const KeyAverage* KeyAverages::find(const std::string& key) const {
  for (const KeyAverage& r : rows_)
    if (r.key == key) return &r;
  return nullptr;
}

namespace {

constexpr size_t kMaxNameWidth = 55;
constexpr size_t kMaxShapesWidth = 80;
constexpr size_t kColumnWidth = 12;

std::string format_time(int64_t ns) {
  const double us = static_cast<double>(ns) / 1000.0;
  char buf[64];
  if (us >= 1e6) std::snprintf(buf, sizeof buf, "%.3fs", us / 1e6);
  else if (us >= 1e3) std::snprintf(buf, sizeof buf, "%.3fms", us / 1e3);
  else std::snprintf(buf, sizeof buf, "%.3fus", us);
  return buf;
}

std::string format_time_avg(double ns) { return format_time(static_cast<int64_t>(ns + 0.5)); }

std::string format_percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", whole > 0 ? 100.0 * double(part) / double(whole) : 0.0);
  return buf;
}

std::string truncate(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 3) + "...";
}

std::string pad_left(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

int64_t sort_value(const KeyAverage& r, const std::string& key) {
  if (key == "self_cpu_time_total") return r.self_cpu_time_total_ns;
  if (key == "cpu_time_total") return r.cpu_time_total_ns;
  if (key == "self_cuda_time_total" || key == "self_device_time_total") return r.self_cuda_time_total_ns;
  if (key == "cuda_time_total" || key == "device_time_total") return r.cuda_time_total_ns;
  if (key == "cpu_time") return static_cast<int64_t>(r.cpu_time_avg_ns());
  if (key == "cuda_time" || key == "device_time") return static_cast<int64_t>(r.cuda_time_avg_ns());
  if (key == "count") return r.count;
  TS_THROW(ValueError, "key_averages.table: unknown sort_by '", key,
           "' (expected self_cpu_time_total, cpu_time_total, self_cuda_time_total, cuda_time_total, cpu_time, "
           "cuda_time or count)");
}

}  // namespace

std::string KeyAverages::table(const std::string& sort_by, int64_t row_limit) const {
  std::vector<const KeyAverage*> rows;
  for (const KeyAverage& r : rows_) rows.push_back(&r);
  if (!sort_by.empty()) {
    sort_value(KeyAverage{}, sort_by);  // validates the key even with no rows
    std::stable_sort(rows.begin(), rows.end(), [&](const KeyAverage* a, const KeyAverage* b) {
      return sort_value(*a, sort_by) > sort_value(*b, sort_by);
    });
  }
  int64_t sum_self_cpu = 0, sum_self_cuda = 0;
  for (const KeyAverage& r : rows_) {
    if (r.is_gpu) sum_self_cuda += r.self_cuda_time_total_ns;
    else sum_self_cpu += r.self_cpu_time_total_ns;
  }
  if (row_limit >= 0 && static_cast<size_t>(row_limit) < rows.size()) rows.resize(static_cast<size_t>(row_limit));

  size_t name_width = 4;
  for (const KeyAverage* r : rows) name_width = std::max(name_width, std::min(r->key.size(), kMaxNameWidth));
  size_t shapes_width = 12;
  if (with_shapes_)
    for (const KeyAverage* r : rows) shapes_width = std::max(shapes_width, std::min(r->input_shapes.size(), kMaxShapesWidth));

  std::vector<std::pair<std::string, size_t>> headers = {
      {"Name", name_width}, {"Self CPU %", kColumnWidth}, {"Self CPU", kColumnWidth}, {"CPU total %", kColumnWidth},
      {"CPU total", kColumnWidth}, {"CPU time avg", kColumnWidth}};
  if (with_cuda_) {
    headers.insert(headers.end(), {{"Self CUDA", kColumnWidth}, {"Self CUDA %", kColumnWidth},
                                   {"CUDA total", kColumnWidth}, {"CUDA time avg", 13}});
  }
  if (with_shapes_) headers.push_back({"Input Shapes", shapes_width});
  headers.push_back({"# of Calls", kColumnWidth});

  std::ostringstream out;
  std::string line;
  for (auto& [h, w] : headers) line += std::string(w, '-') + "  ";
  line += "\n";
  auto emit_row = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) out << pad_left(cells[i], headers[i].second) << "  ";
    out << "\n";
  };
  out << line;
  std::vector<std::string> hcells;
  for (auto& [h, w] : headers) hcells.push_back(h);
  emit_row(hcells);
  out << line;
  for (const KeyAverage* r : rows) {
    std::vector<std::string> c = {truncate(r->key, kMaxNameWidth),
                                  format_percent(r->self_cpu_time_total_ns, sum_self_cpu),
                                  format_time(r->self_cpu_time_total_ns),
                                  format_percent(r->cpu_time_total_ns, sum_self_cpu),
                                  format_time(r->cpu_time_total_ns),
                                  format_time_avg(r->cpu_time_avg_ns())};
    if (with_cuda_) {
      c.insert(c.end(), {format_time(r->self_cuda_time_total_ns), format_percent(r->self_cuda_time_total_ns, sum_self_cuda),
                         format_time(r->cuda_time_total_ns), format_time_avg(r->cuda_time_avg_ns())});
    }
    if (with_shapes_) c.push_back(truncate(r->input_shapes, kMaxShapesWidth));
    c.push_back(std::to_string(r->count));
    emit_row(c);
  }
  out << line;
  out << "Self CPU time total: " << format_time(sum_self_cpu) << "\n";
  if (with_cuda_) out << "Self CUDA time total: " << format_time(sum_self_cuda) << "\n";
  return out.str();
}

namespace detail {

std::string format_shapes(const std::vector<std::vector<int64_t>>& shapes) {
  std::string s = "[";
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (i) s += ", ";
    s += "[";
    for (size_t j = 0; j < shapes[i].size(); ++j) {
      if (j) s += ", ";
      s += std::to_string(shapes[i][j]);
    }
    s += "]";
  }
  return s + "]";
}

KeyAverages compute_key_averages(const std::vector<Event>& events, bool group_by_input_shape, bool with_cuda) {
  std::vector<KeyAverage> rows;
  std::map<std::pair<std::string, std::string>, size_t> index;  // (name, shapes) -> row, in first-seen order
  for (const Event& e : events) {
    const bool gpu = is_gpu_kind(e.kind);
    std::string shapes = group_by_input_shape && !gpu ? format_shapes(e.input_shapes) : std::string();
    auto key = std::make_pair(e.name, shapes);
    auto it = index.find(key);
    if (it == index.end()) {
      KeyAverage r;
      r.key = e.name;
      r.input_shapes = std::move(shapes);
      r.is_gpu = gpu;
      it = index.emplace(std::move(key), rows.size()).first;
      rows.push_back(std::move(r));
    }
    KeyAverage& r = rows[it->second];
    ++r.count;
    if (gpu) {
      r.self_cuda_time_total_ns += e.duration_ns();
      r.cuda_time_total_ns += e.duration_ns();
    } else {
      r.cpu_time_total_ns += e.duration_ns();
      r.self_cpu_time_total_ns += e.self_cpu_ns;
      r.self_cuda_time_total_ns += e.self_cuda_ns;
      r.cuda_time_total_ns += e.cuda_total_ns;
    }
  }
  return KeyAverages(std::move(rows), with_cuda, group_by_input_shape);
}

}  // namespace detail
}  // namespace tessera::profiler
