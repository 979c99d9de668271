#!/usr/bin/env python3
"""No shared object of tessera exports a definition of the C++ runtime (Note [One C++ runtime] in the
top-level CMakeLists.txt).

A toolchain that links libstdc++ statically puts a copy of it inside libtessera.so and the Python
module; exported, its symbols interpose on the system's libstdc++ for every library loaded later, and
two runtimes then share objects (PyTorch imported after tessera aborted in std::locale's destructor).
This lists the strong function definitions (nm type T) in the dynamic symbol table that belong to the
runtime: the std, __gnu_cxx and __cxxabiv1 namespaces (less anything that names tessera, such as a
std::hash specialization of ours), the ABI's __cxa_ / __gxx_ / _Unwind_ functions and libstdc++'s
transactional-memory helpers. Inline and template code instantiated here is weak (W) and allowed, and so
is data such as type_info objects (see STRONG).

  check_exports.py LIB [LIB ...]    exit 1 when some LIB exports the runtime, naming a few symbols
  check_exports.py --selftest CXX   the check on two crafted libraries built with CXX -static-libstdc++,
                                    without and with -Wl,--exclude-libs,ALL: the first must be caught and
                                    the second pass (exit 77, skipped, where CXX cannot link it statically)
"""
import os
import shutil
import subprocess
import sys
import tempfile

RUNTIME_PREFIXES = ("std::", "__gnu_cxx::", "__cxxabiv1::")
RUNTIME_RAW = ("__cxa_", "__gxx_", "_Unwind_", "_txnal_", "__dynamic_cast")
# Code only: a shared object that uses std types may define their type_info objects as strong data
# (pybind11's typeid of a function type `std::string (int)`, shared_ptr's control-block bases), which is
# the ABI's normal way and harmless; a copy of the runtime always brings its functions.
STRONG = set("T")
SKIPPED = 77


def runtime_exports(lib):
    """[(nm type, demangled name)] of the runtime definitions LIB exports."""
    raw = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    dem = subprocess.run(["nm", "-DC", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    found = []
    for line_raw, line_dem in zip(raw.splitlines(), dem.splitlines()):
        parts, dparts = line_raw.split(None, 2), line_dem.split(None, 2)
        if len(parts) < 3 or len(dparts) < 3 or parts[1] not in STRONG:
            continue
        name, pretty = parts[2], dparts[2]
        if "tessera" in pretty:
            continue
        if name.startswith(RUNTIME_RAW) or pretty.startswith(RUNTIME_PREFIXES):
            found.append((parts[1], pretty))
    return found


def check(libs):
    bad = 0
    for lib in libs:
        found = runtime_exports(lib)
        if found:
            bad += 1
            print(f"FAIL {lib}: exports {len(found)} definitions of the C++ runtime, e.g.")
            for t, name in found[:8]:
                print(f"    {t} {name}")
            print("  (a statically linked libstdc++; link shared objects with -Wl,--exclude-libs,ALL)")
        else:
            print(f"ok   {lib}: no definition of the C++ runtime exported")
    return 1 if bad else 0


SOURCE = r"""
#include <sstream>
#include <string>
std::string crafted_to_string(int x) { std::ostringstream s; s << x; return s.str(); }
"""


def selftest(cxx):
    tmp = tempfile.mkdtemp(prefix="check_exports")
    try:
        src = os.path.join(tmp, "crafted.cpp")
        with open(src, "w") as f:
            f.write(SOURCE)
        libs = {}
        for name, extra in (("leaky", []), ("fixed", ["-Wl,--exclude-libs,ALL"])):
            out = os.path.join(tmp, f"lib{name}.so")
            p = subprocess.run([cxx, "-shared", "-fPIC", "-O1", "-static-libstdc++", src, "-o", out] + extra,
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(f"SKIPPED: {cxx} cannot link -static-libstdc++ here:\n{p.stderr[-400:]}")
                return SKIPPED
            libs[name] = out
        leaky, fixed = runtime_exports(libs["leaky"]), runtime_exports(libs["fixed"])
        ok = bool(leaky) and not fixed
        print(f"{'ok  ' if leaky else 'FAIL'} the library with a static libstdc++ exports {len(leaky)} runtime "
              "definitions and is caught")
        print(f"{'ok  ' if not fixed else 'FAIL'} with --exclude-libs,ALL it exports {len(fixed)}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    if len(argv) == 3 and argv[1] == "--selftest":
        return selftest(argv[2])
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__)
        return 2
    return check(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
