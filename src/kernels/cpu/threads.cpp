// Thread count for CPU kernels: OpenMP's team size. OpenBLAS stays on one thread and large GEMMs are
// spread over OpenMP's threads instead (Note [One thread pool] in kernels/cpu/blas.h).
#include <omp.h>

#include <cblas.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tessera/error.h"
#include "tessera/functions.h"

namespace tessera {

void set_num_threads(int n) {
  TS_CHECK(n > 0, ValueError, "set_num_threads: expected a positive number of threads, got ", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(1);
}

int get_num_threads() { return omp_get_max_threads(); }

namespace cpu {
void register_threads() {
  // OpenBLAS starts with its own thread count (OPENBLAS_NUM_THREADS or the cores); one pool only.
  openblas_set_num_threads(1);
}
}  // namespace cpu

}  // namespace tessera
