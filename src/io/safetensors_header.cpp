// Parsing and validation of a safetensors header, with the rules of the reference implementation
// (Hugging Face's Rust crate): an 8-byte little-endian length N <= 100 MB, N bytes of UTF-8 JSON
// holding one object whose entries are {"dtype", "shape", "data_offsets"} plus an optional
// "__metadata__" map of strings, and data offsets that, sorted, tile the data section exactly.
// Stricter than the reference in two places, both of which only reject files no writer produces:
// duplicate keys and unknown entry fields are errors (the reference keeps the last duplicate and
// ignores unknown fields). Every failure raises IOError "safetensors: <source>: <rule>: <details>".
#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "io/safetensors_dtype.h"
#include "io/safetensors_format.h"
#include "tessera/error.h"

namespace tessera::io {
namespace {

using Json = nlohmann::json;

template <class... Parts>
[[noreturn]] void fail(const std::string& source, const Parts&... parts) {
  TS_THROW(IOError, "safetensors: ", source, ": ", parts...);
}

// A JSON value for an error message, cut short: a hostile header may hold megabytes in one value.
std::string brief(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 64) s = s.substr(0, 61) + "...";
  return s;
}

// A name from the header for an error message: quoted, escaped and cut short like any other value.
std::string quoted(const std::string& s) { return brief(Json(s)); }

const char* kind_of(const Json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  return "a number";
}

// Runs inside nlohmann's parser: tracks the keys of every open object, so that a duplicate key is an
// error instead of silently replacing the first value (the DOM keeps only one of them), and the depth.
class HeaderParseCheck {
 public:
  explicit HeaderParseCheck(const std::string& source) : source_(source) {}

  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        // The deepest valid value is a shape list (header -> entry -> shape). Refusing deeper nesting
        // while parsing keeps a hostile header of "[[[[..." from building millions of nested values.
        if (frames_.size() >= kMaxDepth) {
          fail(source_, "header nests deeper than a safetensors header can (more than ", kMaxDepth,
               " levels of objects and lists)");
        }
        frames_.push_back({event == Json::parse_event_t::object_start, {}, {}});
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!frames_.empty()) frames_.pop_back();
        break;
      case Json::parse_event_t::key: {
        if (frames_.empty()) break;
        const std::string& key = parsed.get_ref<const std::string&>();
        Frame& top = frames_.back();
        if (!top.keys.insert(key).second) {
          if (frames_.size() == 1 && key == kMetadataKey) fail(source_, "duplicate key \"__metadata__\" in the header");
          if (frames_.size() == 1) fail(source_, "duplicate tensor name ", quoted(key), " in the header");
          std::string parent = frames_.size() >= 2 ? frames_[frames_.size() - 2].last_key : std::string();
          fail(source_, "duplicate key ", quoted(key), " inside ", quoted(parent), " in the header");
        }
        top.last_key = key;
        break;
      }
      case Json::parse_event_t::value: break;
    }
    return true;
  }

 private:
  static constexpr size_t kMaxDepth = 3;
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string last_key;
  };
  const std::string& source_;
  std::vector<Frame> frames_;
};

bool is_uint(const Json& v) { return v.is_number_unsigned(); }

TensorEntry parse_entry(const std::string& source, const std::string& name, const Json& v) {
  if (!v.is_object()) fail(source, "entry ", quoted(name), " is not an object (it is ", kind_of(v), ")");
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(field)) fail(source, "entry ", quoted(name), " is missing the field \"", field, "\"");
  }
  for (const auto& item : v.items()) {
    const std::string& k = item.key();
    if (k != "dtype" && k != "shape" && k != "data_offsets") {
      fail(source, "entry ", quoted(name), " has an unexpected field ", quoted(k), " (expected only dtype, shape, data_offsets)");
    }
  }
  TensorEntry e;
  e.name = name;

  const Json& dt = v["dtype"];
  std::optional<DType> dtype = dt.is_string() ? dtype_from_safetensors_code(dt.get_ref<const std::string&>()) : std::nullopt;
  if (!dtype) {
    fail(source, "entry ", quoted(name), " has an unknown dtype ", brief(dt),
         " (expected one of BOOL, U8, I8, I32, I64, F16, BF16, F32, F64)");
  }
  e.dtype = *dtype;

  const Json& shape = v["shape"];
  if (!shape.is_array()) fail(source, "entry ", quoted(name), ": shape must be a list of non-negative integers, got ", brief(shape));
  for (const Json& d : shape) {
    if (!is_uint(d)) fail(source, "entry ", quoted(name), ": shape must be a list of non-negative integers, got ", brief(shape));
  }

  const Json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !is_uint(off[0]) || !is_uint(off[1])) {
    fail(source, "entry ", quoted(name), ": data_offsets must be two non-negative integers [begin, end], got ", brief(off));
  }
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end) {
    fail(source, "entry ", quoted(name), ": data_offsets begin ", e.begin, " is after end ", e.end);
  }

  // Element and byte counts must fit in int64, the index type of tensors (the reference checks usize).
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t numel = 1;
  bool overflow = false;
  for (const Json& d : shape) {
    uint64_t n = d.get<uint64_t>();
    e.shape.push_back(static_cast<int64_t>(std::min(n, kMax)));
    if (n > kMax || __builtin_mul_overflow(numel, n, &numel) || numel > kMax) overflow = true;
  }
  // As the reference's checked product, an overflow before a later zero dim still counts. A single
  // dim above int64's range is refused even next to a zero dim, since Shape could not hold it.
  if (overflow) fail(source, "entry ", quoted(name), ": the number of elements of shape ", brief(shape), " overflows");
  uint64_t nbytes;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(element_size(e.dtype)), &nbytes) || nbytes > kMax) {
    fail(source, "entry ", quoted(name), ": the byte size of shape ", brief(shape), " in ", dt.get_ref<const std::string&>(),
         " overflows");
  }
  if (e.end - e.begin != nbytes) {
    fail(source, "entry ", quoted(name), ": byte size disagrees with shape and dtype: data_offsets [", e.begin, ", ", e.end,
         "] span ", e.end - e.begin, " bytes but shape ", brief(shape), " of ", dt.get_ref<const std::string&>(),
         " needs ", nbytes);
  }
  return e;
}

std::map<std::string, std::string> parse_metadata(const std::string& source, const Json& v) {
  if (!v.is_object()) fail(source, "__metadata__ must be a map of strings to strings, got ", kind_of(v));
  std::map<std::string, std::string> out;
  for (const auto& item : v.items()) {
    if (!item.value().is_string()) {
      fail(source, "__metadata__ must be a map of strings to strings, but the value of ", quoted(item.key()), " is ",
           brief(item.value()));
    }
    out.emplace(item.key(), item.value().get<std::string>());
  }
  return out;
}

// The sorted offsets must tile [0, data_size) exactly: the reference requires each tensor to start
// where the previous one ended and the last one to end at the end of the buffer.
void check_tiling(const std::string& source, const std::vector<TensorEntry>& entries, uint64_t data_size) {
  uint64_t cursor = 0;
  for (const TensorEntry& e : entries) {
    if (e.begin > cursor) {
      fail(source, "data offsets leave a hole: tensor ", quoted(e.name), " begins at byte ", e.begin,
           " but the data before it ends at byte ", cursor);
    }
    if (e.begin < cursor) {
      fail(source, "data offsets overlap: tensor ", quoted(e.name), " begins at byte ", e.begin,
           " before the previous tensor ends at byte ", cursor);
    }
    if (e.end > data_size) {
      fail(source, "data offsets run past the buffer: tensor ", quoted(e.name), " ends at byte ", e.end,
           " but the data section has ", data_size, " bytes (truncated file?)");
    }
    cursor = e.end;
  }
  if (cursor != data_size) {
    fail(source, "buffer has trailing bytes: the tensors cover ", cursor, " of the ", data_size, " data bytes");
  }
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return false;  // stray continuation byte, overlong 2-byte lead (C0, C1) or F5..FF
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return false;  // overlong / too big
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;  // UTF-16 surrogates are not characters
    i += len;
  }
  return true;
}

ParsedHeader parse_safetensors_header(const unsigned char* data, size_t size, const std::string& source) {
  if (size < 8) fail(source, "file is shorter than 8 bytes (the header length field): it has ", size, " bytes");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kMaxHeaderSize) fail(source, "header is too large: ", n, " bytes, the limit is ", kMaxHeaderSize);
  if (n > size - 8) {
    fail(source, "header length ", n, " runs past the end of the file, which has ", size - 8,
         " bytes after the length field (truncated file?)");
  }
  std::string_view text(reinterpret_cast<const char*>(data) + 8, n);
  if (!is_valid_utf8(text)) fail(source, "header is not valid UTF-8");

  Json root;
  try {
    HeaderParseCheck check(source);
    root = Json::parse(text.begin(), text.end(), std::ref(check), /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Json::exception& e) {
    fail(source, "header is not valid JSON: ", e.what());
  }
  if (!root.is_object()) fail(source, "header is not a JSON object (it is ", kind_of(root), ")");

  ParsedHeader h;
  h.data_start = 8 + n;
  for (const auto& item : root.items()) {
    if (item.key() == kMetadataKey) h.metadata = parse_metadata(source, item.value());
    else h.entries.push_back(parse_entry(source, item.key(), item.value()));
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  check_tiling(source, h.entries, size - h.data_start);
  return h;
}

}  // namespace tessera::io
