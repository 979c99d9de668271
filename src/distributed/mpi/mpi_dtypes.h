// tessera dtypes and reduce ops as MPI sees them. float16 and bfloat16 have no MPI type: their data
// moves as MPI_UINT16_T and reduces through user-defined ops that add (or compare) in float and round
// once per step, as NCCL's half reductions do.
#pragma once
#include <mpi.h>

#include <cstdint>

#include "tessera/distributed.h"

namespace tessera::distributed::detail {

// The custom ops (MPI_Op_create) for float16 / bfloat16; created after MPI_Init, freed before
// MPI_Finalize by the group that owns them.
class MpiReduceOps {
 public:
  MpiReduceOps();
  ~MpiReduceOps();
  MpiReduceOps(const MpiReduceOps&) = delete;
  MpiReduceOps& operator=(const MpiReduceOps&) = delete;
  // The op reducing `dtype` with `op` (Avg reduces as Sum; the caller divides).
  MPI_Op op(DType dtype, ReduceOp op) const;

 private:
  MPI_Op half_[3], bf16_[3];  // Sum, Max, Min
};

MPI_Datatype mpi_datatype(DType dtype);
// x /= divisor over n elements of a floating-point dtype (ReduceOp::Avg after the sum).
void divide_in_place(void* data, int64_t n, DType dtype, int divisor);

}  // namespace tessera::distributed::detail
