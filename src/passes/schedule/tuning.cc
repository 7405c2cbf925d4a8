#include "ember/passes/tuning.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "ember/ir/op.h"
#include "ember/passes/lower.h"
#include "ember/passes/schedule.h"
#include "ember/support/error.h"

namespace ember::passes {

namespace {

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The group as text with nodes numbered in post order and no source names.
std::string canonical_form(const ir::Function& group, std::string* anchor) {
  std::map<const ir::ExprNode*, size_t> id;
  for (size_t i = 0; i < group->params.size(); ++i) id[group->params[i].get()] = i;
  std::ostringstream os;
  for (auto& p : group->params) os << "param " << ir::to_string(p->type) << "\n";
  const ir::Op* best = nullptr;
  for (auto& e : ir::post_order(group->body)) {
    if (id.count(e.get())) continue;
    size_t n = id.size();
    id[e.get()] = n;
    os << "%" << n << " = ";
    if (auto* c = ir::as<ir::ConstantNode>(e)) {
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016llx",
                    static_cast<unsigned long long>(fnv1a(c->value.data(), c->value.nbytes())));
      os << "const " << hash;
    } else if (auto* c = ir::as<ir::CallNode>(e)) {
      EMBER_CHECK(c->op, "workload_key: nested function in group ", group->name);
      if (!best || c->op->pattern > best->pattern) best = c->op;
      os << c->op->name << "(";
      for (auto& a : c->args) os << "%" << id.at(a.get()) << " ";
      os << ") " << ir::to_string(c->attrs);
    } else if (auto* t = ir::as<ir::TupleNode>(e)) {
      os << "tuple(";
      for (auto& f : t->fields) os << "%" << id.at(f.get()) << " ";
      os << ")";
    } else if (auto* g = ir::as<ir::TupleGetItemNode>(e)) {
      os << "%" << id.at(g->tuple.get()) << "." << g->index;
    }
    os << " : " << ir::to_string(e->type) << "\n";
  }
  *anchor = best ? best->name : "copy";
  return os.str();
}

// The knobs the default schedule uses for `group` with `knobs` set, and its knob ranges.
KnobSpace schedule_space(const ir::Function& group, const MachineModel& machine,
                         const ScheduleKnobs& knobs) {
  std::vector<ir::Tensor> inputs;
  LiveExtents live;
  Schedule sch({group_compute(group, inputs, machine, &live)});
  sch.live() = live;
  KnobSpace space;
  apply_default_schedule(sch, machine, knobs, &space);
  return space;
}

std::vector<int64_t> values_up_to(int64_t max, std::vector<int64_t> candidates) {
  std::vector<int64_t> out;
  for (int64_t v : candidates)
    if (v <= max) out.push_back(v);
  if (std::find(out.begin(), out.end(), max) == out.end()) out.push_back(max);
  return out;
}

// Every setting of the knobs that the schedule's ranges allow for one `shape` (its row
// block, tile axis and partial sums set), each added to `out` once, as the schedule uses it.
void add_settings(const ir::Function& group, const MachineModel& machine,
                  const ScheduleKnobs& shape, std::vector<ScheduleKnobs>& out,
                  std::set<ScheduleKnobs>& seen) {
  const KnobSpace s = schedule_space(group, machine, shape);
  std::vector<int64_t> rows = {0}, vectors = {0}, pad_rows = {0}, unrolls = {0}, orders = {0},
                       chunks = {0};
  if (s.tile_rows_max > 0) {
    rows.clear();
    for (int64_t r = 1; r <= std::min<int64_t>(s.tile_rows_max, 16); ++r) rows.push_back(r);
    vectors.clear();
    for (int64_t v = 1; v <= std::min<int64_t>(s.vectors, 8); ++v)
      if (s.vectors % v == 0 || s.any_vectors) vectors.push_back(v);
    if (s.tile_rows_max > 1) orders = {1, 2};
  }
  if (s.pad_rows_max > 0) pad_rows = values_up_to(s.pad_rows_max, {2, 4, 8, 16, 32, 64});
  // Unrolled steps that divide the loop, up to 16 (beyond that the code only grows).
  if (s.unroll_extent > 0) {
    unrolls.clear();
    for (int64_t u : {1, 2, 3, 4, 6, 8, 16})
      if (u <= s.unroll_extent && s.unroll_extent % u == 0) unrolls.push_back(u);
  }
  // Chunks of a conv block's outer reduction: powers of two that divide it, and one pass.
  if (s.chunk_extent > 0) {
    chunks.clear();
    for (int64_t c = 1; c < s.chunk_extent && c <= 64; c *= 2)
      if (s.chunk_extent % c == 0) chunks.push_back(c);
    chunks.push_back(s.chunk_extent);
  }
  for (int64_t r : rows)
    for (int64_t v : vectors) {
      // Accumulators beyond the vector registers spill on every step: not worth a trial.
      if (r * v * std::max<int64_t>(shape.partial_sums, 1) * s.registers_per_vector >
          s.vector_registers)
        continue;
      for (int64_t order : orders)
        for (int64_t p : pad_rows)
          for (int64_t u : unrolls)
            for (int64_t c : chunks) {
              ScheduleKnobs k = shape;
              k.tile_rows = r;
              k.tile_vectors = v;
              k.loop_order = order;
              k.pad_rows = p;
              k.unroll = u;
              k.k_chunk = c;
              ScheduleKnobs used = schedule_space(group, machine, k).used;
              if (seen.insert(used).second) out.push_back(used);
            }
    }
}

}  // namespace

std::string workload_key(const ir::Function& group) {
  std::string anchor;
  std::string text = canonical_form(group, &anchor);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(fnv1a(text.data(), text.size())));
  return anchor + " " + ir::to_string(group->body->type) + " #" + hash;
}

std::vector<ScheduleKnobs> knob_space(const ir::Function& group, const MachineModel& machine) {
  if (has_custom_lowering(group)) return {ScheduleKnobs{}};
  const KnobSpace base = schedule_space(group, machine, {});
  std::vector<ScheduleKnobs> out = {base.used};
  std::set<ScheduleKnobs> seen = {base.used};
  // The row block and the tile axis bound the register tile's rows: the other knobs' ranges
  // are read from the schedule with those two set.
  std::vector<ScheduleKnobs> shapes;
  std::vector<int64_t> row_blocks = {0}, tile_axes = {0}, partials = {0};
  if (base.row_block_max > 0) {
    row_blocks.clear();
    for (int64_t b = 1; 2 * b <= base.row_block_max; ++b)
      if (base.row_block_max % b == 0) row_blocks.push_back(b);
    if (row_blocks.empty()) row_blocks.push_back(1);
  }
  if (!base.tile_axes.empty()) {
    tile_axes.clear();
    for (int d : base.tile_axes) tile_axes.push_back(d + 1);
  }
  // Partial sums of a one-row tile: divisors of its reduction loop, up to 16 (accumulators
  // beyond the registers are filtered below).
  if (base.partial_extent > 0) {
    partials.clear();
    for (int64_t p : {1, 2, 3, 4, 6, 8, 12, 16})
      if (p <= base.partial_extent && base.partial_extent % p == 0) partials.push_back(p);
  }
  for (int64_t b : row_blocks)
    for (int64_t d : tile_axes)
      for (int64_t p : partials) {
        ScheduleKnobs k;
        k.row_block = b;
        k.tile_axis = d;
        k.partial_sums = p;
        shapes.push_back(k);
      }
  for (const ScheduleKnobs& shape : shapes) add_settings(group, machine, shape, out, seen);
  return out;
}

}  // namespace ember::passes
