// nn.grouped_matmul(data [S, K], weight [G, K, N], offsets [G] int32 or int64) -> [S, N]:
// the grouped matmul of mixture-of-experts layers (torch's _grouped_mm and transformers'
// grouped_mm_fallback in their 2-D x 3-D form). offsets are the cumulative row counts of the
// groups: rows offsets[g - 1] .. offsets[g] of data (offsets[-1] = 0) are multiplied by
// weight[g]; rows from offsets[G - 1] on are zero. data and weight have the same float dtype,
// which the output has too.
//
// Malformed offsets: torch requires them sorted and within [0, S] (and may fault otherwise);
// Ember clamps instead of trapping, so no offsets can make the kernel read or write out of
// bounds. Group g ends at end_g = min(S, max(0, offsets[0], ..., offsets[g])) (the running
// maximum, clamped) and starts at end_(g-1) (0 for g = 0): a group whose offset is below an
// earlier one is empty, offsets past S end at S, negative ones at 0.
//
// weight_block = B > 0 (set by AlterOpLayout for a constant weight) says the weight is packed
// in panels of B columns, [G, N / B, K, B]; the result is the same.
//
// The bounds are data (read at run time), so the op fits no tensor expression: it has no
// compute rule, is Opaque (FuseOps leaves it alone) and always lowers through its own loop
// nest, `lower_grouped_matmul` below. Its work is the grouped product's, 2 S K N flops, not
// the G times more of every row times every group's matrix.
//
// The CPU kernel: a GEMM micro-kernel per (group, column tile).
//
// The N axis is cut into column tiles of V vectors (V x lanes columns, V = 4 with AVX-512,
// 2 with AVX2), or of a packed weight's panel. The last tile of a plain weight is shifted
// back to end at N, recomputing a few columns with identical values; a row narrower than a
// tile is one tile of the whole row, its last vector shifted back likewise or, narrower
// than a vector, one vector of its own length. The parallel loop runs over (group, column
// tile) pairs, group-major (a thread's consecutive pairs read the same rows of data and
// the same pages of the weight), plus a pseudo-group G whose pairs write the rows past the
// last offset as zeros; every pair writes its own rows and columns. A pair computes its
// group's rows in register tiles of at most R rows, balanced (32 rows, R = 6: 6, 6, 5, 5,
// 5, 5): the accumulators are a local buffer of rows x V vectors with constant indices
// (unrolled), which LLVM keeps in registers; per k, one broadcast of data[r, k] per row and
// V vector loads of the weight's row k feed rows x V FMAs. R = (registers - V - 2) / V:
// 6 x 4 with AVX-512's 32 registers, 6 x 2 with AVX2's 16 (nn.attention's Panel), so the
// tile, the weight vectors and a broadcast fit. K runs in blocks whose panel (K block x
// tile columns, at most kPanelBytes) stays in the L2 while all the group's row tiles read
// it; each block's tile is written to the output and read back by the next block.
//
// The packed layout matters when the weight streams from memory (an MoE layer's experts
// are tens to hundreds of MB): a plain weight's k rows are N apart, each in a new page, so
// the first row tile of every pair waits on page walks; a panel is one contiguous stream
// (calibration: grouped matmul panels).
//
// On a GPU: one thread per output element, which finds its row's group by scanning the
// offsets and sums its K products (simple and correct; the CPU is where MoE layers run).
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ember/ir/prim_math.h"
#include "ember/passes/machine_model.h"
#include "ember/support/error.h"
#include "op_util.h"

namespace ember::ir {
namespace {

using namespace ops;

Type grouped_matmul_rel(const std::vector<Type>& args, Attrs& attrs, const TypeContext& ctx) {
  check_arity(args, 3, ctx);
  const TensorType& data = tensor_arg(args, 0, "data", ctx);
  const TensorType& weight = tensor_arg(args, 1, "weight", ctx);
  const TensorType& offsets = tensor_arg(args, 2, "offsets", ctx);
  const int64_t block = attr_int(attrs, "weight_block");
  if (block < 0) ctx.fail("weight_block must be 0 or a panel width, got " + std::to_string(block));
  if (data.ndim() != 2) ctx.fail("data must be 2-D [rows, K] but is " + to_string(data));
  if (block == 0 && weight.ndim() != 3)
    ctx.fail("weight must be 3-D [groups, K, N] but is " + to_string(weight));
  if (block > 0 && (weight.ndim() != 4 || weight.shape[3] != block))
    ctx.fail("weight must be 4-D [groups, N / " + std::to_string(block) + ", K, " +
             std::to_string(block) + "] (packed panels, weight_block=" + std::to_string(block) +
             ") but is " + to_string(weight));
  check_float(data, "data", ctx);
  check_same_dtype(data, "data", weight, "weight", ctx);
  if (offsets.ndim() != 1)
    ctx.fail("offsets must be 1-D [groups] (cumulative row counts) but is " + to_string(offsets));
  if (offsets.dtype != DType::Int32 && offsets.dtype != DType::Int64)
    ctx.fail("offsets is " + to_string(offsets) + " but must be int32 or int64; cast it");
  const int64_t k_axis = block > 0 ? 2 : 1;
  if (data.shape[1] != weight.shape[k_axis])
    ctx.fail("data is " + to_string(data) + " but weight is " + to_string(weight) +
             ": data's K (dimension 1) must equal weight's K (dimension " + std::to_string(k_axis) +
             ")");
  if (offsets.shape[0] != weight.shape[0])
    ctx.fail("offsets is " + to_string(offsets) + " but weight is " + to_string(weight) +
             ": offsets must have one entry per group (weight's dimension 0)");
  if (weight.shape[0] < 1) ctx.fail("weight " + to_string(weight) + " has no groups");
  const int64_t n = block > 0 ? weight.shape[1] * block : weight.shape[2];
  return TensorType{{data.shape[0], n}, data.dtype};
}

// ---------------------------------------------------------------- the kernel

constexpr int64_t kPanelBytes = 256 * 1024;  // a K block's weight panel, read from the L2
constexpr int64_t kGpuThreads = 128;         // GPU threads per block, one output each

using Body = std::function<Stmt(PrimExpr)>;

Stmt loop(const std::string& name, PrimExpr begin, PrimExpr end, ForKind kind, const Body& body) {
  PrimVar v(name);
  return for_loop(v, begin, end - begin, kind, body(v));
}

int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

// The kernel of one nn.grouped_matmul call (the essay at the top): cpu() or gpu().
struct GroupedMatmul {
  GroupedMatmul(const Function& group, const std::string& func_name,
                const passes::MachineModel& machine);
  PrimFunc cpu();
  PrimFunc gpu();

  // Sets `start` and `end`, the rows of group g (0 <= g <= G; g = G: the rows past the last
  // offset), around `body`.
  Stmt with_bounds(PrimExpr g, Stmt body);
  // The group's rows in balanced register tiles, for columns from col0 (column tile `ct`)
  // and K from k0 to k1.
  Stmt row_tiles(PrimExpr g, PrimExpr ct, PrimExpr col0, PrimExpr k0, PrimExpr k1,
                 PrimExpr first_block);
  // One register tile of `rows` rows from row0.
  Stmt tile(PrimExpr g, PrimExpr ct, PrimExpr row0, int64_t rows, PrimExpr col0, PrimExpr k0,
            PrimExpr k1, PrimExpr first_block);
  // fn(v, lane, offset) for every vector v of a column tile, over its lanes (a vectorized
  // loop); `offset` is the column within the tile.
  using VectorBody = std::function<Stmt(int64_t, PrimExpr, PrimExpr)>;
  Stmt each_vector(const VectorBody& fn) const;
  // The element of weight[g] at row k and column col0 + offset of column tile ct.
  PrimExpr weight_at(PrimExpr g, PrimExpr ct, PrimExpr col0, PrimExpr k, PrimExpr offset) const;

  DType t = DType::Float32;
  int64_t S = 0, K = 0, N = 0, G = 0;
  int64_t block = 0;                // weight_block: panels of this many columns (0: plain)
  int64_t lanes = 1, V = 1, R = 1;  // a column tile's vectors: V of `lanes`; row tiles of R
  int64_t width = 1, tiles = 1;     // columns per tile, column tiles
  int64_t kblock = 1, kblocks = 1;  // K in blocks
  PrimFunc f;
  Buffer x, w, offs, out, acc, bound;
  PrimVar start{"start"}, end{"end"};
};

GroupedMatmul::GroupedMatmul(const Function& group, const std::string& func_name,
                             const passes::MachineModel& machine) {
  auto* c = as<CallNode>(group->body);
  EMBER_CHECK(c && c->op && c->op->name == "nn.grouped_matmul" && c->args.size() == 3, "group ",
              group->name, " is not a single nn.grouped_matmul call");
  f.name = func_name;
  std::vector<Buffer> in = single_call_buffers(group, c, f);
  x = in[0];
  w = in[1];
  offs = in[2];
  block = attr_int(c->attrs, "weight_block");
  const TensorType& ot = c->type.tensor();
  t = ot.dtype;
  S = ot.shape[0];
  N = ot.shape[1];
  K = x->shape[1];
  G = w->shape[0];
  out = make_buffer("grouped_matmul", t, {S, N});
  f.params.push_back(out);

  // Column tiles: V vectors (4 with AVX-512, 2 with AVX2), or a packed weight's panel; a
  // row narrower than a tile is one tile, and narrower than a vector one vector of its length.
  const int64_t full = machine.lanes(t);
  // (N = 0: no tiles; the sizes stay at least 1.)
  lanes = std::max<int64_t>(1, std::min(full, N));
  width = block > 0
              ? block
              : std::max<int64_t>(1, std::min(grouped_matmul_tile_vectors(machine) * lanes, N));
  lanes = std::min(lanes, width);
  V = ceil_div(width, lanes);
  tiles = ceil_div(N, width);
  // Rows per register tile: the accumulators, V weight vectors and a broadcast in registers.
  R = std::clamp<int64_t>((machine.vector_registers - V - 2) / V, 1, 12);
  kblocks = std::max<int64_t>(1, ceil_div(K * width * dtype_bytes(t), kPanelBytes));
  kblock = std::max<int64_t>(1, ceil_div(K, kblocks));
  kblocks = ceil_div(K, kblock);
  acc = make_buffer("accumulators", t, {R * V * lanes}, BufferScope::Local);
  bound = make_buffer("group_end", DType::Int64, {1}, BufferScope::Local);
}

Stmt GroupedMatmul::with_bounds(PrimExpr g, Stmt body) {
  PrimExpr running = load(bound, 0);
  PrimExpr offset = cast(DType::Int64, load(offs, min(g, PrimExpr(G - 1))));
  Stmt prefix = seq({store(bound, 0, int64_t{0}), loop("j", 0, g, ForKind::Serial, [&](PrimExpr j) {
                       return store(bound, 0, max(running, cast(DType::Int64, load(offs, j))));
                     })});
  PrimExpr last = select(g < PrimExpr(G), min(max(running, offset), PrimExpr(S)), PrimExpr(S));
  return seq({prefix, let_stmt(start, min(running, PrimExpr(S)), let_stmt(end, last, body))});
}

Stmt GroupedMatmul::each_vector(const VectorBody& fn) const {
  std::vector<Stmt> parts;
  for (int64_t v = 0; v < V; ++v) {
    const int64_t at = std::min(v * lanes, width - lanes);  // the last vector shifted back
    PrimVar lane("lane");
    Stmt body = fn(v, lane, at + lane);
    parts.push_back(lanes == 1 ? let_stmt(lane, int64_t{0}, body)
                               : for_loop(lane, 0, lanes, ForKind::Vectorized, body));
  }
  return seq(parts);
}

PrimExpr GroupedMatmul::weight_at(PrimExpr g, PrimExpr ct, PrimExpr col0, PrimExpr k,
                                  PrimExpr offset) const {
  if (block > 0) return load(w, ((g * tiles + ct) * K + k) * block + offset);
  return load(w, (g * K + k) * N + col0 + offset);
}

Stmt GroupedMatmul::tile(PrimExpr g, PrimExpr ct, PrimExpr row0, int64_t rows, PrimExpr col0,
                         PrimExpr k0, PrimExpr k1, PrimExpr first_block) {
  const PrimExpr zero = make_const(t, 0.0);
  // Every (row, vector) of the tile, unrolled: the accumulators' indices are constants.
  using TileBody = std::function<Stmt(PrimExpr row, PrimExpr slot, PrimExpr offset)>;
  auto each = [&](const TileBody& fn) {
    std::vector<Stmt> parts;
    for (int64_t r = 0; r < rows; ++r)
      parts.push_back(each_vector([&](int64_t v, PrimExpr lane, PrimExpr offset) {
        return fn(row0 + r, PrimExpr((r * V + v) * lanes) + lane, offset);
      }));
    return seq(parts);
  };
  Stmt init = each([&](PrimExpr, PrimExpr a, PrimExpr) { return store(acc, a, zero); });
  if (kblocks > 1)  // a later K block goes on from what the earlier ones wrote
    init = if_then_else(first_block, init, each([&](PrimExpr row, PrimExpr a, PrimExpr offset) {
                          return store(acc, a, load(out, row * N + col0 + offset));
                        }));
  Stmt k_loop = loop("k", k0, k1, ForKind::Serial, [&](PrimExpr k) {
    return each([&](PrimExpr row, PrimExpr a, PrimExpr offset) {
      PrimExpr product = fma(load(x, row * K + k), weight_at(g, ct, col0, k, offset), load(acc, a));
      return store(acc, a, product);
    });
  });
  Stmt write = each([&](PrimExpr row, PrimExpr a, PrimExpr offset) {
    return store(out, row * N + col0 + offset, load(acc, a));
  });
  return seq({init, k_loop, write});
}

// n = ceil(rows / R) tiles: `extra` of base + 1 rows, then n - extra of base rows (32 rows
// with R = 6: 6, 6, 5, 5, 5, 5, not five of 6 and one of 2, whose two rows would each load
// the weight vectors for a third of the FMAs). One loop per tile size, most of them empty.
Stmt GroupedMatmul::row_tiles(PrimExpr g, PrimExpr ct, PrimExpr col0, PrimExpr k0, PrimExpr k1,
                              PrimExpr first_block) {
  PrimVar rows("rows"), n("row_tiles"), base("base"), extra("extra");
  const PrimExpr none = int64_t{0};
  std::vector<Stmt> sizes;
  for (int64_t size = 1; size <= R; ++size) {
    PrimExpr is_base = PrimExpr(base) == PrimExpr(size);
    PrimExpr count = select(PrimExpr(base) + 1 == PrimExpr(size), PrimExpr(extra),
                            select(is_base, n - PrimExpr(extra), none));
    PrimExpr first = start + select(is_base, PrimExpr(extra) * (size + 1), none);
    sizes.push_back(loop("rt", 0, count, ForKind::Serial, [&](PrimExpr rt) {
      return tile(g, ct, first + rt * size, size, col0, k0, k1, first_block);
    }));
  }
  Stmt body = let_stmt(extra, PrimExpr(rows) - PrimExpr(base) * n, seq(sizes));
  body = let_stmt(base, PrimExpr(rows) / max(PrimExpr(n), PrimExpr(int64_t{1})), body);
  body = let_stmt(n, (PrimExpr(rows) + (R - 1)) / R, body);
  return let_stmt(rows, PrimExpr(end) - start, body);
}

PrimFunc GroupedMatmul::cpu() {
  PrimVar i("i"), g("g"), ct("column_tile"), col0("col0");
  const PrimExpr zero = make_const(t, 0.0);
  // Group G: the rows past the last offset, zeros.
  Stmt zeros = loop("r", start, end, ForKind::Serial, [&](PrimExpr r) {
    return each_vector([&](int64_t, PrimExpr, PrimExpr offset) {
      return store(out, r * N + col0 + offset, zero);
    });
  });
  Stmt products = loop("kb", 0, kblocks, ForKind::Serial, [&](PrimExpr kb) {
    PrimExpr k0 = kb * kblock;
    return row_tiles(g, ct, col0, k0, min(k0 + kblock, PrimExpr(K)), kb == PrimExpr(int64_t{0}));
  });
  Stmt body = with_bounds(g, if_then_else(g < PrimExpr(G), products, zeros));
  body = allocate(acc, allocate(bound, body));
  // The last column tile shifted back to end at N (a packed weight's panels divide N).
  body = let_stmt(col0, min(PrimExpr(ct) * width, PrimExpr(N - width)), body);
  // Group-major: a thread's consecutive iterations take neighbouring column tiles of one
  // group, so they read the same rows of data and the same pages of the weight.
  body = let_stmt(ct, PrimExpr(i) % tiles, let_stmt(g, PrimExpr(i) / tiles, body));
  f.body = for_loop(i, 0, (G + 1) * tiles, ForKind::Parallel, body);
  verify(f);
  return f;
}

PrimFunc GroupedMatmul::gpu() {
  // One thread per output element; its row's group g is the number of groups that end at
  // or before the row (the ends are non-decreasing), G for a row past the last offset.
  Buffer sum = make_buffer("sum", t, {1}, BufferScope::Local);
  Buffer count = make_buffer("group", DType::Int64, {1}, BufferScope::Local);
  PrimVar block_id("block"), thread("thread"), e("e"), row("row"), col("col"), g("g");
  const int64_t outputs = S * N, threads = std::clamp<int64_t>(outputs, 1, kGpuThreads);
  const PrimExpr one = int64_t{1}, none = int64_t{0};
  PrimExpr running = load(bound, 0);
  Stmt find = seq({store(bound, 0, none), store(count, 0, none),
                   loop("j", 0, G, ForKind::Serial, [&](PrimExpr j) {
                     PrimExpr ended = min(running, PrimExpr(S)) <= row;
                     return seq({store(bound, 0, max(running, cast(DType::Int64, load(offs, j)))),
                                 store(count, 0, load(count, 0) + select(ended, one, none))});
                   })});
  PrimExpr ct = block > 0 ? PrimExpr(col) / block : PrimExpr(none);
  PrimExpr col0 = block > 0 ? ct * block : PrimExpr(none);
  Stmt k_loop = loop("k", 0, K, ForKind::Serial, [&](PrimExpr k) {
    return store(sum, 0,
                 fma(load(x, row * K + k), weight_at(g, ct, col0, k, col - col0), load(sum, 0)));
  });
  Stmt dot = seq({store(sum, 0, make_const(t, 0.0)), if_then_else(g < PrimExpr(G), k_loop),
                  store(out, e, load(sum, 0))});
  Stmt body = seq({find, let_stmt(g, load(count, 0), dot)});
  body = let_stmt(row, PrimExpr(e) / N, let_stmt(col, PrimExpr(e) % N, body));
  body = allocate(sum, allocate(count, allocate(bound, body)));
  PrimExpr at = PrimExpr(block_id) * threads + thread;
  body = let_stmt(e, at, outputs % threads ? if_then_else(at < PrimExpr(outputs), body) : body);
  f.body = for_loop(block_id, 0, ceil_div(outputs, threads), ForKind::GpuBlockX,
                    for_loop(thread, 0, threads, ForKind::GpuThreadX, body));
  verify(f);
  return f;
}

// Builds the kernel of a group holding one nn.grouped_matmul call (Op::lower).
}  // namespace

int64_t grouped_matmul_tile_vectors(const passes::MachineModel& machine) {
  return machine.vector_registers >= 32 ? 4 : 2;
}

namespace {

PrimFunc lower_grouped_matmul(const Function& group, const std::string& func_name,
                              const passes::MachineModel& machine, bool gpu) {
  GroupedMatmul kernel(group, func_name, machine);
  return gpu ? kernel.gpu() : kernel.cpu();
}

const Op* register_grouped_matmul() {
  Op op{"nn.grouped_matmul", 3, OpPattern::Opaque, grouped_matmul_rel, nullptr};
  op.lower = lower_grouped_matmul;
  op.attrs = {int_attr("weight_block", 0,
                       "0: weight is [G, K, N]; B > 0: weight is packed in panels of B columns, "
                       "[G, N / B, K, B] (set by AlterOpLayout for a constant weight)")};
  return register_op(std::move(op));
}
[[maybe_unused]] const Op* kGroupedMatmul = register_grouped_matmul();

}  // namespace
}  // namespace ember::ir
