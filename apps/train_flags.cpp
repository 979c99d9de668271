// check_flags_for_model (train.h): which `tessera train` flags each model acts on. A flag is given when
// the parser saw it (TrainOptions::given) or its value differs from the default, so that options set
// in code are checked like the command line's.
//
// Note [No flag silently ignored]: every flag is either acted on by the chosen model or refused
// before training starts, with a message naming the flag, the model and the models it applies to.
// A flag added to train_cli.cpp must get its row here (tests/apps check that every option has one).
#include <functional>
#include <string>
#include <vector>

#include "tessera/error.h"
#include "train.h"

namespace tessera::app {
namespace {

struct FlagRow {
  const char* flag;
  const char* models;  // the models it applies to, as a message lists them
  bool (*applies)(const std::string& model);
  std::function<bool(const TrainOptions&, const TrainOptions&)> differs;  // (given, defaults)
};

bool classifier(const std::string& m) { return m == "mlp" || m == "cnn" || m == "resnet18"; }
bool step_based(const std::string& m) { return m == "gpt2" || m == "resnet50"; }
bool gpt(const std::string& m) { return m == "gpt2"; }

#define TS_FLAG(flag, models, applies, field) \
  FlagRow { flag, models, applies, [](const TrainOptions& a, const TrainOptions& b) { return a.field != b.field; } }

const std::vector<FlagRow>& rows() {
  static const std::vector<FlagRow> r = {
      TS_FLAG("--epochs", "mlp, cnn and resnet18", classifier, epochs),
      TS_FLAG("--limit-train", "mlp, cnn and resnet18", classifier, limit_train),
      TS_FLAG("--nproc", "mlp, cnn and resnet18", classifier, nproc),
      TS_FLAG("--steps", "gpt2 and resnet50", step_based, steps),
      TS_FLAG("--log-every", "gpt2 and resnet50", step_based, log_every),
      TS_FLAG("--stop-at", "gpt2 and resnet50", step_based, stop_at),
      TS_FLAG("--layers", "gpt2", gpt, layers),
      TS_FLAG("--heads", "gpt2", gpt, heads),
      TS_FLAG("--embd", "gpt2", gpt, embd),
      TS_FLAG("--context", "gpt2", gpt, context),
      TS_FLAG("--dropout", "gpt2", gpt, dropout),
      TS_FLAG("--accum", "gpt2", gpt, accum),
      TS_FLAG("--warmup", "gpt2", gpt, warmup),
      TS_FLAG("--min-lr", "gpt2", gpt, min_lr),
      TS_FLAG("--weight-decay", "gpt2", gpt, weight_decay),
      TS_FLAG("--grad-clip", "gpt2", gpt, grad_clip),
      TS_FLAG("--eval-every", "gpt2", gpt, eval_every),
      TS_FLAG("--eval-iters", "gpt2", gpt, eval_iters),
      TS_FLAG("--sample-tokens", "gpt2", gpt, sample_tokens),
      TS_FLAG("--temperature", "gpt2", gpt, temperature),
      TS_FLAG("--top-k", "gpt2", gpt, top_k),
      TS_FLAG("--prompt", "gpt2", gpt, prompt),
  };
  return r;
}

#undef TS_FLAG

}  // namespace

// The flags every model acts on; the rest are in rows().
const std::vector<std::string>& flags_for_every_model() {
  static const std::vector<std::string> f = {"--model",      "--data",   "--batch-size", "--lr",      "--optimizer",
                                             "--device",     "--seed",   "--checkpoint", "--resume",  "--metrics",
                                             "--threads",    "--profile", "--amp"};
  return f;
}

std::vector<std::string> model_specific_flags() {
  std::vector<std::string> f;
  for (const FlagRow& r : rows()) f.emplace_back(r.flag);
  return f;
}

void check_flags_for_model(const TrainOptions& o) {
  const TrainOptions defaults;
  for (const FlagRow& r : rows()) {
    if (r.applies(o.model)) continue;
    const bool given = o.given.count(r.flag) > 0 || r.differs(o, defaults);
    TS_CHECK(!given, ValueError, "train: ", r.flag, " does not apply to --model ", o.model, " (it applies to ",
             r.models, ")");
  }
}

}  // namespace tessera::app
