"""The tuning log: one JSON object per line, appended as trials finish.

    {"workload": "nn.dense float32[1, 64] #0123...", "name": "fc", "cpu": "Intel(R) ...",
     "vector_bits": 256, "threads": 1, "template": 1, "knobs": {"tile_rows": 4, ...},
     "default": false, "status": "ok", "ms": 0.0123, "error": null, "time": 1790000000.0}

status is "ok" (ms is the median of the runs), "wrong" (numbers differ from the default
schedule's), or "failed" (the compile or the run raised, crashed or hung: error says which).
After a workload's search, the default and the fastest candidates are timed again side by
side; those entries have "final": true, and builds choose among them.
A line that does not parse is skipped with a warning on the `ember` logger; so are lines
written on another CPU or for another schedule-template version.
"""
import json
import logging
import os
import platform

from .. import _ember

logger = logging.getLogger("ember")

# The schedule knobs (ScheduleKnobs::fields in schedule_knobs.h); a missing one is 0.
KNOBS = ("tile_rows", "tile_vectors", "loop_order", "pad_rows", "unroll", "tile_axis",
         "row_block", "partial_sums", "k_chunk")


def cpu_model():
    """This machine's CPU model ("model name" of /proc/cpuinfo; platform's guess elsewhere)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def knob_tuple(knobs):
    return tuple(int(knobs.get(k, 0)) for k in KNOBS)


def append(path, entry):
    """Appends one entry and flushes it to disk (an interrupted run keeps every line)."""
    with open(path, "a") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _valid(entry):
    return (isinstance(entry, dict) and isinstance(entry.get("workload"), str)
            and isinstance(entry.get("knobs"), dict)
            and all(isinstance(entry["knobs"].get(k, 0), int) for k in KNOBS)
            and entry.get("status") in ("ok", "wrong", "failed")
            and (entry["status"] != "ok" or isinstance(entry.get("ms"), (int, float))))


def read(path, cpu=None, vector_bits=None, warn=True):
    """The entries of the log at `path` that were measured on `cpu` (default: this CPU) at
    `vector_bits` (None: any) with this schedule-template version. Damaged lines and
    foreign ones are skipped, with one warning each kind on the `ember` logger."""
    cpu = cpu_model() if cpu is None else cpu
    entries, damaged, foreign = [], [], 0
    if not os.path.exists(path):
        return entries
    with open(path, errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if not _valid(entry):
                damaged.append(number)
                continue
            version = _ember._schedule_template_version
            if (entry.get("cpu") != cpu or entry.get("template") != version
                    or (vector_bits is not None and entry.get("vector_bits") != vector_bits)):
                foreign += 1
                continue
            entries.append(entry)
    if warn and damaged:
        logger.warning("tuning log %s: skipped %d damaged line(s) (line %s)", path, len(damaged),
                       ", ".join(map(str, damaged[:10])) + (", ..." if len(damaged) > 10 else ""))
    if warn and foreign:
        logger.warning("tuning log %s: ignored %d line(s) measured on another CPU, vector width "
                       "or schedule version (this is %s, %s-bit vectors)", path, foreign, cpu,
                       vector_bits or "any")
    return entries


# A schedule replaces the default only when it is this much faster: smaller differences are
# within a 2-core machine's timing noise, and a tuned kernel must not be slower than the
# default one.
DEFAULT_MARGIN = 0.03


def best(entries, threads=None):
    """{workload: knobs} of the fastest "ok" entry per workload: entries measured at
    `threads` threads are preferred where a workload has any, then those of the final round
    (the default and the fastest candidates timed again side by side), then the fastest;
    the default's time counts DEFAULT_MARGIN less, so another schedule wins only when it
    is clearly faster."""
    chosen = {}
    for e in entries:
        if e["status"] != "ok":
            continue
        ms = e["ms"] * (1.0 - DEFAULT_MARGIN) if e.get("default") else e["ms"]
        rank = (threads is not None and e.get("threads") != threads, not e.get("final"), ms)
        cur = chosen.get(e["workload"])
        if cur is None or rank < cur[0]:
            chosen[e["workload"]] = (rank, e["knobs"])
    return {w: {k: int(knobs.get(k, 0)) for k in KNOBS} for w, (_, knobs) in chosen.items()}
