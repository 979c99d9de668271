// Chunked multi-tensor apply: one kernel launch updates many tensors (PyTorch's multi_tensor_apply).
//
// A launch's argument struct (MtaArgs) holds, for up to kMaxTensors tensors, Depth data pointers each
// (e.g. param, grad, state...), the element count, a few per-tensor float64 scalars and a flag, plus a
// map from each block of the grid to (tensor slot, chunk). Every block updates one chunk of
// kMtaChunk elements of one tensor. The host walks the tensor list, appending a slot per tensor and a
// block per chunk; when the blocks or the slots run out it launches and starts a new struct -- a
// tensor whose chunks are not all placed yet moves to slot 0 of the next struct. Empty tensors take
// no slot. The struct stays below 4 KiB, the kernel-parameter limit of every CUDA version.
//
// Invariants for the kernels: blockIdx.x < the launch's block count; block_tensor[blockIdx.x] is a
// filled slot; its chunk starts below that tensor's numel, so a chunk holds 1..kMtaChunk elements.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "tensor/dispatch_dtype.h"
#include "tessera/error.h"

namespace tessera::cuda {

// Element i of a tensor in its compute type (float for the 16-bit types), and back rounded to nearest
// even: the loads and stores of every multi-tensor kernel.
template <class T>
__device__ __forceinline__ dacc_t<T> mta_load(const T* p, int i) {
  return convert<dacc_t<T>>(p[i]);
}
template <class T>
__device__ __forceinline__ void mta_store(T* p, int i, dacc_t<T> v) {
  p[i] = convert<T>(v);
}

// The per-tensor flag of a list that mixes floating dtypes: a block works on one chunk of one tensor,
// so its branch on the flag is uniform.
enum MtaFloat : uint8_t { kMtaF32 = 0, kMtaF64 = 1, kMtaF16 = 2, kMtaBF16 = 3 };
inline uint8_t mta_float_flag(DType d, const char* op) {
  switch (d) {
    case DType::Float32: return kMtaF32;
    case DType::Float64: return kMtaF64;
    case DType::Float16: return kMtaF16;
    case DType::BFloat16: return kMtaBF16;
    default: throw_unsupported_dtype(op, d);
  }
}

inline constexpr int kMtaChunk = 65536;    // elements per block
inline constexpr int kMtaMaxBlocks = 320;  // blocks per launch
inline constexpr int kMtaThreads = 512;
inline constexpr int kMtaIlp = 4;  // elements in flight per thread (loads issued before the math)

// Slots per struct for `depth` pointers and `nscalars` scalars per tensor, within the 4 KiB budget
// (the per-op hyperparameter struct, passed next to it, has the rest).
constexpr int mta_max_tensors(int depth, int nscalars) {
  return (3600 - kMtaMaxBlocks * 5) / (depth * 8 + 8 + nscalars * 8 + 1);
}

template <int Depth, int NScalars>
struct MtaArgs {
  static constexpr int kDepth = Depth;
  static constexpr int kNScalars = NScalars;
  static constexpr int kMaxTensors = mta_max_tensors(Depth, NScalars);
  void* ptrs[Depth][kMaxTensors];
  int64_t numel[kMaxTensors];
  double scalars[NScalars][kMaxTensors];
  uint8_t flag[kMaxTensors];
  uint8_t block_tensor[kMtaMaxBlocks];
  int32_t block_chunk[kMtaMaxBlocks];
};

// One tensor of the list, as the host driver takes it.
template <int Depth, int NScalars>
struct MtaTensor {
  void* ptrs[Depth];
  int64_t numel;
  double scalars[NScalars];
  uint8_t flag;
};

// Calls launch(args, nblocks) once per filled struct, in list order.
template <int Depth, int NScalars, class Launch>
void multi_tensor_apply(const std::vector<MtaTensor<Depth, NScalars>>& tensors, Launch&& launch) {
  using Args = MtaArgs<Depth, NScalars>;
  static_assert(sizeof(Args) <= 3800, "multi-tensor apply arguments must stay below the 4 KiB parameter limit");
  static_assert(Args::kMaxTensors >= 1 && Args::kMaxTensors <= 255);
  Args args{};
  auto put = [&args](const MtaTensor<Depth, NScalars>& t, int slot) {
    for (int d = 0; d < Depth; ++d) args.ptrs[d][slot] = t.ptrs[d];
    args.numel[slot] = t.numel;
    for (int s = 0; s < NScalars; ++s) args.scalars[s][slot] = t.scalars[s];
    args.flag[slot] = t.flag;
  };
  int slots = 0, blocks = 0;
  for (const auto& t : tensors) {
    if (t.numel == 0) continue;
    const int64_t chunks = (t.numel + kMtaChunk - 1) / kMtaChunk;
    TS_CHECK(chunks <= INT32_MAX, ValueError, "multi-tensor apply: a tensor of ", t.numel, " elements is too large");
    put(t, slots++);
    for (int64_t c = 0; c < chunks; ++c) {
      args.block_tensor[blocks] = static_cast<uint8_t>(slots - 1);
      args.block_chunk[blocks] = static_cast<int32_t>(c);
      ++blocks;
      const bool last_chunk = c == chunks - 1;
      if (blocks == kMtaMaxBlocks || (slots == Args::kMaxTensors && last_chunk)) {
        launch(static_cast<const Args&>(args), blocks);
        blocks = 0;
        if (last_chunk) {
          slots = 0;
        } else {  // the tensor continues in the next launch
          put(t, 0);
          slots = 1;
        }
      }
    }
  }
  if (blocks > 0) launch(static_cast<const Args&>(args), blocks);
}

// Elements base + k * blockDim.x + threadIdx.x (k < kMtaIlp, coalesced) of a chunk of len elements
// in the compute type, 0 past the chunk: all loads issued before any math.
template <class T, int N>
__device__ __forceinline__ void mta_load_ilp(const T* p, int base, int len, dacc_t<T> (&v)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int i = base + k * blockDim.x + threadIdx.x;
    v[k] = i < len ? mta_load(p, i) : dacc_t<T>(0);
  }
}

// The chunk of the calling block: its tensor slot, first element and length (1..kMtaChunk).
struct MtaChunk {
  int slot;
  int64_t start;
  int len;
};
template <class Args>
__device__ __forceinline__ MtaChunk mta_chunk(const Args& args) {
  const int slot = args.block_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(args.block_chunk[blockIdx.x]) * kMtaChunk;
  const int64_t rest = args.numel[slot] - start;
  return {slot, start, static_cast<int>(rest < kMtaChunk ? rest : kMtaChunk)};
}

}  // namespace tessera::cuda
