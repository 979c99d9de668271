// CUDA kernel of random_ (ops/random_kernel.h): out = from + (bits mod range) in any dtype, the CPU
// kernel's numbers bit for bit. 32 bits per element (four elements per Philox block) when the range
// fits in 2^32, else 64 bits from two words (range 0 meaning 2^64). The op has checked that every value
// of [from, from + range) is exact in out's dtype, so the conversion from int64 is exact.
// Its own file: nine dtypes x two word counts x three addressings of philox_fill_kernel.
#include "kernels/cuda/random_common.cuh"

namespace tessera::cuda {
namespace {

template <class T, int W>
struct RandomIntOp {
  int64_t from;
  uint64_t range;
  __device__ __forceinline__ T operator()(int64_t, const uint32_t* w) const {
    uint64_t off;
    if constexpr (W == 1) off = rnd::random_offset_1word(w[0], range);
    else off = rnd::random_offset_2words(w[0], w[1], range);
    return convert<T>(rnd::random_value(from, off));
  }
};

}  // namespace

void random_int_cuda(const Tensor& out, int64_t from, uint64_t range, PhiloxParams p) {
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const RandomLayout L = random_layout(out, "random_");
  cudaStream_t stream = stream_of(out);
  dispatch_device_dtype(out.dtype(), "random_", [&]<class T>(TypeTag<T>) {
    if (random_int_words(range) == 1) launch_philox_fill<T, 1>(L, p, RandomIntOp<T, 1>{from, range}, stream, "random_");
    else launch_philox_fill<T, 2>(L, p, RandomIntOp<T, 2>{from, range}, stream, "random_");
  });
}

}  // namespace tessera::cuda
