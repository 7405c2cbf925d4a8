"""Model files are read with care: `ember inspect` never loads (runs) the file's code, a
graph edited after export (checksums fixed) or a malformed graph is an EmberError, the
header is checked before the file is read, export writes through a unique temporary file
(never a planted link), the code is loaded from memory, and ember.load(path, sha256=...)
pins a file."""
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import time

import numpy as np

import pytest

import ember
from ember import EmberError, cli, ir, op

MAGIC = b"EMBERLIB"


def fnv1a(data):
    h = 1469598103934665603
    for byte in data:
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def read_sections(path):
    data = open(path, "rb").read()
    assert data[:8] == MAGIC
    version, count = struct.unpack_from("<II", data, 8)
    sections = {}
    for i in range(count):
        kind, offset, size, _ = struct.unpack_from("<8sQQQ", data, 16 + 32 * i)
        sections[kind.rstrip(b"\0").decode()] = data[offset:offset + size]
    return version, sections


def write_sections(path, version, sections):
    """An artifact with these sections and valid checksums (what someone editing a file
    would write)."""
    table_end = 16 + 32 * len(sections)
    at = (table_end + 8 + 63) // 64 * 64
    head = MAGIC + struct.pack("<II", version, len(sections))
    body = b""
    for kind, payload in sections.items():
        head += struct.pack("<8sQQQ", kind.encode(), at, len(payload), fnv1a(payload))
        at = (at + len(payload) + 63) // 64 * 64
    head += struct.pack("<Q", fnv1a(head))
    out = bytearray(head)
    for kind, payload in sections.items():
        out += b"\0" * ((len(out) + 63) // 64 * 64 - len(out))
        out += payload
    open(path, "wb").write(bytes(out))


def edit_graph(src, dst, change=None, text_change=None):
    version, sections = read_sections(src)
    graph = json.loads(sections["graph"])
    if change:
        change(graph)
    text = json.dumps(graph, ensure_ascii=False)
    if text_change:
        text = text_change(text)
    sections["graph"] = text.encode()
    write_sections(dst, version, sections)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("model_files")
    x = ir.var("x", (4, 8))
    w = ir.const(np.arange(8, dtype=np.float32), "w")
    lib = ember.build(ir.Function([x], op.nn.relu(op.add(x, w))))
    path = d / "m.ember"
    lib.export(path)
    return lib, path


def test_edited_files_are_rewritten_faithfully(model, tmp_path):
    _, path = model
    copy = tmp_path / "copy.ember"
    edit_graph(path, copy)
    x = np.random.RandomState(0).randn(4, 8).astype(np.float32)
    out = ember.GraphModule(ember.load(copy))(x=x).numpy()
    np.testing.assert_array_equal(out, np.maximum(x + np.arange(8, dtype=np.float32), 0))


def test_a_graph_that_disagrees_with_its_code_is_refused(model, tmp_path):
    _, path = model
    bad = tmp_path / "shrunk.ember"

    def shrink_output(graph):
        graph["values"][graph["outputs"][0]]["shape"] = [1, 8]

    edit_graph(path, bad, shrink_output)  # the kernel still writes (4, 8)
    with pytest.raises(EmberError, match=r"inconsistent.*float32\(4, 8\).*float32\(1, 8\)"):
        ember.load(bad)


def test_a_bad_escape_in_the_graph_is_an_ember_error(model, tmp_path, capsys):
    _, path = model
    bad = tmp_path / "escape.ember"

    def mark(graph):
        graph["kernels"][0]["name"] = "MARK"

    edit_graph(path, bad, mark, lambda text: text.replace('"MARK"', '"bad\\u00zz"'))
    with pytest.raises(EmberError, match="malformed"):
        ember.load(bad)
    assert cli.main(["inspect", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "malformed" in err and "Traceback" not in err


@pytest.mark.parametrize("text, message", [
    ("[" * 100 + "]" * 100, "malformed (nesting too deep)"),
    ('{"ember_version": 1e400}', "malformed (number overflow"),
    ('{"ember_version": "0.1.0"', "malformed (parse error"),
    ("[]", "graph is not an object"),
])
def test_json_errors_name_the_file(model, tmp_path, text, message):
    """nlohmann/json's errors (and the depth bound) become EmberErrors naming the file."""
    _, path = model
    bad = tmp_path / "bad.ember"
    edit_graph(path, bad, text_change=lambda _: text)
    with pytest.raises(EmberError, match=re.escape(message)) as e:
        ember.load(bad)
    assert str(bad) in str(e.value)


def test_wrong_json_types_name_the_field(model, tmp_path):
    _, path = model
    for change, message in [
            (lambda g: g["values"][0].update(shape=[1.5]), "values[0].shape is not an integer"),
            (lambda g: g["kernels"][0].update(args="x"), "kernels[0].args is not a list"),
            (lambda g: g.pop("outputs"), "graph.outputs is missing"),
            (lambda g: g["fusion"].insert(0, {"producer": "a", "consumer": "b", "fused": 1,
                                              "reason": ""}), "fusion[0].fused is not true or false"),
    ]:
        bad = tmp_path / "typed.ember"
        edit_graph(path, bad, change)
        with pytest.raises(EmberError, match=re.escape(message)):
            ember.load(bad)


def test_inspect_does_not_run_the_files_code(model, tmp_path):
    """A file whose library has a constructor: inspect must not load it; load does."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    _, path = model
    version, sections = read_sections(path)
    code = sections["cpu.so"]
    begin = code.index(b"EMBER KERNEL MANIFEST 1\n")
    end = code.index(b"END EMBER KERNEL MANIFEST\n", begin) + len(b"END EMBER KERNEL MANIFEST\n")
    manifest = code[begin:end].decode()
    marker = tmp_path / "constructor_ran"
    src = tmp_path / "evil.c"
    src.write_text(
        "#include <stdio.h>\n"
        f"__attribute__((used)) const char manifest[] = {json.dumps(manifest)};\n"
        "__attribute__((constructor)) static void ran(void) {\n"
        f"  FILE* f = fopen({json.dumps(str(marker))}, \"w\"); if (f) fclose(f);\n"
        "}\n")
    so = tmp_path / "evil.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    sections["cpu.so"] = so.read_bytes()
    evil = tmp_path / "evil.ember"
    write_sections(evil, version, sections)

    assert cli.main(["inspect", str(evil)]) == 0
    assert not marker.exists(), "ember inspect ran code from the file"
    lib = ember.deploy._inspect(evil)
    with pytest.raises(EmberError, match="inspection only"):
        ember.GraphModule(lib)
    # Loading does run it (which is why a model file must come from a trusted source).
    with pytest.raises(EmberError):
        ember.load(evil)
    assert marker.exists()


def test_the_header_is_checked_before_the_file_is_read(tmp_path):
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.write(b"not a model")
        try:
            f.truncate(256 << 30)  # sparse: 256 GiB that take no disk
        except OSError:
            pytest.skip("no sparse files here")
    t0 = time.monotonic()
    with pytest.raises(EmberError, match="not an Ember artifact"):
        ember.load(big)
    assert time.monotonic() - t0 < 5


def test_export_never_follows_a_planted_link(model, tmp_path):
    lib, _ = model
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    target = tmp_path / "out.ember"
    os.symlink(victim, str(target) + ".tmp")
    lib.export(target)
    assert victim.read_text() == "precious"
    assert not target.is_symlink()
    ember.load(target)


def test_concurrent_exports_to_one_path(model, tmp_path):
    lib, _ = model
    target = tmp_path / "shared.ember"
    errors = []

    def export():
        try:
            lib.export(target)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=export) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ember.load(target)
    assert sorted(os.listdir(tmp_path)) == ["shared.ember"]  # no temporary files left


def test_the_code_is_loaded_from_memory(model, monkeypatch):
    _, path = model
    monkeypatch.setenv("TMPDIR", "/nonexistent/ember")  # no temporary file is needed
    m = ember.GraphModule(ember.load(path))
    assert m(x=np.zeros((4, 8), np.float32)).numpy().shape == (4, 8)


def test_load_with_a_digest(model):
    _, path = model
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    ember.load(path, sha256=digest)
    ember.load(path, sha256=digest.upper())
    wrong = ("0" if digest[0] != "0" else "1") + digest[1:]
    with pytest.raises(EmberError, match="SHA-256"):
        ember.load(path, sha256=wrong)
    with pytest.raises(EmberError, match="64 hex digits"):
        ember.load(path, sha256="abc")
    with pytest.raises(EmberError, match="sha256"):
        ember.load(path, sha256=b"abc")


def test_run_time_shapes_in_a_model_file(tmp_path):
    """A graph with symbols (dynamic shapes) runs at any size in their ranges, outputs at the
    run's shape; a size out of range is an EmberError naming the input, the dimension, the
    symbol and its range. The compiler does not write such graphs yet: the test gives the
    input y and its reshaped output (a view, no kernel) a run-time first dimension n."""
    x, y = ir.var("x", (4, 8)), ir.var("y", (3, 5))
    lib = ember.build(ir.Function([x, y], ir.Tuple([op.nn.relu(x), op.reshape(y, (15,))])))
    static, dynamic = tmp_path / "static.ember", tmp_path / "dynamic.ember"
    lib.export(static)

    def add_n(graph):
        graph["symbols"] = [{"name": "n", "min": 1, "max": 3}]
        y_value, flat = graph["inputs"][1]["value"], graph["outputs"][1]
        graph["values"][y_value]["dims"] = [{"coef": 1, "offset": 0, "symbols": [0]},
                                            {"coef": 0, "offset": 5, "symbols": []}]
        graph["values"][flat]["dims"] = [{"coef": 5, "offset": 0, "symbols": [0]}]

    edit_graph(static, dynamic, add_n)
    m = ember.GraphModule(ember.load(dynamic))
    assert m.symbols == [("n", 1, 3)]
    assert m.symbol_values == {"n": 3}  # the maximum until the first run
    xs = np.arange(32, dtype=np.float32).reshape(4, 8) - 10
    for n in (2, 1, 3):
        ys = np.arange(n * 5, dtype=np.float32).reshape(n, 5)
        relu, flat = m(x=xs, y=ys)
        np.testing.assert_array_equal(flat.numpy(), ys.reshape(-1))
        np.testing.assert_array_equal(relu.numpy(), np.maximum(xs, 0))
        m.set_input("y", ys)
        m.run()
        assert m.symbol_values == {"n": n}
        assert m.get_output(1).shape == (n * 5,)
        assert m.get_input("y").shape == (n, 5)
    with pytest.raises(EmberError, match=r"input 'y' dimension 0 is n = 4, outside n's range "
                                         r"\[1, 3\]"):
        m.set_input("y", np.zeros((4, 5), np.float32))
    with pytest.raises(EmberError, match=r"input 'y' dimension 1 is 6 but must be 5"):
        m(x=xs, y=np.zeros((2, 6), np.float32))
    plain = ember.GraphModule(ember.load(static))
    assert plain.symbols == [] and plain.symbol_values == {}
    with pytest.raises(EmberError, match=r"input 'y' expects float32\(3, 5\)"):
        plain.set_input("y", np.zeros((2, 5), np.float32))
