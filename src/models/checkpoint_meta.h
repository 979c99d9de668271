// checkpoint.json, the metadata of a checkpoint (Note [Atomic checkpoint] in tessera/checkpoint.h):
// written by save_checkpoint, parsed and validated here before load_checkpoint trusts any of it. The
// parser takes the file's text, so that it can be fuzzed (fuzz/fuzz_checkpoint_meta.cpp) without a
// checkpoint on disk.
//
// Invariant: parse_checkpoint_meta returns a fully checked CheckpointMeta or raises IOError naming the
// file and the field; no JSON library exception and no unchecked value leaves it.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace tessera::detail {

struct GeneratorState {
  uint64_t seed = 0, offset = 0;
};

struct CheckpointMeta {
  int64_t step = 0;
  std::optional<std::string> optimizer;   // the optimizer's name, when one was saved
  std::optional<std::string> scheduler;   // the scheduler's state_dict, when one was saved
  std::optional<GeneratorState> generator;  // the default CPU generator
  std::map<std::string, GeneratorState> generators;  // the named ones (NamedGenerators)
};

// `text` is the content of `path` (named in errors only).
CheckpointMeta parse_checkpoint_meta(const std::string& text, const std::string& path);

}  // namespace tessera::detail
