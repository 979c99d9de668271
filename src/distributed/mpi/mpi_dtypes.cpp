// The MPI datatypes and ops of mpi_dtypes.h.
#include "distributed/mpi/mpi_dtypes.h"

#include <algorithm>

#include "tessera/half.h"

namespace tessera::distributed::detail {
namespace {

template <class T, int Which>  // 0 sum, 1 max, 2 min
void reduce_16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(T(a[i], FromBits{}));
    const float y = static_cast<float>(T(b[i], FromBits{}));
    float r;
    if constexpr (Which == 0) r = x + y;
    else if constexpr (Which == 1) r = (x != x || y != y) ? x + y : std::max(x, y);  // NaN propagates
    else r = (x != x || y != y) ? x + y : std::min(x, y);
    b[i] = T(r).x;
  }
}

int op_index(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return 0;
    case ReduceOp::Max: return 1;
    case ReduceOp::Min: return 2;
  }
  return 0;
}

}  // namespace

MpiReduceOps::MpiReduceOps() {
  MPI_Op_create(&reduce_16<Half, 0>, 1, &half_[0]);
  MPI_Op_create(&reduce_16<Half, 1>, 1, &half_[1]);
  MPI_Op_create(&reduce_16<Half, 2>, 1, &half_[2]);
  MPI_Op_create(&reduce_16<BFloat16, 0>, 1, &bf16_[0]);
  MPI_Op_create(&reduce_16<BFloat16, 1>, 1, &bf16_[1]);
  MPI_Op_create(&reduce_16<BFloat16, 2>, 1, &bf16_[2]);
}

MpiReduceOps::~MpiReduceOps() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Op& o : half_) MPI_Op_free(&o);
  for (MPI_Op& o : bf16_) MPI_Op_free(&o);
}

MPI_Op MpiReduceOps::op(DType dtype, ReduceOp op) const {
  const int k = op_index(op);
  if (dtype == kFloat16) return half_[k];
  if (dtype == kBFloat16) return bf16_[k];
  if (dtype == kBool) return k == 2 ? MPI_LAND : MPI_LOR;
  return k == 0 ? MPI_SUM : (k == 1 ? MPI_MAX : MPI_MIN);
}

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::Bool: return MPI_C_BOOL;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Float16:
    case DType::BFloat16: return MPI_UINT16_T;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
  }
  TS_THROW(DTypeError, "mpi backend: unsupported dtype ", dtype_name(dtype));
}

void divide_in_place(void* data, int64_t n, DType dtype, int divisor) {
  switch (dtype) {
    case DType::Float32: {
      auto* p = static_cast<float*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(divisor);
      return;
    }
    case DType::Float64: {
      auto* p = static_cast<double*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<double>(divisor);
      return;
    }
    case DType::Float16: {
      auto* p = static_cast<Half*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] = Half(static_cast<float>(p[i]) / static_cast<float>(divisor));
      return;
    }
    case DType::BFloat16: {
      auto* p = static_cast<BFloat16*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] = BFloat16(static_cast<float>(p[i]) / static_cast<float>(divisor));
      return;
    }
    default: TS_THROW(DTypeError, "ReduceOp.AVG needs a floating-point tensor, got ", dtype_name(dtype));
  }
}

}  // namespace tessera::distributed::detail
