// The MPI backend's collectives, run by mpirun on 2 (or more) ranks (tests/distributed/CMakeLists.txt):
// each against its expected result computed in float64 from every rank's inputs, for every dtype and
// odd sizes; the async handles; point to point; the checks (wrong device, layout, sizes, dtypes, a
// second init); the launch environment; a mismatch between ranks raises on every rank. The last test
// aborts the group (the job then ends non-zero by design), so it runs alone, as its own ctest entry.
// With TESSERA_TEST_BACKEND=nccl the Collectives tests that move data run on the NCCL backend, one GPU
// per rank, every tensor on the rank's GPU (the GPU suite's multi-GPU step; filter Collectives.*Every*,
// *Root*, *List*, *Async*, *Ring*).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/distributed.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace dist = tessera::distributed;

namespace {

ts::Device g_dev = ts::Device::cpu();  // the rank's device: the CPU for mpi, its GPU for nccl

// Rank r's value at element i: small integers, exact in every dtype (bool: a pattern).
double value(ts::DType dt, int r, int64_t i) {
  if (dt == ts::kBool) return ((i + r) % 3) == 0 ? 1.0 : 0.0;
  const double v = static_cast<double>((i * 7 + r * 3) % 11);
  return ts::is_signed(dt) ? v - 5.0 : v;
}

ts::Tensor rank_tensor(ts::DType dt, int r, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(dt, r, i);
  return ts::tensor(v, {n}).to(dt).to(g_dev);
}

const ts::DType kAll[] = {ts::kBool, ts::kUInt8, ts::kInt8, ts::kInt32, ts::kInt64,
                          ts::kFloat16, ts::kBFloat16, ts::kFloat32, ts::kFloat64};
const int64_t kSizes[] = {1, 7, 1023, 4099};

double reduce(ts::DType dt, dist::ReduceOp op, int world, int64_t i) {
  double acc = value(dt, 0, i);
  for (int r = 1; r < world; ++r) {
    const double x = value(dt, r, i);
    if (dt == ts::kBool) acc = op == dist::ReduceOp::Min ? (acc && x) : (acc || x);
    else if (op == dist::ReduceOp::Sum || op == dist::ReduceOp::Avg) acc += x;
    else if (op == dist::ReduceOp::Max) acc = std::max(acc, x);
    else acc = std::min(acc, x);
  }
  if (op == dist::ReduceOp::Avg) acc /= world;
  return acc;
}

void expect_values(const ts::Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  std::vector<double> g = got.cpu().tolist<double>();
  // Avg of small integers divided by 2 is exact in every floating dtype; so is everything else here.
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(g[i], want[i]) << what << " at element " << i;
}

TEST(Collectives, AllReduceEveryDtypeOpAndOddSize) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  for (ts::DType dt : kAll) {
    for (int64_t n : kSizes) {
      for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Max, dist::ReduceOp::Min, dist::ReduceOp::Avg}) {
        if (op == dist::ReduceOp::Avg && !ts::is_floating_point(dt)) continue;
        ts::Tensor t = rank_tensor(dt, rank, n);
        dist::all_reduce(t, op);
        std::vector<double> want(n);
        for (int64_t i = 0; i < n; ++i) {
          double w = reduce(dt, op, world, i);
          // Integer sums wrap as the dtype does (uint8 / int8 stay in range here).
          want[i] = w;
        }
        expect_values(t, want, std::string("all_reduce ") + dist::reduce_op_name(op) + " " + ts::dtype_name(dt) +
                                   " n=" + std::to_string(n));
      }
    }
  }
}

TEST(Collectives, BroadcastFromEveryRoot) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  for (ts::DType dt : kAll) {
    for (int root = 0; root < world; ++root) {
      ts::Tensor t = rank_tensor(dt, rank, 1023);
      dist::broadcast(t, root);
      std::vector<double> want(1023);
      for (int64_t i = 0; i < 1023; ++i) want[i] = value(dt, root, i);
      expect_values(t, want, std::string("broadcast ") + ts::dtype_name(dt) + " root " + std::to_string(root));
    }
  }
}

TEST(Collectives, AllGatherTensorAndList) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  for (ts::DType dt : kAll) {
    const int64_t n = 7;
    ts::Tensor out = ts::empty({world * n}, ts::TensorOptions(dt, g_dev));
    dist::all_gather_into_tensor(out, rank_tensor(dt, rank, n));
    std::vector<double> want;
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < n; ++i) want.push_back(value(dt, r, i));
    expect_values(out, want, std::string("all_gather ") + ts::dtype_name(dt));
    std::vector<ts::Tensor> outs;
    for (int r = 0; r < world; ++r) outs.push_back(ts::empty({n}, ts::TensorOptions(dt, g_dev)));
    dist::all_gather(outs, rank_tensor(dt, rank, n));
    for (int r = 0; r < world; ++r) {
      std::vector<double> w(want.begin() + r * n, want.begin() + (r + 1) * n);
      expect_values(outs[r], w, std::string("all_gather list ") + ts::dtype_name(dt));
    }
  }
}

TEST(Collectives, ReduceScatterEveryDtype) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  for (ts::DType dt : kAll) {
    for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Max, dist::ReduceOp::Min, dist::ReduceOp::Avg}) {
      if (op == dist::ReduceOp::Avg && !ts::is_floating_point(dt)) continue;
      const int64_t chunk = 13;
      ts::Tensor out = ts::empty({chunk}, ts::TensorOptions(dt, g_dev));
      dist::reduce_scatter_tensor(out, rank_tensor(dt, rank, chunk * world), op);
      std::vector<double> want(chunk);
      for (int64_t i = 0; i < chunk; ++i) want[i] = reduce(dt, op, world, rank * chunk + i);
      expect_values(out, want, std::string("reduce_scatter ") + dist::reduce_op_name(op) + " " + ts::dtype_name(dt));
    }
  }
}

TEST(Collectives, AsyncWorkHandles) {
  const int world = dist::get_world_size();
  std::vector<ts::Tensor> ts_;
  std::vector<dist::WorkPtr> works;
  for (int k = 0; k < 8; ++k) {
    ts_.push_back(ts::full({257}, static_cast<double>(k + 1), ts::kFloat64).to(g_dev));
    works.push_back(dist::all_reduce(ts_.back(), dist::ReduceOp::Sum, /*async_op=*/true));
  }
  for (int k = 7; k >= 0; --k) {  // waited in any order; they complete in issue order
    works[k]->wait();
    EXPECT_TRUE(works[k]->is_completed());
    EXPECT_TRUE(works[k]->is_success());
    EXPECT_EQ(ts_[k].cpu().tolist<double>()[256], static_cast<double>((k + 1) * world));
  }
  dist::barrier();
}

TEST(Collectives, SendRecvRing) {
  const int world = dist::get_world_size(), rank = dist::get_rank();
  if (world < 2) GTEST_SKIP() << "needs 2 ranks";
  for (ts::DType dt : kAll) {
    ts::Tensor out = rank_tensor(dt, rank, 9);
    ts::Tensor in = ts::empty({9}, ts::TensorOptions(dt, g_dev));
    const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    dist::WorkPtr s = dist::isend(out, next, 3);
    dist::WorkPtr r = dist::irecv(in, prev, 3);
    r->wait();
    s->wait();
    std::vector<double> want(9);
    for (int64_t i = 0; i < 9; ++i) want[i] = value(dt, prev, i);
    expect_values(in, want, std::string("recv ") + ts::dtype_name(dt));
  }
}

TEST(Collectives, BadInputsRaiseBeforeAnythingMoves) {
  const int world = dist::get_world_size();
  const uint64_t seq = dist::default_group().sequence_number();
  ts::Tensor t = ts::ones({4, 6});
  EXPECT_THROW(dist::all_reduce(t.t()), ts::ValueError);                                      // not contiguous
  EXPECT_THROW(dist::all_reduce(ts::ones({3}, ts::kInt64), dist::ReduceOp::Avg), ts::DTypeError);
  EXPECT_THROW(dist::all_gather_into_tensor(ts::empty({world * 4 + 1}), ts::ones({4})), ts::ShapeError);
  EXPECT_THROW(dist::all_gather_into_tensor(ts::empty({world * 4}, ts::kFloat64), ts::ones({4})), ts::DTypeError);
  EXPECT_THROW(dist::reduce_scatter_tensor(ts::empty({4}), ts::ones({world * 4 + 2})), ts::ShapeError);
  EXPECT_THROW(dist::broadcast(ts::ones({2}), world), ts::ValueError);
  EXPECT_THROW(dist::send(ts::ones({2}), dist::get_rank()), ts::ValueError);
  if (ts::cuda::is_available()) {  // without a GPU no CUDA tensor can be made to pass
    try {
      dist::all_reduce(ts::ones({2}, ts::TensorOptions(ts::kFloat32, ts::Device("cuda"))));
      ADD_FAILURE() << "a CUDA tensor on the mpi backend did not raise";
    } catch (const ts::DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("mpi backend works on cpu tensors"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(dist::default_group().sequence_number(), seq) << "a rejected call must not take a sequence number";
  EXPECT_THROW(dist::init_process_group("mpi"), ts::ValueError);  // twice
  EXPECT_THROW(dist::default_group().set_timeout(std::chrono::milliseconds(0)), ts::ValueError);
}

TEST(Collectives, LaunchEnvironmentAgreesWithMpi) {
  dist::LaunchEnv env = dist::read_launch_env();
  EXPECT_EQ(env.launcher, "mpirun");
  EXPECT_EQ(env.rank, dist::get_rank());
  EXPECT_EQ(env.world_size, dist::get_world_size());
  EXPECT_EQ(env.local_rank, dist::get_local_rank());
}

// The sampler's partitions: PyTorch's, worked by hand for 10 samples on 3 replicas without shuffling;
// with shuffling, the ranks' parts (gathered) are disjoint, cover the dataset and change by epoch.
TEST(Collectives, DistributedSamplerPartitions) {
  using ts::data::DistributedSampler;
  auto part = [](int64_t n, int rank, bool drop_last) {
    return DistributedSampler(n, {.num_replicas = 3, .rank = rank, .shuffle = false, .drop_last = drop_last}).indices();
  };
  // torch: DistributedSampler(range(10), 3, r, shuffle=False): [0,3,6,9], [1,4,7,0], [2,5,8,1]
  EXPECT_EQ(part(10, 0, false), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(part(10, 1, false), (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(part(10, 2, false), (std::vector<int64_t>{2, 5, 8, 1}));
  // drop_last: [0,3,6], [1,4,7], [2,5,8]
  EXPECT_EQ(part(10, 0, true), (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(part(10, 2, true), (std::vector<int64_t>{2, 5, 8}));
  // a dataset smaller than the padding: range(2) on 3 replicas pads with 0: [0], [1], [0]
  EXPECT_EQ(part(2, 2, false), (std::vector<int64_t>{0}));
  EXPECT_EQ(part(2, 2, true), (std::vector<int64_t>{}));
  EXPECT_THROW(DistributedSampler(10, {.num_replicas = 3, .rank = 3}), ts::ValueError);

  const int world = dist::get_world_size();
  const int64_t n = 101;
  DistributedSampler s(n, {.seed = 7});
  EXPECT_EQ(s.size(), (n + world - 1) / world);
  std::vector<int64_t> prev;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    s.set_epoch(epoch);
    std::vector<int64_t> mine = s.indices();
    ts::Tensor all = ts::empty({world * s.size()}, ts::kInt64);
    dist::all_gather_into_tensor(all, ts::tensor(mine, {s.size()}));
    std::vector<int64_t> every = all.tolist<int64_t>();
    std::vector<int> seen(n, 0);
    for (int64_t i : every) {
      ASSERT_TRUE(i >= 0 && i < n);
      ++seen[i];
    }
    int twice = 0;
    for (int c : seen) {
      EXPECT_GE(c, 1) << "a sample no rank visits";
      twice += c - 1;
    }
    EXPECT_EQ(twice, world * s.size() - n) << "only the padding repeats";
    EXPECT_NE(mine, prev) << "the order must change with the epoch";
    prev = mine;
  }
}

// Rank 1 calls a collective with another size: every rank gets an error naming what each called, and
// the group is aborted afterwards. Runs alone (ctest filter), as it ends the group.
TEST(CollectivesMismatch, SizesDisagreeAcrossRanks) {
  if (dist::get_world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int rank = dist::get_rank();
  ts::Tensor t = ts::ones({rank == 1 ? 5 : 4});
  try {
    dist::all_reduce(t);
    ADD_FAILURE() << "mismatched sizes did not raise";
  } catch (const dist::DistributedError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("all_reduce (sequence number"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 0 called all_reduce on 4 elements of float32"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1 called all_reduce on 5 elements of float32"), std::string::npos) << m;
  }
  EXPECT_TRUE(dist::default_group().is_aborted());
  EXPECT_THROW(dist::barrier(), dist::DistributedError);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* b = std::getenv("TESSERA_TEST_BACKEND");
  const std::string backend = b && *b ? b : "mpi";
  dist::init_process_group(backend, {.timeout = std::chrono::seconds(60)});
  g_dev = dist::default_group().device();
  // Every rank runs every test and prints its report; a failure on any rank fails mpirun.
  return RUN_ALL_TESTS();
}
