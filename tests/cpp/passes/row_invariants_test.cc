// vectorize_row_invariants (row_invariants.h): a row's long chain, shared by its vector
// loop's lanes, computed for all rows as one vector before the row loop; values unchanged.
#include "ember/passes/row_invariants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ember/codegen/codegen.h"
#include "ember/ir/chains.h"
#include "ember/ir/prim_math.h"

namespace ember::passes {
namespace {

using namespace ir;

constexpr int64_t kCols = 16;

PrimFunc row_func(Stmt body, std::vector<Buffer> params) {
  PrimFunc f;
  f.name = "rows";
  f.params = std::move(params);
  f.num_inputs = static_cast<int>(f.params.size()) - 1;
  f.body = std::move(body);
  return f;
}

// out[r, j] = log(s[r]) + b[j] over `rows` rows, the value built by `value(r, j)`.
struct Rows {
  int64_t rows;
  Buffer s = make_buffer("s", DType::Float32, {rows});
  Buffer b = make_buffer("b", DType::Float32, {kCols});
  Buffer out = make_buffer("out", DType::Float32, {rows * kCols});
  PrimVar r{"r"}, j{"j"};
  PrimFunc func(const std::function<PrimExpr(Rows&)>& value, const Stmt& before = Stmt()) {
    Stmt row = for_loop(j, 0, kCols, ForKind::Vectorized, store(out, r * kCols + j, value(*this)));
    return row_func(for_loop(r, 0, rows, ForKind::Serial, before ? seq({before, row}) : row),
                    {s, b, out});
  }
  PrimExpr log_s() { return log(load(s, r)); }
};

// The innermost statement that stores into `buffer`, and the loop kind around it.
const StoreNode* store_into(const Stmt& s, const Buffer& buffer, ForKind* kind, int64_t* extent) {
  const StoreNode* found = nullptr;
  visit_prim(
      s, [](const PrimExpr&) {},
      [&](const Stmt& x) {
        if (auto* f = x.as<ForNode>();
            f && f->body.as<StoreNode>() && f->body.as<StoreNode>()->buffer == buffer) {
          *kind = f->for_kind;
          as_int(f->extent, extent);
          found = f->body.as<StoreNode>();
        }
      });
  return found;
}

TEST(RowInvariants, ARowsLogIsOneVectorBeforeTheRows) {
  for (int64_t rows : {2, 5, 16}) {
    Rows t{rows};
    PrimFunc f = t.func([](Rows& t) { return t.log_s() + load(t.b, t.j); });
    PrimFunc g = vectorize_row_invariants(f, MachineModel::for_vector_bits(256));
    auto* alloc = g.body.as<AllocateNode>();
    ASSERT_NE(alloc, nullptr) << rows << "\n" << g;
    ForKind kind = ForKind::Serial;
    int64_t extent = 0;
    const StoreNode* pre = store_into(g.body, alloc->buffer, &kind, &extent);
    ASSERT_NE(pre, nullptr) << g;
    EXPECT_EQ(kind, ForKind::Vectorized);
    EXPECT_EQ(extent, rows);
    const StoreNode* row = store_into(g.body, t.out, &kind, &extent);
    ASSERT_NE(row, nullptr) << g;
    EXPECT_LT(chain_length(row->value), kLongChain) << g;  // the log is gone from the row

    std::vector<float> s(rows), b(kCols), out(rows * kCols);
    const float kInf = std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < rows; ++i) s[i] = 0.37f * static_cast<float>(i * i) + 0.01f;
    s[0] = 0.0f;                            // log 0 = -inf
    s[rows - 1] = rows > 2 ? -1.0f : kInf;  // NaN, inf
    for (int64_t c = 0; c < kCols; ++c) b[c] = 0.25f * static_cast<float>(c) - 2.0f;
    std::vector<void*> args{s.data(), b.data(), out.data()};
    codegen::compile_cpu({g})->get_function("rows")(args.data());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < kCols; ++c) {
        const float want = std::log(s[i]) + b[c], got = out[i * kCols + c];
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(got)) << i << " " << c;
        else if (std::isinf(want))
          EXPECT_EQ(got, want) << i << " " << c;
        else
          EXPECT_NEAR(got, want, 1e-6f * (1 + std::fabs(want))) << i << " " << c;
      }
  }
}

TEST(RowInvariants, LeavesWhatIsNotARowInvariant) {
  Rows t{4};
  Buffer tmp = make_buffer("tmp", DType::Float32, {4}, BufferScope::Local);
  auto unchanged = [](const PrimFunc& f, int bits = 256) {
    return vectorize_row_invariants(f, MachineModel::for_vector_bits(bits)).body.get() ==
           f.body.get();
  };
  // The lanes' own values, a short chain, a buffer the row loop writes, a guarded row.
  EXPECT_TRUE(unchanged(t.func([](Rows& t) { return log(load(t.b, t.j)) + load(t.s, t.r); })));
  EXPECT_TRUE(unchanged(t.func(
      [](Rows& t) { return load(t.s, t.r) * make_const(DType::Float32, 2) + load(t.b, t.j); })));
  EXPECT_TRUE(unchanged(
      row_func(allocate(tmp, t.func([&](Rows& t) { return log(load(tmp, t.r)) + load(t.b, t.j); },
                                    store(tmp, t.r, load(t.s, t.r)))
                                 .body),
               {t.s, t.b, t.out})));
  PrimFunc guarded = t.func([](Rows& t) { return t.log_s() + load(t.b, t.j); });
  guarded.body = for_loop(t.r, 0, 4, ForKind::Serial,
                          if_then_else(load(t.s, t.r) > make_const(DType::Float32, 0),
                                       guarded.body.as<ForNode>()->body));
  EXPECT_TRUE(unchanged(guarded));
  // More rows than two vectors: 17 at 8 lanes; 16 rows are not left.
  Rows many{17};
  EXPECT_TRUE(unchanged(many.func([](Rows& t) { return t.log_s() + load(t.b, t.j); })));
  EXPECT_FALSE(unchanged(many.func([](Rows& t) { return t.log_s() + load(t.b, t.j); }), 512));
}

}  // namespace
}  // namespace ember::passes
