// The fuzz targets whose parsers take a path (the IDX reader, the gzip reader, GPT2Config::from_hf_json,
// the text dataset) get each input through one scratch file per process, rewritten for every input:
// the readers are fuzzed as they run, through their file handling, not through a side entry point.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessera::fuzz {

// Writes `data` to this process's scratch file (in /dev/shm where it exists) and returns its path.
inline const std::string& scratch_file(const uint8_t* data, size_t size, const char* suffix = "") {
  static const std::string path = [&] {
    const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/tessera_fuzz_" + std::to_string(::getpid()) + suffix;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();  // the harness itself failed: not a finding about the parser
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace tessera::fuzz
