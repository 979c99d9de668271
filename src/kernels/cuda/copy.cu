// CUDA copies and fills: copy_ within one GPU (any strides, a broadcast source, dtype conversion),
// between a GPU and the CPU, and between two GPUs; fill_ for every dtype.
//
// Within a GPU: a dense copy of one dtype between equal layouts is one cudaMemcpyAsync; everything
// else runs through launch_elementwise (Note [GPU elementwise paths]): same-dtype copies move the
// element's bits (one functor per element size; 16-, 8- or 4-byte units where the layouts allow, Note
// [Wide strided copies]), converting copies convert as the CPU does (ew_cast). A destination that partly overlaps its source is written from a temporary copy.
//
// Note [Copies with the host]: a broadcast source first drops its stride-0 dims (each element
// crosses the bus once; the receiving side broadcasts it again). Data crosses the bus contiguous:
// a non-contiguous or dtype-changing copy converts and packs on the GPU (device to host) or packs
// on the CPU and converts on the GPU (host to device), and scatters into a non-contiguous host
// destination with the CPU copy kernel. All on the GPU's current stream.
// - Device to host returns once the data is in host memory (the stream is synchronized), except
//   with non_blocking into page-locked memory, which returns at once: the caller synchronizes
//   before reading, and record_host_use keeps a pinned block from being reused before the copy.
// - Host to device from pageable memory returns once CUDA has staged the source (cudaMemcpyAsync
//   copies pageable memory before it returns), so the host memory may be reused at once and no
//   synchronization is needed. From page-locked memory the copy is asynchronous: non_blocking
//   returns at once (record_host_use as above); otherwise the stream is synchronized, so that the
//   caller may overwrite the host memory.
// Page-locked memory is recognized by cudaPointerGetAttributes, whichever allocator made it.
//
// Between GPUs: cudaMemcpyPeerAsync on the source device's current stream, after the destination's
// current stream has reached the copy (an event) and before its later work (another event), so the
// copy is ordered with both devices' work; packing and conversion run on the source device,
// scattering into a non-contiguous destination on the destination device.
#include <cstring>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise.cuh"
#include "ops/copy_kernel.h"
#include "runtime/cuda/graph_capture.h"
#include "tensor/tensor_impl.h"
#include "runtime/cuda/deferred_check.h"

namespace tessera::cuda {
namespace {

template <class U>
struct IdentityOp {
  __device__ U operator()(U x) const { return x; }
};
template <class D, class S>
struct ConvertOp {
  __device__ D operator()(S x) const { return ew_cast<D>(x); }
};
template <class U>
struct FillOp {
  U value;
  __device__ U operator()() const { return value; }
};

// f(TypeTag<U>) with U the unsigned integer of `size` bytes: copies of one dtype move bits.
template <class F>
void dispatch_bits(size_t size, F&& f) {
  switch (size) {
    case 1: f(TypeTag<uint8_t>{}); return;
    case 2: f(TypeTag<uint16_t>{}); return;
    case 4: f(TypeTag<uint32_t>{}); return;
    case 8: f(TypeTag<uint64_t>{}); return;
    default: TS_THROW(DTypeError, "copy_: no element type of ", size, " bytes");
  }
}

// [first byte, one past the last byte) that a tensor's elements occupy.
std::pair<const char*, const char*> byte_range(const Tensor& t) {
  const char* lo = static_cast<const char*>(t.data_ptr());
  return {lo, lo + storage_extent(t.sizes(), t.strides()) * static_cast<int64_t>(t.element_size())};
}

// True when dst and src share memory in a way an elementwise pass could read after writing: any
// overlap except the exact aliasing of in-place ops (same first element, strides and element size).
bool partly_overlaps(const Tensor& dst, const Tensor& src) {
  if (!dst.is_alias_of(src)) return false;
  if (dst.data_ptr() == src.data_ptr() && dst.strides() == src.strides() && dst.element_size() == src.element_size())
    return false;
  const auto [dlo, dhi] = byte_range(dst);
  const auto [slo, shi] = byte_range(src);
  return dlo < shi && slo < dhi;
}

// Note [Wide strided copies]: a same-dtype copy whose innermost dim is contiguous on both sides (a
// transpose of outer dims, as attention's (B, H, T, D) <-> (B, T, H, D), a narrow, a cat) moves W-byte
// units instead of elements when the row of that dim, every other stride and both bases are whole
// multiples of W (16, else 8, else 4 bytes): the strided kernel's offset arithmetic and memory
// transactions then run once per unit. Returns false where no width above the element's fits.
template <class W>
bool copy_wide_as(const ElementwiseIter& it, int64_t es, cudaStream_t stream) {
  constexpr int64_t kW = sizeof(W);
  if (kW <= es || it.ndim() < 2) return false;  // one dim: dense (the contiguous path) or strided
  EwGeometry<2> g(it);
  for (int t = 0; t < 2; ++t) {
    if (g.strides[0][t] != es || reinterpret_cast<uintptr_t>(g.data[t]) % kW != 0) return false;
    for (int d = 1; d < g.ndim; ++d)
      if (g.strides[d][t] % kW != 0) return false;
  }
  if ((g.shape[0] * es) % kW != 0) return false;
  g.shape[0] = g.shape[0] * es / kW;
  g.strides[0][0] = g.strides[0][1] = kW;
  g.n = g.n * es / kW;
  launch_strided<kEwHotUnroll, W, W>(g, IdentityOp<W>{}, stream, "copy_");
  return true;
}

bool copy_wide(const ElementwiseIter& it, int64_t es, cudaStream_t stream) {
  return copy_wide_as<uint4>(it, es, stream) || copy_wide_as<uint2>(it, es, stream) ||
         copy_wide_as<uint32_t>(it, es, stream);
}

// dst = src on one GPU (same device; src already broadcast to dst's shape).
void copy_on_device(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  CurrentDevice guard(dst.device().index());
  const cudaStream_t stream = stream_of(dst);
  if (partly_overlaps(dst, src)) {
    Tensor tmp = make_empty(src.sizes(), src.dtype(), src.device());
    copy_on_device(tmp, src);
    copy_on_device(dst, tmp);
    return;
  }
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes()) {
    if (dst.data_ptr() != src.data_ptr())
      TS_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const ElementwiseIter it(dst, {&src});
  if (dst.dtype() == src.dtype()) {
    if (copy_wide(it, static_cast<int64_t>(dst.element_size()), stream)) return;
    dispatch_bits(dst.element_size(), [&]<class U>(TypeTag<U>) {
      launch_elementwise<kEwHotUnroll, U, U>(it, IdentityOp<U>{}, stream, "copy_");
    });
    return;
  }
  dispatch_device_dtype(dst.dtype(), "copy_", [&]<class D>(TypeTag<D>) {
    dispatch_device_dtype(src.dtype(), "copy_", [&]<class S>(TypeTag<S>) {
      if constexpr (!std::is_same_v<D, S>) launch_elementwise<2, D, S>(it, ConvertOp<D, S>{}, stream, "copy_");
    });
  });
}

// ---- copies with the host and between GPUs (Note [Copies with the host]) ----------------------------------
// `t` as a view of `sizes` (t broadcasts to it: dims aligned from the right, stride 0 where t has size 1
// or no dim). Copy_ hands over sources already expanded; this keeps the slot safe for other callers.
Tensor expand_view(const Tensor& t, const Shape& sizes) {
  if (t.sizes() == sizes) return t;
  const int64_t nd = static_cast<int64_t>(sizes.size()), td = t.dim();
  TS_CHECK(td <= nd, ShapeError, "copy_: source of shape ", t.sizes(), " does not broadcast to ", sizes);
  Shape strides(nd, 0);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t k = d - (nd - td);
    if (k < 0) continue;
    TS_CHECK(t.sizes()[k] == sizes[d] || t.sizes()[k] == 1, ShapeError, "copy_: source of shape ", t.sizes(),
             " does not broadcast to ", sizes);
    strides[d] = t.sizes()[k] == sizes[d] ? t.strides()[k] : 0;
  }
  return make_view(t, sizes, std::move(strides), t.storage_offset());
}

// `t` without its broadcast dims: stride-0 dims of size > 1 become size 1 (a view of the same memory).
Tensor drop_broadcast(const Tensor& t) {
  Shape sizes = t.sizes();
  bool changed = false;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (t.strides()[d] == 0 && sizes[d] > 1) {
      sizes[d] = 1;
      changed = true;
    }
  return changed ? make_view(t, std::move(sizes), t.strides(), t.storage_offset()) : t;
}

// `t` (same dims as `sizes`, each 1 or equal) broadcast back to `sizes` with stride 0.
Tensor broadcast_to(const Tensor& t, const Shape& sizes) {
  if (t.sizes() == sizes) return t;
  Shape strides = t.strides();
  for (size_t d = 0; d < sizes.size(); ++d)
    if (t.sizes()[d] != sizes[d]) strides[d] = 0;
  return make_view(t, sizes, std::move(strides), t.storage_offset());
}

bool is_page_locked(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // not a pointer CUDA knows: pageable
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

// The start of the host block that `t` lives in, for record_host_use.
const void* host_block(const Tensor& t) { return t.impl()->storage()->data(); }

void copy_host_to_device(const Tensor& dst, const Tensor& src, bool non_blocking) {
  CurrentDevice guard(dst.device().index());
  const cudaStream_t stream = stream_of(dst);
  Tensor host = drop_broadcast(src);
  const bool user_memory = host.is_contiguous();
  if (!user_memory) {  // pack on the CPU into pageable memory (which CUDA stages before returning)
    Tensor packed = make_empty(host.sizes(), host.dtype(), kCPU);
    copy_kernel(kCPU, packed, host);
    host = packed;
  }
  // A capture takes only asynchronous copies from page-locked memory (read again at each replay).
  if (!(user_memory && non_blocking && is_page_locked(host.data_ptr()))) check_not_capturing("copy_", stream);
  const bool direct = dst.is_contiguous() && dst.dtype() == host.dtype() && host.sizes() == dst.sizes();
  const Tensor landing = direct ? dst : make_empty(host.sizes(), host.dtype(), dst.device());
  TS_CUDA_CHECK(cudaMemcpyAsync(landing.data_ptr(), host.data_ptr(), host.nbytes(), cudaMemcpyHostToDevice, stream));
  if (!direct) copy_on_device(dst, broadcast_to(landing, dst.sizes()));
  if (user_memory && is_page_locked(host.data_ptr())) {
    if (non_blocking) record_host_use(host_block(host), stream);
    else TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

void copy_device_to_host(const Tensor& dst, const Tensor& src, bool non_blocking) {
  CurrentDevice guard(src.device().index());
  const cudaStream_t stream = stream_of(src);
  Tensor dev = drop_broadcast(src);
  if (!dev.is_contiguous() || dev.dtype() != dst.dtype()) {  // pack and convert on the GPU
    Tensor packed = make_empty(dev.sizes(), dst.dtype(), src.device());
    copy_on_device(packed, dev);
    dev = packed;
  }
  const bool direct = dst.is_contiguous() && dev.sizes() == dst.sizes();
  if (!(direct && non_blocking && is_page_locked(dst.data_ptr()))) check_not_capturing("copy_", stream);
  const Tensor landing = direct ? dst : make_empty(dev.sizes(), dst.dtype(), kCPU);
  TS_CUDA_CHECK(cudaMemcpyAsync(landing.data_ptr(), dev.data_ptr(), dev.nbytes(), cudaMemcpyDeviceToHost, stream));
  if (direct && non_blocking && is_page_locked(landing.data_ptr())) {
    record_host_use(host_block(landing), stream);
    return;
  }
  TS_CUDA_CHECK(cudaStreamSynchronize(stream));
  poll_deferred_checks();  // the host has waited: errors found by earlier kernels raise now
  if (!direct) copy_kernel(kCPU, dst, broadcast_to(landing, dst.sizes()));
}

// `waiter` waits for the work queued so far on `signaller` (a stream of device `signaller_device`).
void stream_wait(cudaStream_t waiter, cudaStream_t signaller, int signaller_device) {
  CurrentDevice guard(signaller_device);
  cudaEvent_t event = nullptr;
  TS_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  cudaError_t err = cudaEventRecord(event, signaller);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, event, 0);
  (void)cudaEventDestroy(event);  // released once the recorded work is done
  TS_CUDA_CHECK(err);
}

void copy_peer(const Tensor& dst, const Tensor& src) {
  const int sd = src.device().index(), dd = dst.device().index();
  Tensor from = drop_broadcast(src);
  if (!from.is_contiguous() || from.dtype() != dst.dtype()) {  // pack and convert on the source GPU
    Tensor packed = make_empty(from.sizes(), dst.dtype(), src.device());
    copy_on_device(packed, from);
    from = packed;
  }
  const bool direct = dst.is_contiguous() && from.sizes() == dst.sizes();
  const Tensor landing = direct ? dst : make_empty(from.sizes(), dst.dtype(), dst.device());
  const cudaStream_t ss = current_raw_stream(sd), ds = current_raw_stream(dd);
  stream_wait(ss, ds, dd);  // the destination's earlier work (and landing's last use) before the copy
  {
    CurrentDevice guard(sd);
    TS_CUDA_CHECK(cudaMemcpyPeerAsync(landing.data_ptr(), dd, from.data_ptr(), sd, from.nbytes(), ss));
  }
  stream_wait(ds, ss, sd);  // the destination's later work after the copy
  if (!direct) copy_on_device(dst, broadcast_to(landing, dst.sizes()));
}

void copy_between_devices_cuda(const Tensor& dst, const Tensor& src_in, bool non_blocking) {
  if (dst.numel() == 0) return;
  const Tensor src = expand_view(src_in, dst.sizes());
  if (dst.is_cuda() && src.is_cuda()) {
    if (dst.device() == src.device()) copy_on_device(dst, src);
    else copy_peer(dst, src);
  } else if (dst.is_cuda() && src.is_cpu()) {
    copy_host_to_device(dst, src, non_blocking);
  } else if (dst.is_cpu() && src.is_cuda()) {
    copy_device_to_host(dst, src, non_blocking);
  } else {
    TS_THROW(DeviceError, "copy_: cannot copy from ", src.device().str(), " to ", dst.device().str());
  }
}

void copy_cuda(const Tensor& dst, const Tensor& src) {
  if (dst.device() == src.device()) copy_on_device(dst, src);
  else copy_between_devices_cuda(dst, src, /*non_blocking=*/false);
}

// ---- fill ---------------------------------------------------------------------------------------------------
// The fill value in the host element type, converted as the CPU's fill converts it.
template <class To, class From>
To host_convert(From v) {
  if constexpr (std::is_same_v<To, bool>) return v != From(0);
  else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) return To(static_cast<float>(v));
  else return static_cast<To>(v);
}

void fill_cuda(const Tensor& dst, const Scalar& value) {
  if (dst.numel() == 0) return;
  CurrentDevice guard(dst.device().index());
  const cudaStream_t stream = stream_of(dst);
  dispatch_dtype(dst.dtype(), "fill_", [&]<class H>(TypeTag<H>) {
    H v = value.is_floating_point() ? host_convert<H>(value.to_double()) : host_convert<H>(value.to_int());
    if (value.is_bool()) v = host_convert<H>(value.to_bool());
    unsigned char bytes[sizeof(H)];
    std::memcpy(bytes, &v, sizeof(H));
    bool one_byte = true;  // every byte of the pattern the same: a memset
    for (size_t i = 1; i < sizeof(H); ++i) one_byte = one_byte && bytes[i] == bytes[0];
    if (one_byte && dst.is_contiguous()) {
      TS_CUDA_CHECK(cudaMemsetAsync(dst.data_ptr(), bytes[0], dst.nbytes(), stream));
      return;
    }
    const ElementwiseIter it(dst, {});
    dispatch_bits(sizeof(H), [&]<class U>(TypeTag<U>) {
      U bits;
      std::memcpy(&bits, bytes, sizeof(U));
      launch_elementwise<kEwHotUnroll, U>(it, FillOp<U>{bits}, stream, "fill_");
    });
  });
}

}  // namespace

void register_copy() {
  copy_kernel.set(DeviceType::CUDA, &copy_cuda);
  copy_between_devices_kernel.set(DeviceType::CUDA, &copy_between_devices_cuda);
  fill_kernel.set(DeviceType::CUDA, &fill_cuda);
}

}  // namespace tessera::cuda
