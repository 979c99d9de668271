// The namespace of one instruction-set level's build of the dispatched CPU kernels.
//
// Note [ISA namespaces]: every file of TESSERA_CPU_ISA_SOURCES (src/CMakeLists.txt) is compiled
// once per level (Note [CPU ISA dispatch] in runtime/cpu_isa.h) with -DTS_CPU_ISA=<level> and opens
// `namespace tessera::cpu::inline TS_CPU_ISA`, so each build's functions, templates and OpenMP
// outlined bodies are distinct symbols (tessera::cpu::avx2::register_elementwise(), ...) while code
// inside still names them as tessera::cpu::x. The headers of inline helpers they include (convert.h,
// vec_math.h, stream_store.h, reduce_common.h, blas.h) open the same namespace through
// TS_CPU_ISA_BEGIN, else an AVX2 copy of an inline function that GCC did not inline could be the one
// the linker keeps for a baseline caller.
//
// Inline functions of the layers below (Tensor's accessors, the elementwise iterator, the standard
// library's templates) are still emitted by each level's objects as weak (COMDAT) copies of one
// symbol, and the linker keeps the first one it meets: the baseline objects come first on the link
// line (the layers below, then the baseline level, then avx2, then avx512), so the copy kept is
// always compiled for plain x86-64. tests/kernels/test_cpu_isa_objects.py disassembles the library
// and fails on any AVX instruction outside the avx2 and avx512 namespaces.
#pragma once

// For headers that dispatched and undispatched files both include: the level's namespace inside
// tessera::cpu in the former, nothing in the latter.
#if defined(TS_CPU_ISA)
#define TS_CPU_ISA_BEGIN inline namespace TS_CPU_ISA {
#define TS_CPU_ISA_END }
#else
#define TS_CPU_ISA_BEGIN
#define TS_CPU_ISA_END
#endif
