// libFuzzer target for GPT2Config::from_hf_json (src/models/gpt2.cpp): any config.json must either
// give a configuration that validate() accepts or raise a tessera::Error naming the field; a JSON
// library exception escaping it, a crash or a sanitizer report is a bug. The model itself is not
// built (a valid config may describe billions of parameters). Seed: fuzz/corpus/gpt2_config.
#include <cstddef>
#include <cstdint>

#include "fuzz_file.h"
#include "tessera/tessera.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = tessera::fuzz::scratch_file(data, size, ".json");
  try {
    const tessera::models::GPT2Config c = tessera::models::GPT2Config::from_hf_json(path);
    c.validate();  // what from_hf_json returns is valid
    (void)c.num_parameters();
  } catch (const tessera::Error&) {
  }
  return 0;
}
