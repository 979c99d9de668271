// Building a graph's kernels and calling one (compiled_kernels.h).
//
// Note [Compiler debug output]
// TESSERA_COMPILE_DEBUG_DIR=<folder> makes every graph the codegen backend plans write, into
// <folder>/<n>-<label>/ (n counts the graphs of the process):
//   captured.txt the graph as captured (ir_text.cpp), after dead-code elimination
//   graph.txt    the graph after the passes (passes.h, decompose.h): the one the groups are of
//   fusion.txt   the fusion groups (fusion_text: members, inputs, literals, outputs, bytes saved)
//   kernels.cpp  the CPU translation unit, and kernel_<k>.cu for each CUDA kernel
// Each file is plain text a person reads; the sources compile as they are.
#include "compile/codegen/compiled_kernels.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>

#include "compile/codegen/cpu_library.h"
#include "compile/codegen/cuda_library.h"
#include "compile/codegen/kernel_cache.h"

namespace tessera::compiler {

std::string debug_folder(const std::string& label) {
  const char* d = std::getenv("TESSERA_COMPILE_DEBUG_DIR");
  if (!d || !*d) return "";
  static std::atomic<int> counter{0};
  const std::string dir = std::string(d) + "/" + std::to_string(counter++) + "-" + label;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TS_CHECK(!ec, IOError, "compile: cannot create the debug folder ", dir, ": ", ec.message());
  return dir;
}

std::vector<CompiledKernel> compile_groups(const Graph& g, const FusionPlan& plan, const std::string& label,
                                           const Graph* captured) {
  std::vector<CompiledKernel> out(plan.groups.size());
  const std::string dbg = debug_folder(label);
  if (!dbg.empty()) {
    if (captured) write_file_atomic(dbg + "/captured.txt", captured->to_text());
    write_file_atomic(dbg + "/graph.txt", g.to_text());
    write_file_atomic(dbg + "/fusion.txt", fusion_text(g, plan));
  }
  std::vector<const KernelSpec*> cpu;
  std::vector<size_t> cuda;
  for (size_t k = 0; k < plan.groups.size(); ++k) {
    const FusionGroup& grp = plan.groups[k];
    const KernelTarget t = grp.device.is_cuda() ? KernelTarget::Cuda : KernelTarget::Cpu;
    out[k].spec = make_kernel_spec(g, grp, t, static_cast<int>(k));
    if (t == KernelTarget::Cpu) cpu.push_back(&out[k].spec);
    else {
      out[k].device_index = grp.device.index() < 0 ? 0 : grp.device.index();
      cuda.push_back(k);
    }
  }
  if (!cpu.empty()) {
    const std::string tu = translation_unit(KernelTarget::Cpu, cpu);
    if (!dbg.empty()) write_file_atomic(dbg + "/kernels.cpp", tu);
    std::shared_ptr<const CpuLibrary> lib = build_cpu_library(tu);
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k].spec.target == KernelTarget::Cpu) {
        out[k].fn = lib->symbol(out[k].spec.name);
        out[k].library = lib;
      }
  }
  if (!cuda.empty()) {
    std::vector<std::future<void>> jobs;
    for (size_t k : cuda) {
      const std::string tu = translation_unit(KernelTarget::Cuda, {&out[k].spec});
      if (!dbg.empty()) write_file_atomic(dbg + "/kernel_" + std::to_string(k) + ".cu", tu);
      jobs.push_back(std::async(std::launch::async, [&out, k, tu] {
        CompiledKernel& ck = out[k];
        std::shared_ptr<const CudaLibrary> lib =
            build_cuda_library(tu, cuda_arch_of(ck.device_index), ck.device_index);
        ck.fn = cuda_kernel(*lib, ck.spec.name);
        ck.library = lib;
      }));
    }
    for (auto& j : jobs) j.get();  // rethrows the first failure
  }
  return out;
}

void run_kernel(const CompiledKernel& k, const std::vector<Tensor>& operands) {
  const std::vector<KernelOperand>& ops = k.spec.operands;
  TS_CHECK(operands.size() == ops.size(), ValueError, "compile: kernel ", k.spec.name, " takes ", ops.size(),
           " operands, got ", operands.size());
  std::vector<void*> ptrs(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Tensor& t = operands[i];
    const TensorMeta& m = ops[i].meta;
    TS_CHECK(t.defined() && t.sizes() == m.sizes && t.strides() == m.strides && t.dtype() == m.dtype &&
                 t.device() == m.device,
             ValueError, "compile: kernel ", k.spec.name, " was generated for operand ", i, " as ", to_string(m),
             ", got ", t.defined() ? to_string(TensorMeta::of(t)) : std::string("an undefined tensor"));
    ptrs[i] = t.data_ptr();
  }
  if (k.spec.target == KernelTarget::Cpu) {
    reinterpret_cast<void (*)(void* const*)>(k.fn)(ptrs.data());
  } else {
    std::vector<void*> params(ptrs.size());
    for (size_t i = 0; i < ptrs.size(); ++i) params[i] = &ptrs[i];
    if (k.spec.reduction())
      launch_cuda_rows(k.fn, k.spec.rows, k.spec.rows_per_block, k.spec.row_threads, params.data(), k.device_index,
                       k.spec.name.c_str());
    else
      launch_cuda_kernel(k.fn, k.spec.numel / k.spec.vector_width, params.data(), k.device_index, k.spec.name.c_str(),
                         k.spec.thread_period);
  }
}

void forget_loaded_kernels() {
  forget_loaded_cpu_libraries();
  forget_loaded_cuda_libraries();
}

}  // namespace tessera::compiler
