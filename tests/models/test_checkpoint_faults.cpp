// Faults that lose nothing (Note [Atomic checkpoint]): a process killed while it saves, and a save
// that runs out of space, both leave the previous checkpoint loadable and equal to what was saved.
// Each fault happens in a forked child, so the test process keeps its own limits and signals.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <vector>
#include <cmath>
#include <filesystem>
#include <thread>

#include "common/test_util.h"

namespace ts = tessera;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tessera_ckpt_fault_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

// A model whose every parameter holds `v`, so that a loaded checkpoint tells which save it came from.
void fill(ts::nn::Module& m, double v) {
  ts::NoGradGuard g;
  for (ts::Tensor& p : m.parameters()) p.fill_(v);
}
// The value of every parameter if they all agree, else NaN.
double common_value(ts::nn::Module& m) {
  double v = m.parameters()[0].reshape({-1})[0].item<double>();
  for (ts::Tensor& p : m.parameters())
    if (!ts::equal(p, ts::full_like(p, v))) return std::nan("");
  return v;
}

void remove_siblings(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir.parent_path()))
    if (e.path().filename().string().rfind(dir.filename().string(), 0) == 0) fs::remove_all(e.path());
}

TEST(CheckpointFaults, KilledWhileSavingLeavesAWholeCheckpoint) {
  const fs::path dir = scratch("kill");
  ts::models::MLP m(64, {256, 256}, 10);  // ~85k parameters: a save takes long enough to be cut
  fill(m, 1.0);
  // How long one save takes here (its fsyncs dominate, and a slow disk makes them slow): the kills
  // land at fractions of it, so that they cut a save in its middle on any machine.
  const auto t0 = std::chrono::steady_clock::now();
  ts::save_checkpoint(dir.string(), m, nullptr, nullptr, 1);
  const auto save_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  // The child only writes (no kernels: OpenMP's thread pool does not survive fork), so the models
  // it saves are filled here.
  std::vector<std::unique_ptr<ts::models::MLP>> versions;
  for (int k = 0; k < 4; ++k) {
    versions.push_back(std::make_unique<ts::models::MLP>(64, std::vector<int64_t>{256, 256}, 10));
    fill(*versions.back(), 2.0 + k);
  }
  for (int round = 0; round < 12; ++round) {
    int done[2];
    ASSERT_EQ(::pipe(done), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // saves forever, each save of the value it names as its step; a byte per save
      ::close(done[0]);
      for (int k = 0;; k = (k + 1) % 4) {
        ts::save_checkpoint(dir.string(), *versions[k], nullptr, nullptr, 2 + k);
        const char b = 1;
        if (::write(done[1], &b, 1) != 1) ::_exit(7);
      }
    }
    ::close(done[1]);
    // Once the child has replaced the checkpoint at least once, kill it somewhere in a later save:
    // the delay walks from the start of a save to past its end.
    char b = 0;
    ASSERT_EQ(::read(done[0], &b, 1), 1) << "round " << round << ": the child died before its first save";
    std::this_thread::sleep_for(std::chrono::microseconds(save_us * (1 + round % 6) / 4));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ::close(done[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round;
    ts::models::MLP back(64, {256, 256}, 10);
    int64_t step = -1;
    ASSERT_NO_THROW(step = ts::load_checkpoint(dir.string(), back)) << "round " << round;
    // Whichever save was the last whole one: its step and its values agree, and it is one of the
    // child's (the first replace completed before the kill).
    EXPECT_GT(step, 1) << "round " << round;
    EXPECT_EQ(common_value(back), static_cast<double>(step)) << "round " << round;
  }
  remove_siblings(dir);
}

TEST(CheckpointFaults, FullDiskRaisesIOErrorAndKeepsThePrevious) {
  const fs::path dir = scratch("full");
  ts::models::MLP m(64, {256, 256}, 10);
  fill(m, 3.0);
  ts::save_checkpoint(dir.string(), m, nullptr, nullptr, 3);
  fill(m, 4.0);  // in the parent: the child runs no kernels (see above)
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Files may grow to 64 KiB: the model's 340 KB do not fit. SIGXFSZ would kill; ignored, write
    // fails with EFBIG instead, as on a full disk.
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{64 * 1024, 64 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      ts::save_checkpoint(dir.string(), m, nullptr, nullptr, 4);
    } catch (const ts::IOError& e) {
      const std::string what = e.what();
      ::_exit(what.find("model.safetensors") != std::string::npos ? 0 : 3);  // names the file
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(5);  // the save claimed success
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the IOError does not name the file; 4: another error; 5: no error";
  ts::models::MLP back(64, {256, 256}, 10);
  EXPECT_EQ(ts::load_checkpoint(dir.string(), back), 3);
  EXPECT_EQ(common_value(back), 3.0);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.parent_path()))
    entries += e.path().filename().string().rfind(dir.filename().string(), 0) == 0;
  EXPECT_EQ(entries, 1) << "the failed save left its temporary directory";
  remove_siblings(dir);
}

TEST(CheckpointFaults, ASaveKilledBetweenItsRenamesIsFoundAside) {
  // Where the filesystem cannot exchange two directories, the previous checkpoint is moved to
  // dir.old.<pid> before the new one is renamed in; a kill between the two leaves no dir at all.
  const fs::path dir = scratch("aside");
  ts::models::MLP m(4, {8}, 2);
  fill(m, 5.0);
  ts::save_checkpoint(dir.string(), m, nullptr, nullptr, 5);
  fs::rename(dir, dir.string() + ".old.12345");
  ts::models::MLP back(4, {8}, 2);
  EXPECT_EQ(ts::load_checkpoint(dir.string(), back), 5);
  EXPECT_EQ(common_value(back), 5.0);
  remove_siblings(dir);
}

}  // namespace
