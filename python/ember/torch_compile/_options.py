"""torch.compile(..., options={...}) for the ember backend, checked and mapped to a
PassContext and the thread count."""
import os

from .. import transform
from .._ember import EmberError
from ._dynamic import DYNAMIC_MAX

KNOWN = ("opt_level", "disabled_passes", "num_threads", "tuning_log", "dynamic_max")


class Options:
    """The checked options: pass_context (ember.transform.PassContext), num_threads
    (None: leave ember.set_num_threads alone) and dynamic_max (the largest size a build
    for Dynamo's symbolic sizes covers where Dynamo gives no bound: _dynamic.py)."""

    def __init__(self, options, mode):
        options = {} if options is None else options
        if not isinstance(options, dict):
            raise EmberError("torch.compile(backend='ember'): options must be a dict, got "
                             f"{type(options).__name__}")
        if mode not in (None, "default"):
            raise EmberError(f"torch.compile(backend='ember'): mode={mode!r} is not supported; "
                             "Ember has one mode (tune it with options={'opt_level': ...})")
        unknown = sorted(set(options) - set(KNOWN))
        if unknown:
            raise EmberError(f"torch.compile(backend='ember'): unknown option(s) {unknown}; "
                             f"the options are {', '.join(KNOWN)}")
        log = options.get("tuning_log")
        if log is not None and not isinstance(log, (str, os.PathLike)):
            raise EmberError("torch.compile(backend='ember'): tuning_log must be the path of a "
                             f"log written by ember.tune, got {log!r}")
        self.pass_context = transform.PassContext(
            opt_level=options.get("opt_level", 3),
            disabled_passes=options.get("disabled_passes"),
            config=None if log is None else {"tuning_log": log})
        threads = options.get("num_threads")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise EmberError("torch.compile(backend='ember'): num_threads must be an int >= 1, "
                             f"got {threads!r}")
        self.num_threads = threads
        dynamic_max = options.get("dynamic_max", DYNAMIC_MAX)
        if isinstance(dynamic_max, bool) or not isinstance(dynamic_max, int) or dynamic_max < 2:
            raise EmberError("torch.compile(backend='ember'): dynamic_max must be an int >= 2 "
                             f"(the largest size built for where Dynamo gives none), got "
                             f"{dynamic_max!r}")
        self.dynamic_max = dynamic_max
