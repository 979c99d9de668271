// GPT-2's fused paths against the unfused math, on the CPU in float64: the trunk with each residual
// add fused into the following layer norm (ln_2, the next block's ln_1, ln_f) and c_fc + GELU as
// linear_gelu, against the same modules composed as Hugging Face writes the block; the chunked
// loss() against forward(idx, targets), values and gradients; every block checkpointed against not.
#include <set>
#include <string>
#include <tuple>

#include "common/test_util.h"
#include "tessera/models.h"
#include "tessera/nn/functional.h"
#include "tessera/profiler.h"

namespace ts = tessera;
namespace F = tessera::nn::functional;
using namespace tessera::testing;

namespace {

ts::models::GPT2Config tiny(int64_t layers) {
  ts::models::GPT2Config cfg;
  cfg.n_layer = layers;
  cfg.n_head = 2;
  cfg.n_embd = 16;
  cfg.n_positions = 12;
  cfg.vocab_size = 37;
  cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = 0.0;
  return cfg;
}

// HF's GPT2Model.forward written out with the model's own modules, no fused op.
ts::Tensor unfused_trunk(ts::models::GPT2Model& m, const ts::Tensor& idx) {
  ts::Tensor pos = ts::arange(idx.size(1), ts::TensorOptions(ts::kInt64));
  ts::Tensor x = m.wte(idx) + m.wpe(pos);
  for (size_t i = 0; i < m.h.size(); ++i) {
    auto& b = m.h.at<ts::models::GPT2Block>(static_cast<int64_t>(i));
    x = x + b.attn(b.ln_1(x));
    x = x + b.mlp.c_proj(F::gelu(b.mlp.c_fc(b.ln_2(x)), "tanh"));
  }
  return m.ln_f(x);
}

TEST(GPT2Fused, TrunkMatchesUnfusedBlocks) {
  for (int64_t layers : {0, 1, 3}) {
    ts::manual_seed(3);
    ts::models::GPT2 model(tiny(layers));
    model.to(ts::kFloat64);
    ts::Tensor idx = test_data({2, 9}, ts::kInt64, 7, 0, 37).reshape({2, 9});
    ts::Tensor got = model.transformer.forward(idx, nullptr);
    ts::Tensor want = unfused_trunk(model.transformer, idx);
    EXPECT_TRUE(all_close(got, want, {1e-12, 1e-12})) << layers << " layers";
    // A block alone (forward) is the same math too.
    if (layers > 0) {
      auto& b = model.transformer.h.at<ts::models::GPT2Block>(0);
      ts::Tensor x = test_data({2, 5, 16}, ts::kFloat64, 8).reshape({2, 5, 16});
      ts::Tensor y = x + b.attn(b.ln_1(x));
      y = y + b.mlp.c_proj(F::gelu(b.mlp.c_fc(b.ln_2(y)), "tanh"));
      EXPECT_TRUE(all_close(b.forward(x, nullptr), y, {1e-12, 1e-12}));
    }
  }
}

// GPT2Config::fused = false runs the composite ops; same weights, same values and gradients.
TEST(GPT2Fused, UnfusedConfigMatchesFused) {
  ts::manual_seed(5);
  ts::models::GPT2 fused(tiny(2));
  ts::models::GPT2Config cfg = tiny(2);
  cfg.fused = false;
  ts::models::GPT2 plain(cfg);
  fused.to(ts::kFloat64);
  plain.to(ts::kFloat64);
  plain.load_state_dict(fused.state_dict());
  ts::Tensor idx = test_data({2, 8}, ts::kInt64, 11, 0, 37).reshape({2, 8});
  ts::Tensor tgt = test_data({2, 8}, ts::kInt64, 12, 0, 37).reshape({2, 8});
  ts::Tensor a = fused.loss(idx, tgt), b = plain.loss(idx, tgt);
  EXPECT_TRUE(all_close(a, b, {1e-12, 1e-12}));
  a.backward();
  b.backward();
  auto pa = fused.named_parameters(), pb = plain.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(all_close(pa[i].second.grad(), pb[i].second.grad(), {1e-10, 1e-12})) << pa[i].first;
  // The single block's forward takes the composite path too.
  auto& blk = plain.transformer.h.at<ts::models::GPT2Block>(0);
  ts::Tensor x = test_data({2, 5, 16}, ts::kFloat64, 13).reshape({2, 5, 16});
  EXPECT_TRUE(all_close(blk.forward(x, nullptr), fused.transformer.h.at<ts::models::GPT2Block>(0).forward(x, nullptr),
                        {1e-12, 1e-12}));
  // Cached generation steps: the prompt, then one token at a time.
  ts::models::GPT2KVCache ca, cb;
  EXPECT_TRUE(all_close(fused.forward(idx.narrow(1, 0, 5), &ca), plain.forward(idx.narrow(1, 0, 5), &cb), {1e-12, 1e-12}));
  EXPECT_TRUE(all_close(fused.forward(idx.narrow(1, 5, 1), &ca), plain.forward(idx.narrow(1, 5, 1), &cb), {1e-12, 1e-12}));
  // Which ops ran: the fused ones only in the fused model (equal values alone would not tell).
  auto ops_of = [&](ts::models::GPT2& m) {
    ts::profiler::profile p;
    m.loss(idx, tgt).backward();
    p.stop();
    std::set<std::string> names;
    for (const auto& e : p.events()) names.insert(e.name);
    return names;
  };
  const std::set<std::string> f = ops_of(fused), u = ops_of(plain);
  for (const char* op : {"native_add_layer_norm", "mlp_gelu"}) {
    EXPECT_TRUE(f.count(op)) << op << " not run by the fused model";
    EXPECT_FALSE(u.count(op)) << op << " run by the model built with fused = false";
  }
  EXPECT_TRUE(u.count("native_layer_norm") && u.count("gelu"));
}

TEST(GPT2Fused, ChunkedLossMatchesLogitsLoss) {
  ts::manual_seed(4);
  ts::models::GPT2 model(tiny(2));
  model.to(ts::kFloat64);
  ts::Tensor idx = test_data({3, 10}, ts::kInt64, 9, 0, 37).reshape({3, 10});
  ts::Tensor tgt = test_data({3, 10}, ts::kInt64, 10, 0, 37).reshape({3, 10});
  tgt.narrow(1, 0, 2).fill_(-100);
  ts::Tensor fused = model.loss(idx, tgt, /*chunk_rows=*/7);
  fused.backward();
  std::vector<ts::Tensor> g_fused;
  for (const ts::Tensor& p : model.parameters()) g_fused.push_back(p.grad().clone());
  model.zero_grad();
  auto [logits, loss] = model.forward(idx, tgt);
  EXPECT_EQ(logits.sizes(), ts::Shape({3, 10, 37}));
  loss.backward();
  EXPECT_TRUE(all_close(fused, loss, {1e-12, 1e-12}));
  size_t i = 0;
  for (const ts::Tensor& p : model.parameters()) EXPECT_TRUE(all_close(g_fused[i++], p.grad(), {1e-10, 1e-12}));
  EXPECT_THROW(model.loss(idx, tgt.narrow(1, 0, 5)), ts::ShapeError);
}


// GPT2Config::gradient_checkpointing, in both forms (gradient_checkpointing_use_reentrant): the same
// loss and gradients (dropout on: the recomputation replays its random numbers), the blocks' forward
// ops run twice (once more in backward), and only in training mode with grad on.
TEST(GPT2Fused, GradientCheckpointingEqualsPlainTrainingWithDropout) {
  for (bool reentrant : {true, false})
  for (bool fused : {true, false}) {
    SCOPED_TRACE(reentrant ? "reentrant" : "non-reentrant");
    ts::models::GPT2Config cfg = tiny(3);
    cfg.fused = fused;
    cfg.gradient_checkpointing_use_reentrant = reentrant;
    cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = 0.1;
    ts::manual_seed(21);
    ts::models::GPT2 plain(cfg);
    cfg.gradient_checkpointing = true;
    ts::models::GPT2 ckpt(cfg);
    plain.to(ts::kFloat64);
    ckpt.to(ts::kFloat64);
    ckpt.load_state_dict(plain.state_dict());
    ts::Tensor idx = test_data({2, 8}, ts::kInt64, 31, 0, 37).reshape({2, 8});
    ts::Tensor tgt = test_data({2, 8}, ts::kInt64, 32, 0, 37).reshape({2, 8});
    auto step = [&](ts::models::GPT2& m, int* forward_ops) {
      ts::manual_seed(99);
      ts::profiler::profile p;
      ts::Tensor loss = m.loss(idx, tgt);
      loss.backward();
      p.stop();
      *forward_ops = 0;
      for (const auto& e : p.events()) *forward_ops += e.name == (fused ? "native_add_layer_norm" : "native_layer_norm");
      return loss;
    };
    int n_plain = 0, n_ckpt = 0;
    ts::Tensor a = step(plain, &n_plain), b = step(ckpt, &n_ckpt);
    EXPECT_TRUE(all_close(a, b, {1e-12, 1e-12})) << "fused " << fused;
    auto pa = plain.named_parameters(), pb = ckpt.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      EXPECT_TRUE(all_close(pa[i].second.grad(), pb[i].second.grad(), {1e-10, 1e-12})) << pa[i].first << " fused " << fused;
    // Each block's norms run again in the recomputation: fused, all of the add + layer norms are the
    // blocks' (the last one computes ln_f); unfused, ln_f runs once, outside the blocks.
    EXPECT_EQ(n_ckpt, fused ? 2 * n_plain : 2 * n_plain - 1) << "fused " << fused << ": " << n_plain << " norms without, " << n_ckpt << " with";
    ckpt.eval();
    ts::manual_seed(99);
    ts::profiler::profile p;
    ckpt.loss(idx, tgt).backward();
    p.stop();
    int n_eval = 0;
    for (const auto& e : p.events()) n_eval += e.name == (fused ? "native_add_layer_norm" : "native_layer_norm");
    EXPECT_EQ(n_eval, n_plain) << "eval mode does not checkpoint";
  }
}

}  // namespace
