// CUDA graphs (tessera/cuda_graph.h) on a GPU: capture and replay equal eager bit for bit (a few ops,
// after the static input changes, and a whole MLP training step through make_graphed over 5 steps);
// dropout draws new numbers at each replay and repeats them for the same seed; synchronizing calls
// during a capture raise naming the op (and leave the capture valid); repeated captures do not grow
// reserved memory; a pool shared by two graphs captured in order; capture on the default stream raises.
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "tessera/cuda_graph.h"
#include "tessera/models.h"
#include "tessera/nn/functional.h"
#include "tessera/optim.h"

namespace ts = tessera;
namespace cuda = tessera::cuda;
namespace F = tessera::nn::functional;

namespace {

ts::Device gpu() { return ts::Device::cuda(); }

// Bitwise equality of two tensors of one dtype and sizes (any devices).
::testing::AssertionResult same_bits(const ts::Tensor& actual, const ts::Tensor& expected) {
  if (actual.sizes() != expected.sizes() || actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << "sizes or dtype differ";
  const ts::Tensor a = actual.cpu().contiguous(), e = expected.cpu().contiguous();
  const size_t es = ts::element_size(a.dtype());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(static_cast<const char*>(a.data_ptr()) + i * es, static_cast<const char*>(e.data_ptr()) + i * es,
                    es) != 0) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.numel() << " elements differ, first at flat index "
                                       << first;
}

// The work the graph tests capture: elementwise ops, a matmul, a softmax and a reduction.
ts::Tensor few_ops(const ts::Tensor& x, const ts::Tensor& w) {
  ts::Tensor h = (x * 2.0 + 1.0).relu();
  h = h.matmul(w);
  h = ts::softmax(h, -1);
  return h.sum(0) + x.mean();
}

TEST(CudaGraph, CaptureReplayOfAFewOpsEqualsEagerBitwise) {
  TS_REQUIRE_GPU();
  ts::manual_seed(1);
  ts::Tensor x = ts::randn({64, 128}, gpu()), w = ts::randn({128, 96}, gpu());
  const ts::Tensor eager = few_ops(x, w);
  cuda::Stream side = cuda::Stream::create();
  cuda::Graph g;
  ts::Tensor out;
  {
    cuda::StreamGuard sg(side);
    (void)few_ops(x, w);  // warm-up (library handles, workspaces)
    g.capture_begin();
    EXPECT_TRUE(cuda::is_current_stream_capturing());
    out = few_ops(x, w);
    g.capture_end();
  }
  EXPECT_TRUE(g.captured());
  EXPECT_NE(g.pool(), (cuda::MempoolId{0, 0}));
  g.replay();
  EXPECT_TRUE(same_bits(out, eager));
  g.replay();  // replaying again gives the same
  EXPECT_TRUE(same_bits(out, eager));
}

TEST(CudaGraph, ReplaysAfterChangingTheStaticInput) {
  TS_REQUIRE_GPU();
  ts::manual_seed(2);
  ts::Tensor x = ts::randn({64, 128}, gpu()), w = ts::randn({128, 96}, gpu());
  cuda::Stream side = cuda::Stream::create();
  cuda::Graph g;
  ts::Tensor out;
  {
    cuda::StreamGuard sg(side);
    (void)few_ops(x, w);
    g.capture_begin();
    out = few_ops(x, w);
    g.capture_end();
  }
  for (int i = 0; i < 3; ++i) {
    ts::Tensor next = ts::randn({64, 128}, gpu());
    x.copy_(next);  // on the current stream, before the replay queued there
    g.replay();
    EXPECT_TRUE(same_bits(out, few_ops(next, w))) << "replay " << i;
  }
  // Replays run on any stream.
  {
    cuda::StreamGuard sg(side);
    ts::Tensor next = ts::randn({64, 128}, gpu());
    x.copy_(next);
    g.replay();
    EXPECT_TRUE(same_bits(out, few_ops(next, w)));
  }
  // reset() drops the capture; the graph can capture again.
  g.reset();
  EXPECT_FALSE(g.captured());
  EXPECT_THROW(g.replay(), ts::ValueError);
}

// One SGD-momentum training step of an MLP; returns the loss.
struct Trainer {
  ts::models::MLP net{32, {64, 64}, 10};
  ts::optim::SGD opt;
  Trainer() : opt((net.to(gpu()), net.parameters()), {.lr = 0.05, .momentum = 0.9}) {}
  std::vector<ts::Tensor> step(const std::vector<ts::Tensor>& in) {
    opt.zero_grad();
    ts::Tensor loss = F::cross_entropy(net.forward(in[0]), in[1]);
    loss.backward();
    opt.step();
    return {loss};
  }
};

TEST(CudaGraph, MakeGraphedMlpTrainingStepEqualsEagerOver5Steps) {
  TS_REQUIRE_GPU();
  ts::manual_seed(3);
  Trainer eager;
  ts::manual_seed(3);
  Trainer graphed;
  const auto params_e = eager.net.parameters(), params_g = graphed.net.parameters();
  ASSERT_EQ(params_e.size(), params_g.size());
  for (size_t i = 0; i < params_e.size(); ++i) ASSERT_TRUE(same_bits(params_g[i], params_e[i]));
  std::vector<std::vector<ts::Tensor>> batches;
  for (int i = 0; i < 6; ++i)
    batches.push_back({ts::randn({16, 32}, gpu()), ts::randint(0, 10, {16}, ts::TensorOptions(ts::kInt64, gpu()))});
  // make_graphed warms up with 3 real steps on the sample batch; the eager model takes the same 3.
  auto step = cuda::make_graphed([&](const std::vector<ts::Tensor>& in) { return graphed.step(in); }, batches[0]);
  for (int i = 0; i < 3; ++i) (void)eager.step(batches[0]);
  for (int s = 1; s <= 5; ++s) {
    const ts::Tensor le = eager.step(batches[s])[0];
    const ts::Tensor lg = step(batches[s])[0];
    EXPECT_TRUE(same_bits(lg, le)) << "loss of step " << s;
  }
  for (size_t i = 0; i < params_e.size(); ++i) EXPECT_TRUE(same_bits(params_g[i], params_e[i])) << "parameter " << i;
  // The inputs must keep the captured shapes.
  EXPECT_THROW(step({ts::randn({8, 32}, gpu()), batches[1][1]}), ts::ValueError);
}

TEST(CudaGraph, DropoutDrawsNewNumbersPerReplayAndTheSameForTheSameSeed) {
  TS_REQUIRE_GPU();
  ts::Tensor x = ts::ones({1000, 37}, gpu());
  cuda::Stream side = cuda::Stream::create();
  cuda::Graph g;
  ts::Tensor out;
  {
    cuda::StreamGuard sg(side);
    (void)F::dropout(x, 0.5);
    g.capture_begin();
    out = F::dropout(x, 0.5) + ts::randn({1000, 37}, gpu());
    g.capture_end();
  }
  ts::manual_seed(11);
  g.replay();
  const ts::Tensor r1 = out.clone();
  g.replay();
  const ts::Tensor r2 = out.clone();
  EXPECT_FALSE(same_bits(r2, r1)) << "two replays drew the same numbers";
  ts::manual_seed(11);
  g.replay();
  EXPECT_TRUE(same_bits(out, r1)) << "the same seed did not give the same numbers";
  g.replay();
  EXPECT_TRUE(same_bits(out, r2));
  // A replay draws what the captured work would draw eagerly from the same generator state.
  ts::manual_seed(11);
  const ts::Tensor eager = F::dropout(x, 0.5) + ts::randn({1000, 37}, gpu());
  EXPECT_TRUE(same_bits(r1, eager));
}

TEST(CudaGraph, SynchronizingCallsDuringCaptureRaiseNamingTheOp) {
  TS_REQUIRE_GPU();
  ts::Tensor x = ts::randn({10}, gpu());
  cuda::Stream side = cuda::Stream::create();
  cuda::Graph g;
  ts::Tensor y;
  {
    cuda::StreamGuard sg(side);
    (void)(x * 3.0);
    g.capture_begin();
    y = x * 3.0;
    const std::string tail = ": cannot synchronize the device while a CUDA graph is being captured";
    EXPECT_NE(ts::testing::message_of<ts::Error>([&] { (void)y.sum().item(); }).find("item" + tail), std::string::npos);
    EXPECT_NE(ts::testing::message_of<ts::Error>([&] { (void)y.cpu(); }).find("cpu" + tail), std::string::npos);
    EXPECT_NE(ts::testing::message_of<ts::Error>([&] { cuda::synchronize(); }).find("synchronize" + tail), std::string::npos);
    EXPECT_NE(ts::testing::message_of<ts::Error>([&] { side.synchronize(); }).find("Stream.synchronize" + tail), std::string::npos);
    EXPECT_NE(ts::testing::message_of<ts::Error>([&] { (void)ts::nonzero(y > 0.0); }).find("nonzero" + tail), std::string::npos);
    EXPECT_NE(ts::testing::message_of<ts::Error>([&] { (void)ts::allclose(y, y); }).find("allclose" + tail), std::string::npos);
    EXPECT_NE(ts::testing::message_of<ts::Error>([&] { cuda::empty_cache(); }).find("empty_cache" + tail), std::string::npos);
    y = y + 1.0;
    g.capture_end();  // the checks raised before synchronizing: the capture is still valid
  }
  g.replay();
  EXPECT_TRUE(same_bits(y, x * 3.0 + 1.0));
  EXPECT_FALSE(cuda::is_current_stream_capturing());
}

TEST(CudaGraph, CaptureOnTheDefaultStreamRaises) {
  TS_REQUIRE_GPU();
  cuda::Graph g;
  EXPECT_NE(ts::testing::message_of<ts::Error>([&] { g.capture_begin(); }).find("other than the default stream"), std::string::npos);
  EXPECT_FALSE(g.capturing());
}

TEST(CudaGraph, HundredCapturesGrowReservedMemoryByLessThan100MB) {
  TS_REQUIRE_GPU();
  ts::Tensor x = ts::randn({512, 512}, gpu()), w = ts::randn({512, 512}, gpu());
  cuda::Stream side = cuda::Stream::create();
  {
    cuda::StreamGuard sg(side);
    (void)few_ops(x, w);
  }
  cuda::synchronize();
  const int64_t before = cuda::memory_reserved();
  int64_t after10 = 0;
  for (int i = 0; i < 100; ++i) {
    cuda::Graph g;
    ts::Tensor out;
    {
      cuda::StreamGuard sg(side);
      g.capture_begin();  // releases the pool of the graph destroyed before
      out = few_ops(x, w);  // ~5 MB of temporaries, and cuBLASLt's workspace
      g.capture_end();
    }
    g.replay();
    if (i == 9) after10 = cuda::memory_reserved();
  }
  cuda::synchronize();
  const int64_t grown = cuda::memory_reserved() - before;
  EXPECT_LT(grown, int64_t(100) << 20) << "reserved memory grew by " << grown << " bytes over 100 captures";
  // The last graph's pool is still reserved (freed at the next capture or empty_cache); nothing accumulates.
  EXPECT_LT(cuda::memory_reserved() - after10, int64_t(4) << 20) << "reserved memory grows with each capture";
}

TEST(CudaGraph, PoolSharedBetweenTwoGraphsCapturedInOrder) {
  TS_REQUIRE_GPU();
  ts::Tensor x = ts::randn({256, 256}, gpu());
  const cuda::MempoolId pool = cuda::graph_pool_handle();
  cuda::Stream side = cuda::Stream::create();
  cuda::Graph g1, g2;
  ts::Tensor out1, out2;
  {
    cuda::StreamGuard sg(side);
    g1.capture_begin(pool);
    out1 = (x * 2.0).exp().sum(1);
    g1.capture_end();
    g2.capture_begin(pool);
    out2 = (out1 + 1.0).log() * x.sum(0);
    g2.capture_end();
  }
  EXPECT_EQ(g1.pool(), pool);
  EXPECT_EQ(g2.pool(), pool);
  for (int i = 0; i < 2; ++i) {
    x.copy_(ts::randn({256, 256}, gpu()));
    g1.replay();
    g2.replay();
    const ts::Tensor e1 = (x * 2.0).exp().sum(1);
    EXPECT_TRUE(same_bits(out1, e1));
    EXPECT_TRUE(same_bits(out2, (e1 + 1.0).log() * x.sum(0)));
  }
  // The first graph goes; the second still replays.
  g1.reset();
  g2.replay();
  EXPECT_TRUE(same_bits(out2, ((x * 2.0).exp().sum(1) + 1.0).log() * x.sum(0)));
}

}  // namespace
