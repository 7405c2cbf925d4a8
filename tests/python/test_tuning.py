"""Schedule tuning (issue #13): ember.tune, its log, and builds that apply it. Tiny kernels
and few trials; timings are recorded, never asserted."""
import json
import logging
import os
import time

import numpy as np
import pytest
import torch

import ember
from ember import ir, op
from ember.tuning import LocalRunner, cpu_model

LOGGER = "ember"


def dense_model(m=4, k=32, n=48):
    a = ir.var("a", shape=(m, k))
    w = ir.var("w", shape=(n, k))
    f = ir.Function([a, w], op.nn.relu(op.nn.dense(a, w)))
    rng = np.random.default_rng(0)
    return f, {"w": rng.standard_normal((n, k)).astype("float32")}, \
        rng.standard_normal((m, k)).astype("float32")


def conv_model():
    x = ir.var("x", shape=(1, 8, 12, 12))
    w = ir.var("w", shape=(16, 8, 3, 3))
    f = ir.Function([x, w], op.nn.relu(op.nn.conv2d(x, w, padding=1)))
    rng = np.random.default_rng(1)
    return f, {"w": rng.standard_normal((16, 8, 3, 3)).astype("float32")}, \
        rng.standard_normal((1, 8, 12, 12)).astype("float32")


def run(f, params, x, log=None):
    config = {} if log is None else {"tuning_log": log}
    with ember.transform.PassContext(config=config):
        lib = ember.build(f, params=params)
    m = ember.GraphModule(lib)
    m.set_input(0, x)
    m.run()
    return lib, m.get_output(0).numpy()


def lines(path, final=False):
    """The log's search entries (or, with final=True, those of the final round)."""
    with open(path) as fh:
        entries = [json.loads(line) for line in fh if line.strip()]
    return [e for e in entries if bool(e.get("final")) == final]


@pytest.mark.parametrize("model", [dense_model, conv_model])
def test_tune_log_round_trip_and_tuned_build_matches_default(tmp_path, model):
    f, params, x = model()
    log = str(tmp_path / "t.json")
    records = ember.tune(f, params, trials=6, batch=3, log=log, progress=False,
                         min_repeat_ms=0.5, repeat=3)
    assert len(records) == 1 and records[0].trials == 6
    entries = lines(log)
    assert len(entries) == 6 and entries[0]["default"]
    assert {e["cpu"] for e in entries} == {cpu_model()}
    assert all(e["status"] == "ok" and e["ms"] > 0 for e in entries), entries
    assert len({tuple(sorted(e["knobs"].items())) for e in entries}) == 6
    # The best entry is never slower than the default as measured.
    assert records[0].best_ms <= records[0].default_ms and records[0].confirmed
    # The final round: the default and the three fastest others, timed again.
    finals = lines(log, final=True)
    assert len(finals) == 4 and sum(e["default"] for e in finals) == 1, finals
    assert records[0].best_ms == min(e["ms"] for e in finals)
    # Resuming measures nothing again.
    again = ember.tune(f, params, trials=6, log=log, progress=False)
    assert len(lines(log)) == 6 and len(lines(log, final=True)) == 4 and again[0].trials == 6
    assert again[0].knobs == records[0].knobs
    lib, tuned = run(f, params, x, log)
    report = lib.fusion_report()
    assert [k.tuned for k in report] == [True] and "tuned" in str(report)
    _, default = run(f, params, x)
    np.testing.assert_allclose(tuned, default, rtol=1e-4, atol=1e-4)


def test_the_best_entry_is_applied_and_other_knobs_give_the_same_numbers(tmp_path):
    f, params, x = dense_model(m=6)
    _, default = run(f, params, x)
    lib = ember.build(f, params=params)
    group = ember._ember._extract_workloads(lib)[0]
    space = ember._ember._knob_space(group["group"], "llvm")
    assert len(space) > 4
    # A spread of the space, every knob that varies among them.
    sample = space[1::max(1, len(space) // 8)]
    assert {k for s in sample for k in s if s[k] != space[0][k]} >= {"tile_rows", "unroll"}
    base = {"workload": group["key"], "name": "fc", "cpu": cpu_model(),
            "vector_bits": ember._ember._target_vector_bits("llvm"),
            "threads": ember.get_num_threads(), "template": 1, "status": "ok", "error": None}
    for i, knobs in enumerate(sample):
        log = str(tmp_path / f"{i}.json")
        with open(log, "w") as fh:  # the chosen knobs are the fastest entry's
            fh.write(json.dumps({**base, "knobs": knobs, "ms": 1.0}) + "\n")
            fh.write(json.dumps({**base, "knobs": space[0], "ms": 2.0}) + "\n")
        lib, got = run(f, params, x, log)
        assert "k0" in lib.get_source("loop") and lib.fusion_report()[0].tuned
        np.testing.assert_allclose(got, default, rtol=1e-4, atol=1e-4, err_msg=str(knobs))


def test_damaged_and_foreign_lines_are_skipped_with_a_warning(tmp_path, caplog):
    f, params, x = dense_model()
    log = str(tmp_path / "t.json")
    ember.tune(f, params, trials=2, log=log, progress=False, min_repeat_ms=0.2, repeat=2)
    good = lines(log)[-1]
    before = len(lines(log)) + len(lines(log, final=True))
    with open(log, "a") as fh:
        fh.write('{"workload": "nn.dense float32[4, 48] #0", "knobs": \n')  # cut short
        fh.write("not json at all\n")
        fh.write(json.dumps({**good, "cpu": "Some Other CPU", "ms": 1e-9,
                             "knobs": {"tile_rows": 99}}) + "\n")
        fh.write(json.dumps({**good, "template": 999, "ms": 1e-9}) + "\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        lib, got = run(f, params, x, log)
    text = caplog.text
    assert f"skipped 2 damaged line(s) (line {before + 1}, {before + 2})" in text, text
    assert "ignored 2 line(s) measured on another CPU" in text, text
    assert lib.fusion_report()[0].tuned
    np.testing.assert_allclose(got, run(f, params, x)[1], rtol=1e-4, atol=1e-4)


def test_knobs_that_do_not_fit_fall_back_to_the_default_with_a_warning(tmp_path, caplog):
    f, params, x = dense_model()
    lib = ember.build(f, params=params)
    key = ember._ember._extract_workloads(lib)[0]["key"]
    log = str(tmp_path / "t.json")
    with open(log, "w") as fh:
        fh.write(json.dumps({"workload": key, "cpu": cpu_model(), "template": 1,
                             "vector_bits": ember._ember._target_vector_bits("llvm"),
                             "threads": 1, "status": "ok", "ms": 1.0,
                             "knobs": {"tile_rows": 99, "tile_vectors": 1}}) + "\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        lib, got = run(f, params, x, log)
    assert "tile_rows=99" in caplog.text and "not applied" in caplog.text
    # FuseOps' cost rule priced the candidate with the default knobs too: still one kernel.
    assert [k.tuned for k in lib.fusion_report()] == [False]
    np.testing.assert_allclose(got, run(f, params, x)[1], rtol=1e-5)


def test_a_tuned_fusion_stays_fused_where_its_knobs_are_priced_slower(tmp_path):
    """Issue 43: FuseOps' cost rule prices a candidate with the log's knobs for its workload,
    but those knobs ran no slower than the default ones, so the cheaper estimate stands. A
    register tile of 4 rows over the dense's 6 computes 8 (1.3x the GEMM's flops) and is
    priced above the dense and the relu apart; the fusion it was measured in stays, tuned."""
    f, params, x = dense_model(m=6)
    target = "llvm -vector-bits=256"
    config = {"FuseOps.cost_model": "avx2"}  # the model pinned, so on every host
    with ember.transform.PassContext(config=config):
        plain = ember.build(f, target, params=params)
    assert len(plain.fusion_report()) == 1
    work = ember._ember._extract_workloads(plain)[0]
    knobs = next(k for k in ember._ember._knob_space(work["group"], target)
                 if k["tile_rows"] == 4 and k["tile_vectors"] == 1)
    log = str(tmp_path / "t.json")
    with open(log, "w") as fh:
        fh.write(json.dumps({"workload": work["key"], "cpu": cpu_model(), "template": 1,
                             "vector_bits": ember._ember._target_vector_bits(target),
                             "threads": ember.get_num_threads(), "status": "ok", "ms": 1.0,
                             "knobs": knobs}) + "\n")
    with ember.transform.PassContext(config={**config, "tuning_log": log}):
        lib = ember.build(f, target, params=params)
    assert [k.ops for k in lib.fusion_report()] == [["nn.dense_packed", "nn.relu"]]
    assert lib.fusion_report()[0].tuned
    outs = [ember.GraphModule(m)(x).numpy() for m in (plain, lib)]
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5)


def test_missing_log_warns_and_unknown_config_key_is_an_error(tmp_path, caplog):
    f, params, x = dense_model()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        run(f, params, x, str(tmp_path / "none.json"))
    assert "does not exist" in caplog.text
    with pytest.raises(ember.EmberError, match="unknown config key 'tunning_log'.*tuning_log"):
        ember.transform.PassContext(config={"tunning_log": "x"})


def _faulty(workload, knobs):
    # Injected faults, run in the worker just before a measurement.
    if knobs["tile_rows"] == 1 and knobs["tile_vectors"] == 1:
        os._exit(3)  # a crash
    if knobs["tile_rows"] == 2 and knobs["tile_vectors"] == 1:
        time.sleep(60)  # a hang


def test_crashing_and_hanging_trials_are_recorded_as_failed(tmp_path):
    f, params, _ = dense_model(m=4, k=5)  # 5 steps of reduction: no unroll knob, a small space
    lib = ember.build(f, params=params)
    group = ember._ember._extract_workloads(lib)[0]["group"]
    space = ember._ember._knob_space(group, "llvm")
    faulty = [k for k in space if k["tile_rows"] in (1, 2)
              and k["tile_vectors"] == 1]
    assert len(faulty) == 2
    log = str(tmp_path / "t.json")
    runner = LocalRunner(timeout_s=3, before_measure=_faulty)
    records = ember.tune(f, params, trials=len(space), batch=len(space), log=log, runner=runner,
                         progress=False, min_repeat_ms=0.2, repeat=2)
    by_knobs = {tuple(sorted(e["knobs"].items())): e for e in lines(log)}
    assert len(by_knobs) == len(space)
    crashed = by_knobs[tuple(sorted(faulty[0].items()))]
    hung = by_knobs[tuple(sorted(faulty[1].items()))]
    assert crashed["status"] == "failed" and "exit code 3" in crashed["error"], crashed
    assert hung["status"] == "failed" and "timed out" in hung["error"], hung
    ok = [e for e in by_knobs.values() if e["status"] == "ok"]
    assert len(ok) == len(space) - 2 and records[0].best_ms is not None


def test_torch_compile_passes_the_log_through(tmp_path):
    f, params, _ = dense_model(m=4, k=32, n=48)
    log = str(tmp_path / "t.json")
    ember.tune(f, params, trials=2, log=log, progress=False, min_repeat_ms=0.2, repeat=2)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48, bias=False), torch.nn.ReLU()).eval()
    model[0].weight.data = torch.from_numpy(params["w"])
    torch._dynamo.reset()
    x = torch.randn(4, 32)
    with torch.no_grad():
        got = torch.compile(model, backend="ember", options={"tuning_log": log})(x)
        torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()


def test_search_strategies_each_measure_the_default_first_and_every_candidate_once():
    from ember.tuning._log import knob_tuple
    from ember.tuning._search import Search
    f, params, _ = dense_model(m=6, k=32)
    lib = ember.build(f, params=params)
    group = ember._ember._extract_workloads(lib)[0]["group"]
    space = ember._ember._knob_space(group, "llvm")
    # A made-up cost: the search must find the cheap corner (many accumulators, unrolled).
    def cost(k):
        return 1.0 / (k["tile_rows"] * k["tile_vectors"]) + 0.1 / k["unroll"]
    best = {}
    for strategy in ("random", "evolution", "model"):
        search = Search(space, set(), seed=1, strategy=strategy)
        seen = []
        while len(seen) < 32:
            batch = search.next_batch(8)
            for k in batch:
                search.observe(k, "ok", cost(k))
            seen += batch
        assert seen[0] is space[0] and len({knob_tuple(k) for k in seen}) == len(seen)
        best[strategy] = min(cost(k) for k in seen)
    assert best["model"] <= best["random"] and best["evolution"] <= best["random"], best
    with pytest.raises(ValueError, match="search strategy"):
        Search(space, set(), strategy="annealing")


def test_tune_takes_a_search_strategy(tmp_path):
    f, params, _ = dense_model()
    log = str(tmp_path / "t.json")
    records = ember.tune(f, params, trials=3, log=log, progress=False, min_repeat_ms=0.2,
                         repeat=2, search="random")
    assert records[0].trials == 3
    with pytest.raises(ember.EmberError, match="search must be one of model, evolution, random"):
        ember.tune(f, params, trials=3, log=log, progress=False, search="beam")


def _run_with_knobs(w, rng, knob_list):
    """Workload w's kernel built with each knob dict, run on the same random inputs."""
    inputs = [rng.standard_normal(p.shape).astype(p.dtype) for p in w["group"].params]
    outs = []
    for knobs in knob_list:
        m = ember.GraphModule(ember._ember._build_kernel(w["group"], "llvm", knobs))
        for i, a in enumerate(inputs):
            m.set_input(i, a)
        m.run()
        outs.append(m.get_output(0).numpy())
    return outs


def _blocked_conv_workload():
    """The second conv of a two-conv chain, which the layout pass blocks (NCHW16c)."""
    x = ir.var("x", shape=(1, 16, 10, 10))
    w1, w2 = ir.var("w1", shape=(16, 16, 3, 3)), ir.var("w2", shape=(16, 16, 3, 3))
    y = op.nn.conv2d(op.nn.relu(op.nn.conv2d(x, w1, padding=1)), w2, padding=1)
    rng = np.random.default_rng(2)
    params = {n: rng.standard_normal((16, 16, 3, 3)).astype("float32") for n in ("w1", "w2")}
    lib = ember.build(ir.Function([x, w1, w2], op.nn.relu(y)), params=params)
    return [w for w in ember._ember._extract_workloads(lib) if "conv" in w["anchor"]][-1]


def test_a_blocked_conv_may_take_its_register_tile_along_rows_or_columns():
    w = _blocked_conv_workload()
    vb = ember._ember._target_vector_bits("llvm")
    space = ember._ember._knob_space(w["group"], "llvm")
    axes = {k["tile_axis"] for k in space}
    assert len(axes) == 2 and 0 not in axes, (w["anchor"], axes)
    other = next(k for k in space if k["tile_axis"] != space[0]["tile_axis"])
    rng = np.random.default_rng(3)
    outs = _run_with_knobs(w, rng, ({}, other, {"tile_axis": other["tile_axis"], "unroll": 4}))
    for o in outs[1:]:
        np.testing.assert_allclose(o, outs[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(ember.EmberError, match="tile_axis=9 is not one of"):
        ember._ember._build_kernel(w["group"], "llvm", {"tile_axis": 9})
    with pytest.raises(ember.EmberError, match="unknown schedule knob 'unrol'.*unroll"):
        ember._ember._build_kernel(w["group"], "llvm", {"unrol": 2})


def test_a_deep_conv_on_a_small_image_tunes_its_reduction_chunks():
    # 64 -> 64 channels, 3x3 at 7x7: the default schedule accumulates the output-channel
    # block in chunks of input-channel blocks (at 256 bits; one pass at 512, where one step
    # of weights fills half the L1); k_chunk may choose any power-of-two chunk or one pass.
    x = ir.var("x", shape=(1, 64, 7, 7))
    w1, w2 = ir.var("w1", shape=(64, 64, 3, 3)), ir.var("w2", shape=(64, 64, 3, 3))
    y = op.nn.conv2d(op.nn.relu(op.nn.conv2d(x, w1, padding=1)), w2, padding=1)
    rng = np.random.default_rng(4)
    params = {n: (rng.standard_normal((64, 64, 3, 3)) / 24).astype("float32")
              for n in ("w1", "w2")}
    lib = ember.build(ir.Function([x, w1, w2], op.nn.relu(y)), params=params)
    w = [w for w in ember._ember._extract_workloads(lib) if "conv" in w["anchor"]][-1]
    vb = ember._ember._target_vector_bits("llvm")
    space = ember._ember._knob_space(w["group"], "llvm")
    chunks = {k["k_chunk"] for k in space}
    if vb == 256:
        # (0: a register tile along the other axis, whose block is not chunked.)
        assert space[0]["k_chunk"] == 1 and chunks - {0} == {1, 2, 4}, chunks
    outs = _run_with_knobs(w, rng, [{}] + [{"k_chunk": c} for c in sorted(chunks - {0})])
    for o in outs[1:]:
        np.testing.assert_allclose(o, outs[0], rtol=1e-5, atol=1e-5)
    if vb == 256:
        with pytest.raises(ember.EmberError, match="k_chunk=3 does not divide the 4"):
            ember._ember._build_kernel(w["group"], "llvm", {"k_chunk": 3})


def test_a_one_row_dense_tunes_column_tiles_and_partial_sums():
    """A 1 x 2048 -> 1024 dense with bias (a GEMV on packed weight panels: whole vectors
    divide its outputs at both widths) has >= 100 settings; partial sums change the loop
    nest, not the numbers."""
    rng = np.random.default_rng(4)
    x, w = ir.var("x", shape=(1, 2048)), ir.var("w", shape=(1024, 2048))
    b = ir.var("b", shape=(1024,))
    f = ir.Function([x, w, b], op.nn.bias_add(op.nn.dense(x, w), b))
    params = {"w": rng.standard_normal((1024, 2048)).astype("float32"),
              "b": rng.standard_normal(1024).astype("float32")}
    lib = ember.build(f, params=params)
    [work] = ember._ember._extract_workloads(lib)
    assert work["anchor"] == "nn.dense_packed"
    space = ember._ember._knob_space(work["group"], "llvm")
    assert len(space) >= 100
    assert {k["partial_sums"] for k in space} >= {1, 2, 4, 8}
    assert {k["tile_vectors"] for k in space} >= {1, 2, 3, 4, 5}
    inputs = [rng.standard_normal(p.shape).astype("float32") for p in work["group"].params]
    loops, outs = [], []
    for knobs in ({}, {"tile_vectors": 1, "partial_sums": 8, "unroll": 2}):
        kernel = ember._ember._build_kernel(work["group"], "llvm", knobs)
        loops.append(kernel.get_source("loop"))
        m = ember.GraphModule(kernel)
        for i, a in enumerate(inputs):
            m.set_input(i, a)
        m.run()
        outs.append(m.get_output(0).numpy())
    assert loops[0] != loops[1] and "partial" in loops[1] and "partial" not in loops[0]
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-3)


def test_a_tuned_model_file_keeps_its_knobs_and_where_they_were_measured(tmp_path, capsys):
    f, params, x = dense_model(m=6)
    lib = ember.build(f, params=params)
    work = ember._ember._extract_workloads(lib)[0]
    vb = ember._ember._target_vector_bits("llvm")
    space = ember._ember._knob_space(work["group"], "llvm")
    knobs = space[1]
    log = str(tmp_path / "t.json")
    base = {"workload": work["key"], "name": "fc", "cpu": cpu_model(), "vector_bits": vb,
            "threads": ember.get_num_threads(), "template": 1, "status": "ok", "error": None}
    with open(log, "w") as fh:
        fh.write(json.dumps({**base, "knobs": knobs, "ms": 1.0}) + "\n")
        fh.write(json.dumps({**base, "knobs": space[0], "ms": 2.0}) + "\n")
    tuned, got = run(f, params, x, log)
    where = {"log": log, "cpu": cpu_model(), "vector_bits": vb,
             "threads": ember.get_num_threads()}
    assert tuned.tuning == where
    tuned.export(tmp_path / "tuned.ember")
    loaded = ember.load(tmp_path / "tuned.ember")
    assert loaded.tuning == where
    for report in (tuned.fusion_report(), loaded.fusion_report()):
        assert report.tuning == where and [k.tuned for k in report] == [True]
        assert report[0].knobs == knobs and report[0].workload == work["key"]
        assert f"Tuning log {log}: 1 kernels tuned" in str(report)
    m = ember.GraphModule(loaded)
    m.set_input(0, x)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), got)
    # `ember inspect` shows them too.
    from ember import cli
    cli.main(["inspect", str(tmp_path / "tuned.ember")])
    text = capsys.readouterr().out
    assert f"tuning   {log}: measured on {cpu_model()}" in text and "tuned knobs" in text
    # A model built without a log records none.
    lib.export(tmp_path / "plain.ember")
    plain = ember.load(tmp_path / "plain.ember")
    assert plain.tuning is None and lib.tuning is None
    assert [(k.tuned, k.knobs, k.workload) for k in plain.fusion_report()] == [(None, None, None)]


def test_the_default_stays_unless_another_schedule_is_clearly_faster():
    """In the final round, a schedule within the timing noise of the default (3%) does not
    replace it: tuning never swaps in a kernel that may be slower. A clearly faster one does."""
    from ember.tuning import _log

    def entry(knobs, ms, default=False):
        return {"workload": "w", "status": "ok", "ms": ms, "final": True, "threads": 1,
                "default": default, "knobs": knobs}

    default, other = {"tile_rows": 4}, {"tile_rows": 6}
    close = [entry(default, 1.00, True), entry(other, 0.99)]
    assert _log.best(close, threads=1)["w"]["tile_rows"] == 4
    clear = [entry(default, 1.00, True), entry(other, 0.90)]
    assert _log.best(clear, threads=1)["w"]["tile_rows"] == 6
