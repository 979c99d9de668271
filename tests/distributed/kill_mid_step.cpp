// A rank killed mid-step: rank 1 dies (SIGKILL) between two all-reduces of a training step; rank 0's
// next all-reduce must raise the timeout error (naming the collective, its sequence number and rank 1)
// within the timeout, then end the job with a non-zero status. Driven by kill_mid_step.py, which
// checks the message, the status and the time.
#include <csignal>
#include <cstdio>

#include "tessera/distributed.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace dist = tessera::distributed;

int main() {
  dist::init_process_group("mpi", {.timeout = std::chrono::milliseconds(3000)});
  ts::manual_seed(0);
  ts::nn::Linear fc(16, 4);
  ts::Tensor loss = fc(ts::randn({8, 16})).pow(2).mean();
  loss.backward();
  for (const ts::Tensor& p : fc.parameters()) dist::all_reduce(p.grad(), dist::ReduceOp::Avg);
  dist::barrier();
  if (dist::get_rank() == 1) std::raise(SIGKILL);  // dies mid-step
  try {
    for (const ts::Tensor& p : fc.parameters()) dist::all_reduce(p.grad(), dist::ReduceOp::Avg);
  } catch (const dist::DistributedTimeoutError& e) {
    std::fprintf(stderr, "rank %d: %s\n", dist::get_rank(), e.what());
    return 3;  // the aborted group ends the job at exit (Note [MPI lifetime])
  }
  std::fprintf(stderr, "rank %d: the all-reduce completed without rank 1\n", dist::get_rank());
  return 0;
}
