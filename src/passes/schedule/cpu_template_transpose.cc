// The "tiles" template of tile_templates() (default_schedule.cc): a transpose's tile loop.
#include "analysis.h"
#include "cpu_schedule.h"

namespace ember::passes::cpu {

using namespace ir;

constexpr int64_t kTransposeRows = 16;  // tile_transpose: outputs per input cache line

// The axis of `o` (not its innermost) that walks an input's contiguous axis while o's
// innermost axis reads that input across its rows (a transpose's), or -1.
int transposed_axis(const PrimExpr& body, const Stage& o) {
  const std::vector<IterVar>& axes = o.root_axes();
  const PrimVarNode* last = axes.back()->var.get();
  int found = -1;
  visit_prim(body, [&](const PrimExpr& e) {
    auto* p = e.as<ProducerLoadNode>();
    if (!p || p->indices.size() < 2 || p->producer->shape.back() < 8) return;
    const PrimExpr& inner = p->indices.back();
    bool across = false;
    for (size_t i = 0; i + 1 < p->indices.size(); ++i) across |= uses_var(p->indices[i], last);
    if (!across || uses_var(inner, last)) return;
    for (size_t d = 0; d + 1 < axes.size(); ++d)
      if (axes[d]->extent >= kTransposeRows && uses_var(inner, axes[d]->var.get()))
        found = static_cast<int>(d);
  });
  return found;
}

bool OutputTiling::transposes() const {
  return reds.empty() && outer_vec && transposed_axis(body, o) >= 0;
}

// A transpose (o's innermost axis reads an input across its rows): kTransposeRows values
// of the axis that walks the input's rows loop just outside o's innermost axis, so each
// cache line of the input serves that many outputs while it is in L1. Without this, a line
// is reused only after a whole plane (256 x 56 x 56 with axes (0, 3, 2, 1): slower than two
// transposes that each keep their reads near; calibration: transpose tiles).
void OutputTiling::tile_transpose() {
  const int a = transposed_axis(body, o);
  IterVar a_in = o.split(axes[a], kTransposeRows, SplitTail::Shift).second;
  // [.., a.o, a.i, .., last.o, last.i] -> [.., a.o, .. | last.o, a.i, last.i]
  std::vector<IterVar> tile_axes, inner;
  bool after = false;
  for (auto& x : o.leaf_axes()) {
    if (x == outer_vec) after = true;
    if (x != a_in && x != outer_vec) (after ? inner : tile_axes).push_back(x);
  }
  std::vector<IterVar> order = tile_axes;
  order.push_back(outer_vec);
  order.push_back(a_in);
  order.insert(order.end(), inner.begin(), inner.end());
  o.reorder(order);
  tile = o.fuse(tile_axes);
}

}  // namespace ember::passes::cpu
