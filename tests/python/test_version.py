"""The version is written once, in CMakeLists.txt: the extension, the package, model files
and pyproject.toml's metadata all read it from there."""
import pathlib
import re

import ember
from ember import ir

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _cmake_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(ember VERSION ([0-9.]+)", text).group(1)


def test_one_version_everywhere(tmp_path):
    version = _cmake_version()
    assert ember.__version__ == version
    x = ir.var("x", shape=(2, 3))
    ember.build(ir.Function([x], x + x)).export(tmp_path / "m.ember")
    assert ember.load(tmp_path / "m.ember")._info()["ember_version"] == version


def test_pyproject_reads_the_version_from_cmake():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version\s*=', text, re.M) is None, "pyproject.toml writes a version"
    assert 'dynamic = ["version"]' in text
    # The regex scikit-build-core applies to CMakeLists.txt finds the version.
    pattern = re.search(r"^regex = '(.*)'$", text, re.M).group(1)
    found = re.search(pattern, (ROOT / "CMakeLists.txt").read_text())
    assert found and found.group("value") == _cmake_version()


def test_no_other_file_writes_the_version():
    version = _cmake_version()
    for path in [*(ROOT / "src").rglob("*.cc"), *(ROOT / "python" / "ember").rglob("*.py")]:
        assert f'"{version}"' not in path.read_text(), path
