// The graph pass pipeline, as one readable list (Halide's Lower.cpp style): each step runs
// when the PassContext enables it, and the IR after it can be dumped. known_passes() (the
// names and levels PassContext checks) is read off this list, so there is no second one.
#include "ember/passes/pipeline.h"

#include <cstdlib>
#include <iostream>

#include "ember/passes/alter_op_layout.h"
#include "ember/passes/batch_shared_dense.h"
#include "ember/passes/bf16_products.h"
#include "ember/passes/fold_constant.h"
#include "ember/passes/fold_pad_into_conv.h"
#include "ember/passes/fold_scale_axis.h"
#include "ember/passes/fuse_ops.h"
#include "ember/passes/int8_products.h"
#include "ember/passes/legalize_bf16.h"
#include "ember/passes/recognize_attention.h"
#include "ember/passes/recognize_patterns.h"
#include "ember/passes/simplify_expr.h"
#include "ember/passes/simplify_inference.h"
#include "ember/support/error.h"

namespace ember::passes {

namespace {

using ir::Function;

// A pass that needs nothing but the graph.
template <Function (*pass)(const Function&)>
Function graph_only(const Function& f, const PassEnv&) {
  return pass(f);
}

Function fold_constants(const Function& f, const PassEnv& env) {
  return fold_constant(f, env.evaluate);
}

}  // namespace

const std::vector<GraphPass>& graph_passes() {
  static const std::vector<GraphPass> passes = {
      // First: every later pass sees bfloat16 ops as float32 ones between casts.
      {"LegalizeBF16", 0, false, graph_only<legalize_bf16>},
      {"SimplifyInference", 0, false, graph_only<simplify_inference>},
      // Fusion-catalog rewrites: erase and merge first, then recognise composites, before
      // FoldConstant and FuseOps see the graph.
      {"SimplifyExpr", 1, false, graph_only<simplify_expr>},
      {"RecognizePatterns", 1, false, graph_only<recognize_patterns>},
      // Before FoldConstant evaluates the weights' dequantization into float32.
      {"Int8Products", 3, true,
       [](const Function& f, const PassEnv& env) {
         return int8_products(f, env.int8_dot, env.int8_dot_7bit, env.target.machine);
       }},
      // Before FoldConstant widens the bfloat16 weights to float32.
      {"BF16Products", 3, true,
       [](const Function& f, const PassEnv& env) {
         return bf16_products(f, env.bf16_dot, env.target.machine);
       }},
      {"FoldPadIntoConv", 2, false, graph_only<fold_pad_into_conv>},
      {"FoldConstant", 2, false, fold_constants},
      {"FoldScaleAxis", 3, false, graph_only<fold_scale_axis>},
      {"FoldConstant", 2, false, fold_constants},
      // After constant folding, so that the attention scale is one constant.
      {"RecognizeAttention", 1, false, graph_only<recognize_attention>},
      // Before AlterOpLayout packs each dense's weight: one batched dense per shared weight.
      {"BatchSharedDense", 2, false, graph_only<batch_shared_dense>},
      {"AlterOpLayout", 3, true,
       [](const Function& f, const PassEnv& env) {
         return alter_op_layout(f, env.target.machine);
       }},
      {"FoldConstant", 2, true, fold_constants},
      {"FuseOps", 1, false,
       [](const Function& f, const PassEnv& env) {
         return fuse_ops(f, env.fuse_max_depth, env.fusion_decisions, env.fuse_machine,
                         env.target.gpu, env.target.tuned);
       }},
  };
  return passes;
}

const std::vector<PassInfo>& known_passes() {
  static const std::vector<PassInfo> names = [] {
    std::vector<PassInfo> out;
    for (const GraphPass& p : graph_passes()) {
      bool seen = false;
      for (const PassInfo& q : out) seen |= q.name == p.name;
      if (!seen) out.push_back({p.name, p.opt_level});
    }
    return out;
  }();
  return names;
}

StepLog::StepLog(const PassContext& ctx) {
  const char* env = std::getenv("EMBER_DUMP_IR");
  on_ = ctx.config_value("dump_ir", env ? env : "0") == "1";
}

void StepLog::operator()(const std::string& step, const ir::Function& f) {
  if (!on_) return;
  if (step == "input")
    std::cerr << "// input\n" << ir::to_string(f);
  else
    std::cerr << "// after " << step << " (step " << ++steps_ << ")\n" << ir::to_string(f);
}

void StepLog::operator()(const std::string& step, const std::vector<ir::PrimFunc>& funcs) {
  if (!on_) return;
  std::cerr << "// after " << step << " (step " << ++steps_ << ")\n";
  for (const ir::PrimFunc& f : funcs) std::cerr << f << "\n";
}

ir::Function run_pipeline(const ir::Function& input, const PassContext& raw_ctx,
                          const PipelineTarget& target, const ConstEvaluator& evaluate,
                          std::vector<runtime::FusionEdge>* fusion_decisions, StepLog* log) {
  PassContext ctx = raw_ctx.validated();
  StepLog own_log(ctx);
  if (!log) {
    log = &own_log;
    own_log("input", input);
  }
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
  const std::string int8 = ctx.config_value("Int8Products.int8_dot", "target");
  if (int8 != "target" && int8 != "on" && int8 != "off")
    fail("config Int8Products.int8_dot must be \"target\", \"on\" or \"off\", got '", int8, "'");
  const std::string bf16 = ctx.config_value("BF16Products.bf16_dot", "target");
  if (bf16 != "target" && bf16 != "on" && bf16 != "off")
    fail("config BF16Products.bf16_dot must be \"target\", \"on\" or \"off\", got '", bf16, "'");
  const PassEnv env{target,
                    evaluate,
                    static_cast<int>(max_depth),
                    target.gpu || cost_model == "none" ? nullptr : &cost_machine,
                    fusion_decisions,
                    int8 == "target" ? target.machine.int8_dot : int8 == "on",
                    int8 == "target" ? target.machine.int8_dot_7bit : int8 == "on",
                    bf16 == "target" ? target.machine.bf16_dot : bf16 == "on"};

  ir::Function f = input;
  for (const GraphPass& pass : graph_passes()) {
    if ((pass.cpu_only && target.gpu) || !ctx.enabled(pass.name, pass.opt_level)) continue;
    try {
      f = pass.run(f, env);
      ir::infer_types(f);
    } catch (const InternalError& e) {  // a compiler bug: say which pass it is in
      throw InternalError(std::string(e.what()) + "\nin graph pass " + pass.name);
    }
    (*log)(pass.name, f);
  }
  return f;
}

}  // namespace ember::passes
