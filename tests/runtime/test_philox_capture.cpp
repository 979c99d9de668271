// The Generator side of random numbers under CUDA graph capture (Note [Philox under graph capture],
// runtime/philox_capture.h), without a GPU: during a capture the capturing thread's reservations are
// relative to the graph and carry the device words' pointers; other threads and other generators
// reserve as usual; the capture's total is what each replay reserves; a generator is captured once at a time.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/philox_capture.h"
#include "tessera/error.h"
#include "tessera/generator.h"

namespace {

using namespace tessera;

TEST(PhiloxCapture, ReservationsDuringACaptureAreRelativeToTheGraph) {
  Generator gen(42), other(7);
  gen.reserve(100);  // the generator's offset before the capture does not matter to the graph
  uint64_t words[2] = {0, 0};
  CapturedPhilox c;
  EXPECT_FALSE(philox_reserve_captured(gen, 5, &c));  // no capture yet
  philox_capture_begin(gen, &words[0], &words[1]);
  ASSERT_TRUE(philox_reserve_captured(gen, 5, &c));
  EXPECT_EQ(c.seed_ptr, &words[0]);
  EXPECT_EQ(c.offset_ptr, &words[1]);
  EXPECT_EQ(c.offset, 0u);
  ASSERT_TRUE(philox_reserve_captured(gen, 3, &c));
  EXPECT_EQ(c.offset, 5u);
  EXPECT_FALSE(philox_reserve_captured(other, 3, &c));  // another generator: eager
  bool from_other_thread = true;
  std::thread t([&] {
    CapturedPhilox d;
    from_other_thread = philox_reserve_captured(gen, 4, &d);
  });
  t.join();
  EXPECT_FALSE(from_other_thread) << "a thread that is not capturing drew from the graph";
  EXPECT_EQ(gen.offset(), 100u) << "the capture moved the generator";
  EXPECT_THROW(philox_capture_begin(gen, &words[0], &words[1]), ValueError);
  EXPECT_EQ(philox_capture_end(gen), 8u);
  EXPECT_FALSE(philox_reserve_captured(gen, 5, &c));
  EXPECT_EQ(philox_capture_end(gen), 0u);
  // Each replay then reserves the capture's total from the generator: successive replays never overlap.
  EXPECT_EQ(gen.reserve(8).second, 100u);
  EXPECT_EQ(gen.reserve(8).second, 108u);
}

}  // namespace
