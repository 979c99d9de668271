#!/usr/bin/env python3
"""Where a C++ exception raised through tessera's bindings takes the interpreter down, and why: a
probe for a crash that one machine shows and another does not (the Python, the pybind11 that built
tessera._C, the compiler and the PyTorch beside it all vary).

It runs the failing statements, each in a fresh interpreter (a crash ends only that one), in the orders
that matter: tessera alone, PyTorch imported after tessera and used (the order of the pytest session:
conftest imports tessera, a test imports torch), and PyTorch imported first. Each child prints a marker
before every step, so the last marker names the step that crashed, and reports what decides whether
two pybind11 modules share state (Note [Shared pybind11 internals]) and which C++ runtime libraries the
process loaded. A child that dies by a signal is run again for a native backtrace: under gdb (or CUDA's
cuda-gdb) where there is one, and with a small SIGSEGV handler preloaded where there is none or it gave
no frames (Note [A backtrace without gdb]).

usage: PYTHONPATH=BUILD/python python3 scripts/py_exception_probe.py [--build BUILD] [--only VARIANT]
                                                                       [--no-gdb]
BUILD (default: the first PYTHONPATH entry's parent) is read for the compiler and the pybind11 that
built tessera._C. Exit status 1 when some variant crashed. pybind11_add_module strips a Release module,
so the native frames inside tessera._C get names from a RelWithDebInfo (or Debug) build only.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Each variant: the steps a child runs, in order. "sgd" is the statement of
# test_api_extras.py::test_add_param_group_and_extra_keys (a py::init factory that throws
# tessera::ValueError); "index" a plain bound function that throws tessera::IndexError.
VARIANTS = {
    "alone": ["import tessera", "sgd", "index"],
    "alone-index-first": ["import tessera", "index", "sgd"],
    "torch-after": ["import tessera", "import torch", "use torch", "sgd", "index"],
    "torch-after-index-first": ["import tessera", "import torch", "use torch", "index", "sgd"],
    "torch-before": ["import torch", "use torch", "import tessera", "sgd", "index"],
}
SKIPPED = 77  # a child's exit status when the variant needs torch and there is none
# Not run by default: a deliberate SIGSEGV, to see the backtrace machinery work (--only selftest-crash).
SELFTEST = {"selftest-crash": ["import tessera", "segfault"]}


# Note [Shared pybind11 internals]: pybind11 modules whose internals ID matches (internals version,
# platform ABI id: compiler family, C++ library, its ABI version) share one `internals` object, found
# under a key that spells that ID: in the interpreter's state dict (newer pybind11) or in builtins
# (older); the probe lists both. Shared internals mean one list of exception translators: a C++ exception
# thrown in tessera._C is offered to every translator any module registered, PyTorch's included, and
# those were compiled against another pybind11 release. Two keys after both imports: not shared.
def pybind11_internals_keys():
    import builtins
    import ctypes
    keys = [("builtins", k) for k in vars(builtins) if "pybind11" in str(k)]
    try:
        api = ctypes.pythonapi
        api.PyInterpreterState_Get.restype = ctypes.c_void_p
        api.PyInterpreterState_GetDict.restype = ctypes.py_object
        api.PyInterpreterState_GetDict.argtypes = [ctypes.c_void_p]
        d = api.PyInterpreterState_GetDict(api.PyInterpreterState_Get())
        keys += [("interpreter state dict", k) for k in d if "pybind11" in str(k)]
    except Exception as e:  # noqa: BLE001 (a report, not a check)
        keys.append(("interpreter state dict", f"<not readable: {e!r}>"))
    return keys


def loaded_libraries(patterns=("libstdc++", "libgcc_s", "libc.so", "libtorch_python", "_C.", "libtessera")):
    seen = []
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if path.startswith("/") and any(p in os.path.basename(path) for p in patterns) and path not in seen:
                seen.append(path)
    return seen


def child(variant):
    import faulthandler
    faulthandler.enable()
    mods = {}
    last_import = [s for s in {**VARIANTS, **SELFTEST}[variant] if s.startswith("import")][-1]

    def say(*a):
        print(*a, flush=True)

    for step in {**VARIANTS, **SELFTEST}[variant]:
        say(f"step: {step}")
        if step == "import tessera":
            import tessera
            mods["ts"] = tessera
            say(f"  tessera._C = {tessera._C.__file__}")
        elif step == "import torch":
            try:
                import torch
            except ImportError as e:
                say(f"  torch not importable ({e}): variant skipped")
                sys.exit(SKIPPED)
            mods["torch"] = torch
            say(f"  torch {torch.__version__} from {torch.__file__}")
        elif step == "use torch":
            torch = mods["torch"]
            say(f"  {(torch.ones(2) + 1).tolist()}")
        elif step == "sgd":
            ts = mods["ts"]
            try:
                ts.optim.SGD([{"params": [ts.randn(2, requires_grad=True)], "lr": -1.0}])
                say("  no exception (expected ValueError)")
            except ValueError as e:
                say(f"  raised {type(e).__module__}.{type(e).__name__}: {e}")
        elif step == "segfault":
            import ctypes
            ctypes.string_at(0)
        elif step == "index":
            ts = mods["ts"]
            try:
                ts.randn(2)[5]
                say("  no exception (expected IndexError)")
            except IndexError as e:
                say(f"  raised {type(e).__module__}.{type(e).__name__}: {e}")
        if step == last_import:
            for where, key in pybind11_internals_keys():
                say(f"  pybind11 internals ({where}): {key}")
            for path in loaded_libraries():
                say(f"  loaded: {path}")
    say("done")


# Note [A backtrace without gdb]: glibc's catchsegv and libSegFault.so are gone (glibc 2.35), so where
# gdb is missing the probe compiles a preloadable handler that prints backtrace_symbols_fd() for
# SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT and re-raises. faulthandler's own handler runs first
# (it prints the Python stack) and then re-raises into this one. Frames in hidden symbols (all of
# pybind11's) print as DSO(+offset); the probe hands those to addr2line, which names them from the
# symbol table where the module is not stripped.
SHIM = r"""
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
static void on_fatal(int sig) {
  void* frames[128];
  int n = backtrace(frames, 128);
  static const char msg[] = "\n--- native backtrace ---\n";
  (void)!write(2, msg, sizeof msg - 1);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}
__attribute__((constructor)) static void install(void) {
  void* f[1];
  backtrace(f, 1);  /* loads libgcc_s now rather than inside the handler */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal;
  sa.sa_flags = SA_NODEFER;
  int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; ++i) sigaction(sigs[i], &sa, 0);
}
"""


def run(cmd, env=None, timeout=600):
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return "timeout", out


def resolve_frames(text):
    """addr2line for the DSO(+0xOFFSET) frames of a backtrace_symbols_fd dump."""
    if not shutil.which("addr2line"):
        return ""
    out = []
    for dso, off in re.findall(r"^(/[^\s(]+)\(\+(0x[0-9a-f]+)\)", text, re.M):
        _, where = run(["addr2line", "-Cfpe", dso, off], timeout=60)
        out.append(f"  {os.path.basename(dso)}+{off}: {where.strip()}")
    return "\n".join(out)


def native_backtrace(variant, env, use_gdb):
    me = os.path.abspath(__file__)
    # cuda-gdb debugs host-only programs too, and is there where gdb is not (CUDA's toolkit).
    debugger = use_gdb and (shutil.which("gdb") or shutil.which("cuda-gdb")
                            or next((p for p in ("/usr/local/cuda/bin/cuda-gdb",) if os.access(p, os.X_OK)), None))
    if debugger:
        cmd = [debugger, "-q", "-batch", "-nx", "-iex", "set debuginfod enabled off", "-iex", "set auto-load off",
               "-ex", "run", "-ex", "bt 40", "-ex", "info sharedlibrary",
               "--args", sys.executable, me, "--child", variant]
        text = f"{os.path.basename(debugger)}:\n" + run(cmd, env=env)[1]
        if re.search(r"^#0 ", text, re.M):
            return text
        return text + "\n(no frames from the debugger)\n" + preloaded_backtrace(me, variant, env)
    return preloaded_backtrace(me, variant, env)


def preloaded_backtrace(me, variant, env):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        return "no gdb and no C compiler: only faulthandler's Python stack above"
    tmp = tempfile.mkdtemp(prefix="py_exception_probe")
    src, lib = os.path.join(tmp, "shim.c"), os.path.join(tmp, "shim.so")
    with open(src, "w") as f:
        f.write(SHIM)
    rc, text = run([cc, "-shared", "-fPIC", "-O1", "-o", lib, src], timeout=120)
    if rc != 0:
        return f"could not build the backtrace handler:\n{text}"
    env = dict(env, LD_PRELOAD=lib)
    rc, text = run([sys.executable, me, "--child", variant], env=env)
    frames = resolve_frames(text)
    shutil.rmtree(tmp, ignore_errors=True)
    return f"preloaded handler (exit {rc}):\n{text}\naddr2line:\n{frames}"


def pybind11_version(include_dir):
    h = os.path.join(include_dir, "pybind11", "detail", "common.h")
    if not os.path.exists(h):
        return None
    with open(h) as f:
        text = f.read()
    v = [re.search(rf"#define PYBIND11_VERSION_{k}\s+(\S+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    iv_h = os.path.join(include_dir, "pybind11", "detail", "internals.h")
    iv = None
    if os.path.exists(iv_h):
        with open(iv_h) as f:
            m = re.search(r"#\s*define PYBIND11_INTERNALS_VERSION\s+(\d+)", f.read())
            iv = m and m.group(1)
    return ".".join(m.group(1) if m else "?" for m in v) + (f" (internals version {iv})" if iv else "")


def report_build(build):
    print(f"python: {sys.version.split()[0]} at {sys.executable}")
    cache = os.path.join(build, "CMakeCache.txt") if build else ""
    if cache and os.path.exists(cache):
        with open(cache) as f:
            entries = dict(re.findall(r"^([A-Za-z0-9_]+):[A-Z]+=(.*)$", f.read(), re.M))
        for k in ("CMAKE_CXX_COMPILER", "CMAKE_BUILD_TYPE", "Python3_EXECUTABLE", "pybind11_DIR",
                  "pybind11_INCLUDE_DIR"):
            print(f"build {k}: {entries.get(k, '-')}")
        cxx = entries.get("CMAKE_CXX_COMPILER")
        if cxx and os.path.exists(cxx):
            print(f"compiler: {run([cxx, '--version'], timeout=30)[1].splitlines()[0]}")
        inc = entries.get("pybind11_INCLUDE_DIR")
        if not inc and entries.get("pybind11_DIR"):
            # pip's pybind11: <site>/pybind11/share/cmake/pybind11 -> <site>/pybind11/include
            inc = os.path.normpath(os.path.join(entries["pybind11_DIR"], "..", "..", "..", "include"))
        if inc:
            print(f"tessera's pybind11: {pybind11_version(inc)} ({inc})")
    else:
        print(f"no CMakeCache.txt under {build!r}: tessera's compiler and pybind11 not reported")
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec and spec.origin:
        inc = os.path.join(os.path.dirname(spec.origin), "include")
        print(f"torch's pybind11 headers: {pybind11_version(inc)} ({inc})")
    try:
        import tessera._C as c  # the import alone does not crash; a child does the rest
        print(f"tessera._C: {c.__file__}")
        if shutil.which("ldd"):
            print(run(["ldd", c.__file__], timeout=60)[1].rstrip())
    except Exception as e:  # noqa: BLE001
        print(f"tessera._C not importable: {e!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--build", default=None)
    ap.add_argument("--only", choices=sorted({**VARIANTS, **SELFTEST}), action="append")
    ap.add_argument("--no-gdb", action="store_true", help="the preloaded handler even where gdb exists")
    a = ap.parse_args()
    if a.child:
        child(a.child)
        return 0
    pypath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    build = a.build or (os.path.dirname(os.path.abspath(pypath[0])) if pypath else None)
    report_build(build)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    crashed, skipped = [], []
    for variant in a.only or VARIANTS:
        print(f"\n=== {variant}: {' -> '.join({**VARIANTS, **SELFTEST}[variant])}")
        rc, text = run([sys.executable, os.path.abspath(__file__), "--child", variant], env=env)
        print(text.rstrip())
        print(f"--- exit status {rc}" + (f" (signal {-rc})" if isinstance(rc, int) and rc < 0 else ""))
        if rc == SKIPPED:
            skipped.append(variant)
        elif rc != 0:
            crashed.append(variant)
            print(native_backtrace(variant, env, use_gdb=not a.no_gdb))
    print(f"\nsummary: {len(crashed)} of {len(a.only or VARIANTS)} variants failed: {', '.join(crashed) or '-'}; "
          f"skipped (no torch): {', '.join(skipped) or '-'}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
