#pragma once
// The model file's "graph" section: the executor graph, the report and what the code needs,
// as JSON (field list in include/ember/runtime/artifact.h), read and written with
// nlohmann/json. The reader checks everything a damaged or edited file could get wrong,
// before the executor sees the graph.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/runtime/artifact.h"

namespace ember::runtime {

/// The graph section of `a`; param i is at `param_offsets[i]` of the params section.
std::string write_graph_json(const Artifact& a, const std::vector<size_t>& param_offsets);

/// Parses and checks the graph section `text` of the file `where` into a.graph and a.info;
/// params view `params` (`params_size` bytes of `buffer`). `gpu_code`: the file holds PTX,
/// so the launch table is required. Every defect is an ember::Error naming the field.
void read_graph_json(const std::string& text, const std::string& where,
                     const std::shared_ptr<void>& buffer, const char* params, uint64_t params_size,
                     bool gpu_code, Artifact& a);

}  // namespace ember::runtime
