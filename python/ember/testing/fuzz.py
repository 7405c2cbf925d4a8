"""Differential fuzzer: random graphs built with Ember at several opt levels and vector
widths, compared with PyTorch in float64.

    python -m ember.testing.fuzz --count 200 --seed 1 --opt-levels 0,3 \\
        --vector-bits 256,512 --out fuzz-failures/

Each case is a small JSON record (fuzz_ops.py says how nodes are drawn), regenerated from
(seed, case number). Cases run in a worker process, so a crash (segfault) or a hang of one
case is reported and the worker restarted for the rest. A failing case is minimized (nodes
dropped while it still fails the same way) and written to --out as a pytest file.

Outcomes per build (one opt level and vector width): ok; mismatch (numbers beyond the
tolerance); error (InternalError, or another exception); unsupported (EmberError: Ember
refuses the graph, counted apart); crash; timeout.
"""
import argparse
import json
import math
import os
import select
import subprocess
import sys
import time

import numpy as np

# Tolerance (see compare()): |ember - ref64| <= ATOL * S + RTOL * |ref64| + COND * C, with S
# the largest |ref64| of the output (float32 rounding is relative to the output's scale)
# and C the largest |torch_float32 - ref64| (PyTorch's own float32 error on this graph:
# large when the graph is ill-conditioned, e.g. a sum that cancels).
ATOL, RTOL, COND = 2e-4, 2e-3, 10.0
CASE_TIMEOUT_S = 300  # per case, all its builds; past it the case is a timeout

SEVERITY = ["ok", "unsupported", "mismatch", "error", "timeout", "crash"]


# ------------------------------------------------------------------------ generation

def _input_shape(rng):
    kind = rng.choice(["nchw", "nchw", "nchw", "2d", "3d", "1d"])
    if kind == "nchw":
        return (int(rng.integers(1, 3)), int(rng.integers(1, 17)), int(rng.integers(1, 13)),
                int(rng.integers(1, 13)))
    if kind == "2d":
        return (int(rng.integers(1, 9)), int(rng.integers(1, 65)))
    if kind == "3d":
        return (int(rng.integers(1, 4)), int(rng.integers(1, 17)), int(rng.integers(1, 33)))
    return (int(rng.integers(1, 65)),)


def generate(seed, index, max_nodes=8):
    """Case `index` of `seed`: 1-2 inputs and 1..max_nodes nodes."""
    from . import fuzz_ops
    rng = np.random.default_rng([seed, index])
    case = {"seed": seed, "index": index, "input_seed": int(rng.integers(2**31)),
            "inputs": [list(_input_shape(rng)) for _ in range(1 + int(rng.random() < 0.25))],
            "nodes": [], "outputs": None}
    graph = fuzz_ops.Graph([tuple(s) for s in case["inputs"]], reference_inputs(case))
    names = list(fuzz_ops.OPS)
    weights = np.array([fuzz_ops.OPS[n].weight for n in names])
    target = int(rng.integers(1, max_nodes + 1))
    for _ in range(20 * target):
        if len(case["nodes"]) == target:
            break
        fop = fuzz_ops.OPS[str(rng.choice(names, p=weights / weights.sum()))]
        picked = fop.gen(rng, graph)
        if picked is None:
            continue
        node = {"op": fop.name, "in": picked[0], "a": picked[1],
                "seed": int(rng.integers(2**31))}
        value = _eval_node(node, graph.values, "float64")
        if value is None:
            continue
        case["nodes"].append(node)
        graph.shapes.append(tuple(value.shape))
        graph.values.append(value)
    return case


def _eval_node(node, values, dtype):
    """The node's reference value, or None when it is not a usable value (too large,
    empty, not finite: the generator then draws another node)."""
    from . import fuzz_ops
    try:
        v = fuzz_ops.OPS[node["op"]].torch([values[i] for i in node["in"]], node["a"],
                                           _torch_consts(node, values, dtype))
    except (RuntimeError, ValueError, IndexError):  # PyTorch refuses it: not a graph to test
        return None
    if v.numel() == 0 or v.numel() > fuzz_ops.MAX_ELEMS or not bool(v.isfinite().all()):
        return None
    return v.contiguous()


# ------------------------------------------------------------------ building, running

def node_consts(node, in_shapes):
    from . import fuzz_ops
    return fuzz_ops.OPS[node["op"]].consts(node["a"], in_shapes,
                                           np.random.default_rng(node["seed"]))


def _torch_consts(node, values, dtype):
    import torch
    consts = node_consts(node, [tuple(values[i].shape) for i in node["in"]])
    return {k: torch.from_numpy(v).to(getattr(torch, dtype) if v.dtype.kind == "f" else
                                      torch.int64) for k, v in consts.items()}


def input_arrays(case):
    rng = np.random.default_rng(case["input_seed"])
    return [rng.standard_normal(s).astype(np.float32) for s in case["inputs"]]


def reference_inputs(case, dtype="float64"):
    import torch
    return [torch.from_numpy(a).to(getattr(torch, dtype)) for a in input_arrays(case)]


def output_ids(case):
    """The case's outputs: as recorded, else every value no node reads (the sinks)."""
    if case.get("outputs") is not None:
        return list(case["outputs"])
    used = {i for n in case["nodes"] for i in n["in"]}
    total = len(case["inputs"]) + len(case["nodes"])
    return [i for i in range(len(case["inputs"]), total) if i not in used] or [total - 1]


def reference(case, dtype="float64"):
    values = reference_inputs(case, dtype)
    for node in case["nodes"]:
        from . import fuzz_ops
        values.append(fuzz_ops.OPS[node["op"]].torch(
            [values[i] for i in node["in"]], node["a"], _torch_consts(node, values, dtype)))
    return [values[i].numpy() for i in output_ids(case)]


def ember_function(case):
    from . import fuzz_ops
    from .. import ir
    params = [ir.var(f"x{i}", s, "float32") for i, s in enumerate(case["inputs"])]
    values, shapes = list(params), [tuple(s) for s in case["inputs"]]
    for node in case["nodes"]:
        consts = node_consts(node, [shapes[i] for i in node["in"]])
        v = fuzz_ops.OPS[node["op"]].ember([values[i] for i in node["in"]], node["a"], consts)
        values.append(v)
        shapes.append(tuple(v.shape))
    outs = [values[i] for i in output_ids(case)]
    return ir.Function(params, outs[0] if len(outs) == 1 else ir.Tuple(outs))


def run_ember(case, opt_level, vector_bits):
    import ember
    fn = ember_function(case)
    with ember.transform.PassContext(opt_level=opt_level):
        lib = ember.build(fn, target=f"llvm -vector-bits={vector_bits}")
    out = ember.GraphModule(lib)(*input_arrays(case))
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def compare(got, ref64, ref32):
    """None when `got` is within the tolerance of ref64, else a description."""
    if got.shape != ref64.shape:
        return f"shape {got.shape}, expected {ref64.shape}"
    got64 = got.astype(np.float64)
    if not np.isfinite(got64).all():
        return f"{int((~np.isfinite(got64)).sum())} non-finite values"
    scale = float(np.abs(ref64).max()) if ref64.size else 0.0
    cond = float(np.abs(ref32.astype(np.float64) - ref64).max()) if ref64.size else 0.0
    err = np.abs(got64 - ref64)
    tol = ATOL * scale + RTOL * np.abs(ref64) + COND * cond
    bad = err > tol
    if not bad.any():
        return None
    at = np.unravel_index(int(np.argmax(err - tol)), err.shape)
    return (f"{int(bad.sum())}/{err.size} elements off: at {tuple(int(i) for i in at)} "
            f"got {got64[at]:.6g}, expected {ref64[at]:.6g} (max error {err.max():.3g}, "
            f"output scale {scale:.3g})")


def check_config(case, opt_level, vector_bits, refs=None):
    """Outcome of one build: {"status": ..., "detail": ...}."""
    import ember
    refs = refs or (reference(case), reference(case, "float32"))
    try:
        got = run_ember(case, opt_level, vector_bits)
    except ember.EmberError as e:
        return {"status": "unsupported", "detail": str(e).splitlines()[0][:300]}
    except Exception as e:  # InternalError or a bug in the Python layer
        return {"status": "error", "detail": f"{type(e).__name__}: {str(e)[:500]}"}
    for k, (g, r64, r32) in enumerate(zip(got, *refs)):
        problem = compare(g, r64, r32)
        if problem:
            return {"status": "mismatch", "detail": f"output {k}: {problem}"}
    return {"status": "ok", "detail": ""}


def check_case(case, configs):
    """{config name: outcome} for each (opt_level, vector_bits)."""
    refs = (reference(case), reference(case, "float32"))
    return {config_name(o, v): check_config(case, o, v, refs) for o, v in configs}


def config_name(opt_level, vector_bits):
    return f"O{opt_level}/v{vector_bits}"


def parse_config(name):
    o, v = name.split("/")
    return int(o[1:]), int(v[1:])


def assert_case_passes(case, opt_level, vector_bits):
    """For the pytest files the fuzzer writes: AssertionError unless the build is ok (or
    unsupported, which is a clear refusal)."""
    out = check_config(case, opt_level, vector_bits)
    assert out["status"] in ("ok", "unsupported"), out["detail"]


# --------------------------------------------------------------- isolated execution

class Runner:
    """Runs cases in a worker process; restarts it after a crash or a hang."""

    def __init__(self, timeout_s=CASE_TIMEOUT_S):
        self.timeout_s = timeout_s
        self.proc = None

    def _start(self):
        env = dict(os.environ)
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ember.testing.fuzz", "--worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(self, case, configs):
        """{config: outcome}; a crash or hang gives every config of the case that outcome."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps({"case": case, "configs": configs}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        status = "timeout" if not ready else "crash"
        code = self.proc.poll()
        self.stop()
        detail = f"the worker exited with {code}" if status == "crash" else (
            f"no result in {self.timeout_s} s")
        return {config_name(o, v): {"status": status, "detail": detail} for o, v in configs}


def worker_main():
    # Test hook: EMBER_FUZZ_CRASH_OP=<op> makes a case with that op kill the worker (the
    # way a segfault would), so the tests can check that crashes are isolated.
    crash_op = os.environ.get("EMBER_FUZZ_CRASH_OP")
    for line in sys.stdin:
        job = json.loads(line)
        if crash_op and any(n["op"] == crash_op for n in job["case"]["nodes"]):
            os._exit(139)
        result = check_case(job["case"], [tuple(c) for c in job["configs"]])
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


# ----------------------------------------------------------------------- minimization

def _prune(case, outputs):
    """The case with only the nodes `outputs` need, renumbered."""
    n_in = len(case["inputs"])
    keep = set(outputs)
    for k in range(len(case["nodes"]) - 1, -1, -1):
        if n_in + k in keep:
            keep.update(case["nodes"][k]["in"])
    new_id = {i: i for i in range(n_in)}
    nodes = []
    for k, node in enumerate(case["nodes"]):
        if n_in + k in keep:
            new_id[n_in + k] = n_in + len(nodes)
            nodes.append(dict(node, **{"in": [new_id[i] for i in node["in"]]}))
    return dict(case, nodes=nodes, outputs=[new_id[o] for o in outputs])


def _bypass(case, k):
    """The case with node k replaced by its first input (None if their shapes differ)."""
    n_in = len(case["inputs"])
    shapes = _shapes(case)
    node_id, src = n_in + k, case["nodes"][k]["in"][0]
    if shapes[src] != shapes[node_id]:
        return None
    swap = lambda i: src if i == node_id else i  # noqa: E731
    nodes = [dict(n, **{"in": [swap(i) for i in n["in"]]}) for n in case["nodes"]]
    outputs = [swap(o) for o in output_ids(case)]
    return _prune(dict(case, nodes=nodes), outputs)


def _shapes(case):
    values = reference_inputs(case)
    for node in case["nodes"]:
        values.append(_eval_node(node, values, "float64"))
    return [tuple(v.shape) if v is not None else None for v in values]


def _candidates(case):
    """Smaller cases: one output only, an earlier node as the output, a node bypassed."""
    n_in = len(case["inputs"])
    outs = output_ids(case)
    if len(outs) > 1:
        yield from (_prune(case, [o]) for o in outs)
    for k in range(len(case["nodes"]) - 1, -1, -1):
        if n_in + k not in outs:
            yield _prune(case, [n_in + k])
    for k in range(len(case["nodes"])):
        smaller = _bypass(case, k)
        if smaller is not None:
            yield smaller


def minimize(case, config, status, runner, budget=40):
    """Drops nodes while the case still fails `config` with `status`; at most `budget`
    tries."""
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for smaller in _candidates(case):
            if not smaller["nodes"] or tries >= budget:
                continue
            tries += 1
            got = runner.run(smaller, [parse_config(config)])[config]
            if got["status"] == status:
                case, improved = smaller, True
                break
    return case


def write_test(case, config, outcome, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    opt_level, vector_bits = parse_config(config)
    name = f"test_fuzz_s{case['seed']}_c{case['index']}_o{opt_level}_v{vector_bits}"
    path = os.path.join(out_dir, name + ".py")
    detail = outcome["detail"].replace("\n", " ")[:300]
    with open(path, "w") as f:
        f.write(f'"""Minimized by ember.testing.fuzz (seed {case["seed"]}, case '
                f'{case["index"]}, {config}): {outcome["status"]}.\n{detail}\n"""\n'
                f"from ember.testing.fuzz import assert_case_passes\n\n"
                f"CASE = {json.dumps(case)}\n\n\n"
                f"def {name}():\n"
                f"    assert_case_passes(CASE, opt_level={opt_level}, "
                f"vector_bits={vector_bits})\n")
    return path


# -------------------------------------------------------------------------------- CLI

def _configs_for(index, args):
    levels = args.opt_levels
    if args.all_levels_every and index % args.all_levels_every == 0:
        levels = sorted(set(levels) | {0, 1, 2, 3})
    return [(o, v) for o in levels for v in args.vector_bits]


def run_fuzz(args, log=print):
    runner = Runner(args.timeout)
    totals = {s: 0 for s in SEVERITY}
    builds = {s: 0 for s in SEVERITY}
    failures, unsupported = [], {}
    start = time.time()
    for index in range(args.start, args.start + args.count):
        case = generate(args.seed, index, args.max_nodes)
        result = runner.run(case, _configs_for(index, args))
        worst = max((o["status"] for o in result.values()), key=SEVERITY.index)
        totals[worst] += 1
        for config, o in result.items():
            builds[o["status"]] += 1
            if o["status"] == "unsupported":
                unsupported[o["detail"]] = unsupported.get(o["detail"], 0) + 1
        if worst not in ("ok", "unsupported"):
            config = next(c for c, o in result.items() if o["status"] == worst)
            failures.append((case, config, result[config]))
            log(f"case {index}: {worst} at {config}: {result[config]['detail']}")
        if args.progress and (index - args.start + 1) % args.progress == 0:
            log(f"[{index - args.start + 1}/{args.count} cases, {time.time() - start:.0f} s] "
                + ", ".join(f"{k} {v}" for k, v in totals.items() if v))
    written = []
    for case, config, outcome in failures[:args.max_minimize]:
        small = minimize(case, config, outcome["status"], runner)
        if args.out:
            written.append(write_test(small, config, outcome, args.out))
    runner.stop()
    return {"cases": args.count, "by_case": totals, "by_build": builds,
            "unsupported": unsupported, "failures": len(failures), "written": written,
            "seconds": round(time.time() - start, 1)}


def _ints(text):
    return [int(v) for v in text.split(",") if v]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ember.testing.fuzz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=100, help="number of random graphs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="first case number")
    p.add_argument("--opt-levels", type=_ints, default=[0, 3])
    p.add_argument("--vector-bits", type=_ints, default=[256, 512])
    p.add_argument("--all-levels-every", type=int, default=0, metavar="K",
                   help="every K-th case is also built at opt levels 0-3")
    p.add_argument("--max-nodes", type=int, default=8)
    p.add_argument("--out", help="directory for the minimized failing cases (pytest files)")
    p.add_argument("--max-minimize", type=int, default=20)
    p.add_argument("--timeout", type=float, default=CASE_TIMEOUT_S, help="seconds per case")
    p.add_argument("--progress", type=int, default=50, help="report every N cases")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main()
    for v in args.vector_bits:
        if v not in (256, 512):
            p.error(f"--vector-bits takes 256 and 512, not {v}")
    for o in args.opt_levels:
        if not 0 <= o <= 3:
            p.error(f"--opt-levels takes 0 to 3, not {o}")
    summary = run_fuzz(args)
    print(json.dumps(summary, indent=1))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
