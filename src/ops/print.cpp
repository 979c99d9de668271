// Printing of tensors in PyTorch's style (torch/_tensor_str.py, default print options: precision 4,
// threshold 1000, edgeitems 3, linewidth 80, automatic scientific mode). The output matches
// PyTorch's character for character, except that dtypes print without the "torch." prefix
// (", dtype=float64)") -- line-wrapping decisions use tessera's shorter suffix.
//
// Values are read once through tolist<>() (which copies to the host and makes them contiguous), so
// printing needs no op of any other family. One formatter, built from the elements that are shown
// (the edge items only when the tensor is summarized), fixes the width and mode of every element.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {
namespace {

constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 80;

// Python's "{:.{p}f}" / "{:.{p}e}": printf's, except that every NaN prints as "nan".
std::string py_format(double v, int precision, char conv) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[512];
  const char fmt[] = {'%', '.', '*', conv, '\0'};
  std::snprintf(buf, sizeof buf, fmt, precision, v);
  return buf;
}

std::string pad_left(std::string s, size_t width) {
  return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
}

// The element values of a tensor, flattened row-major, in the widest type of its kind.
struct Values {
  enum Kind { Float, Int, Bool } kind;
  std::vector<double> f;
  std::vector<int64_t> i;
  std::vector<bool> b;

  explicit Values(const Tensor& t) {
    if (t.is_floating_point()) {
      kind = Float;
      f = t.tolist<double>();
    } else if (t.dtype() == kBool) {
      kind = Bool;
      b = t.tolist<bool>();
    } else {
      kind = Int;
      i = t.tolist<int64_t>();
    }
  }
};

// torch._tensor_str._Formatter: picks integer / fixed / scientific mode and the common width.
class Formatter {
 public:
  Formatter(const Values& v, const std::vector<int64_t>& shown) : v_(v) {
    if (v.kind != Values::Float) {
      for (int64_t k : shown) width_ = std::max(width_, raw(k).size());
      return;
    }
    std::vector<double> vals;
    for (int64_t k : shown)
      if (std::isfinite(v.f[k]) && v.f[k] != 0) vals.push_back(v.f[k]);
    if (vals.empty()) return;
    double lo = std::fabs(vals[0]), hi = lo;
    for (double x : vals) {
      lo = std::min(lo, std::fabs(x));
      hi = std::max(hi, std::fabs(x));
      if (x != std::ceil(x)) int_mode_ = false;
    }
    const bool wide = hi / lo > 1000.0 || hi > 1.0e8;
    if (int_mode_) {
      sci_mode_ = wide;
      for (double x : vals)
        width_ = std::max(width_, sci_mode_ ? py_format(x, kPrecision, 'e').size() : py_format(x, 0, 'f').size() + 1);
    } else {
      sci_mode_ = wide || lo < 1.0e-4;
      for (double x : vals) width_ = std::max(width_, py_format(x, kPrecision, sci_mode_ ? 'e' : 'f').size());
    }
  }

  size_t width() const { return width_; }

  std::string format(int64_t k) const {
    if (v_.kind != Values::Float) return pad_left(raw(k), width_);
    const double x = v_.f[k];
    std::string s;
    if (sci_mode_) {
      s = py_format(x, kPrecision, 'e');
    } else if (int_mode_) {
      s = py_format(x, 0, 'f');
      if (std::isfinite(x)) s += ".";
    } else {
      s = py_format(x, kPrecision, 'f');
    }
    return pad_left(std::move(s), width_);
  }

 private:
  std::string raw(int64_t k) const {
    if (v_.kind == Values::Bool) return v_.b[k] ? "True" : "False";
    return std::to_string(v_.i[k]);
  }

  const Values& v_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t width_ = 1;
};

struct Printer {
  const Shape& sizes;
  Shape strides;  // row-major strides of the flattened values
  bool summarize;

  bool elided(int d) const { return summarize && sizes[d] > 2 * kEdgeItems; }

  // The flat indices of the shown elements, in display order (get_summarized_data).
  void collect(int d, int64_t base, std::vector<int64_t>& out) const {
    if (d == static_cast<int>(sizes.size())) {
      out.push_back(base);
      return;
    }
    for (int64_t j = 0; j < sizes[d]; ++j) {
      if (elided(d) && j == kEdgeItems) j = sizes[d] - kEdgeItems;
      collect(d + 1, base + j * strides[d], out);
    }
  }

  std::string vector_str(int64_t base, int indent, const Formatter& fmt) const {
    const int d = static_cast<int>(sizes.size()) - 1;
    const double element_length = static_cast<double>(fmt.width() + 2);
    const int64_t per_line = std::max<int64_t>(1, static_cast<int64_t>(std::floor((kLineWidth - indent) / element_length)));
    std::vector<std::string> data;
    for (int64_t j = 0; j < sizes[d]; ++j) {
      if (elided(d) && j == kEdgeItems) {
        data.push_back(" ...");
        j = sizes[d] - kEdgeItems;
      }
      data.push_back(fmt.format(base + j * strides[d]));
    }
    std::string s = "[";
    for (size_t k = 0; k < data.size(); ++k) {
      if (k > 0) s += k % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
      s += data[k];
    }
    return s + "]";
  }

  std::string tensor_str(int d, int64_t base, int indent, const Formatter& fmt) const {
    const int ndim = static_cast<int>(sizes.size());
    if (ndim == 0) return fmt.format(0);
    if (d == ndim - 1) return vector_str(base, indent, fmt);
    std::string sep(1, ',');  // built by append: GCC 12 warns falsely (-Wrestrict) on "," + string
    sep.append(static_cast<size_t>(ndim - d - 1), '\n').append(static_cast<size_t>(indent + 1), ' ');
    std::string s = "[";
    for (int64_t j = 0; j < sizes[d]; ++j) {
      if (j > 0) s += sep;
      if (elided(d) && j == kEdgeItems) {
        s.append("...").append(sep);
        j = sizes[d] - kEdgeItems;
      }
      s += tensor_str(d + 1, base + j * strides[d], indent + 1, fmt);
    }
    return s + "]";
  }
};

// Python's str(tuple(shape)): "(2, 3)", "(5,)", "()".
std::string tuple_str(const Shape& s) {
  std::string r = "(";
  for (size_t k = 0; k < s.size(); ++k) r += (k ? ", " : "") + std::to_string(s[k]);
  return r + (s.size() == 1 ? ",)" : ")");
}

// torch._tensor_str._add_suffixes, with its line-length arithmetic.
std::string add_suffixes(const std::string& body, const std::vector<std::string>& suffixes, int indent) {
  std::string r = body;
  const size_t nl = body.rfind('\n');
  int64_t last_line_len = static_cast<int64_t>(body.size()) - (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const std::string& suffix : suffixes) {
    const int64_t len = static_cast<int64_t>(suffix.size());
    if (last_line_len + len + 2 > kLineWidth) {
      r += ",\n" + std::string(indent, ' ') + suffix;
      last_line_len = indent + len;
    } else {
      r += ", " + suffix;
      last_line_len += len + 2;
    }
  }
  return r + ")";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<std::string> suffixes;
  if (!is_cpu()) suffixes.push_back("device='" + device().str() + "'");
  const std::string dtype_suffix = std::string("dtype=") + dtype_name(dtype());
  std::string body;
  if (is_meta()) {
    suffixes.push_back("size=" + tuple_str(sizes()));
    if (dtype() != kFloat32) suffixes.push_back(dtype_suffix);
    body = "...";
  } else if (numel() == 0) {
    if (dim() != 1) suffixes.push_back("size=" + tuple_str(sizes()));
    if (dtype() != kFloat32) suffixes.push_back(dtype_suffix);
    body = "[]";
  } else {
    if (dtype() != kFloat32 && dtype() != kInt64 && dtype() != kBool) suffixes.push_back(dtype_suffix);
    const Values values(*this);
    Printer pr{sizes(), contiguous_strides(sizes()), numel() > kThreshold};
    std::vector<int64_t> shown;
    pr.collect(0, 0, shown);
    const Formatter fmt(values, shown);
    body = pr.tensor_str(0, 0, indent, fmt);
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace tessera
