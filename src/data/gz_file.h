// Reading and writing files through zlib's gzFile: a reader that decompresses gzip data and passes
// any other file through unchanged (zlib's transparent mode), so callers read MNIST's *.gz and raw
// files alike. Every failure is an IOError naming the file, the calling op and, for damaged data, the
// offset where it was found.
//
// Invariant: read() either returns the bytes it was asked for, fewer only at the true end of the data,
// or throws: a truncated or corrupt gzip stream is never reported as a short, clean end.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::data::detail {

class GzReader {
 public:
  // Opens `path`; a missing file, a directory or an unreadable file raises IOError "<op>: ...".
  GzReader(const std::string& path, const char* op);
  ~GzReader();
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes into dst; returns how many were read (less than n only at the end of the data).
  size_t read(void* dst, size_t n);
  // Reads until the end of the data.
  std::vector<uint8_t> read_all();
  bool compressed() const { return compressed_; }
  // The size of the file on disk (compressed size for a gzip file).
  uint64_t file_size() const { return file_size_; }
  const std::string& path() const { return path_; }
  // The bytes read() has delivered so far: the offset of the next byte in the (decompressed) data.
  uint64_t offset() const { return delivered_; }

 private:
  void* file_ = nullptr;  // gzFile
  std::string path_;
  const char* op_;
  bool compressed_ = false;
  uint64_t file_size_ = 0;
  uint64_t delivered_ = 0;
};

// Writes `n` bytes to `path`, gzip-compressed when `compress`; raises IOError "<op>: ..." on failure.
void write_file(const std::string& path, const void* data, size_t n, bool compress, const char* op);

}  // namespace tessera::data::detail
