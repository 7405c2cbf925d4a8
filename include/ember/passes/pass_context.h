#pragma once
/// Which graph passes run: PassContext(opt_level, disabled_passes, required_passes, config),
/// as in TVM. A pass runs when it is not disabled and opt_level reaches its level, or when it
/// is required.
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ember::passes {

struct PassContext {
  int opt_level = 3;
  std::set<std::string> disabled_passes;
  std::set<std::string> required_passes;
  /// Settings (known_config_keys): "FuseOps.max_depth", "dump_ir" ("1": print the IR after
  /// each pass), "tuning_log" (a log of ember.tune, applied by the Python ember.build).
  std::map<std::string, std::string> config;

  /// Normalises pass names ("OpFusion" is another name for "FuseOps") and checks them and
  /// the config keys: an unknown name or key is an ember::Error listing the known ones.
  PassContext validated() const;
  bool enabled(const std::string& pass, int level) const;
  std::string config_value(const std::string& key, const std::string& dflt) const;
};

/// The passes in pipeline order (first appearance in graph_passes(), pipeline.h), with their
/// opt levels.
struct PassInfo {
  std::string name;
  int opt_level;
};
const std::vector<PassInfo>& known_passes();
/// The keys PassContext::config accepts.
const std::vector<std::string>& known_config_keys();

}  // namespace ember::passes
