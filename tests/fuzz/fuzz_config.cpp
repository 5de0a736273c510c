// Config decoding (runtime_config_from_json, src/runtime/config.cpp): any JSON value, nested as deep as it
// comes, is a runtime config or refused with Error. Paths are pointed into a scratch directory first (a
// fuzzer must not write wherever its input says), and the store is in memory.
#include <cstdint>
#include <string>

#include "agentrt/config.hpp"
#include "agentrt/error.hpp"
#include "fuzz_support.hpp"

using namespace agentrt;

namespace {

const agentrt_fuzz::ScratchDir& scratch() {
  static agentrt_fuzz::ScratchDir dir("config");
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json j = json::parse(agentrt_fuzz::text_of(data, size), nullptr, false);
  if (j.is_discarded()) return 0;
  if (j.is_object()) {
    // Only the keys that name files; the rest is decoded as it came.
    j["data_dir"] = scratch().path();
    if (!j.contains("store")) j["store"] = json{{"path", ":memory:"}};
    if (auto s = j.find("store"); s != j.end() && s->is_object()) {
      if (s->contains("path")) (*s)["path"] = ":memory:";
      if (s->contains("document_index_path")) (*s)["document_index_path"] = ":memory:";
    }
    if (auto o = j.find("objects"); o != j.end() && o->is_object() && o->contains("root"))
      (*o)["root"] = scratch().file("objects");
  }
  try {
    RuntimeConfig c = runtime_config_from_json(j);
    if (!c.store || !c.model) agentrt_fuzz::broken("config", "a config without a store or a model");
    if (c.max_json_depth < 1 || c.max_json_depth > kMaxConfigurableJsonDepth)
      agentrt_fuzz::broken("config", "max_json_depth out of its range");
  } catch (const Error&) {
  }
  return 0;
}
