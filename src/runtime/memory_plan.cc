// The executor's memory plan (memory_plan.h): roles, view roots, lifetimes, and best-fit
// reuse of 64-byte aligned blocks in one pool.
#include "ember/runtime/memory_plan.h"

#include <algorithm>
#include <string>

#include "ember/support/checked_math.h"
#include "ember/support/error.h"

namespace ember::runtime {

namespace {

constexpr size_t kAlignment = 64;

std::string type_str(DType dtype, const Shape& shape) {
  return dtype_name(dtype) + shape_str(shape);
}

size_t value_bytes(const ExecGraph::Value& v) {
  return static_cast<size_t>(checked_nbytes(v.shape, dtype_bytes(v.dtype), "a model value"));
}

// Best-fit reuse of byte blocks. Blocks are laid out back to back in one pool, each at a
// 64-byte aligned offset.
class BlockPlanner {
 public:
  int acquire(size_t bytes) {
    // bytes < 2^63 (value_bytes), so rounding up cannot wrap around.
    size_t need = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (sizes_[*it] >= need && (best == free_.end() || sizes_[*it] < sizes_[*best])) best = it;
    if (best != free_.end()) {
      int block = *best;
      free_.erase(best);
      return block;
    }
    sizes_.push_back(need);
    return static_cast<int>(sizes_.size()) - 1;
  }
  void release(int block) { free_.push_back(block); }
  std::vector<size_t> offsets() const {
    std::vector<size_t> off(sizes_.size());
    size_t at = 0;
    for (size_t b = 0; b < sizes_.size(); ++b) off[b] = at, at += sizes_[b];
    return off;
  }
  size_t total() const {
    int64_t sum = 0;
    for (size_t s : sizes_)
      sum = checked_add(sum, static_cast<int64_t>(s), "the model's intermediate memory");
    return static_cast<size_t>(sum);
  }

 private:
  std::vector<size_t> sizes_;
  std::vector<int> free_;
};

void check_id(int v, int n, const std::string& where) {
  EMBER_CHECK(v >= 0 && v < n, where, " refers to value ", v, " but the graph has ", n, " values");
}

// Who owns each value's memory: inputs, params and views (outputs come later, from roots).
std::vector<Role> owner_roles(const ExecGraph& g) {
  const int n = static_cast<int>(g.values.size());
  std::vector<Role> role(n, Role::Intermediate);
  for (const auto& in : g.inputs) {
    check_id(in.value, n, "input '" + in.name + "'");
    role[in.value] = Role::Input;
  }
  for (const auto& p : g.params) {
    check_id(p.value, n, "param '" + p.name + "'");
    const ExecGraph::Value& v = g.values[p.value];
    if (!p.data.defined() || p.data.shape() != v.shape || p.data.dtype() != v.dtype)
      fail("parameter '", p.name, "' holds ",
           p.data.defined() ? type_str(p.data.dtype(), p.data.shape()) : "no data",
           " but the graph expects ", type_str(v.dtype, v.shape),
           ": the parameters do not belong to this graph; rebuild or reload the model");
    EMBER_CHECK(role[p.value] == Role::Intermediate, "value ", p.value, " is a param twice");
    role[p.value] = Role::Param;
  }
  for (const auto& vw : g.views) {
    check_id(vw.dst, n, "view dst");
    check_id(vw.src, n, "view src");
    EMBER_CHECK(role[vw.dst] == Role::Intermediate, "view dst ", vw.dst,
                " is already an input, param or view");
    const auto &d = g.values[vw.dst], &s = g.values[vw.src];
    EMBER_CHECK(d.dtype == s.dtype && shape_numel(d.shape) == shape_numel(s.shape), "view ", vw.dst,
                " ", type_str(d.dtype, d.shape), " of value ", vw.src, " ",
                type_str(s.dtype, s.shape), " changes the byte size");
    role[vw.dst] = Role::View;
  }
  return role;
}

// Each value's root: a chain of views shares the memory of its first non-view value.
std::vector<int> view_roots(const ExecGraph& g) {
  const int n = static_cast<int>(g.values.size());
  std::vector<int> src(n, -1), root(n);
  for (const auto& vw : g.views) src[vw.dst] = vw.src;
  for (int v = 0; v < n; ++v) {
    int r = v, steps = 0;
    while (src[r] >= 0) {
      r = src[r];
      EMBER_CHECK(++steps <= n, "views form a cycle through value ", v);
    }
    root[v] = r;
  }
  return root;
}

// Pool offsets of the intermediate roots, planned kernel by kernel: first take blocks for
// values a kernel touches for the first time (its outputs), then free the values it was the
// last to touch.
void plan_pool(const ExecGraph& g, MemoryPlan& plan) {
  const int n = static_cast<int>(g.values.size());
  std::vector<int> first(n, -1), last(n, -1);  // lifetimes of roots, in kernel steps
  for (size_t k = 0; k < g.kernels.size(); ++k) {
    const auto& kern = g.kernels[k];
    EMBER_CHECK(kern.num_inputs >= 0 && kern.num_inputs <= static_cast<int>(kern.args.size()),
                "kernel '", kern.name, "' has num_inputs ", kern.num_inputs, " of ",
                kern.args.size(), " args");
    for (int a : kern.args) {
      check_id(a, n, "kernel '" + kern.name + "'");
      int r = plan.root[a];
      if (first[r] < 0) first[r] = static_cast<int>(k);
      last[r] = static_cast<int>(k);
    }
  }
  BlockPlanner planner;
  std::vector<int> block(n, -1);
  for (size_t k = 0; k < g.kernels.size(); ++k) {
    const int step = static_cast<int>(k);
    for (int a : g.kernels[k].args) {
      int r = plan.root[a];
      if (plan.role[r] == Role::Intermediate && first[r] == step && block[r] < 0)
        block[r] = planner.acquire(value_bytes(g.values[r]));
    }
    for (int a : g.kernels[k].args) {
      int r = plan.root[a];
      if (plan.role[r] == Role::Intermediate && last[r] == step && block[r] >= 0) {
        planner.release(block[r]);
        last[r] = -1;  // released once even when the value is several args of this kernel
      }
    }
  }
  plan.pool_bytes = planner.total();
  const std::vector<size_t> offsets = planner.offsets();
  plan.offset.assign(n, -1);
  for (int v = 0; v < n; ++v)
    if (block[v] >= 0) plan.offset[v] = static_cast<int64_t>(offsets[block[v]]);
}

}  // namespace

MemoryPlan plan_memory(const ExecGraph& g) {
  MemoryPlan plan;
  plan.role = owner_roles(g);
  plan.root = view_roots(g);
  // An output (or the root of an output view) keeps its own buffer: later kernels must not
  // overwrite it, and the caller reads it after run().
  for (int o : g.outputs) {
    check_id(o, static_cast<int>(g.values.size()), "output");
    Role& r = plan.role[plan.root[o]];
    if (r == Role::Intermediate) r = Role::Output;
    plan.output_is_param.push_back(r == Role::Param);
  }
  plan_pool(g, plan);
  return plan;
}

}  // namespace ember::runtime
