// The architecture check's rules (runtime/cuda_arch.h), without a GPU: which compute capabilities a
// CMAKE_CUDA_ARCHITECTURES list can run on.
#include <gtest/gtest.h>

#include "runtime/cuda_arch.h"

namespace {

using namespace tessera::cuda_arch;

TEST(CudaArch, DefaultReleaseList) {
  const ArchList l = parse("70-real,75-real,80-real,86-real,89-real,90");
  EXPECT_FALSE(l.unchecked);
  EXPECT_TRUE(supports(l, 9, 0));
  EXPECT_TRUE(supports(l, 8, 6));
  EXPECT_TRUE(supports(l, 8, 7));   // sm_86 SASS runs on sm_87 (same major, higher minor)
  EXPECT_TRUE(supports(l, 10, 0));  // PTX of compute_90 is compiled for newer GPUs
  EXPECT_FALSE(supports(l, 6, 1));
  EXPECT_EQ(sass_numbers(l), (std::vector<int>{70, 75, 80, 86, 89, 90}));
  EXPECT_EQ(ptx_numbers(l), (std::vector<int>{90}));
  EXPECT_EQ(describe(l), "sm_70, sm_75, sm_80, sm_86, sm_89, sm_90, compute_90 (PTX)");
}

TEST(CudaArch, SassOnlyRunsOnTheSameMajor) {
  const ArchList l = parse("90-real");
  EXPECT_TRUE(supports(l, 9, 0));
  EXPECT_FALSE(supports(l, 8, 9));
  EXPECT_FALSE(supports(l, 10, 0));
  EXPECT_FALSE(supports(l, 12, 0));
  const ArchList m = parse("80-real;86-real");  // CMake's own separator
  EXPECT_TRUE(supports(m, 8, 9));
  EXPECT_FALSE(supports(m, 7, 5));
  EXPECT_FALSE(supports(m, 9, 0));
}

TEST(CudaArch, PtxRunsOnAnyNewerGpu) {
  const ArchList l = parse("80");
  EXPECT_TRUE(supports(l, 8, 0));
  EXPECT_TRUE(supports(l, 9, 0));
  EXPECT_TRUE(supports(l, 12, 0));
  EXPECT_FALSE(supports(l, 7, 5));
  const ArchList v = parse("75-virtual");
  EXPECT_TRUE(supports(v, 9, 0));
  EXPECT_TRUE(sass_numbers(v).empty());
}

TEST(CudaArch, ArchSpecificAndFamilyCode) {
  const ArchList a = parse("90a");
  EXPECT_TRUE(supports(a, 9, 0));
  EXPECT_FALSE(supports(a, 10, 0));
  EXPECT_EQ(describe(a), "sm_90a, compute_90a (PTX)");
  const ArchList f = parse("100f-real");
  EXPECT_TRUE(supports(f, 10, 3));
  EXPECT_FALSE(supports(f, 12, 0));
}

TEST(CudaArch, SpecialValuesAreNotChecked) {
  for (const char* s : {"native", "all", "all-major", "", "garbage"}) {
    const ArchList l = parse(s);
    EXPECT_TRUE(l.unchecked) << s;
    EXPECT_TRUE(supports(l, 3, 0)) << s;
  }
}

}  // namespace
