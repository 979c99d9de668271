// Zero-copy exchange with other array libraries through DLPack (the Python array API's protocol):
// Tensor.__dlpack__(stream=None), Tensor.__dlpack_device__(), tessera.from_dlpack(obj), and the
// wrapping of foreign memory that from_dlpack and from_numpy share.
//
// Note [Foreign memory]: a tensor over memory another library owns holds a Storage whose DataPtr
// deleter runs the owner's release (the DLPack deleter, or dropping the numpy array), so the memory
// lives exactly as long as the last tessera tensor or view of it. The release takes the GIL when it
// has Python objects to drop; after the interpreter has finalized it does nothing (the process is
// exiting and the owner is gone with it). Foreign memory is not the caching allocator's: it is never
// reused by tessera, and a CUDA tensor over it records no stream.
//
// Note [DLPack streams]: per the DLPack specification, `__dlpack__(stream=S)` makes the data safe to
// use on the consumer's stream S: tessera records an event on its current stream of the tensor's
// device and makes S wait for it (no host synchronization). S is an integer cudaStream_t; None and 1
// mean the legacy default stream, 2 the per-thread default stream, -1 "no synchronization". On import,
// from_dlpack passes tessera's current stream as S, so the producer orders its work before ours.
// DLPack 0.6 has no bool type code: bool exports as code 6 (kDLBool of DLPack 0.8 and later) and imports
// from it; PyTorch 1.13 exports bool as uint8, which imports as uint8.
#include <dlpack/dlpack.h>

#include "bindings.h"
#include "runtime/storage.h"
#include "tensor/tensor_impl.h"

namespace tessera::python {
namespace {

constexpr uint8_t kDLBoolCode = 6;

struct ReleaseCtx {
  std::function<void()> release;
};

void run_release(void* ctx) {
  auto* c = static_cast<ReleaseCtx*>(ctx);
  if (Py_IsInitialized()) c->release();
  delete c;
}

DLDataType dl_dtype(DType d) {
  DLDataType t{};
  t.lanes = 1;
  t.bits = static_cast<uint8_t>(element_size(d) * 8);
  switch (d) {
    case kBool: t.code = kDLBoolCode; break;
    case kUInt8: t.code = kDLUInt; break;
    case kInt8: case kInt32: case kInt64: t.code = kDLInt; break;
    case kFloat16: case kFloat32: case kFloat64: t.code = kDLFloat; break;
    case kBFloat16: t.code = kDLBfloat; break;
  }
  return t;
}

DType dtype_of_dl(DLDataType t) {
  TS_CHECK(t.lanes == 1, DTypeError, "from_dlpack: vector types (lanes ", t.lanes, ") are not supported");
  if (t.code == kDLBoolCode && t.bits == 8) return kBool;
  if (t.code == kDLUInt && t.bits == 8) return kUInt8;
  if (t.code == kDLUInt && t.bits == 1) return kBool;
  if (t.code == kDLInt && t.bits == 8) return kInt8;
  if (t.code == kDLInt && t.bits == 32) return kInt32;
  if (t.code == kDLInt && t.bits == 64) return kInt64;
  if (t.code == kDLFloat && t.bits == 16) return kFloat16;
  if (t.code == kDLFloat && t.bits == 32) return kFloat32;
  if (t.code == kDLFloat && t.bits == 64) return kFloat64;
  if (t.code == kDLBfloat && t.bits == 16) return kBFloat16;
  TS_THROW(DTypeError, "from_dlpack: unsupported DLPack dtype (code ", int(t.code), ", ", int(t.bits),
           " bits); tessera has bool, uint8, int8, int32, int64, float16, bfloat16, float32 and float64");
}

// What a DLManagedTensor exported by tessera owns: the tensor handle and the shape/stride arrays.
struct Exported {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

void exported_deleter(DLManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); }

void capsule_destructor(PyObject* capsule) {
  // A capsule still named "dltensor" was never consumed: its owner frees it (the DLPack protocol).
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  } else {
    PyErr_Clear();
  }
}

// Note [DLPack streams]: the consumer's stream waits for tessera's current stream.
void order_for_consumer(const Tensor& t, py::object stream) {
  if (!t.is_cuda()) {
    TS_CHECK(stream.is_none(), ValueError, "__dlpack__: stream must be None for a tensor on the CPU, got ",
             std::string(py::str(stream)));
    return;
  }
  int64_t s = stream.is_none() ? 1 : stream.cast<int64_t>();
  TS_CHECK(s != 0, ValueError, "__dlpack__: stream 0 is ambiguous for CUDA (the DLPack specification disallows it); "
           "pass 1 for the legacy default stream or 2 for the per-thread default stream");
  if (s == -1) return;
  const int dev = t.device().index();
  cuda::Stream producer = cuda::current_stream(dev);
  cuda::Stream consumer(dev, reinterpret_cast<void*>(static_cast<intptr_t>(s)));
  if (producer == consumer) return;
  cuda::Event e;
  e.record(producer);
  e.wait(consumer);
}

py::capsule to_dlpack(const Tensor& t, py::object stream) {
  TS_CHECK(!t.is_meta(), ValueError, "__dlpack__: a meta tensor has no data to export");
  TS_CHECK(!t.requires_grad(), Error, "Can't export tensors that require gradient, use tensor.detach()");
  order_for_consumer(t, stream);
  auto* e = new Exported{t, std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                         std::vector<int64_t>(t.strides().begin(), t.strides().end())};
  DLTensor& dl = e->managed.dl_tensor;
  dl.data = t.numel() ? t.data_ptr() : nullptr;
  dl.device = t.is_cuda() ? DLDevice{kDLCUDA, t.device().index()} : DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = dl_dtype(t.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = &exported_deleter;
  PyObject* cap = PyCapsule_New(&e->managed, "dltensor", &capsule_destructor);
  if (!cap) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

Tensor from_capsule(py::handle capsule) {
  PyObject* cap = capsule.ptr();
  TS_CHECK(PyCapsule_IsValid(cap, "dltensor"), ValueError,
           "from_dlpack: expected a DLPack capsule named 'dltensor' that has not been consumed yet");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  const DLTensor& dl = m->dl_tensor;
  Device device;
  switch (dl.device.device_type) {
    case kDLCPU: case kDLCUDAHost: device = kCPU; break;
    case kDLCUDA: case kDLCUDAManaged: device = Device::cuda(dl.device.device_id); break;
    default: TS_THROW(DeviceError, "from_dlpack: unsupported DLPack device type ", int(dl.device.device_type),
                      " (tessera has the CPU and CUDA)");
  }
  DType dtype = dtype_of_dl(dl.dtype);
  Shape sizes(dl.shape, dl.shape + dl.ndim);
  Shape strides = dl.strides ? Shape(dl.strides, dl.strides + dl.ndim) : contiguous_strides(sizes);
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  // The capsule is consumed: from here on the tensor's storage owns the DLManagedTensor.
  if (PyCapsule_SetName(cap, "used_dltensor") != 0) throw py::error_already_set();
  return wrap_foreign(data, sizes, strides, dtype, device, [m]() { if (m->deleter) m->deleter(m); }, "from_dlpack");
}

}  // namespace

Tensor wrap_foreign(void* data, const Shape& sizes, const Shape& strides, DType dtype, Device device,
                    std::function<void()> release, const char* op) {
  TS_CHECK(sizes.size() == strides.size(), ValueError, op, ": ", sizes.size(), " sizes but ", strides.size(), " strides");
  int64_t extent = 0;  // elements from the first to one past the last
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    TS_CHECK(sizes[d] >= 0, ValueError, op, ": negative size ", sizes[d], " at dim ", d);
    TS_CHECK(strides[d] >= 0, ValueError, op, ": negative stride ", strides[d], " at dim ", d,
             " (tessera tensors have non-negative strides)");
    if (sizes[d] == 0) empty = true;
    int64_t span = 0;
    TS_CHECK(!__builtin_mul_overflow(sizes[d] > 0 ? sizes[d] - 1 : 0, strides[d], &span) &&
                 !__builtin_add_overflow(extent, span, &extent),
             ValueError, op, ": sizes ", sizes, " with strides ", strides, " overflow int64");
  }
  const size_t nbytes = empty ? 0 : static_cast<size_t>(extent + 1) * element_size(dtype);
  auto* ctx = new ReleaseCtx{std::move(release)};
  DataPtr ptr(data, ctx, &run_release);
  auto storage = std::make_shared<Storage>(std::move(ptr), nbytes, device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, strides, 0));
}

void init_dlpack(py::module_& m, py::class_<Tensor>& cls) {
  cls.def("__dlpack__", [](const Tensor& t, py::object stream) { return to_dlpack(t, stream); },
          py::kw_only(), py::arg("stream") = py::none())
      .def("__dlpack_device__", [](const Tensor& t) {
        TS_CHECK(!t.is_meta(), ValueError, "__dlpack_device__: a meta tensor has no DLPack device");
        return t.is_cuda() ? py::make_tuple(int(kDLCUDA), t.device().index()) : py::make_tuple(int(kDLCPU), 0);
      });
  m.def("_from_dlpack_capsule", &from_capsule, py::arg("capsule"));
  m.def("from_dlpack", [](py::object obj) {
    if (PyCapsule_CheckExact(obj.ptr())) return from_capsule(obj);
    if (!py::hasattr(obj, "__dlpack__"))
      throw py::type_error(std::string("from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got ") +
                           std::string(py::str(obj.get_type().attr("__name__"))));
    py::object capsule;
    py::tuple dev = obj.attr("__dlpack_device__")();
    int type = dev[0].cast<int>();
    if (type == kDLCUDA || type == kDLCUDAManaged) {
      // Note [DLPack streams]: the producer orders its work before tessera's current stream.
      cuda::Stream s = cuda::current_stream(dev[1].cast<int>());
      intptr_t h = reinterpret_cast<intptr_t>(s.handle());
      capsule = obj.attr("__dlpack__")(py::arg("stream") = h == 0 ? 1 : h);
    } else {
      capsule = obj.attr("__dlpack__")();
    }
    return from_capsule(capsule);
  }, py::arg("ext_tensor"));
}

}  // namespace tessera::python
