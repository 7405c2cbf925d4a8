// The graph pass pipeline, as one readable list (Halide's Lower.cpp style): each step runs
// when the PassContext enables it, and the IR after it can be dumped.
#include "ember/passes/pipeline.h"

#include <cstdlib>
#include <iostream>

#include "ember/passes/alter_op_layout.h"
#include "ember/passes/fold_constant.h"
#include "ember/passes/fold_pad_into_conv.h"
#include "ember/passes/fold_scale_axis.h"
#include "ember/passes/fuse_ops.h"
#include "ember/passes/recognize_attention.h"
#include "ember/passes/recognize_patterns.h"
#include "ember/passes/simplify_expr.h"
#include "ember/passes/simplify_inference.h"
#include "ember/support/error.h"

namespace ember::passes {

ir::Function run_pipeline(const ir::Function& input, const PassContext& raw_ctx,
                          const PipelineTarget& target, const ConstEvaluator& evaluate,
                          std::vector<runtime::FusionEdge>* fusion_decisions) {
  PassContext ctx = raw_ctx.validated();
  const char* env = std::getenv("EMBER_DUMP_IR");
  bool dump = ctx.config_value("dump_ir", env ? env : "0") == "1";
  std::string depth_text = ctx.config_value("FuseOps.max_depth", "256");
  char* end = nullptr;
  long max_depth = std::strtol(depth_text.c_str(), &end, 10);
  if (depth_text.empty() || *end != '\0')
    fail("config FuseOps.max_depth must be an integer, got '", depth_text, "'");
  // The machine the FuseOps cost rule prices kernels on: the target's, or a fixed one so that
  // tests get the same kernels on every host (the code is still generated for the target).
  std::string cost_model = ctx.config_value("FuseOps.cost_model", "target");
  MachineModel cost_machine = target.machine;
  if (cost_model == "avx2" || cost_model == "avx512")
    cost_machine = MachineModel::for_vector_bits(cost_model == "avx2" ? 256 : 512);
  else if (cost_model != "target" && cost_model != "none")
    fail("config FuseOps.cost_model must be \"target\", \"avx2\", \"avx512\" or \"none\", got '",
         cost_model, "'");
  const MachineModel* fuse_machine = target.gpu || cost_model == "none" ? nullptr : &cost_machine;
  int level = 0;
  auto& levels = known_passes();
  auto level_of = [&](const std::string& name) {
    for (auto& p : levels)
      if (p.name == name) return p.opt_level;
    return 0;
  };
  ir::Function f = input;
  auto step = [&](const std::string& name, auto&& pass) {
    if (!ctx.enabled(name, level_of(name))) return;
    try {
      f = pass(f);
      ir::infer_types(f);
    } catch (const InternalError& e) {  // a compiler bug: say which pass it is in
      throw InternalError(std::string(e.what()) + "\nin graph pass " + name);
    }
    if (dump) std::cerr << "// after " << name << " (step " << ++level << ")\n" << ir::to_string(f);
  };
  if (dump) std::cerr << "// input\n" << ir::to_string(f);

  step("SimplifyInference", simplify_inference);
  // Fusion-catalog rewrites: erase and merge first, then recognise composites, before
  // FoldConstant and FuseOps see the graph.
  step("SimplifyExpr", simplify_expr);
  step("RecognizePatterns", recognize_patterns);
  step("FoldPadIntoConv", fold_pad_into_conv);
  step("FoldConstant", [&](const ir::Function& g) { return fold_constant(g, evaluate); });
  step("FoldScaleAxis", fold_scale_axis);
  step("FoldConstant", [&](const ir::Function& g) { return fold_constant(g, evaluate); });
  // After constant folding, so that the attention scale is one constant.
  step("RecognizeAttention", recognize_attention);
  if (!target.gpu) {
    step("AlterOpLayout",
         [&](const ir::Function& g) { return alter_op_layout(g, target.machine); });
    step("FoldConstant", [&](const ir::Function& g) { return fold_constant(g, evaluate); });
  }
  step("FuseOps", [&](const ir::Function& g) {
    return fuse_ops(g, static_cast<int>(max_depth), fusion_decisions, fuse_machine);
  });
  return f;
}

}  // namespace ember::passes
