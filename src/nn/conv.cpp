// Conv1d, Conv2d, ConvTranspose2d and the pooling modules: parameters and PyTorch's initialization
// here; the arithmetic, shape checks and derivatives belong to the functional ops they call.
#include "tessera/nn/conv.h"

#include <algorithm>
#include <cmath>

#include "tessera/nn/init.h"

namespace tessera::nn {
namespace {

std::string pair_str(const IntPair& p) { return detail::str_cat("(", p.h, ", ", p.w, ")"); }
const char* py_bool(bool b) { return b ? "True" : "False"; }

void check_channels(const char* module, int64_t in, int64_t out, int64_t groups) {
  TS_CHECK(in > 0 && out > 0, ValueError, module, ": in_channels and out_channels must be positive, got ", in, " and ", out);
  TS_CHECK(groups > 0, ValueError, module, ": groups must be a positive integer, got ", groups);
  TS_CHECK(in % groups == 0, ValueError, module, ": in_channels (", in, ") must be divisible by groups (", groups, ")");
  TS_CHECK(out % groups == 0, ValueError, module, ": out_channels (", out, ") must be divisible by groups (", groups, ")");
}

void check_kernel(const char* module, const IntPair& k) {
  TS_CHECK(k.h > 0 && k.w > 0, ValueError, module, ": kernel_size must be positive, got ", pair_str(k));
}

// PyTorch's _ConvNd.reset_parameters: kaiming_uniform(a = sqrt(5)), bias bound 1 / sqrt(fan_in).
void reset_conv(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(weight);
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

std::string conv_repr(int64_t in, int64_t out, const std::string& k, const std::string& s, const std::string& p,
                      bool default_padding, const std::string& d, bool default_dilation, int64_t groups, bool bias) {
  std::string r = detail::str_cat(in, ", ", out, ", kernel_size=", k, ", stride=", s);
  if (!default_padding) r += ", padding=" + p;
  if (!default_dilation) r += ", dilation=" + d;
  if (groups != 1) r += detail::str_cat(", groups=", groups);
  if (!bias) r += ", bias=False";
  return r;
}

}  // namespace

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, int64_t padding,
               int64_t dilation, int64_t groups, bool bias)
    : in_channels(in_channels), out_channels(out_channels), kernel_size(kernel_size), stride(stride),
      padding(padding), dilation(dilation), groups(groups) {
  check_channels("Conv1d", in_channels, out_channels, groups);
  check_kernel("Conv1d", kernel_size);
  weight = empty({out_channels, in_channels / groups, kernel_size});
  if (bias) this->bias = empty({out_channels});
  register_parameter("weight", weight);
  register_parameter("bias", this->bias);
  reset_parameters();
}
void Conv1d::reset_parameters() { reset_conv(weight, bias); }
Tensor Conv1d::forward(Tensor x) { return conv1d(x, weight, opt(bias), stride, padding, dilation, groups); }
std::string Conv1d::extra_repr() const {
  return conv_repr(in_channels, out_channels, detail::str_cat("(", kernel_size, ",)"), detail::str_cat("(", stride, ",)"),
                   detail::str_cat("(", padding, ",)"), padding == 0, detail::str_cat("(", dilation, ",)"), dilation == 1,
                   groups, bias.defined());
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size, IntPair stride, IntPair padding,
               IntPair dilation, int64_t groups, bool bias)
    : in_channels(in_channels), out_channels(out_channels), kernel_size(kernel_size), stride(stride),
      padding(padding), dilation(dilation), groups(groups) {
  check_channels("Conv2d", in_channels, out_channels, groups);
  check_kernel("Conv2d", kernel_size);
  weight = empty({out_channels, in_channels / groups, kernel_size.h, kernel_size.w});
  if (bias) this->bias = empty({out_channels});
  register_parameter("weight", weight);
  register_parameter("bias", this->bias);
  reset_parameters();
}
void Conv2d::reset_parameters() { reset_conv(weight, bias); }
Tensor Conv2d::forward(Tensor x) { return conv2d(x, weight, opt(bias), stride, padding, dilation, groups); }
std::string Conv2d::extra_repr() const {
  return conv_repr(in_channels, out_channels, pair_str(kernel_size), pair_str(stride), pair_str(padding),
                   padding.h == 0 && padding.w == 0, pair_str(dilation), dilation.h == 1 && dilation.w == 1, groups,
                   bias.defined());
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntPair kernel_size, IntPair stride,
                                 IntPair padding, IntPair output_padding, int64_t groups, bool bias, IntPair dilation)
    : in_channels(in_channels), out_channels(out_channels), kernel_size(kernel_size), stride(stride),
      padding(padding), output_padding(output_padding), groups(groups), dilation(dilation) {
  check_channels("ConvTranspose2d", in_channels, out_channels, groups);
  check_kernel("ConvTranspose2d", kernel_size);
  TS_CHECK(output_padding.h < std::max(stride.h, dilation.h) && output_padding.w < std::max(stride.w, dilation.w),
           ValueError, "ConvTranspose2d: output padding must be smaller than either stride or dilation, got "
           "output_padding=", pair_str(output_padding), ", stride=", pair_str(stride), ", dilation=", pair_str(dilation));
  weight = empty({in_channels, out_channels / groups, kernel_size.h, kernel_size.w});
  if (bias) this->bias = empty({out_channels});
  register_parameter("weight", weight);
  register_parameter("bias", this->bias);
  reset_parameters();
}
void ConvTranspose2d::reset_parameters() { reset_conv(weight, bias); }
Tensor ConvTranspose2d::forward(Tensor x) {
  return conv_transpose2d(x, weight, opt(bias), stride, padding, output_padding, groups, dilation);
}
std::string ConvTranspose2d::extra_repr() const {
  std::string r = conv_repr(in_channels, out_channels, pair_str(kernel_size), pair_str(stride), pair_str(padding),
                            padding.h == 0 && padding.w == 0, pair_str(dilation), dilation.h == 1 && dilation.w == 1,
                            groups, bias.defined());
  if (output_padding.h != 0 || output_padding.w != 0) r += ", output_padding=" + pair_str(output_padding);
  return r;
}

MaxPool2d::MaxPool2d(IntPair kernel_size, std::optional<IntPair> stride, IntPair padding, IntPair dilation,
                     bool ceil_mode)
    : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding), dilation(dilation),
      ceil_mode(ceil_mode) {
  check_kernel("MaxPool2d", kernel_size);
}
Tensor MaxPool2d::forward(Tensor x) { return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode); }
std::string MaxPool2d::extra_repr() const {
  return detail::str_cat("kernel_size=", pair_str(kernel_size), ", stride=", pair_str(stride), ", padding=",
                         pair_str(padding), ", dilation=", pair_str(dilation), ", ceil_mode=", py_bool(ceil_mode));
}

AvgPool2d::AvgPool2d(IntPair kernel_size, std::optional<IntPair> stride, IntPair padding, bool ceil_mode,
                     bool count_include_pad)
    : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding), ceil_mode(ceil_mode),
      count_include_pad(count_include_pad) {
  check_kernel("AvgPool2d", kernel_size);
}
Tensor AvgPool2d::forward(Tensor x) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}
std::string AvgPool2d::extra_repr() const {
  return detail::str_cat("kernel_size=", pair_str(kernel_size), ", stride=", pair_str(stride), ", padding=",
                         pair_str(padding));
}

Tensor AdaptiveAvgPool2d::forward(Tensor x) { return adaptive_avg_pool2d(x, output_size); }
std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + pair_str(output_size); }

}  // namespace tessera::nn
