// nn::init: PyTorch's torch.nn.init. Each fills a tensor in place under no_grad (so parameters that
// require grad can be initialized) and returns it. Random fills draw from the Philox generator
// (gen, or the tensor's device default).
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "tessera/generator.h"
#include "tessera/tensor.h"

namespace tessera::nn::init {

// The recommended gain for a nonlinearity: "linear", "conv*", "sigmoid" -> 1, "tanh" -> 5/3,
// "relu" -> sqrt(2), "leaky_relu" -> sqrt(2 / (1 + slope^2)) (slope = param, default 0.01),
// "selu" -> 3/4. Others raise ValueError.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);
// (fan_in, fan_out) of a weight (out, in, *kernel): in * receptive field, out * receptive field.
// ValueError for fewer than 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
// N(mean, std) conditioned on [a, b] (inverse-CDF sampling, as PyTorch).
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                      Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);
Tensor& ones_(Tensor& t);
Tensor& zeros_(Tensor& t);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// N(0, s) with s = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// U(-b, b) with b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a); mode "fan_in" or "fan_out".
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
// N(0, s) with s = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);

// The same on an rvalue handle (e.g. `init::zeros_(lin.bias)` works either way).
inline Tensor uniform_(Tensor&& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr) { return uniform_(t, a, b, gen); }
inline Tensor normal_(Tensor&& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr) { return normal_(t, mean, std, gen); }
inline Tensor constant_(Tensor&& t, double value) { return constant_(t, value); }
inline Tensor zeros_(Tensor&& t) { return zeros_(t); }
inline Tensor ones_(Tensor&& t) { return ones_(t); }

}  // namespace tessera::nn::init
