// parse_checkpoint_meta (checkpoint_meta.h): every field is type- and range-checked, with an IOError
// naming the file and the field, so that a damaged or hand-edited checkpoint.json fails clearly.
#include "models/checkpoint_meta.h"

#include <nlohmann/json.hpp>

#include "tessera/error.h"

namespace tessera::detail {
namespace {

constexpr const char* kOp = "load_checkpoint";

GeneratorState generator_state(const nlohmann::json& g, const std::string& path, const std::string& field) {
  TS_CHECK(g.is_object() && g.contains("seed") && g.contains("offset") && g["seed"].is_number_unsigned() &&
               g["offset"].is_number_unsigned(),
           IOError, kOp, ": ", path, ": ", field, " must be an object {\"seed\": N, \"offset\": N} of unsigned "
           "integers, got ", g.dump());
  return {g["seed"].get<uint64_t>(), g["offset"].get<uint64_t>()};
}

}  // namespace

CheckpointMeta parse_checkpoint_meta(const std::string& text, const std::string& path) {
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(IOError, kOp, ": ", path, " is not valid JSON: ", e.what());
  }
  TS_CHECK(meta.is_object() && meta.contains("format") && meta["format"] == "tessera-checkpoint", IOError, kOp,
           ": ", path, " is not a tessera checkpoint (no \"format\": \"tessera-checkpoint\")");
  CheckpointMeta m;
  if (meta.contains("step")) {
    TS_CHECK(meta["step"].is_number_integer() && meta["step"].get<int64_t>() >= 0, IOError, kOp, ": ", path,
             ": step must be a non-negative integer, got ", meta["step"].dump());
    m.step = meta["step"].get<int64_t>();
  }
  if (meta.contains("optimizer")) {
    TS_CHECK(meta["optimizer"].is_string(), IOError, kOp, ": ", path, ": optimizer must be a string, got ",
             meta["optimizer"].dump());
    m.optimizer = meta["optimizer"].get<std::string>();
  }
  if (meta.contains("scheduler")) {
    TS_CHECK(meta["scheduler"].is_string(), IOError, kOp, ": ", path, ": scheduler must be a string, got ",
             meta["scheduler"].dump());
    m.scheduler = meta["scheduler"].get<std::string>();
  }
  if (meta.contains("generator")) m.generator = generator_state(meta["generator"], path, "generator");
  if (meta.contains("generators")) {
    const nlohmann::json& gs = meta["generators"];
    TS_CHECK(gs.is_object(), IOError, kOp, ": ", path, ": generators must be an object, got ", gs.dump());
    for (auto it = gs.begin(); it != gs.end(); ++it)
      m.generators[it.key()] = generator_state(it.value(), path, "generators." + it.key());
  }
  return m;
}

}  // namespace tessera::detail
