// The kernel cache on disk (Note [Kernel cache]): compiled kernels kept between processes.
//
// Note [Kernel cache]
// An entry is named by a key, the hash of everything that decides the binary: the kernel's source,
// the target (the CPU flags or the GPU architecture), the compiler's identity (its path and version
// line, or NVRTC's version) and tessera's version. A change of any of these is another key, so an
// entry is never stale. The folder is $TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else
// $HOME/.cache/tessera, with a `kernels/` folder inside.
// Each entry is two files: the binary (`<key>.so`, `<key>.cubin`) and `<key>.<ext>.sum`, which holds
// the binary's size and a 128-bit hash of its bytes. Both are written to a temporary name and renamed
// into place, the sum last. A reader checks the binary against its sum before using it: a truncated,
// corrupt or half-written entry (or one whose sum is missing) is a miss, removed and rebuilt; it is never
// loaded. Two processes writing one key at once are safe: the renames are atomic, and a binary whose
// sum came from the other writer fails the check and is rebuilt.
// The generated source is kept beside the binary (`<key>.cpp`, `<key>.cu`), so an error can name it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::compiler {

std::string kernel_cache_dir();  // created on first use
std::string cache_key(const std::vector<std::string>& parts);  // 32 hex digits
std::string cache_path(const std::string& key, const std::string& ext);  // "<dir>/<key><ext>"
std::string content_hash(const std::string& bytes);  // 32 hex digits

// The entry's binary, if it is present and intact; a damaged entry is removed and counted.
std::optional<std::string> cache_read(const std::string& key, const std::string& ext);
// Whether the entry's binary on disk is intact (for binaries loaded by path: dlopen).
bool cache_check(const std::string& key, const std::string& ext);
// Stores `bytes` as the entry (atomically, then its sum).
void cache_write(const std::string& key, const std::string& ext, const std::string& bytes);
// Writes a file atomically (temporary name, then rename); throws IOError naming the path.
void write_file_atomic(const std::string& path, const std::string& bytes);
std::optional<std::string> read_file(const std::string& path);

struct KernelCacheStats {
  int64_t compiled = 0;      // binaries built by a compiler in this process
  int64_t disk_hits = 0;     // entries read back from the disk
  int64_t memory_hits = 0;   // modules this process had already loaded
  int64_t rejected = 0;      // damaged entries found, removed and rebuilt
};
KernelCacheStats kernel_cache_stats();
void count_cache(int64_t KernelCacheStats::*field);
// Forgets the modules loaded by this process (their code stays mapped), so that the next lookup goes
// to the disk: for tests of the disk cache.
void forget_loaded_kernels();

}  // namespace tessera::compiler
