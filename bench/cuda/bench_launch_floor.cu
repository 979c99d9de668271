// The CUDA runtime's own host-side costs per call, measured alone: the floor under tessera's eager
// op overhead (bench_cuda_micro's eager_add rows). Each row times 10^4 back-to-back calls with the
// host clock and prints microseconds per call as a JSON line:
//   launch_empty        cudaLaunchKernel of an empty kernel (<<<1, 128>>>) on a non-default stream
//   launch_args80       the same with an 80-byte argument struct (an elementwise kernel's size)
//   get_device          cudaGetDevice
//   get_last_error      cudaGetLastError
//   capture_info        cudaStreamGetCaptureInfo (what a capture check costs)
//   event_record        cudaEventRecord (timing disabled)
// A launch row's host time is only the launch cost while the GPU keeps up; the row also reports the
// time to drain (synchronize) after the loop.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

struct Args80 {
  void* p[4];
  long long n[6];
};

__global__ void empty_kernel() {}
__global__ void args_kernel(Args80 a) {
  if (a.n[0] < 0 && threadIdx.x == 0) static_cast<int*>(a.p[0])[0] = 1;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class F>
void row(const char* name, cudaStream_t s, F&& f) {
  constexpr int kCalls = 10000;
  for (int i = 0; i < 100; ++i) f();  // warm-up
  check(cudaStreamSynchronize(s), "sync");
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  check(cudaStreamSynchronize(s), "sync");
  const auto t2 = std::chrono::steady_clock::now();
  const double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / kCalls;
  const double drain = std::chrono::duration<double, std::micro>(t2 - t0).count() / kCalls;
  std::printf("{\"name\": \"%s\", \"unit\": \"us/call\", \"value\": %.4f, \"with_drain\": %.4f}\n", name, us, drain);
}

}  // namespace

int main() {
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  cudaEvent_t ev;
  check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "event");
  Args80 a{};
  row("launch_empty", s, [&] { empty_kernel<<<1, 128, 0, s>>>(); });
  row("launch_args80", s, [&] { args_kernel<<<1, 128, 0, s>>>(a); });
  int dev = 0;
  row("get_device", s, [&] { check(cudaGetDevice(&dev), "cudaGetDevice"); });
  row("get_last_error", s, [&] { (void)cudaGetLastError(); });
  cudaStreamCaptureStatus st;
  row("capture_info", s, [&] { check(cudaStreamGetCaptureInfo(s, &st, nullptr), "capture info"); });
  row("event_record", s, [&] { check(cudaEventRecord(ev, s), "event record"); });
  return 0;
}
