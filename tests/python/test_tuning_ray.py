"""ember.tune(runner="ray") on a local Ray instance started by the test (skipped without
Ray: pip install 'ember[ray]' or bash scripts/setup.sh --ray)."""
import json
import os

import numpy as np
import pytest

import ember
from ember.tuning import cpu_model

ray = pytest.importorskip("ray")
from test_tuning import dense_model, run  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    python_dir = os.path.dirname(os.path.dirname(ember.__file__))
    # Ray's agents start slowly on a loaded machine; its default 20 s wait would abort.
    os.environ.setdefault("RAY_agent_register_timeout_ms", "180000")
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": python_dir}})
    yield
    ray.shutdown()


def test_ray_runner_measures_on_the_cluster_and_the_driver_writes_the_log(tmp_path, local_ray):
    f, params, x = dense_model()
    log = str(tmp_path / "t.json")
    records = ember.tune(f, params, trials=4, batch=4, log=log, runner="ray", progress=False,
                         min_repeat_ms=0.2, repeat=2)
    with open(log) as fh:
        entries = [json.loads(line) for line in fh]
    assert len(entries) == 4 and records[0].trials == 4
    assert all(e["status"] == "ok" and e["cpu"] == cpu_model() for e in entries), entries
    lib, got = run(f, params, x, log)
    assert lib.fusion_report()[0].tuned
    np.testing.assert_allclose(got, run(f, params, x)[1], rtol=1e-4, atol=1e-4)
