// `tessera train`'s options (apps/train_cli.h). Values are checked here where CLI11 can (ranges, choices);
// combinations per model are checked by resolve_options(), which also refuses a flag the model does
// not act on (check_flags_for_model, train_flags.cpp): the parser records which flags were given.
#include "train_cli.h"

namespace tessera::app {

void add_train_options(CLI::App& train, TrainOptions& t) {
  train.add_option("--model", t.model, "mlp | cnn | resnet18 (Fashion-MNIST), gpt2 (byte-level, text), resnet50 (synthetic)")
      ->check(CLI::IsMember({"mlp", "cnn", "resnet18", "gpt2", "resnet50"}));
  train.add_option("--data", t.data, "fashion-mnist[:DIR] | text:FILE (gpt2) | synthetic (resnet50)");
  train.add_option("--epochs", t.epochs, "number of epochs (Fashion-MNIST models)")->check(CLI::PositiveNumber);
  train.add_option("--batch-size", t.batch_size, "examples per step (default 64; resnet50: 256 on a GPU)")
      ->check(CLI::PositiveNumber);
  train.add_option("--lr", t.lr, "learning rate (default: 0.05 for sgd, 1e-3 for adamw, 0.1 for resnet50)")
      ->check(CLI::NonNegativeNumber);
  train.add_option("--optimizer", t.optimizer, "sgd | adamw (gpt2: adamw, resnet50: sgd)")
      ->check(CLI::IsMember({"sgd", "adamw"}));
  train.add_option("--device", t.device, "cpu | cuda | auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  train.add_option("--seed", t.seed, "random seed");
  train.add_option("--checkpoint", t.checkpoint,
                   "checkpoint directory, saved after every epoch (gpt2: every evaluation; resnet50: every printed "
                   "line) and at --stop-at");
  train.add_flag("--resume", t.resume, "continue from --checkpoint (an error if there is none)");
  train.add_option("--metrics", t.metrics,
                   "CSV of per-epoch metrics (gpt2, resnet50: per printed step); an SVG plot is written next to it");
  train.add_option("--limit-train", t.limit_train, "use only the first N training examples");
  train.add_option("--threads", t.threads, "CPU threads (default: all)");
  train.add_option("--profile", t.profile,
                   "profile steps 3-5 of the first epoch (gpt2, resnet50: of the run): Chrome trace to this path (open in "
                   "Perfetto), memory timeline SVG next to it, table of ops on stdout");
  train.add_option("--amp", t.amp,
                   "mixed precision: bf16 | fp16 | off | auto (fp16 scales the loss; auto: bf16 for gpt2 and resnet50 "
                   "on a GPU, else off)")
      ->check(CLI::IsMember({"bf16", "fp16", "off", "auto"}));
  train.add_option("--nproc", t.nproc,
                   "data-parallel processes on this machine, started through mpirun (mlp, cnn, resnet18); each "
                   "trains on 1/N of every epoch's examples with --batch-size per process")
      ->check(CLI::PositiveNumber);
  // gpt2 and resnet50
  train.add_option("--steps", t.steps, "optimizer steps (gpt2: 3000, resnet50: 100)")->check(CLI::PositiveNumber);
  train.add_option("--log-every", t.log_every, "print a line every N steps (gpt2: 50, resnet50: 10)")
      ->check(CLI::PositiveNumber);
  train.add_option("--stop-at", t.stop_at,
                   "end this run after step N of --steps, saving --checkpoint there (the schedule still spans "
                   "--steps; continue with --resume)")
      ->check(CLI::PositiveNumber);
  // gpt2
  train.add_option("--layers", t.layers, "gpt2: transformer blocks")->check(CLI::PositiveNumber)
      ->capture_default_str();
  train.add_option("--heads", t.heads, "gpt2: attention heads")->check(CLI::PositiveNumber)
      ->capture_default_str();
  train.add_option("--embd", t.embd, "gpt2: embedding width (a multiple of --heads)")->check(CLI::PositiveNumber)
      ->capture_default_str();
  train.add_option("--context", t.context, "gpt2: context length in bytes")->check(CLI::PositiveNumber)
      ->capture_default_str();
  train.add_option("--dropout", t.dropout, "gpt2: dropout probability")->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  train.add_option("--accum", t.accum, "gpt2: micro-batches per optimizer step (gradient accumulation)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  train.add_option("--warmup", t.warmup, "gpt2: linear warm-up steps before the cosine decay")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  train.add_option("--min-lr", t.min_lr, "gpt2: learning rate at the last step (default lr / 10)")
      ->check(CLI::NonNegativeNumber);
  train.add_option("--weight-decay", t.weight_decay, "gpt2: AdamW weight decay of the matrices and embeddings")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  train.add_option("--grad-clip", t.grad_clip, "gpt2: clip the gradients' global norm to this (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  train.add_option("--eval-every", t.eval_every, "gpt2: validation loss every N steps")->check(CLI::PositiveNumber)
      ->capture_default_str();
  train.add_option("--eval-iters", t.eval_iters, "gpt2: batches per loss estimate")->check(CLI::PositiveNumber)
      ->capture_default_str();
  train.add_option("--sample-tokens", t.sample_tokens, "gpt2: bytes to generate after training (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  train.add_option("--temperature", t.temperature, "gpt2: sampling temperature (0: greedy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  train.add_option("--top-k", t.top_k, "gpt2: sample from the k most likely bytes (0: all)")->check(CLI::Range(0, 256))
      ->capture_default_str();
  train.add_option("--prompt", t.prompt, "gpt2: the text the sample continues (default a newline)");
  // Which flags were given, for the per-model check (a flag at its default value is still given).
  train.final_callback([&train, &t] {
    for (const CLI::Option* opt : train.get_options())
      if (opt->count() > 0 && !opt->get_lnames().empty()) t.given.insert("--" + opt->get_lnames().front());
  });
}

}  // namespace tessera::app
