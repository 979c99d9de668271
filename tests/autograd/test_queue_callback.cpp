// autograd::queue_callback (Note [Final callbacks]): a callback queued by a hook runs once, after the
// last node of its backward pass; callbacks may queue more; outside a pass it raises; a pass that
// raises drops them; a backward started inside a hook keeps its own list.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/autograd/callbacks.h"
#include "tessera/tessera.h"

namespace ts = tessera;

TEST(QueueCallback, RunsAfterTheLastNodeOfThePass) {
  ts::Tensor a = ts::ones({3}).requires_grad_(), b = ts::ones({3}).requires_grad_();
  std::vector<std::string> log;
  bool both_ready = false;
  // a's gradient arrives first (b's branch was recorded last, so it runs first... either way: the
  // callback must see both).
  a.register_post_accumulate_grad_hook([&](const ts::Tensor&) {
    log.push_back("a");
    ts::autograd::queue_callback([&] {
      log.push_back("callback");
      both_ready = a.grad().defined() && b.grad().defined();
    });
  });
  b.register_post_accumulate_grad_hook([&](const ts::Tensor&) { log.push_back("b"); });
  ((a * 2).sum() + (b * 3).sum()).backward();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log.back(), "callback");
  EXPECT_TRUE(both_ready);
  EXPECT_FALSE(ts::autograd::in_backward_pass());
}

TEST(QueueCallback, ACallbackMayQueueAnother) {
  ts::Tensor a = ts::ones({2}).requires_grad_();
  std::vector<int> order;
  a.register_post_accumulate_grad_hook([&](const ts::Tensor&) {
    EXPECT_TRUE(ts::autograd::in_backward_pass());
    ts::autograd::queue_callback([&] {
      order.push_back(1);
      ts::autograd::queue_callback([&] { order.push_back(2); });
    });
  });
  (a * a).sum().backward();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  (a * a).sum().backward();  // queued again by the next pass, run once each
  EXPECT_EQ(order, (std::vector<int>{1, 2, 1, 2}));
}

TEST(QueueCallback, OutsideBackwardRaises) {
  try {
    ts::autograd::queue_callback([] {});
    FAIL() << "expected ValueError";
  } catch (const ts::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Final callbacks can only be installed during backward pass"),
              std::string::npos);
  }
}

TEST(QueueCallback, APassThatRaisesDropsItsCallbacks) {
  ts::Tensor a = ts::ones({2}).requires_grad_(), b = ts::ones({2}).requires_grad_();
  int ran = 0;
  a.register_post_accumulate_grad_hook([&](const ts::Tensor&) { ts::autograd::queue_callback([&] { ++ran; }); });
  b.register_post_accumulate_grad_hook([&](const ts::Tensor&) { throw ts::ValueError("hook failed"); });
  EXPECT_THROW(((a * 2).sum() + (b * 3).sum()).backward(), ts::ValueError);
  EXPECT_EQ(ran, 0);
  EXPECT_FALSE(ts::autograd::in_backward_pass());
}

TEST(QueueCallback, ANestedPassRunsItsOwnCallbacks) {
  ts::Tensor a = ts::ones({2}).requires_grad_(), c = ts::ones({2}).requires_grad_();
  std::vector<std::string> log;
  c.register_post_accumulate_grad_hook([&](const ts::Tensor&) {
    ts::autograd::queue_callback([&] { log.push_back("inner callback"); });
  });
  a.register_post_accumulate_grad_hook([&](const ts::Tensor&) {
    ts::autograd::queue_callback([&] { log.push_back("outer callback"); });
    ts::EnableGradGuard grad_mode;  // hooks run with grad mode off
    (c * c).sum().backward();       // a pass inside a hook of the outer one
    log.push_back("inner pass returned");
  });
  (a * 2).sum().backward();
  EXPECT_EQ(log, (std::vector<std::string>{"inner callback", "inner pass returned", "outer callback"}));
}
