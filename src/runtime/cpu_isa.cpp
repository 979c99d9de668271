// CPU detection (tessera/cpu.h, Note [CPU ISA dispatch] in runtime/cpu_isa.h): cpuid leaves 1, 7 and
// 0x80000002-4, XCR0 through xgetbv, and the cap from TESSERA_CPU_ISA.
#include "runtime/cpu_isa.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TS_X86 1
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tessera::cpu {
namespace {

#if defined(TS_X86)
struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(uint32_t leaf, uint32_t sub = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}

// XCR0: which register states the OS saves. Only read when cpuid says OSXSAVE (else xgetbv faults).
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

bool bit(uint32_t r, int i) { return (r >> i) & 1u; }

// Linux hands out AMX's tile state only to a process that asks for it (arch_prctl ARCH_REQ_XCOMP_PERM);
// a library using AMX (oneDNN) asks itself, so here AMX counts as usable when the kernel allows it.
bool amx_permitted() {
#if defined(__linux__) && defined(__x86_64__) && defined(SYS_arch_prctl)
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuInfo detect() {
  CpuInfo info;
  const Regs v = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &v.b, 4);
  std::memcpy(vendor + 4, &v.d, 4);
  std::memcpy(vendor + 8, &v.c, 4);
  info.vendor = vendor;
  const uint32_t max_leaf = v.a;
  const Regs l1 = max_leaf >= 1 ? cpuid(1) : Regs{};
  const Regs l7 = max_leaf >= 7 ? cpuid(7, 0) : Regs{};
  const Regs l7s1 = max_leaf >= 7 && l7.a >= 1 ? cpuid(7, 1) : Regs{};
  const Regs e1 = cpuid(0x80000000).a >= 0x80000001 ? cpuid(0x80000001) : Regs{};
  if (cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    std::string s = brand;
    s.erase(0, s.find_first_not_of(' '));
    s.erase(s.find_last_not_of(' ') + 1);
    info.name = s;
  }
  if (info.name.empty()) info.name = info.vendor.empty() ? "unknown x86-64 CPU" : info.vendor;

  const uint64_t x = bit(l1.c, 27) ? xcr0() : 0;  // OSXSAVE
  const bool os_avx = (x & 0x6) == 0x6;            // XMM and YMM state
  const bool os_avx512 = os_avx && (x & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (x & 0x60000) == 0x60000;     // XTILECFG, XTILEDATA

  struct Feature {
    const char* name;
    bool cpu;
    bool os;
  };
  const Feature table[] = {
      {"sse3", bit(l1.c, 0), true},          {"ssse3", bit(l1.c, 9), true},
      {"sse4_1", bit(l1.c, 19), true},       {"sse4_2", bit(l1.c, 20), true},
      {"popcnt", bit(l1.c, 23), true},       {"cx16", bit(l1.c, 13), true},
      {"lahf_lm", bit(e1.c, 0), true},       {"avx", bit(l1.c, 28), os_avx},
      {"f16c", bit(l1.c, 29), os_avx},       {"fma", bit(l1.c, 12), os_avx},
      {"movbe", bit(l1.c, 22), true},        {"abm", bit(e1.c, 5), true},
      {"bmi1", bit(l7.b, 3), true},          {"avx2", bit(l7.b, 5), os_avx},
      {"bmi2", bit(l7.b, 8), true},          {"avx_vnni", bit(l7s1.a, 4), os_avx},
      {"avx512f", bit(l7.b, 16), os_avx512}, {"avx512dq", bit(l7.b, 17), os_avx512},
      {"avx512cd", bit(l7.b, 28), os_avx512}, {"avx512bw", bit(l7.b, 30), os_avx512},
      {"avx512vl", bit(l7.b, 31), os_avx512}, {"avx512_vnni", bit(l7.c, 11), os_avx512},
      {"avx512_bf16", bit(l7s1.a, 5), os_avx512}, {"avx512_fp16", bit(l7.d, 23), os_avx512},
      {"amx_tile", bit(l7.d, 24), os_amx},   {"amx_bf16", bit(l7.d, 22), os_amx},
      {"amx_int8", bit(l7.d, 25), os_amx},
  };
  const bool amx_ok = bit(l7.d, 24) && os_amx && amx_permitted();
  for (const Feature& f : table) {
    const bool amx = std::strncmp(f.name, "amx_", 4) == 0;
    if (f.cpu && f.os && (!amx || amx_ok)) info.features.push_back(f.name);
  }
  auto has = [&](const char* n) {
    return std::find(info.features.begin(), info.features.end(), n) != info.features.end();
  };
  // The levels are x86-64-v3 and x86-64-v4 of the psABI, the -march values their kernels are built with.
  const bool v2 = has("sse3") && has("ssse3") && has("sse4_1") && has("sse4_2") && has("popcnt") && has("cx16");
  const bool v3 = v2 && has("avx") && has("avx2") && has("fma") && has("f16c") && has("bmi1") && has("bmi2") &&
                  has("movbe") && has("abm");
  const bool v4 = v3 && has("avx512f") && has("avx512dq") && has("avx512cd") && has("avx512bw") && has("avx512vl");
  info.supported = v4 ? IsaLevel::avx512 : v3 ? IsaLevel::avx2 : IsaLevel::baseline;
  return info;
}
#else
CpuInfo detect() {
  CpuInfo info;
  info.name = "unknown CPU";
  return info;
}
#endif

}  // namespace

const char* isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::baseline: return "baseline";
    case IsaLevel::avx2: return "avx2";
    case IsaLevel::avx512: return "avx512";
  }
  return "baseline";
}

std::optional<IsaLevel> parse_isa_level(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (IsaLevel v : {IsaLevel::baseline, IsaLevel::avx2, IsaLevel::avx512})
    if (l == isa_level_name(v)) return v;
  return std::nullopt;
}

IsaLevel choose_isa_level(IsaLevel supported, const std::string& cap, std::string* warning) {
  if (cap.empty()) return supported;
  const std::optional<IsaLevel> c = parse_isa_level(cap);
  if (!c) {
    if (warning)
      *warning = "TESSERA_CPU_ISA: expected one of baseline, avx2, avx512, got '" + cap + "'; using " +
                 isa_level_name(supported);
    return supported;
  }
  return std::min(*c, supported);
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = [] {
    CpuInfo i = detect();
    const char* cap = std::getenv("TESSERA_CPU_ISA");
    i.cap = cap ? cap : "";
    std::string warning;
    i.level = choose_isa_level(i.supported, i.cap, &warning);
    if (!warning.empty()) std::fprintf(stderr, "tessera: %s\n", warning.c_str());
    return i;
  }();
  return info;
}

bool has_feature(const std::string& name) {
  const auto& f = cpu_info().features;
  return std::find(f.begin(), f.end(), name) != f.end();
}

}  // namespace tessera::cpu
