"""Pass configuration: which graph passes ember.build runs.

    with ember.transform.PassContext(opt_level=3, disabled_passes=["FuseOps"]):
        lib = ember.build(mod, target="llvm", params=params)

A pass runs when it is not disabled and opt_level reaches its level (SimplifyInference 0,
FuseOps 1, FoldConstant 2, FoldScaleAxis 3), or when it is required. Outside any context
everything runs (opt_level 3). "OpFusion" is accepted as another name for "FuseOps".
config keys: "FuseOps.max_depth" (int), "FuseOps.cost_model" ("target", the default: the
cost rule prices kernels on the target's machine model; "avx2" or "avx512": on that one, so
that the kernels are the same on every host; "none": pattern rules only), "dump_ir" (True:
print the IR after each pass to stderr; the environment variable EMBER_DUMP_IR=1 does the
same), "tuning_log" (a log written by ember.tune: each kernel whose workload it has, measured
on this CPU, gets the fastest schedule in it). Any other key is an error.
"""
import os
import threading

from ._ember import EmberError, _known_config_keys, _known_passes

__all__ = ["PassContext", "current", "known_passes"]

_state = threading.local()


def known_passes():
    """The passes in pipeline order, as (name, opt_level) pairs."""
    return list(_known_passes())


def _names(value, what):
    if value is None:
        return []
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise EmberError(f"PassContext: {what} must be a list of pass names, got {value!r}")
    return list(value)


class PassContext:
    """Settings for ember.build, used as a context manager (nests; thread-local)."""

    def __init__(self, opt_level=3, disabled_passes=None, required_passes=None, config=None):
        if not isinstance(opt_level, int) or isinstance(opt_level, bool) or opt_level < 0:
            raise EmberError(f"PassContext: opt_level must be an int >= 0, got {opt_level!r}")
        self.opt_level = opt_level
        self.disabled_passes = _names(disabled_passes, "disabled_passes")
        self.required_passes = _names(required_passes, "required_passes")
        if config is not None and not isinstance(config, dict):
            raise EmberError(f"PassContext: config must be a dict, got {config!r}")
        self.config = {}
        for key, value in (config or {}).items():
            if key not in _known_config_keys():
                raise EmberError(f"PassContext: unknown config key {key!r}; the known keys are: "
                                 f"{', '.join(_known_config_keys())}")
            if key == "tuning_log":
                value = os.fspath(value)
            if isinstance(value, bool):
                value = int(value)
            self.config[str(key)] = str(value)
        known = {name for name, _ in _known_passes()} | {"OpFusion"}
        for name in self.disabled_passes + self.required_passes:
            if name not in known:
                raise EmberError(f"unknown pass '{name}'; the known passes are: "
                                 f"{', '.join(n for n, _ in _known_passes())} "
                                 "(OpFusion is accepted for FuseOps)")

    def __enter__(self):
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _state.stack.pop()
        return False

    def __repr__(self):
        return (f"PassContext(opt_level={self.opt_level}, disabled_passes={self.disabled_passes}, "
                f"required_passes={self.required_passes}, config={self.config})")


def current():
    """The innermost active PassContext, or the default one (opt_level 3, nothing disabled)."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else PassContext()
