// The dispatch path's tracer slot (ops/op_scope.h) over whole training steps: a recording tracer is
// installed beside the profiler and a wrapper of the autograd stage, and one training step of GPT-2
// small (the 124M configuration, AdamW fused, gradient clipping) and one of ResNet-18 (SGD with
// momentum, batch norm in training mode) run on the CPU. Then:
//   * no kernel slot ran outside every op (Note [Scoped kernels]): nothing bypassed the path;
//   * the tracer saw exactly the ops the profiler saw, in the same order, with their input metadata;
//   * every op that autograd recorded was seen by the tracer;
//   * the ops that the steps must contain (the fused optimizer step among them) are there.
#include <map>
#include <set>

#include "common/test_util.h"
#include "ops/autograd_hook.h"
#include "ops/op_scope.h"
#include "ops/optim_kernel.h"

namespace ts = tessera;
namespace prof = ts::profiler;
using ts::OpId;

namespace {

struct TracedOp {
  OpId op;
  int depth;  // 0 for an op called by the program, > 0 inside another op
  std::vector<ts::Shape> shapes;
  std::vector<ts::DType> dtypes;
};

class RecordingTracer final : public ts::TracerStage {
 public:
  void on_enter(const ts::OpEvent& e) override {
    TracedOp t{e.op, depth_++, {}, {}};
    for (int i = 0; i < e.num_inputs; ++i) {
      const ts::Tensor* x = e.inputs[i];
      t.shapes.push_back(x && x->defined() ? x->sizes() : ts::Shape{});
      t.dtypes.push_back(x && x->defined() ? x->dtype() : ts::kFloat32);
    }
    ops.push_back(std::move(t));
  }
  void on_exit(const ts::OpEvent&) override { --depth_; }
  void on_unscoped_kernel(const char* kernel) override { unscoped.push_back(kernel); }

  std::vector<TracedOp> ops;
  std::vector<std::string> unscoped;

 private:
  int depth_ = 0;
};

// Forwards to the real autograd stage, noting which ops it records.
class RecordingAutograd final : public ts::AutogradStage {
 public:
  explicit RecordingAutograd(ts::AutogradStage* real) : real_(real) {}
  void record(OpId op, const std::vector<ts::Tensor>& inputs, const std::vector<ts::Tensor>& outputs,
              ts::OpAttrs&& attrs) override {
    recorded.insert(op);
    real_->record(op, inputs, outputs, std::move(attrs));
  }
  std::set<OpId> recorded;

 private:
  ts::AutogradStage* real_;
};

struct StepTrace {
  RecordingTracer tracer;
  std::vector<std::string> profiled;  // names of the profiler's op events, in start order
  std::set<OpId> recorded;
};

// Runs `step` with the tracer, the profiler and the autograd wrapper installed.
template <class Step>
void trace(StepTrace& out, Step&& step) {
  ts::AutogradStage* real = ts::autograd_stage();
  ASSERT_NE(real, nullptr);
  RecordingAutograd autograd(real);
  ts::set_autograd_stage(&autograd);
  ASSERT_EQ(ts::set_tracer_stage(&out.tracer), nullptr);
  {
    prof::profile p;
    step();
    p.stop();
    for (const prof::Event& e : p.events())
      if (e.kind == prof::EventKind::Op) out.profiled.push_back(e.name);
  }
  ts::set_tracer_stage(nullptr);
  ts::set_autograd_stage(real);
  out.recorded = autograd.recorded;
}

void expect_complete(const StepTrace& t, const std::vector<OpId>& required) {
  EXPECT_TRUE(t.tracer.unscoped.empty()) << "kernels run outside every op, first: " << t.tracer.unscoped.front();
  std::vector<std::string> traced;
  for (const TracedOp& o : t.tracer.ops) traced.push_back(ts::op_name(o.op));
  EXPECT_EQ(traced, t.profiled) << "the tracer and the profiler saw different ops";
  std::set<OpId> seen;
  for (const TracedOp& o : t.tracer.ops) seen.insert(o.op);
  for (OpId op : t.recorded) EXPECT_TRUE(seen.count(op)) << ts::op_name(op) << " was recorded by autograd unseen";
  for (OpId op : required) EXPECT_TRUE(seen.count(op)) << ts::op_name(op) << " is missing from the trace";
  std::map<std::string, int> top;
  for (const TracedOp& o : t.tracer.ops)
    if (o.depth == 0) ++top[ts::op_name(o.op)];
  std::string summary;
  for (const auto& [name, n] : top) summary += name + " x" + std::to_string(n) + "  ";
  std::cout << t.tracer.ops.size() << " ops traced (" << top.size() << " distinct at top level): " << summary << "\n";
}

const TracedOp* first_of(const StepTrace& t, OpId op) {
  for (const TracedOp& o : t.tracer.ops)
    if (o.op == op) return &o;
  return nullptr;
}

}  // namespace

TEST(DispatchStages, TracerSeesEveryOpOfAGpt2SmallTrainingStep) {
  ts::manual_seed(0);
  ts::models::GPT2Config cfg;  // GPT-2 small, 124M parameters
  cfg.attn_pdrop = cfg.resid_pdrop = cfg.embd_pdrop = 0.1;
  ts::models::GPT2 model(cfg);
  model.train();
  ts::optim::AdamW opt(model.parameters(), {.lr = 1e-4, .weight_decay = 0.1, .fused = true});
  ts::Generator g(1);
  ts::Tensor idx = ts::randint(0, cfg.vocab_size, {1, 16}, ts::kInt64, &g);
  ts::Tensor targets = ts::randint(0, cfg.vocab_size, {1, 16}, ts::kInt64, &g);

  StepTrace t;
  trace(t, [&] {
    ts::Tensor loss = model.loss(idx, targets);
    loss.backward();
    ts::nn::utils::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    opt.zero_grad(true);
  });
  expect_complete(t, {OpId::embedding, OpId::native_layer_norm, OpId::linear_cross_entropy, OpId::_foreach_norm,
                      OpId::_foreach_mul_, OpId::_fused_adam_, OpId::gelu});
  // The token embedding, with its inputs' metadata: the table (V, C) and the ids (1, 16) int64.
  bool token_embedding = false;
  for (const TracedOp& o : t.tracer.ops)
    if (o.op == OpId::embedding && o.shapes.size() == 2 && o.shapes[0] == ts::Shape{cfg.vocab_size, cfg.n_embd}) {
      token_embedding = true;
      EXPECT_EQ(o.depth, 0);
      EXPECT_EQ(o.shapes[1], (ts::Shape{1, 16}));
      EXPECT_EQ(o.dtypes[1], ts::kInt64);
    }
  EXPECT_TRUE(token_embedding);
  const TracedOp* adam = first_of(t, OpId::_fused_adam_);
  ASSERT_NE(adam, nullptr);
  EXPECT_EQ(adam->shapes.size(), model.parameters().size());  // one fused call over all CPU parameters
}

TEST(DispatchStages, TracerSeesEveryOpOfAResNet18TrainingStep) {
  ts::manual_seed(0);
  ts::models::ResNet model = ts::models::resnet18(10);
  model.train();
  ts::optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4, .fused = true});
  ts::Tensor x = ts::randn({2, 3, 64, 64});
  ts::Tensor y = ts::tensor(std::vector<int64_t>{3, 7}, {2});

  StepTrace t;
  trace(t, [&] {
    ts::Tensor loss = ts::nn::functional::cross_entropy(model.forward(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad(true);
  });
  // relu_: torchvision's ReLU(inplace=True); the loss is one op (cross_entropy) with its fused rows inside.
  expect_complete(t, {OpId::conv2d, OpId::native_batch_norm, OpId::relu_, OpId::max_pool2d_with_indices,
                      OpId::adaptive_avg_pool2d, OpId::cross_entropy, OpId::cross_entropy_loss_rows,
                      OpId::_fused_sgd_, OpId::add_});
  const TracedOp* loss = first_of(t, OpId::cross_entropy);
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->depth, 0);
  EXPECT_EQ(loss->shapes[0], (ts::Shape{2, 10}));
  const TracedOp* conv = first_of(t, OpId::conv2d);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->shapes[0], (ts::Shape{2, 3, 64, 64}));
  EXPECT_EQ(conv->shapes[1], (ts::Shape{64, 3, 7, 7}));
}

// A kernel slot called outside every op is reported to the tracer, by the slot's name.
TEST(DispatchStages, AKernelOutsideEveryOpIsReported) {
  RecordingTracer tracer;
  const ts::TensorList p = {ts::zeros({4})}, g = {ts::ones({4})}, m = {ts::zeros({4})}, v = {ts::zeros({4})}, none;
  const std::vector<int64_t> steps = {1};
  ASSERT_EQ(ts::set_tracer_stage(&tracer), nullptr);
  ts::adam_kernel(ts::kCPU, p, g, m, v, none, steps, ts::AdamKernelParams{.lr = 0.1});
  ts::set_tracer_stage(nullptr);
  ASSERT_EQ(tracer.unscoped.size(), 1u);
  EXPECT_EQ(tracer.unscoped[0], "adam");
  EXPECT_TRUE(tracer.ops.empty());
}

// With no stage installed an op costs no tracer call, and installing one twice replaces the first.
TEST(DispatchStages, InstallingAndRemovingTheTracer) {
  RecordingTracer a, b;
  const ts::Tensor one = ts::ones({2});
  EXPECT_EQ(ts::set_tracer_stage(&a), nullptr);
  EXPECT_EQ(ts::set_tracer_stage(&b), &a);
  ts::Tensor x = one.add(1.0);
  EXPECT_EQ(ts::set_tracer_stage(nullptr), &b);
  ts::Tensor y = x.mul(3.0);
  EXPECT_TRUE(a.ops.empty());
  ASSERT_FALSE(b.ops.empty());
  EXPECT_EQ(b.ops[0].op, OpId::add);
  EXPECT_EQ(b.ops[0].depth, 0);
  for (size_t i = 1; i < b.ops.size(); ++i) EXPECT_GT(b.ops[i].depth, 0) << ts::op_name(b.ops[i].op);  // the number's fill
}
