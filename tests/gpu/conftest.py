"""The runtime-only GPU suite: `pytest tests/gpu --artifacts DIR` on the GPU machine (what
scripts/gpu_run.sh DIR runs), DIR written here by `benchmarks/gpu_families.py export DIR`.
Nothing here compiles: every test loads an exported artifact. Without DIR or without a GPU the
tests fail, naming what is missing: on the GPU machine they must run, not skip."""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
for _p in (ROOT / "benchmarks", ROOT / "tests" / "python", ROOT / "tests" / "gpu"):
    sys.path.insert(0, str(_p))


def pytest_addoption(parser):
    parser.addoption("--artifacts", default=None,
                     help="the folder `benchmarks/gpu_families.py export` wrote")


def _manifest(config):
    d = config.getoption("--artifacts")
    if d is None or not (pathlib.Path(d) / "manifest.json").is_file():
        return None
    return json.loads((pathlib.Path(d) / "manifest.json").read_text())


def pytest_generate_tests(metafunc):
    if "entry_key" in metafunc.fixturenames:
        manifest = _manifest(metafunc.config)
        keys = sorted(manifest["entries"]) if manifest else ["<no --artifacts DIR>"]
        metafunc.parametrize("entry_key", keys)


@pytest.fixture(scope="session")
def artifacts(request):
    d = request.config.getoption("--artifacts")
    if d is None or not (pathlib.Path(d) / "manifest.json").is_file():
        pytest.fail(f"--artifacts {d!r} names no folder with a manifest.json: run "
                    "`benchmarks/gpu_families.py export DIR` on a machine with the full Ember, "
                    "then `bash scripts/gpu_run.sh DIR` here")
    import ember
    if not ember.cuda_available():
        pytest.fail("ember.cuda_available() is False: this suite runs on a machine with an "
                    "NVIDIA GPU and its driver")
    return pathlib.Path(d)


@pytest.fixture(scope="session")
def manifest(artifacts):
    return json.loads((artifacts / "manifest.json").read_text())
