// The op table (src/ops/table/op_table.def) as the one source of op identity: names unique and
// parsable back, each row's columns consistent with one another, and a walk over OpId that fails for
// a row whose grad column says Formula but has no registered derivative (and the reverse: the
// registry refuses a derivative for a row that does not say Formula). The autocast column is what
// amp::autocast_policy reports.
#include <set>
#include <string>

#include "autograd/op_node.h"
#include "common/test_util.h"
#include "ops/table/op_table.h"

namespace ts = tessera;
using ts::OpId;

namespace {

std::vector<OpId> all_ops() {
  std::vector<OpId> v;
  for (int i = 0; i < ts::kNumOps; ++i) v.push_back(static_cast<OpId>(i));
  return v;
}

}  // namespace

TEST(OpTable, NamesAreUniqueAndParseBack) {
  std::set<std::string> seen;
  for (OpId id : all_ops()) {
    const std::string name = ts::op_name(id);
    EXPECT_TRUE(seen.insert(name).second) << "duplicate op name " << name;
    ASSERT_TRUE(ts::op_from_name(name).has_value()) << name;
    EXPECT_EQ(*ts::op_from_name(name), id) << name;
    EXPECT_EQ(ts::op_info(id).id, id) << name;
  }
  EXPECT_FALSE(ts::op_from_name("no_such_op").has_value());
  EXPECT_FALSE(ts::op_from_name("").has_value());
  EXPECT_FALSE(ts::op_from_name("ad").has_value());  // a prefix of "add" is not "add"
  EXPECT_STREQ(ts::op_name(OpId::add), "add");
  EXPECT_STREQ(ts::op_family_name(ts::op_info(OpId::conv2d).family), "conv");
  EXPECT_STREQ(ts::op_kind_name(ts::op_info(OpId::add_out).kind), "out");
}

// Columns that must agree: out= forms are never autocast and never differentiable (they refuse
// recording); views are differentiable by a formula; factories have no gradient.
TEST(OpTable, ColumnsAreConsistent) {
  for (OpId id : all_ops()) {
    const ts::OpInfo& r = ts::op_info(id);
    const std::string name = r.name;
    if (r.kind == ts::OpKind::Out) {
      EXPECT_EQ(r.autocast, ts::AutocastPolicy::None) << name;
      EXPECT_EQ(r.grad, ts::OpGrad::None) << name;
      EXPECT_TRUE(name.ends_with("_out")) << name;
    }
    if (r.kind == ts::OpKind::View) {
      EXPECT_EQ(r.grad, ts::OpGrad::Formula) << name;
    }
    if (r.kind == ts::OpKind::Factory) {
      EXPECT_EQ(r.grad, ts::OpGrad::None) << name;
    }
    if (r.kind == ts::OpKind::InPlace) {
      EXPECT_TRUE(name.ends_with("_")) << name;
    }
  }
}

// The walk over OpId: every row that claims a derivative formula has one, and every registered
// derivative belongs to such a row (register_derivative refuses others at start-up, so a derivative
// registered under a wrong row would already have failed library initialization).
TEST(OpTable, EveryFormulaRowHasADerivative) {
  int formulas = 0;
  for (OpId id : all_ops()) {
    const bool has = ts::autograd::find_derivative(id) != nullptr;
    if (ts::op_info(id).grad == ts::OpGrad::Formula) {
      ++formulas;
      EXPECT_TRUE(has) << ts::op_name(id) << ": the table says Formula but no derivative is registered";
    } else {
      EXPECT_FALSE(has) << ts::op_name(id) << ": a derivative is registered but the table says "
                        << (ts::op_info(id).grad == ts::OpGrad::Composite ? "Composite" : "None");
    }
  }
  EXPECT_GT(formulas, 100);
}

TEST(OpTable, RegistryRefusesAWrongOrRepeatedRegistration) {
  const ts::autograd::Derivative d{[](const ts::autograd::BackwardContext&, const std::vector<ts::Tensor>&) {
    return std::vector<ts::Tensor>{};
  }};
  // eq has no gradient; add already has its derivative.
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { ts::autograd::register_derivative(OpId::eq, d); })
                .find("eq is not marked differentiable"),
            std::string::npos);
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { ts::autograd::register_derivative(OpId::add, d); })
                .find("add is registered twice"),
            std::string::npos);
}

TEST(OpTable, AutocastPolicyIsTheTableColumn) {
  namespace amp = ts::amp;
  for (OpId id : all_ops()) {
    const auto p = amp::autocast_policy(ts::op_name(id));
    switch (ts::op_info(id).autocast) {
      case ts::AutocastPolicy::None: EXPECT_FALSE(p.has_value()) << ts::op_name(id); break;
      case ts::AutocastPolicy::Lower: EXPECT_EQ(p, amp::CastPolicy::LowerPrecision) << ts::op_name(id); break;
      case ts::AutocastPolicy::Float32: EXPECT_EQ(p, amp::CastPolicy::Float32) << ts::op_name(id); break;
      case ts::AutocastPolicy::Promote: EXPECT_EQ(p, amp::CastPolicy::Promote) << ts::op_name(id); break;
    }
  }
  EXPECT_FALSE(amp::autocast_policy("not_an_op").has_value());
}

// A view op's output is known to autograd as a view of its input (Note [View tracking]): an in-place
// write to a view of a leaf is refused, one to a view of a non-leaf rewrites the base's history; a
// functional op's output is no view.
TEST(OpTable, ViewKindMarksAutogradViews) {
  ts::Tensor x = ts::randn({3, 4}).requires_grad_();
  ts::Tensor v = x.transpose(0, 1);
  ts::Tensor f = x.mul(2.0);
  EXPECT_THROW(v.mul_(2.0), ts::ValueError);
  EXPECT_NO_THROW(f.transpose(0, 1).mul_(2.0));
  EXPECT_EQ(f.grad_fn()->name(), "CopySlices");
  EXPECT_NO_THROW(x.mul(2.0).mul_(2.0));
}
