// Typed attributes (Note [Typed attributes], src/ops/table/op_attrs.h): equal sets compare and hash
// equal, any changed field makes them differ, they print every field by name, a derivative asking for
// the wrong struct gets a clear error, and the autograd stage refuses a call recorded with a struct
// other than its table row's.
#include <unordered_set>

#include "common/test_util.h"
#include "ops/autograd_hook.h"
#include "ops/table/op_table.h"

namespace ts = tessera;

namespace {
ts::OpAttrs conv(ts::ConvAttrs a) { return ts::OpAttrs{.typed = a}; }
}  // namespace

TEST(OpAttrs, EqualSetsCompareAndHashEqual) {
  const ts::ConvAttrs a{.stride = {2, 2}, .padding = {3, 3}, .groups = 1};
  ts::ConvAttrs b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(ts::hash_value(a), ts::hash_value(b));
  EXPECT_TRUE(conv(a) == conv(b));
  EXPECT_EQ(ts::hash_value(conv(a)), ts::hash_value(conv(b)));
  // Each field changes the comparison (and, for these, the hash).
  std::vector<ts::ConvAttrs> changed(6, a);
  changed[0].stride.w = 1;
  changed[1].padding.h = 0;
  changed[2].dilation = {2, 1};
  changed[3].output_padding = {1, 0};
  changed[4].groups = 4;
  changed[5].kernel = {3, 3};
  std::unordered_set<size_t> hashes = {ts::hash_value(a)};
  for (const ts::ConvAttrs& c : changed) {
    EXPECT_NE(c, a);
    EXPECT_FALSE(conv(c) == conv(a));
    hashes.insert(ts::hash_value(c));
  }
  EXPECT_EQ(hashes.size(), 7u);
  const ts::PoolAttrs p{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
  ts::PoolAttrs q = p;
  q.ceil_mode = true;
  EXPECT_NE(p, q);
  EXPECT_NE(ts::hash_value(p), ts::hash_value(q));
  EXPECT_FALSE(ts::OpAttrs{.typed = p} == ts::OpAttrs{.typed = q});
  // Different structs never compare equal.
  EXPECT_FALSE(conv(a) == ts::OpAttrs{});
}

TEST(OpAttrs, PositionalFieldsCompareHashAndPrint) {
  ts::OpAttrs a;
  a.ints = {0, -1};
  a.flag = true;
  a.scalars = {ts::Scalar(1.5), ts::Scalar(int64_t(2))};
  a.tensors = {ts::zeros({4, 5}, ts::kInt64)};
  ts::OpAttrs b = a;
  b.tensors = {ts::ones({4, 5}, ts::kInt64)};  // other values, same metadata: the same attributes
  EXPECT_TRUE(a == b);
  EXPECT_EQ(ts::hash_value(a), ts::hash_value(b));
  b.scalars[1] = ts::Scalar(2.0);  // a float 2 is not the integer 2
  EXPECT_FALSE(a == b);
  b = a;
  b.tensors = {ts::zeros({4, 5}, ts::kInt32)};
  EXPECT_FALSE(a == b);
  b = a;
  b.ints = {0, 1};
  EXPECT_FALSE(a == b);
  EXPECT_EQ(ts::to_string(a), "ints=[0, -1], scalars=[1.5, 2], flag=true, tensors=[int64(4, 5)]");
  EXPECT_EQ(ts::to_string(ts::OpAttrs{}), "");
}

TEST(OpAttrs, TypedSetsPrintEveryField) {
  EXPECT_EQ(ts::to_string(ts::ConvAttrs{.stride = {2, 2}, .padding = {3, 3}, .groups = 2}),
            "ConvAttrs(stride=(2, 2), padding=(3, 3), dilation=(1, 1), output_padding=(0, 0), groups=2, kernel=(0, 0))");
  EXPECT_EQ(ts::to_string(ts::OpAttrs{.typed = ts::PoolAttrs{.kernel = {2, 2}, .stride = {2, 2}}}),
            "PoolAttrs(kernel=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=false, "
            "count_include_pad=true)");
}

TEST(OpAttrs, ReduceAttrsAreWhatTheReductionsRecord) {
  const ts::ReduceAttrs a{.dims = {0, -1}, .keepdim = true, .correction = 1};
  ts::ReduceAttrs b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(ts::hash_value(a), ts::hash_value(b));
  b.dims = {-1, 0};  // the dims as the caller gave them: another order is another call
  EXPECT_NE(a, b);
  b = a;
  b.keepdim = false;
  EXPECT_NE(ts::hash_value(a), ts::hash_value(b));
  EXPECT_EQ(ts::to_string(a), "ReduceAttrs(dims=[0, -1], keepdim=true, correction=1, p=2)");
  for (ts::OpId id : {ts::OpId::sum, ts::OpId::var, ts::OpId::norm, ts::OpId::cumsum, ts::OpId::max_dim})
    EXPECT_EQ(ts::op_info(id).attrs, ts::AttrsKind::Reduce) << ts::op_name(id);
  // var's backward reads its correction by name: correction 0 and 1 give different gradients.
  ts::Tensor x = ts::randn({6}, ts::kFloat64).requires_grad_();
  ts::Tensor g0 = ts::autograd::grad({ts::var(x, std::nullopt, 0.0)}, {x})[0];
  ts::Tensor g1 = ts::autograd::grad({ts::var(x, std::nullopt, 1.0)}, {x})[0];
  EXPECT_TRUE(ts::testing::all_close(g1 * 5.0, g0 * 6.0));
}

TEST(OpAttrs, NormAndBatchNormAttrs) {
  EXPECT_EQ(ts::to_string(ts::NormAttrs{.normalized_shape = {8}, .eps = 1e-5}), "NormAttrs(normalized_shape=[8], eps=1e-05)");
  EXPECT_EQ(ts::to_string(ts::BatchNormAttrs{.training = true, .eps = 0.001}), "BatchNormAttrs(training=true, eps=0.001)");
  EXPECT_NE(ts::hash_value(ts::NormAttrs{.normalized_shape = {8}}), ts::hash_value(ts::NormAttrs{.normalized_shape = {2, 4}}));
  EXPECT_NE(ts::BatchNormAttrs{.training = true}, ts::BatchNormAttrs{.training = false});
  for (ts::OpId id : {ts::OpId::native_layer_norm, ts::OpId::native_rms_norm, ts::OpId::native_add_layer_norm})
    EXPECT_EQ(ts::op_info(id).attrs, ts::AttrsKind::Norm) << ts::op_name(id);
  EXPECT_EQ(ts::op_info(ts::OpId::native_batch_norm).attrs, ts::AttrsKind::BatchNorm);
  // layer norm's backward reads eps by name: a large eps changes the input gradient.
  ts::Tensor x = ts::randn({3, 8}, ts::kFloat64).requires_grad_();
  ts::Tensor w = ts::randn({3, 8}, ts::kFloat64);
  auto grad_at = [&](double eps) {
    return ts::autograd::grad({(ts::nn::functional::layer_norm(x, {8}, std::nullopt, std::nullopt, eps) * w).sum()},
                              {x})[0];
  };
  EXPECT_FALSE(ts::allclose(grad_at(1e-5), grad_at(10.0)));
}

TEST(OpAttrs, IndexAttrs) {
  EXPECT_EQ(ts::to_string(ts::IndexAttrs{.dim = 1, .alpha = 2}),
            "IndexAttrs(dim=1, alpha=2, accumulate=false, padding_idx=-1)");
  EXPECT_NE(ts::IndexAttrs{.dim = 0}, ts::IndexAttrs{.dim = 1});
  EXPECT_NE(ts::hash_value(ts::IndexAttrs{.accumulate = true}), ts::hash_value(ts::IndexAttrs{}));
  for (ts::OpId id : {ts::OpId::index_select, ts::OpId::gather, ts::OpId::scatter_add, ts::OpId::index_add,
                      ts::OpId::index_put, ts::OpId::embedding, ts::OpId::sort, ts::OpId::topk})
    EXPECT_EQ(ts::op_info(id).attrs, ts::AttrsKind::Index) << ts::op_name(id);
  // index_add's backward reads alpha by name; embedding's, padding_idx (its row gets no gradient).
  ts::Tensor src = ts::randn({2, 3}, ts::kFloat64).requires_grad_();
  ts::Tensor idx = ts::tensor(std::vector<int64_t>{0, 2}, {2});
  ts::Tensor y = ts::index_add(ts::zeros({4, 3}, ts::kFloat64), 0, idx, src, 3.0);
  EXPECT_TRUE(ts::testing::all_close(ts::autograd::grad({y.sum()}, {src})[0], ts::full({2, 3}, 3.0, ts::kFloat64)));
  ts::Tensor w = ts::randn({5, 2}, ts::kFloat64).requires_grad_();
  ts::Tensor e = ts::embedding(w, ts::tensor(std::vector<int64_t>{1, 3, 1}, {3}), 1);
  ts::Tensor gw = ts::autograd::grad({e.sum()}, {w})[0];
  EXPECT_EQ(gw.tolist<double>(), (std::vector<double>{0, 0, 0, 0, 0, 0, 1, 1, 0, 0}));
}

TEST(OpAttrs, AskingForTheWrongStructIsAClearError) {
  const ts::OpAttrs a = conv({});
  EXPECT_NO_THROW(a.as<ts::ConvAttrs>());
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] { a.as<ts::PoolAttrs>(); })
                .find("expected PoolAttrs attributes, the call carries ConvAttrs"),
            std::string::npos);
}

TEST(OpAttrs, TheAutogradStageChecksTheTableColumn) {
  EXPECT_EQ(ts::op_info(ts::OpId::conv2d).attrs, ts::AttrsKind::Conv);
  EXPECT_EQ(ts::op_info(ts::OpId::avg_pool2d).attrs, ts::AttrsKind::Pool);
  EXPECT_EQ(ts::op_info(ts::OpId::add).attrs, ts::AttrsKind::Positional);
  ts::Tensor x = ts::randn({1, 1, 4, 4}).requires_grad_();
  ts::Tensor y = ts::randn({1, 1, 4, 4});
  // A conv2d recorded with positional attributes, or an add with ConvAttrs, is refused.
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] {
              ts::record_op(ts::OpId::conv2d, {x, x, ts::Tensor()}, {y}, ts::OpAttrs{});
            }).find("conv2d: recorded with positional attributes, but the op table says ConvAttrs"),
            std::string::npos);
  EXPECT_NE(ts::testing::message_of<ts::ValueError>([&] {
              ts::record_op(ts::OpId::add, {x, x}, {y}, conv({}));
            }).find("add: recorded with ConvAttrs attributes, but the op table says positional"),
            std::string::npos);
  // The real ops record what their rows say (their backward reads the named fields).
  ts::Tensor w = ts::randn({2, 1, 3, 3}).requires_grad_();
  ts::Tensor out = ts::conv2d(x, w, std::nullopt, 1, 1);
  ts::Tensor pooled = ts::max_pool2d(out, 2);
  EXPECT_NO_THROW(pooled.sum().backward());
  EXPECT_TRUE(x.grad().defined());
  EXPECT_TRUE(w.grad().defined());
}
