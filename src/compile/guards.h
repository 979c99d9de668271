// Guards: what a compiled variant assumed about its call (DESIGN.md "The compiler").
//
// A variant is reused only when every guard holds: each tensor argument's sizes, strides, storage
// offset, dtype, device and requires_grad, and which arguments share storage; the non-tensor
// arguments' values; grad mode; autocast (enabled and dtype, CPU and CUDA); the module's training
// mode (every submodule's) and its parameters' and buffers' identity and metadata. Strides are
// guarded exactly, which is finer than a layout class: it can only cause a recompile, never a wrong
// replay. check() names the first guard that fails, for the recompile message. Guards made by
// unify_batch (Note [Symbolic batch] in symbolic_batch.h) hold for every batch size B >= 2 whose
// argument metadata lies on the lines through the two captures.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "compile/capture.h"
#include "compile/symbolic_batch.h"

namespace tessera::compiler {

// What a call looks like, gathered once per call.
struct CallState {
  std::vector<Tensor> args;           // flattened tensor arguments (undefined allowed)
  std::vector<std::string> scalars;   // the non-tensor arguments, printed
  NamedTensors params;                // parameters and buffers, in the module's order
  std::vector<bool> training;         // every submodule's training flag, in the module's order
};

class Guards {
 public:
  static Guards of(const CallState& call);
  // The first guard `call` fails, described ("argument 0: sizes [8, 16] (the graph was captured
  // for [4, 16])"), or nullopt when all hold.
  std::optional<std::string> check(const CallState& call) const;
  std::string to_text() const;  // one guard per line, for compile_explain
  // The guards of two captures whose calls differ only in their batch size (batch_size_of), made one;
  // nullopt with `why` when they differ otherwise.
  static std::optional<Guards> unify_batch(const Guards& a, int64_t batch_a, const Guards& b, int64_t batch_b,
                                           std::string* why);
  bool symbolic() const { return !arg_lines_.empty(); }

 private:
  struct TensorGuard {
    bool defined = false;
    TensorMeta meta;
    int alias_of = -1;  // the first earlier argument sharing its storage
  };
  std::vector<TensorGuard> args_;
  std::vector<std::vector<AffineInt>> arg_lines_;  // symbolic: per argument, batch_ints(meta) as lines in B
  std::vector<std::string> scalars_;
  std::vector<std::string> param_names_;
  std::vector<const void*> param_impls_;
  std::vector<TensorMeta> param_metas_;
  std::vector<bool> training_;
  bool grad_enabled_ = true;
  bool autocast_cpu_ = false, autocast_cuda_ = false;
  DType autocast_cpu_dtype_ = kBFloat16, autocast_cuda_dtype_ = kFloat16;
};

}  // namespace tessera::compiler
