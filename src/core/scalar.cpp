// Scalar: dtype inference and printing.
#include "tessera/scalar.h"

namespace tessera {

DType Scalar::dtype() const {
  switch (kind_) {
    case Kind::Bool: return DType::Bool;
    case Kind::Int: return DType::Int64;
    case Kind::Float: return DType::Float32;
  }
  return DType::Float32;
}

Scalar Scalar::operator-() const {
  switch (kind_) {
    case Kind::Bool: return Scalar(-static_cast<int64_t>(i_));
    case Kind::Int: return Scalar(-i_);
    case Kind::Float: return Scalar(-d_);
  }
  return *this;
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return os << (s.to_bool() ? "True" : "False");
    case Scalar::Kind::Int: return os << s.to_int();
    case Scalar::Kind::Float: return os << s.to_double();
  }
  return os;
}

}  // namespace tessera
