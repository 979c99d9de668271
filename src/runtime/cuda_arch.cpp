// Architecture compatibility rules (cuda_arch.h).
#include "runtime/cuda_arch.h"

#include <algorithm>
#include <cctype>

namespace tessera::cuda_arch {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool runs(const Arch& a, int gpu, bool as_ptx) {
  const int major = a.number / 10, gpu_major = gpu / 10;
  if (a.suffix == 'a') return a.number == gpu;
  if (a.suffix == 'f') return major == gpu_major && a.number <= gpu;
  if (as_ptx) return a.number <= gpu;
  return major == gpu_major && a.number <= gpu;
}

}  // namespace

ArchList parse(std::string_view text) {
  ArchList out;
  text = trim(text);
  if (text.empty()) {
    out.unchecked = true;
    return out;
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(",;", start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view tok = trim(text.substr(start, end - start));
    start = end + 1;
    if (tok.empty()) continue;
    if (tok == "native" || tok == "all" || tok == "all-major") {
      out.unchecked = true;
      continue;
    }
    Arch a;
    size_t i = 0;
    while (i < tok.size() && std::isdigit(static_cast<unsigned char>(tok[i]))) a.number = a.number * 10 + (tok[i++] - '0');
    if (i == 0) {
      out.unchecked = true;
      continue;
    }
    if (i < tok.size() && (tok[i] == 'a' || tok[i] == 'f')) a.suffix = tok[i++];
    const std::string_view kind = tok.substr(i);
    if (kind.empty()) {
      a.sass = a.ptx = true;
    } else if (kind == "-real") {
      a.sass = true;
    } else if (kind == "-virtual") {
      a.ptx = true;
    } else {
      out.unchecked = true;
      continue;
    }
    out.archs.push_back(a);
  }
  if (out.archs.empty()) out.unchecked = true;
  return out;
}

bool supports(const ArchList& list, int major, int minor) {
  if (list.unchecked) return true;
  const int gpu = major * 10 + minor;
  return std::any_of(list.archs.begin(), list.archs.end(),
                     [&](const Arch& a) { return (a.sass && runs(a, gpu, false)) || (a.ptx && runs(a, gpu, true)); });
}

std::string describe(const ArchList& list) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  for (const Arch& a : list.archs) {
    std::string n = std::to_string(a.number) + (a.suffix ? std::string(1, a.suffix) : "");
    if (a.sass) add("sm_" + n);
    if (a.ptx) add("compute_" + n + " (PTX)");
  }
  if (list.unchecked) add(list.archs.empty() ? "the architectures chosen at build time" : "others chosen at build time");
  return out;
}

std::vector<int> sass_numbers(const ArchList& list) {
  std::vector<int> out;
  for (const Arch& a : list.archs)
    if (a.sass && std::find(out.begin(), out.end(), a.number) == out.end()) out.push_back(a.number);
  return out;
}

std::vector<int> ptx_numbers(const ArchList& list) {
  std::vector<int> out;
  for (const Arch& a : list.archs)
    if (a.ptx && std::find(out.begin(), out.end(), a.number) == out.end()) out.push_back(a.number);
  return out;
}

}  // namespace tessera::cuda_arch
