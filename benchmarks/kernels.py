"""Every conv/dense/matmul kernel of ResNet-50 and of a BERT-base layer: its time, GFLOP/s and
share of the single-core FMA peak, at 1 thread.

    PYTHONPATH=python python3 benchmarks/kernels.py [--models resnet50,bert_s128] [--repeat 5]
        [--target "llvm -vector-bits=256"] [--quick]

Builds each model (benchmarks/e2e.py's definitions: ResNet-50 on 1x3x224x224, the BERT-base
encoder layer on 1x128x768; any e2e.py model name works) with Ember, runs
GraphModule.profile() at 1 thread --repeat times (the median per kernel of those runs, as
every other benchmark here takes medians; a mean let one interrupted run move a 0.24 ms
kernel by 5%) and reads every
kernel's ops from the graph after the passes (lib.get_source("graph")). For each kernel whose
anchor is nn.conv2d, nn.dense, nn.matmul or nn.batch_matmul (or a layout variant such as
nn.conv2d_blocked or nn.dense_packed, shown with its real, blocked shapes) — and nn.attention,
whose two batched products q k^T and p v are counted — the useful flops come from the anchor's
operand and result shapes: 2*M*N*K for products, 2*N*Cout*OH*OW*Cin/groups*KH*KW for
convolutions (a kernel with two anchors, e.g. depthwise -> pointwise, counts both). The peak
is measured in the same run by ember.measure_fma_peak (independent float32 FMA chains that
Ember compiles at the target's vector width, one thread), right before and right after each
model's profile; a kernel's % peak is against the higher of those two. The process is pinned
to one CPU (--cpu): on a virtual machine one vCPU can run 30% slower than the other for
minutes (a busy sibling hyperthread on the host), so the peak and the kernels must share one.
A model whose two peaks differ by more than 10% (the CPU's speed changed while it ran) is
profiled again, up to three times, and flagged when it never ran steady. Prints one Markdown row per kernel, sorted by model
then time, the totals per model and, per model, how many workloads are distinct; batch-1
dense kernels also against the read bandwidth of an Ember-compiled streaming sum over a
buffer the size of their weights, each pair timed in the same cache state (both warm: run
back to back; both cold: after evicting the caches). Never part of the test pass/fail.
"""
import argparse
import contextlib
import io
import os
import platform
import re
import sys
import time

import numpy as np
import torch

import ember

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402  (the model definitions)

PRODUCT_OPS = ("nn.conv2d", "nn.dense", "nn.matmul", "nn.batch_matmul", "nn.attention")

_PRIM = re.compile(r"^\s*%\w+ = primitive fn \((.*)\) -> .* \{$")
_PARAM = re.compile(r"%(\w+): \w+\[([\d, ]*)\]")
_OP = re.compile(r"^\s*%(\w+) = ([\w.]+)\((.*)\) : \w+\[([\d, ]*)\](?: /\*.*\*/)?$")
_END = re.compile(r"^\s*\}\(.*\) : .*?(?:/\* (.*) \*/)?$")


def _shape(text):
    return tuple(int(d) for d in text.split(",") if d.strip())


def parse_graph(text):
    """The primitive functions (kernels) of lib.get_source("graph"), in order: a list of
    {"name", "ops": [{"op", "args": [shapes], "out": shape, "attrs": str}]}."""
    kernels, cur, shapes = [], None, {}
    for line in text.splitlines():
        m = _PRIM.match(line)
        if m:
            cur = {"name": None, "ops": []}
            shapes = {name: _shape(dims) for name, dims in _PARAM.findall(m.group(1))}
            continue
        if cur is None:
            continue
        m = _END.match(line)
        if m:
            cur["name"] = m.group(1)
            kernels.append(cur)
            cur = None
            continue
        m = _OP.match(line)
        if m:
            var, op, args, out = m.group(1), m.group(2), m.group(3), _shape(m.group(4))
            operands, attrs = [], []
            for tok in args.split(", "):
                if not attrs and tok.startswith("%") and "=" not in tok:
                    operands.append(tok[1:])
                else:
                    attrs.append(tok)
            cur["ops"].append({"op": op, "args": [shapes.get(a) for a in operands],
                               "out": out, "attrs": ", ".join(attrs)})
            shapes[var] = out
    return kernels


def _x(shape):
    return "x".join(map(str, shape))


def _attr(attrs, key):
    m = re.search(r"\b" + key + r"=(?:\[([\d, ]*)\]|(\d+))", attrs)
    if not m:
        return None
    return [int(v) for v in (m.group(1) or m.group(2)).split(",") if v.strip()]


def is_product(op_name):
    """conv2d, dense, matmul, batch_matmul, attention and their layout variants (e.g.
    nn.dense_packed, whose weight is pre-packed)."""
    return op_name.startswith(PRODUCT_OPS)


def workload(op):
    """(flops, shape text) of one product op, or None when its shapes are unknown. Only the
    data operand and the result are trusted to have the logical layout: a weight may be
    packed (nn.dense_packed's is [N/8, K, 8])."""
    args, out, kind = op["args"], op["out"], op["op"]
    if any(a is None for a in args[:3 if kind.startswith("nn.attention") else 2]):
        return None
    if kind.startswith("nn.conv2d"):  # data [N, Cin, H, W], weight Cout*Cin/g*KH*KW values
        x, w = args[0], args[1]
        groups = (_attr(op["attrs"], "groups") or [1])[0]
        stride = _attr(op["attrs"], "strides") or [1, 1]
        points = out[0] * out[2] * out[3]  # N*OH*OW (also for an NCHWc result)
        flops = 2 * points * int(np.prod(w))  # Cout * Cin/groups * KH * KW MACs per point
        text = f"{_x(x)} * {_x(w)}" + (f" g{groups}" if groups != 1 else "") + \
            (f" s{stride[0]}" if stride[0] != 1 else "") + f" -> {_x(out)}"
        return flops, text
    if kind.startswith("nn.dense"):  # data [..., K] -> [..., N]
        m, n, k = int(np.prod(out[:-1])), out[-1], args[0][-1]
        return 2 * m * n * k, f"M{m} N{n} K{k}"
    if kind.startswith(("nn.matmul", "nn.batch_matmul")):  # a [..., M, K] @ b -> [..., M, N]
        k = args[0][-1]
        batch = int(np.prod(out[:-2])) if len(out) > 2 else 1
        m = out[-2] if len(out) >= 2 else 1
        return (2 * int(np.prod(out)) * k,
                (f"B{batch} " if batch != 1 else "") + f"M{m} N{out[-1]} K{k}")
    if kind.startswith("nn.attention"):  # q [..., L, E], k [..., S, E], v [..., S, Ev]
        q, k, v = args[0], args[1], args[2]
        batch, L, E, S, Ev = int(np.prod(q[:-2])), q[-2], q[-1], k[-2], v[-1]
        causal = "causal=1" in op["attrs"]
        return (2 * batch * L * S * (E + Ev),
                f"B{batch} L{L} S{S} E{E} (qk+pv)" + (" causal, full count" if causal else ""))
    return None


def parse_profile(table, funcs):
    """{func: ms} from GraphModule.profile()'s table (columns Name, Func, Time(ms), Percent,
    Shapes, separated by two or more spaces)."""
    times = {}
    for line in table.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        for i, cell in enumerate(cells):
            if cell in funcs and i + 1 < len(cells):
                try:
                    times[cell] = float(cells[i + 1])
                except ValueError:
                    pass
                break
    return times


def match_kernels(report, graph_kernels):
    """Pairs each fusion-report kernel with its primitive function in the graph text (same
    order; matched on the name and the op list, unmatched ones get None)."""
    out, j = [], 0
    for k in report:
        found = None
        for jj in range(j, len(graph_kernels)):
            g = graph_kernels[jj]
            if g["name"] == k.name and [o["op"] for o in g["ops"]] == list(k.ops):
                found, j = g, jj + 1
                break
        out.append(found)
    return out


def _flush_caches(_buf=[]):
    """Evicts the caches (writes 64 MB, more than this machine's L2 + L3)."""
    if not _buf:
        _buf.append(np.zeros(16 << 20, dtype=np.float32))
    _buf[0] += 1.0


def _time_ms(m, cold, repeat):
    """Median ms of `repeat` runs of module m: back to back (warm caches: its data stays in
    L2/L3 when it fits), or each after evicting the caches (cold: read from memory, as a
    model's weights are when the kernel's turn comes)."""
    if not cold:
        return m.benchmark(number=3, repeat=repeat).median
    times = []
    for _ in range(repeat):
        _flush_caches()
        t0 = time.perf_counter()
        m.run()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def stream_gbps(nbytes, target, cold, repeat=20):
    """Read bandwidth (GB/s) of an Ember-compiled float32 sum over a buffer of `nbytes`: the
    bound a batch-1 dense (a GEMV, which reads each weight once) can reach."""
    n = nbytes // 4
    x = ember.ir.var("w", shape=(n,))
    lib = ember.build(ember.ir.Function([x], ember.op.sum(x)), target=target)
    m = ember.GraphModule(lib)
    m.set_input(0, np.random.default_rng(0).standard_normal(n, dtype=np.float32))
    m.run()
    return nbytes / (_time_ms(m, cold, repeat) * 1e6)


def standalone_ms(lib, kernel_name, target, repeat=20):
    """(warm ms, cold ms) of one kernel of `lib` built and run on its own (random inputs), or
    None when the build has no such workload."""
    from ember import _ember
    from ember.tuning._runner import _inputs, input_specs
    for w in _ember._extract_workloads(lib):
        if w["name"] != kernel_name:
            continue
        m = ember.GraphModule(_ember._build_kernel(w["group"], target, {}))
        for i, a in enumerate(_inputs(input_specs(w["group"]))):
            m.set_input(i, a)
        m.run()
        return _time_ms(m, False, repeat), _time_ms(m, True, repeat)
    return None


def print_gemv_bandwidth(rows, target):
    """Batch-1 dense kernels (M1): weight bytes read per second against the streaming sum's
    bandwidth over a buffer of the same size, measured now, each pair in the same cache
    state: the kernel alone, run back to back, against the sum run back to back (warm), and
    the kernel alone after evicting the caches against the sum after evicting them (cold).
    The in-model time (the profile's, caches as the model leaves them) is shown beside."""
    gemv = [r for r in rows if "dense" in r["anchor"] and r["shape"].startswith("M1 ")]
    if not gemv:
        return
    print("\nBatch-1 dense against an Ember-compiled streaming sum over its weights' bytes "
          "(1 thread; GB/s of weights read):\n")
    print("| model | kernel | shape | weight MB | in model ms | in model GB/s | alone warm GB/s "
          "| sum warm GB/s | % warm | alone cold GB/s | sum cold GB/s | % cold |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in gemv:
        n, k = (int(v) for v in re.findall(r"[NK](\d+)", r["shape"]))
        nbytes = 4 * n * k
        gbps = nbytes / (r["ms"] * 1e6) if r["ms"] else None
        alone = standalone_ms(r["lib"], r["kernel"], target)
        warm, cold = (nbytes / (t * 1e6) for t in alone) if alone else (None, None)
        sum_warm, sum_cold = stream_gbps(nbytes, target, False), stream_gbps(nbytes, target, True)
        print(f"| {r['model']} | {r['kernel']} | {r['shape']} | {nbytes / 1e6:.1f} "
              f"| {fmt(r['ms'], 3)} | {fmt(gbps)} | {fmt(warm)} | {sum_warm:.1f} "
              f"| {fmt(100 * warm / sum_warm if warm else None)} | {fmt(cold)} "
              f"| {sum_cold:.1f} | {fmt(100 * cold / sum_cold if cold else None)} |")


def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:.{digits}f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,bert_s128",
                   help=f"comma list of e2e.py models (default resnet50,bert_s128): "
                        f"{', '.join(e2e.MODELS)}")
    p.add_argument("--repeat", type=int, default=None,
                   help="profiled runs per model (default 15; 3 with --quick)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--target", default="llvm", help='Ember target string (default "llvm")')
    p.add_argument("--cpu", type=int, default=None,
                   help="CPU to pin to (default: the first one this process may use)")
    args = p.parse_args()
    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    names = e2e.chosen(p, args.models, e2e.MODELS, "model")
    repeat = args.repeat or (3 if args.quick else 15)

    ember.set_num_threads(1)
    torch.set_num_threads(1)
    print(f"# Ember kernels: {platform.processor() or platform.machine()}, target "
          f"{args.target!r}, 1 thread, median of {repeat} profiled runs, load average "
          f"{os.getloadavg()[0]:.1f} at start, pinned to CPU {cpu}")

    def measure_peak():
        """The FMA peak in GFLOP/s, or None when it cannot be measured."""
        if not hasattr(ember, "measure_fma_peak"):
            print("# FMA peak unavailable: this build has no ember.measure_fma_peak; "
                  "the % peak column is n/a")
            return None
        try:
            return float(ember.measure_fma_peak(args.target, seconds=0.5))
        except Exception as e:  # noqa: BLE001
            print(f"# FMA peak unavailable: ember.measure_fma_peak failed: "
                  f"{type(e).__name__}: {e}; the % peak column is n/a")
            return None

    def profile_steady(m):
        """(profile tables of `repeat` runs, peak before, peak after, steady) of model module m."""
        for _ in range(3):
            before = measure_peak()
            with contextlib.redirect_stdout(io.StringIO()):  # profile() prints its table too
                tables = [m.profile(repeat=1) for _ in range(repeat)]
            after = measure_peak()
            steady = before is None or after is None or abs(before - after) <= 0.1 * max(
                before, after)
            if steady:
                break
        return tables, before, after, steady

    rows, summaries = [], []
    for name in names:
        model, inputs = e2e.make(name, 1)
        t0 = time.perf_counter()
        mod, params = ember.frontend.from_pytorch(model, inputs)
        lib = ember.build(mod, target=args.target, params=params)
        build_s = time.perf_counter() - t0
        m = ember.GraphModule(lib)
        for i, x in enumerate(inputs):
            m.set_input(i, x.numpy())
        m.run()  # warm-up
        tables, before, after, steady = profile_steady(m)
        peak = max(before, after) if before and after else None
        report = lib.fusion_report()
        funcs = {k.func for k in report}
        runs = [parse_profile(t, funcs) for t in tables]
        times = {f: float(np.median([r[f] for r in runs if f in r]))
                 for f in funcs if any(f in r for r in runs)}
        graph = match_kernels(report, parse_graph(lib.get_source("graph")))
        total_ms = sum(times.values())
        model_rows, other_ms, distinct = [], 0.0, {}
        for k, g in zip(report, graph):
            ms = times.get(k.func)
            products = [o for o in (g["ops"] if g else []) if is_product(o["op"])]
            if not is_product(k.anchor) and not products:
                other_ms += ms or 0.0
                continue
            works = [workload(o) for o in products]
            if not works or any(w is None for w in works):
                flops, shape = None, "shapes unknown"
            else:
                flops = sum(w[0] for w in works)
                shape = " ; ".join(w[1] for w in works)
            anchor = " + ".join(o["op"].replace("nn.", "") for o in products) or k.anchor
            gflops = flops / (ms * 1e6) if flops and ms else None
            row = {"model": name, "kernel": k.name, "anchor": anchor, "shape": shape,
                   "ms": ms, "flops": flops, "gflops": gflops, "lib": lib,
                   "pct": 100 * gflops / peak if gflops and peak else None}
            model_rows.append(row)
            distinct.setdefault((anchor, shape), []).append(row)
        model_rows.sort(key=lambda r: -(r["ms"] or 0))
        rows += model_rows
        kern_ms = sum(r["ms"] or 0 for r in model_rows)
        flops = sum(r["flops"] or 0 for r in model_rows)
        summaries.append({"model": name, "build_s": build_s, "kernels": len(report),
                          "product_kernels": len(model_rows), "distinct": len(distinct),
                          "total_ms": total_ms, "product_ms": kern_ms, "other_ms": other_ms,
                          "gflop": flops / 1e9, "peak": peak,
                          "gflops": flops / (kern_ms * 1e6) if kern_ms else None})
        peaks = f"{before:.1f} before, {after:.1f} after" if peak else "n/a"
        print(f"# {name}: built in {build_s:.1f} s, {len(report)} kernels, profiled; FMA peak "
              f"(ember.measure_fma_peak, float32, {args.target!r}) {peaks} GFLOP/s"
              + ("" if steady else " -- UNSTEADY: the CPU's speed changed during the profile "
                 "three times; its % peak is unreliable"), flush=True)

    print("\n| model | kernel | anchor | shape | ms | GFLOP/s | % peak |")
    print("|---|---|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['kernel']} | {r['anchor']} | {r['shape']} "
              f"| {fmt(r['ms'], 3)} | {fmt(r['gflops'])} | {fmt(r['pct'])} |")
    print("\nTotals per model (1 thread):\n")
    print("| model | all kernels ms | conv/dense/matmul kernels ms | their GFLOP | GFLOP/s "
          "| % peak | other kernels ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in summaries:
        pct = 100 * s["gflops"] / s["peak"] if s["gflops"] and s["peak"] else None
        print(f"| {s['model']} | {s['total_ms']:.2f} | {s['product_ms']:.2f} | {s['gflop']:.3f} "
              f"| {fmt(s['gflops'])} | {fmt(pct)} | {s['other_ms']:.2f} |")
    print_gemv_bandwidth(rows, args.target)
    print()
    for s in summaries:
        print(f"{s['model']}: {s['product_kernels']} conv/dense/matmul kernels of "
              f"{s['kernels']}, {s['distinct']} distinct workloads (anchor and shapes); "
              f"build {s['build_s']:.1f} s")
    if all(s["peak"] is None for s in summaries):
        print("% peak: n/a (no FMA peak measured in this run)")
    elif any(r["pct"] and r["pct"] > 100 for r in rows):
        print("Some kernels show more than 100% of the peak: the peak measurement was disturbed "
              "(other processes on the cores?); rerun on a quiet machine.")


if __name__ == "__main__":
    main()
