// Tensor methods about where memory lives and who uses it: pin_memory / is_pinned (page-locked host
// memory) and record_stream (cross-stream use of CUDA memory). They reach the CUDA runtime through the
// hook table of runtime/device_hooks.h, so this layer builds without CUDA.
#include "runtime/device_hooks.h"
#include "tensor/tensor_impl.h"
#include "tessera/cuda.h"
#include "tessera/tensor.h"

namespace tessera {

bool Tensor::is_pinned() const {
  if (!defined() || !is_cpu()) return false;
  const CudaHooks* h = cuda_hooks();
  const void* p = impl_->storage()->data();
  return h && h->is_pinned && p && h->is_pinned(p);
}

Tensor Tensor::pin_memory() const {
  TS_CHECK(defined(), ValueError, "pin_memory: undefined tensor");
  TS_CHECK(is_cpu(), DeviceError, "pin_memory: cannot pin a ", device().str(),
           " tensor: only CPU tensors can be pinned");
  const CudaHooks* h = cuda_hooks();
  TS_CHECK(h && h->pinned_allocator, DeviceError,
           "pin_memory: tessera was built without the CUDA backend (pinned memory needs CUDA)");
  TS_CHECK(cuda::is_available(), DeviceError, "pin_memory: no CUDA GPU was found (pinned memory needs the CUDA driver)");
  if (is_pinned()) return *this;
  const size_t nbytes = this->nbytes();
  auto storage = std::make_shared<Storage>(h->pinned_allocator()->allocate(nbytes, kCPU), nbytes, kCPU);
  Tensor out(std::make_shared<TensorImpl>(std::move(storage), dtype(), sizes(), contiguous_strides(sizes()), 0));
  out.copy_(*this);
  return out;
}

void Tensor::record_stream(const cuda::Stream& stream) const {
  TS_CHECK(defined(), ValueError, "record_stream: undefined tensor");
  TS_CHECK(is_cuda(), DeviceError, "record_stream: expected a CUDA tensor but got a ", device().str(), " tensor");
  TS_CHECK(stream.device_index() == device().index() && stream.handle() != nullptr, DeviceError,
           "record_stream: the stream is on cuda:", stream.device_index(), " but the tensor is on ", device().str());
  const CudaHooks* h = cuda_hooks();
  TS_CHECK(h && h->record_stream, DeviceError, "record_stream: tessera was built without the CUDA backend");
  if (void* p = impl_->storage()->data()) h->record_stream(p, stream.handle());
}

}  // namespace tessera
