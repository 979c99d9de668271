// The TCPStore's wire format (Note [TCPStore wire format] in tessera/distributed/tcp_store.h): the
// query codes, and a writer and a reader of its values, shared by the client and the server.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tessera::distributed::wire {

inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;

// c10d's QueryType, in its order (the byte on the wire).
enum class Query : uint8_t {
  Validate, Set, CompareSet, Get, Add, Check, Wait, GetNumKeys, DeleteKey, Append, MultiGet, MultiSet,
  CancelWait, Ping,
};
enum class CheckReply : uint8_t { Ready, NotReady };
enum class WaitReply : uint8_t { StopWaiting, WaitCanceled };

// Appends values in the host's byte order; a string or a byte vector is its uint64 length, then its bytes.
struct Writer {
  std::vector<uint8_t> out;
  // resize and memcpy, not insert: GCC 12 misreads small inserts as overflows (-Wstringop-overflow).
  Writer& raw(const void* data, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n) std::memcpy(out.data() + at, data, n);
    return *this;
  }
  template <typename T>
  Writer& value(T v) { return raw(&v, sizeof(T)); }
  Writer& query(Query q) { return value(static_cast<uint8_t>(q)); }
  Writer& bytes(const void* data, uint64_t n) { return value(n).raw(data, n); }
  Writer& str(const std::string& s) { return bytes(s.data(), s.size()); }
  Writer& vec(const std::vector<uint8_t>& v) { return bytes(v.data(), v.size()); }
};

// Reads from a buffer that may hold only part of a message: each read returns false, consuming
// nothing the caller keeps, when the bytes are not all there yet. `max_len` bounds a length field,
// so a corrupt or hostile length is an error, not an allocation of exabytes.
struct Reader {
  const uint8_t* p;
  size_t n, pos = 0;
  bool bad = false;  // a length over the bound
  static constexpr uint64_t kMaxLen = uint64_t{1} << 30;

  template <typename T>
  bool value(T* v) {
    if (n - pos < sizeof(T)) return false;
    std::memcpy(v, p + pos, sizeof(T));
    pos += sizeof(T);
    return true;
  }
  bool vec(std::vector<uint8_t>* v) {
    uint64_t len = 0;
    if (!value(&len)) return false;
    if (len > kMaxLen) return bad = true, false;
    if (n - pos < len) return false;
    v->assign(p + pos, p + pos + len);
    pos += len;
    return true;
  }
  bool str(std::string* s) {
    std::vector<uint8_t> v;
    if (!vec(&v)) return false;
    s->assign(v.begin(), v.end());
    return true;
  }
};

}  // namespace tessera::distributed::wire
