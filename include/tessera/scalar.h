// A number passed to an op (alpha, a fill value, a clamp bound): boolean, integral or floating.
// Its category takes part in type promotion as a "wrapped number" does in PyTorch.
#pragma once
#include <cstdint>
#include <ostream>
#include <type_traits>

#include "tessera/dtype.h"

namespace tessera {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(Half v) : kind_(Kind::Float), d_(float(v)) {}  // NOLINT
  Scalar(BFloat16 v) : kind_(Kind::Float), d_(float(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating_point() const { return kind_ == Kind::Float; }
  // The dtype PyTorch gives a tensor made from this number: bool, int64 or the default float dtype.
  DType dtype() const;

  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }
  template <class T> T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(kind_ == Kind::Float ? static_cast<T>(d_) : static_cast<T>(i_));
    else if constexpr (std::is_same_v<T, double>) return to_double();
    else return T(static_cast<float>(to_double()));
  }
  Scalar operator-() const;

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace tessera
