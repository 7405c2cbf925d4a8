#include "ember/passes/pass_context.h"

#include <fmt/format.h>

#include <algorithm>

#include "ember/support/error.h"

namespace ember::passes {

// known_passes() is read off the pipeline list (pipeline.cc).

namespace {
std::string canonical(const std::string& name) {
  // TVM examples disable fusion as "OpFusion"; accept it as FuseOps.
  if (name == "OpFusion") return "FuseOps";
  for (auto& p : known_passes())
    if (p.name == name) return name;
  std::vector<std::string> known;
  for (auto& p : known_passes()) known.push_back(p.name);
  fail("unknown pass '", name,
       "'; the known passes are: ", fmt::format("{}", fmt::join(known, ", ")),
       " (OpFusion is accepted for FuseOps)");
}
}  // namespace

const std::vector<std::string>& known_config_keys() {
  static const std::vector<std::string> keys = {
      "FuseOps.max_depth",    "FuseOps.cost_model",    "dump_ir",
      "tuning_log",           "cuda.matmul_precision", "Int8Products.int8_dot",
      "BF16Products.bf16_dot"};
  return keys;
}

PassContext PassContext::validated() const {
  if (opt_level < 0) fail("opt_level must be >= 0, got ", opt_level);
  const auto& keys = known_config_keys();
  for (auto& [key, value] : config)
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      fail("unknown PassContext config key '", key,
           "'; the known keys are: ", fmt::format("{}", fmt::join(keys, ", ")));
  PassContext ctx = *this;
  ctx.disabled_passes.clear();
  ctx.required_passes.clear();
  for (auto& p : disabled_passes) ctx.disabled_passes.insert(canonical(p));
  for (auto& p : required_passes) ctx.required_passes.insert(canonical(p));
  for (auto& p : ctx.required_passes)
    if (ctx.disabled_passes.count(p)) fail("pass '", p, "' is both required and disabled");
  return ctx;
}

bool PassContext::enabled(const std::string& pass, int level) const {
  if (required_passes.count(pass)) return true;
  if (disabled_passes.count(pass)) return false;
  return opt_level >= level;
}

std::string PassContext::config_value(const std::string& key, const std::string& dflt) const {
  auto it = config.find(key);
  return it == config.end() ? dflt : it->second;
}

}  // namespace ember::passes
