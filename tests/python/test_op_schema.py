"""The op schema exported from C++ (ember.op.schema) and the Python wrappers checked against
it: every registered op is described, the wrappers' attribute defaults are the C++ ones, and
a wrapper that drifts fails loudly."""
import inspect

import pytest

import ember
from ember import _ember, ir, op

PATTERNS = {"ElemWise", "Broadcast", "Injective", "CommReduce", "OutEWiseFusable", "Opaque"}
KINDS = {"int": int, "float": float, "str": str, "ints": list}


def test_every_registered_op_has_a_schema():
    names = _ember.list_ops()
    assert len(names) > 50
    for name in names:
        o = _ember.get_op(name)
        assert o.has_compute or o.has_lower, name
        assert o.pattern in PATTERNS, name
        assert "." not in o.family, name
        s = op.schema(name)
        assert s["num_inputs"] == o.num_inputs
        for attr, (kind, default, required, doc) in s["attrs"].items():
            assert kind in KINDS, (name, attr)
            assert isinstance(doc, str)
            if required:
                assert default is None, (name, attr)
            if default is not None:
                assert isinstance(default, KINDS[kind]), (name, attr, default)


def _wrappers():
    for module, prefix in ((op, ""), (op.nn, "nn.")):
        for attr in module.__all__:
            fn = getattr(module, attr)
            if callable(fn) and prefix + attr in _ember.list_ops():
                yield prefix + attr, fn


@pytest.mark.parametrize("name,fn", list(_wrappers()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_wrapper_defaults_are_the_schema_defaults(name, fn):
    declared = op.schema(name)["attrs"]
    try:
        params = inspect.signature(fn).parameters
    except ValueError:
        return
    for param in params.values():
        if param.name not in declared or param.default in (inspect.Parameter.empty, None):
            continue  # None: the wrapper computes it (pooling strides default to the window)
        kind, default, _, _ = declared[param.name]
        if default is None:
            continue
        value = param.default
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, bool):
            value = int(value)
        if kind == "ints" and isinstance(value, int):
            value = [value] * len(default)
        if kind == "ints" and len(value) != len(default) and len(value) == 2 and len(default) == 4:
            value = value * 2  # padding (h, w) means (top, left, bottom, right) = (h, w, h, w)
        assert value == default, (name, param.name, param.default, default)


def test_activation_defaults_come_from_cpp():
    # nn.elu's alpha is written only in activations.cc.
    x = ir.var("x", (4,), "float32")
    assert op.schema("nn.elu")["attrs"]["alpha"][1] == 1.0
    assert op.nn.elu(x).attrs["alpha"] == 1.0


def test_a_drifted_wrapper_fails(monkeypatch):
    x = ir.var("x", (2, 3), "float32")
    with pytest.raises(AssertionError, match="does not declare"):
        op._call("nn.softmax", [x], {"dim": -1}, "")
    with pytest.raises(AssertionError, match="declares it int"):
        op._call("nn.softmax", [x], {"axis": -1.0}, "")
    with pytest.raises(AssertionError, match="inputs"):
        op._call("nn.softmax", [x, x], {"axis": -1}, "")


def test_registered_ops_without_a_wrapper_are_callable():
    x = ir.var("x", (2, 8), "float32")
    y = op.nn.pack_dense_weight(x, block=4)  # no hand-written wrapper
    assert y.op.name == "nn.pack_dense_weight"
    with pytest.raises(AttributeError):
        op.no_such_op
    with pytest.raises(AttributeError):
        op.nn.no_such_op
    with pytest.raises(ember.EmberError, match="unknown attribute"):
        op.nn.elu(x, beta=2.0)
    # An op that declares no attributes says so rather than ignore one.
    with pytest.raises(ember.EmberError,
                       match="op.nn.log_sigmoid: unknown attribute 'alpha'; it takes no attr"):
        op.nn.log_sigmoid(x, alpha=1.0)


def test_layout_ops_declare_their_attributes():
    # AlterOpLayout's internal ops: their block sizes are declared, required and checked
    # (no default written in their relations); from_blocked's channels default to all of
    # the blocks' channels, so it is declared without one.
    x = ir.var("x", (1, 20, 4, 4), "float32")
    w = ir.var("w", (24, 20, 3, 3), "float32")
    d = ir.var("d", (2, 8), "float32")
    attrs = {n: op.schema(n)["attrs"] for n in
             ("to_blocked", "from_blocked", "nn.pack_conv_weight", "nn.pack_dense_weight",
              "nn.dense_packed")}
    assert attrs["to_blocked"]["block"][2] and attrs["nn.dense_packed"]["units"][2]
    assert attrs["from_blocked"]["channels"][1] is None
    assert not attrs["from_blocked"]["channels"][2]
    b = _ember.call("to_blocked", [x], {"block": 8}, "xb")
    assert list(b.shape) == [1, 3, 4, 4, 8]
    assert list(_ember.call("from_blocked", [b], {}, "xp").shape) == [1, 24, 4, 4]
    assert list(_ember.call("from_blocked", [b], {"channels": 20}, "x").shape) == [1, 20, 4, 4]
    with pytest.raises(ember.EmberError, match="to_blocked 'xb'.*needs the attribute block"):
        _ember.call("to_blocked", [x], {}, "xb")
    with pytest.raises(ember.EmberError, match="'in_block' must be an integer"):
        _ember.call("nn.pack_conv_weight", [w], {"in_block": "8", "out_block": 8}, "wp")
    with pytest.raises(ember.EmberError, match="needs the attribute out_block"):
        _ember.call("nn.pack_conv_weight", [w], {"in_block": 8}, "wp")
    with pytest.raises(ember.EmberError, match="dense_packed 'fc'.*needs the attribute units"):
        packed = _ember.call("nn.pack_dense_weight", [ir.var("k", (10, 8), "float32")],
                             {"block": 4}, "kp")
        _ember.call("nn.dense_packed", [d, packed], {}, "fc")


def test_transform_ops_declare_their_attributes():
    # Defaults live in the schema only (the relations read declared values); required ones
    # and wrong kinds are errors naming the node.
    x = ir.var("x", (2, 3, 4), "float32")
    assert op.schema("flatten")["attrs"]["start_dim"][1] == 1
    assert op.schema("take")["attrs"]["allow_negative"][1] == 1
    assert op.schema("strided_slice")["attrs"]["end"][2]
    assert list(_ember.call("flatten", [x], {}, "f").shape) == [2, 12]
    assert list(_ember.call("transpose", [x], {}, "t").shape) == [4, 3, 2]
    assert list(_ember.call("expand_dims", [x], {}, "e").shape) == [1, 2, 3, 4]
    with pytest.raises(ember.EmberError, match="reshape 'r'.*needs the attribute newshape"):
        _ember.call("reshape", [x], {}, "r")
    with pytest.raises(ember.EmberError, match="strided_slice 's'.*needs the attribute end"):
        _ember.call("strided_slice", [x], {"begin": [0]}, "s")
    with pytest.raises(ember.EmberError, match="concatenate 'c'.*'axis' must be an integer"):
        _ember.call("concatenate", [x, x], {"axis": "last"}, "c")


def test_schema_errors_name_the_node():
    x = ir.var("x", (2, 8), "float32")
    with pytest.raises(ember.EmberError, match="topk 'best'.*needs the attribute k"):
        _ember.call("topk", [x], {}, "best")
    with pytest.raises(ember.EmberError, match="nn.softmax 'p'.*'axis' must be an integer"):
        _ember.call("nn.softmax", [x], {"axis": "last"}, "p")
