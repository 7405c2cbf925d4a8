"""Lesson 08: tune the kernels' schedules on this machine with ember.tune, then build with the log.

    PYTHONPATH=python python3 tutorials/08_schedule_tuning.py

Ember's default CPU schedule picks each kernel's register tile and loop order from a model
of the machine (lesson 02 showed schedules). ember.tune measures the alternatives instead.
The knobs (include/ember/passes/schedule_knobs.h; 0 leaves the schedule's own choice):

    tile_rows, tile_vectors  the register tile: accumulators = rows x vectors
    tile_axis                which output axis the tile's rows run along (1-based), where
                             several share the vector loads (a blocked conv: rows or columns)
    loop_order               the weights' axes inside (1) or outside (2) the tile loop
    pad_rows                 rows per tile of a kernel that pads its input itself
    unroll                   steps of the innermost reduction loop unrolled together
    row_block                rows of a GEMM computed at once under a layer norm
    partial_sums             a one-row tile (a GEMV, a sum over a middle axis): independent
                             partial sums per vector
    k_chunk                  a conv whose pixel block fits the L1: input-channel blocks
                             accumulated per pass (all of them: one pass)

A conv or dense kernel of ResNet-50 or BERT has 124 to 1246 valid settings, ResNet-50's
one-row fc 115
(`python3 benchmarks/tuning.py --spaces`). The search measures the default first, then 8
random settings, then the ones an xgboost cost model trained on the times so far predicts
fastest (search="model"; "evolution" and "random" are the alternatives):

    records = ember.tune(mod, params, trials=64, log="model.tune.json")
    with ember.transform.PassContext(config={"tuning_log": "model.tune.json"}):
        lib = ember.build(mod, params=params)

Each distinct kernel (a workload: anchor op, shapes, dtypes, fused epilogue) is tuned once,
however often the model uses it. Candidates are compiled in parallel, then measured one at
a time in a worker process (a crash or hang costs one trial), the default schedule first;
every result is appended to the log, so a second run resumes and Ctrl-C loses nothing. The
log is keyed by CPU model, vector width and thread count: on another CPU it is ignored with a
warning. From the shell: `ember tune model.pt2 --trials 64 --log F`, then
`ember compile model.pt2 --tuning-log F`. With Ray installed (`pip install 'ember[ray]'`),
runner="ray" measures on every node of a Ray cluster, one measurement per node at a time.
"""
import concurrent.futures
import os
import tempfile
import time

import numpy as np

import ember
from ember import ir, op


def small_cnn():
    """Two 3x3 convolutions with ReLU and a dense head: four kernels, three tunable."""
    rng = np.random.default_rng(0)
    x = ir.var("x", shape=(1, 16, 16, 16))
    w1, w2 = ir.var("w1", shape=(32, 16, 3, 3)), ir.var("w2", shape=(32, 32, 3, 3))
    fc = ir.var("fc", shape=(10, 32))
    y = op.nn.relu(op.nn.conv2d(x, w1, padding=1))
    y = op.nn.relu(op.nn.conv2d(y, w2, padding=1))
    y = op.nn.dense(op.mean(y, axis=[2, 3]), fc)
    params = {"w1": rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.1,
              "w2": rng.standard_normal((32, 32, 3, 3)).astype("float32") * 0.1,
              "fc": rng.standard_normal((10, 32)).astype("float32")}
    return ir.Function([x, w1, w2, fc], y), params


def main(trials=8):
    mod, params = small_cnn()
    image = np.random.default_rng(1).standard_normal((1, 16, 16, 16)).astype("float32")
    log = os.path.join(tempfile.mkdtemp(), "cnn.tune.json")

    # 1. Tune: a few trials per workload here (64 or more for a real model).
    start = time.perf_counter()
    records = ember.tune(mod, params, trials=trials, log=log, progress=False,
                         min_repeat_ms=1.0, repeat=3)
    print(f"tuned {len(records)} workloads in {time.perf_counter() - start:.1f} s")
    for r in records:
        print(f"  {r.name:<28} {r.trials}/{r.space_size} candidates  default "
              f"{r.default_ms:.4f} ms  best {r.best_ms:.4f} ms  {r.knobs}")
        assert r.best_ms <= r.default_ms  # the default is a candidate

    # 2. Build with the log: the fusion report says which kernels got a tuned schedule, and
    # the numbers are the default build's (up to float rounding in another summation order).
    with ember.transform.PassContext(config={"tuning_log": log}):
        tuned = ember.build(mod, params=params)
    print(tuned.fusion_report())
    default = ember.build(mod, params=params)
    outs = [ember.GraphModule(lib)(x=image).numpy() for lib in (default, tuned)]
    error = float(np.max(np.abs(outs[0] - outs[1])))
    print(f"max difference tuned vs default build: {error:.2e}")
    assert sum(bool(k.tuned) for k in tuned.fusion_report()) == len(records)
    # The model file keeps it: which kernels were tuned, with which knobs, and where the log
    # was measured (CPU model, vector width, threads; `ember inspect` shows them too).
    path = os.path.join(os.path.dirname(log), "cnn.ember")
    tuned.export(path)
    loaded = ember.load(path).fusion_report()
    print("model file:", loaded.tuning, "first tuned kernel's knobs:",
          next(k.knobs for k in loaded if k.tuned))
    assert [k.knobs for k in loaded] == [k.knobs for k in tuned.fusion_report()]

    # 3. Why candidates are compiled in parallel: compiling dominates a trial. The same eight
    # candidates of the first workload, compiled one after another and on a thread pool.
    groups = {w["key"]: w["group"] for w in ember._ember._extract_workloads(default)}
    group = groups[records[0].key]
    space = ember._ember._knob_space(group, "llvm")[:8]
    build = lambda knobs: ember._ember._build_kernel(group, "llvm", knobs)  # noqa: E731
    start = time.perf_counter()
    for knobs in space:
        build(knobs)
    serial = time.perf_counter() - start
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(build, space))
    parallel = time.perf_counter() - start
    print(f"compiling {len(space)} candidates: {serial:.2f} s one by one, {parallel:.2f} s on "
          f"{os.cpu_count()} threads ({serial / parallel:.1f}x)")
    return error


def test_lesson_08():
    assert main(trials=4) < 1e-3


if __name__ == "__main__":
    main()
