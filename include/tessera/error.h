// tessera's exceptions. Every message names the op, what was given and what was expected, e.g.
// "add: the size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1".
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ShapeError : public Error { public: using Error::Error; };
class DTypeError : public Error { public: using Error::Error; };
class DeviceError : public Error { public: using Error::Error; };
class IndexError : public Error { public: using Error::Error; };
class ValueError : public Error { public: using Error::Error; };
class IOError : public Error { public: using Error::Error; };
class OutOfMemoryError : public Error { public: using Error::Error; };
class NotImplementedError : public Error { public: using Error::Error; };

namespace detail {
template <class T>
void append(std::ostream& os, const T& v) {
  os << v;
}
// Sizes and strides print as [2, 3].
template <class T>
void append(std::ostream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
}
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (append(os, args), ...);
  return os.str();
}
}  // namespace detail

}  // namespace tessera

// TS_CHECK(cond, ErrorClass, parts...): throws ErrorClass(str_cat(parts...)) when cond is false.
#define TS_CHECK(cond, ErrorClass, ...)                                   \
  do {                                                                    \
    if (!(cond)) [[unlikely]] {                                           \
      throw ::tessera::ErrorClass(::tessera::detail::str_cat(__VA_ARGS__)); \
    }                                                                     \
  } while (0)
#define TS_THROW(ErrorClass, ...) throw ::tessera::ErrorClass(::tessera::detail::str_cat(__VA_ARGS__))
