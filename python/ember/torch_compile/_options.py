"""torch.compile(..., options={...}) for the ember backend, checked and mapped to a
PassContext and the thread count."""
import os

from .. import transform
from .._ember import EmberError

KNOWN = ("opt_level", "disabled_passes", "num_threads", "tuning_log")


class Options:
    """The checked options: pass_context (ember.transform.PassContext) and num_threads
    (None: leave ember.set_num_threads alone)."""

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
