// Thread count for CPU kernels: OpenMP's team size, and OpenBLAS's to match.
#include <omp.h>

#include <cblas.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tessera/error.h"
#include "tessera/functions.h"

namespace tessera {

void set_num_threads(int n) {
  TS_CHECK(n > 0, ValueError, "set_num_threads: expected a positive number of threads, got ", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

namespace cpu {
void register_threads() {
  // OpenBLAS starts with its own thread count; keep it equal to OpenMP's.
  openblas_set_num_threads(omp_get_max_threads());
}
}  // namespace cpu

}  // namespace tessera
