// nn::init: in-place initializers with PyTorch's formulas (fans, gains, bounds). All fills run
// under no_grad, so they apply to parameters that require grad without recording history.
#include "tessera/nn/init.h"

#include <cmath>
#include <vector>

#include "tessera/autograd.h"
#include "tessera/functions.h"

namespace tessera::nn::init {
namespace {

double norm_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Inverse of the standard normal CDF: Acklam's rational approximation (relative error 1.2e-9),
// then one Halley step against erfc, which brings it to double precision.
double norm_ppf(double p) {
  if (p <= 0) return -INFINITY;
  if (p >= 1) return INFINITY;
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425, hi = 1 - lo;
  double x;
  if (p < lo) {
    double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= hi) {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double e = norm_cdf(x) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

void check_defined(const char* op, const Tensor& t) {
  TS_CHECK(t.defined(), ValueError, op, ": got an undefined tensor");
}

double fan_for(const char* op, const Tensor& t, const std::string& mode) {
  TS_CHECK(mode == "fan_in" || mode == "fan_out", ValueError, op, ": mode ", mode,
           " not supported, please use one of fan_in, fan_out");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return static_cast<double>(mode == "fan_in" ? fan_in : fan_out);
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  static const char* kUnit[] = {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                "conv_transpose3d", "sigmoid"};
  for (const char* n : kUnit)
    if (nonlinearity == n) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4.0;
  TS_THROW(ValueError, "calculate_gain: unsupported nonlinearity ", nonlinearity);
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  check_defined("calculate_fan_in_and_fan_out", t);
  TS_CHECK(t.dim() >= 2, ValueError, "calculate_fan_in_and_fan_out: Fan in and fan out can not be computed for "
           "tensor with fewer than 2 dimensions, got shape ", t.sizes());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double a, double b, Generator* gen) {
  check_defined("uniform_", t);
  NoGradGuard no_grad;
  return t.uniform_(a, b, gen);
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_defined("normal_", t);
  TS_CHECK(std >= 0, ValueError, "normal_: std must be non-negative, got ", std);
  NoGradGuard no_grad;
  return t.normal_(mean, std, gen);
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  check_defined("trunc_normal_", t);
  TS_CHECK(a < b, ValueError, "trunc_normal_: expected a < b, got a=", a, ", b=", b);
  TS_CHECK(std > 0, ValueError, "trunc_normal_: std must be positive, got ", std);
  NoGradGuard no_grad;
  if (t.is_meta() || t.numel() == 0) return t;
  // x = mean + std * Phi^-1(l + U (u - l)): the uniforms come from the tensor's device generator;
  // the inverse CDF (which has no tessera op) runs on the host in float64.
  const double l = norm_cdf((a - mean) / std), u = norm_cdf((b - mean) / std);
  Tensor uni = rand(t.sizes(), TensorOptions(kFloat64, t.device()), gen).cpu().contiguous();
  std::vector<double> v = uni.tolist<double>();
  for (double& x : v) {
    x = mean + std * norm_ppf(l + x * (u - l));
    x = x < a ? a : (x > b ? b : x);
  }
  t.copy_(tensor(v, t.sizes(), kFloat64).to(t.device()));
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  check_defined("constant_", t);
  NoGradGuard no_grad;
  return t.fill_(value);
}
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_defined("xavier_uniform_", t);
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(t, -bound, bound, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check_defined("xavier_normal_", t);
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

Tensor& kaiming_uniform_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity, Generator* gen) {
  check_defined("kaiming_uniform_", t);
  if (t.numel() == 0) return t;  // PyTorch warns and leaves a zero-element tensor alone
  const double fan = fan_for("kaiming_uniform_", t, mode);
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan);
  return uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity, Generator* gen) {
  check_defined("kaiming_normal_", t);
  if (t.numel() == 0) return t;
  const double fan = fan_for("kaiming_normal_", t, mode);
  return normal_(t, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(fan), gen);
}

}  // namespace tessera::nn::init
