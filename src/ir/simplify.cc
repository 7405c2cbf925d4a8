#include "ember/ir/simplify.h"

#include <algorithm>

#include "ember/support/error.h"

namespace ember::ir {

namespace {

// An integer expression as sum(coeff * atom) + constant. Atoms are variables or
// non-affine subexpressions (matched structurally), so (x*8 + 7) - x*8 cancels to 7.
struct Terms {
  std::vector<std::pair<PrimExpr, int64_t>> atoms;
  int64_t constant = 0;

  void add(const PrimExpr& atom, int64_t c) {
    if (c == 0) return;
    for (auto it = atoms.begin(); it != atoms.end(); ++it) {
      if (structural_equal(it->first, atom) || it->first.same_as(atom)) {
        it->second += c;
        if (it->second == 0) atoms.erase(it);
        return;
      }
    }
    atoms.emplace_back(atom, c);
  }
  void add(const Terms& o, int64_t scale) {
    for (auto& [a, c] : o.atoms) add(a, c * scale);
    constant += o.constant * scale;
  }
  bool is_const() const { return atoms.empty(); }
};

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

PrimExpr simplify_int(const PrimExpr& e);

// Ranges of the loop variables around the statement being simplified (Stmt simplify sets
// them); with them (q*c + r) / c is q and (q*c + r) % c is r when r is known in [0, c).
thread_local const VarRanges* loop_ranges = nullptr;

// The constant range of an integer expression over the ranged variables: interval
// arithmetic through +, -, * and floor / and % by positive constants, min and max.
std::optional<Interval> value_range(const PrimExpr& e, const VarRanges& ranges) {
  int64_t c;
  if (as_int(e, &c)) return Interval{c, c};
  if (auto* v = e.as<PrimVarNode>()) {
    auto it = ranges.find(v);
    return it == ranges.end() ? std::nullopt : std::optional<Interval>(it->second);
  }
  auto* b = e.as<BinaryNode>();
  if (!b) return std::nullopt;
  auto x = value_range(b->a, ranges), y = value_range(b->b, ranges);
  const bool positive_const = as_int(b->b, &c) && c > 0;
  if (b->op == BinaryOp::Mod && positive_const) {  // floor modulo: always in [0, c)
    if (x && floor_div(x->min, c) == floor_div(x->max, c))
      return Interval{x->min - floor_div(x->min, c) * c, x->max - floor_div(x->min, c) * c};
    return Interval{0, c - 1};
  }
  if (!x || !y) return std::nullopt;
  switch (b->op) {
    case BinaryOp::Add:
      return Interval{x->min + y->min, x->max + y->max};
    case BinaryOp::Sub:
      return Interval{x->min - y->max, x->max - y->min};
    case BinaryOp::Mul: {
      int64_t p[] = {x->min * y->min, x->min * y->max, x->max * y->min, x->max * y->max};
      return Interval{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
    }
    case BinaryOp::Div:
      if (!positive_const) return std::nullopt;
      return Interval{floor_div(x->min, c), floor_div(x->max, c)};
    case BinaryOp::Min:
      return Interval{std::min(x->min, y->min), std::min(x->max, y->max)};
    case BinaryOp::Max:
      return Interval{std::max(x->min, y->min), std::max(x->max, y->max)};
    default:
      return std::nullopt;
  }
}

// The constant bounds of the terms `t`, when every atom has a range over the ranged
// variables.
std::optional<Interval> terms_bound(const Terms& t) {
  if (!loop_ranges) return std::nullopt;
  int64_t lo = t.constant, hi = t.constant;
  for (auto& [a, c] : t.atoms) {
    std::optional<Interval> r = value_range(a, *loop_ranges);
    if (!r) return std::nullopt;
    int64_t x = c * r->min, y = c * r->max;
    lo += std::min(x, y);
    hi += std::max(x, y);
  }
  return Interval{lo, hi};
}

// Simplifies the operands of a node that is itself kept as an atom.
PrimExpr simplify_operands(const PrimExpr& e) {
  auto* b = e.as<BinaryNode>();
  if (!b) return simplify(e);
  PrimExpr a = simplify(b->a), c = simplify(b->b);
  if (a.same_as(b->a) && c.same_as(b->b)) return e;
  return binary(b->op, a, c);
}

PrimExpr rebuild(const Terms& t, DType dtype) {
  PrimExpr r;
  for (auto& [atom, c] : t.atoms) {
    PrimExpr term = c == 1 ? atom : atom * make_const(dtype, double(c));
    r = r ? r + term : term;
  }
  PrimExpr k = make_const(dtype, double(t.constant));
  if (!r) return k;
  return t.constant == 0 ? r : r + k;
}

Terms collect(const PrimExpr& e);

// x = c*q + r with r = d*h + l, d dividing c and l in [0, d) (a vector's lane under a loop of
// whole vectors): x / c = q + h / (c/d) and x % c = d * (h % (c/d)) + l. Tries the largest
// such d among r's coefficients; false when none fits.
bool split_low_part(BinaryOp op, const Terms& q, const Terms& r, int64_t c, DType dtype,
                    Terms* out) {
  std::vector<int64_t> divisors;
  for (auto& [a, k] : r.atoms)
    if (k > 1 && c % k == 0) divisors.push_back(k);
  std::sort(divisors.rbegin(), divisors.rend());
  for (int64_t d : divisors) {
    Terms h, l;
    l.constant = r.constant;
    for (auto& [a, k] : r.atoms) (k % d == 0 ? h : l).add(a, k % d == 0 ? k / d : k);
    auto lb = terms_bound(l);
    if (!lb || lb->min < 0 || lb->max >= d) continue;
    PrimExpr high = binary(op, rebuild(h, dtype), make_const(dtype, double(c / d)));
    if (op == BinaryOp::Div) {
      *out = q;
      out->add(collect(high), 1);
    } else {
      *out = l;
      out->add(collect(high), d);
    }
    return true;
  }
  return false;
}

// Collects the affine structure of `e`; non-affine nodes become simplified atoms.
Terms collect(const PrimExpr& e) {
  Terms t;
  int64_t v;
  if (as_int(e, &v)) {
    t.constant = v;
    return t;
  }
  if (auto* b = e.as<BinaryNode>()) {
    switch (b->op) {
      case BinaryOp::Add:
        t = collect(b->a);
        t.add(collect(b->b), 1);
        return t;
      case BinaryOp::Sub:
        t = collect(b->a);
        t.add(collect(b->b), -1);
        return t;
      case BinaryOp::Mul: {
        Terms x = collect(b->a), y = collect(b->b);
        if (y.is_const()) {
          t.add(x, y.constant);
          return t;
        }
        if (x.is_const()) {
          t.add(y, x.constant);
          return t;
        }
        break;
      }
      case BinaryOp::Div:
      case BinaryOp::Mod: {
        Terms x = collect(b->a), y = collect(b->b);
        if (y.is_const() && y.constant > 0) {
          int64_t c = y.constant;
          bool all_divisible = true;
          for (auto& [a, k] : x.atoms) all_divisible &= (k % c == 0);
          if (all_divisible) {
            if (b->op == BinaryOp::Div) {
              for (auto& [a, k] : x.atoms) t.add(a, k / c);
              t.constant = floor_div(x.constant, c);
            } else {
              t.constant = x.constant - floor_div(x.constant, c) * c;
            }
            return t;
          }
          // x = c*q + r with r's range inside one multiple of c: x / c = q + r / c.
          Terms q, r;
          r.constant = x.constant;
          for (auto& [a, k] : x.atoms) (k % c == 0 ? q : r).add(a, k % c == 0 ? k / c : k);
          if (auto rb = terms_bound(r); rb && floor_div(rb->min, c) == floor_div(rb->max, c)) {
            int64_t whole = floor_div(rb->min, c);
            if (b->op == BinaryOp::Div) {
              t = q;
              t.constant += whole;
            } else {
              t = r;
              t.constant -= whole * c;
            }
            return t;
          }
          if (split_low_part(b->op, q, r, c, b->a.dtype(), &t)) return t;
          if (!q.atoms.empty()) {  // floor division: (c*q + r) / c = q + r / c, % gives r % c
            PrimExpr rest = binary(b->op, rebuild(r, b->a.dtype()), b->b);
            if (b->op == BinaryOp::Div) t = q;
            t.add(rest, 1);
            return t;
          }
        }
        break;
      }
      default:
        break;
    }
  }
  t.add(e.as<PrimVarNode>() ? e : simplify_operands(e), 1);
  return t;
}

// (x / c) * c + x % c is x (floor division and modulo by a positive constant): the index of
// a loop fused from two, r0 = f / W and r1 = f % W, into a row of W is f again. Replaces each
// pair of such atoms (coefficients k * c and k) in `t` by x.
void recombine_div_mod(Terms& t) {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < t.atoms.size() && !changed; ++i) {
      auto* mod = t.atoms[i].first.as<BinaryNode>();
      int64_t c = 0, k = t.atoms[i].second;
      if (!mod || mod->op != BinaryOp::Mod || !as_int(mod->b, &c) || c <= 0) continue;
      for (size_t j = 0; j < t.atoms.size(); ++j) {
        auto* div = t.atoms[j].first.as<BinaryNode>();
        if (!div || div->op != BinaryOp::Div || t.atoms[j].second != k * c ||
            !structural_equal(div->b, mod->b) || !structural_equal(div->a, mod->a))
          continue;
        PrimExpr x = mod->a, d = t.atoms[j].first, m = t.atoms[i].first;
        t.add(d, -k * c);
        t.add(m, -k);
        t.add(collect(x), k);
        changed = true;
        break;
      }
    }
  }
}

PrimExpr simplify_int(const PrimExpr& e) {
  // Simplify children of non-affine nodes; affine nodes are canonicalised by collect().
  if (auto* b = e.as<BinaryNode>()) {
    if (b->op == BinaryOp::Add || b->op == BinaryOp::Sub || b->op == BinaryOp::Mul ||
        b->op == BinaryOp::Div || b->op == BinaryOp::Mod) {
      Terms t = collect(e);
      recombine_div_mod(t);
      bool changed = t.atoms.size() != 1 || t.constant != 0 || t.atoms[0].second != 1 ||
                     !t.atoms[0].first.same_as(e);
      return changed ? rebuild(t, e.dtype()) : e;
    }
    return simplify_operands(e);
  }
  return e;
}

class Simplifier : public PrimMutator {
 protected:
  PrimExpr visit_binary(const PrimExpr& e, const BinaryNode* op) override {
    if (is_int(op->dtype)) return simplify_int(e);
    return PrimMutator::visit_binary(e, op);
  }

  // A let of a loop variable's index arithmetic (the axes of a fused loop: i = f / 384,
  // j = f % 384) gives its variable a range too, so indices built from it simplify.
  Stmt visit_let_stmt(const Stmt& s, const LetStmtNode* let) override {
    if (!is_int(let->value.dtype())) return PrimMutator::visit_let_stmt(s, let);
    PrimExpr value = mutate(let->value);
    std::optional<Interval> r = value_range(value, ranges_);
    if (r) ranges_[let->var.get()] = *r;
    const VarRanges* outer = loop_ranges;
    loop_ranges = &ranges_;
    Stmt body;
    try {
      body = mutate(let->body);
    } catch (...) {
      loop_ranges = outer;
      throw;
    }
    loop_ranges = outer;
    ranges_.erase(let->var.get());
    if (value.same_as(let->value) && body.same_as(let->body)) return s;
    return let_stmt(let->var, value, body);
  }

  Stmt visit_for(const Stmt& s, const ForNode* op) override {
    int64_t mn, ext;
    if (!as_int(op->min, &mn) || !as_int(op->extent, &ext) || ext < 1)
      return PrimMutator::visit_for(s, op);
    ranges_[op->var.get()] = {mn, mn + ext - 1};
    const VarRanges* outer = loop_ranges;
    loop_ranges = &ranges_;
    Stmt out;
    try {
      out = PrimMutator::visit_for(s, op);
    } catch (...) {
      loop_ranges = outer;
      throw;
    }
    loop_ranges = outer;
    ranges_.erase(op->var.get());
    return out;
  }

 private:
  VarRanges ranges_;
};

}  // namespace

PrimExpr simplify(const PrimExpr& e) { return e ? Simplifier().mutate(e) : e; }
Stmt simplify(const Stmt& s) {
  Simplifier m;
  return m.mutate(s);
}

std::optional<LinearForm> linear_form(const PrimExpr& e) {
  Terms t = collect(e);
  LinearForm f;
  f.constant = t.constant;
  for (auto& [a, c] : t.atoms) {
    auto* v = a.as<PrimVarNode>();
    if (!v) return std::nullopt;
    f.coeff[v] += c;
  }
  return f;
}

namespace {
bool uses_ranged(const PrimExpr& e, const VarRanges& ranges) {
  bool found = false;
  visit_prim(e, [&](const PrimExpr& x) {
    if (auto* v = x.as<PrimVarNode>()) found |= ranges.count(v) != 0;
  });
  return found;
}
}  // namespace

std::optional<std::pair<PrimExpr, int64_t>> bound(const PrimExpr& e, const VarRanges& ranges) {
  Terms t = collect(e);
  // Split into the part over ranged variables (must be affine in them) and the rest.
  Terms rest;
  rest.constant = t.constant;
  int64_t lo = 0, hi = 0;
  for (auto& [a, c] : t.atoms) {
    auto* v = a.as<PrimVarNode>();
    if (v && ranges.count(v)) {
      const Interval& r = ranges.at(v);
      int64_t x = c * r.min, y = c * r.max;
      lo += std::min(x, y);
      hi += std::max(x, y);
    } else if (uses_ranged(a, ranges)) {
      return std::nullopt;
    } else {
      rest.add(a, c);
    }
  }
  rest.constant += lo;
  return std::make_pair(rebuild(rest, e.dtype()), hi - lo + 1);
}

PrimExpr unclamped(const PrimExpr& index) {
  auto* b = index.as<BinaryNode>();
  int64_t c;
  if (b && (b->op == BinaryOp::Max || b->op == BinaryOp::Min) && as_int(b->b, &c))
    return unclamped(b->a);
  return index;
}

std::optional<Interval> const_bound(const PrimExpr& e, const VarRanges& ranges) {
  auto b = bound(e, ranges);
  if (!b) return std::nullopt;
  int64_t mn;
  if (!as_int(b->first, &mn)) return std::nullopt;
  return Interval{mn, mn + b->second - 1};
}

}  // namespace ember::ir
