#pragma once
#include <map>
#include <string>

#include "ember/ir/graph.h"

namespace ember::passes {

/// Replaces the function inputs named in `params` by constants holding those tensors (the
/// model's weights); they leave the function's parameter list. A name that is no input,
/// or a tensor whose shape or dtype differs from the input's, is an ember::Error.
ir::Function bind_params(const ir::Function& f,
                         const std::map<std::string, runtime::NDArray>& params);

}  // namespace ember::passes
