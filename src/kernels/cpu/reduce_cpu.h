// Registration of the reduction family's CPU kernels, split over several files; register_reduce()
// (reduce.cpp) calls the others.
#pragma once

namespace tessera::cpu {

void register_reduce_rows();  // reduce_rows.cpp: arg-reductions, var, logsumexp
void register_scan();         // scan.cpp: cumsum, cumprod

}  // namespace tessera::cpu
