"""Which candidates to measure next: the default first, a random start, then the
candidates a learned cost model (xgboost, when installed) ranks fastest, with one random
pick per batch to keep exploring."""
import math
import random

from ._log import KNOBS, knob_tuple


def _features(knobs):
    t = knob_tuple(knobs)
    return list(t) + [t[0] * t[1]]


class Search:
    """Candidate order for one workload's `space` (a list of knob dicts, default first),
    skipping `measured` (a set of knob tuples)."""

    def __init__(self, space, measured, seed=0, random_start=8):
        self.rng = random.Random(seed)
        self.space = space
        self.todo = [k for k in space if knob_tuple(k) not in measured]
        self.random_start = random_start
        self.x, self.y = [], []

    def observe(self, knobs, status, ms):
        """Adds one measurement; failed and wrong candidates count as very slow."""
        self.x.append(_features(knobs))
        self.y.append(math.log(ms) if status == "ok" and ms else None)

    def next_batch(self, n):
        if not self.todo or n <= 0:
            return []
        n = min(n, len(self.todo))
        batch = []
        if self.todo[0] is self.space[0]:  # the default is always a candidate
            batch.append(self.todo.pop(0))
        rest = n - len(batch)
        ranked = self._ranked() if len(self.y) >= self.random_start else None
        if ranked is None:
            picks = self.rng.sample(range(len(self.todo)), rest)
        else:
            picks = ranked[:max(rest - 1, 0)]
            others = [i for i in range(len(self.todo)) if i not in picks]
            picks += self.rng.sample(others, min(rest - len(picks), len(others)))
        for i in sorted(picks, reverse=True):
            batch.append(self.todo.pop(i))
        return batch

    def _ranked(self):
        """Indices of todo, predicted fastest first; None without xgboost."""
        try:
            import xgboost
        except ImportError:
            return None
        ok = [y for y in self.y if y is not None]
        if len(ok) < 2:
            return None
        worst = max(ok) + 1.0
        y = [worst if v is None else v for v in self.y]
        params = {"max_depth": 3, "eta": 0.3, "nthread": 1, "verbosity": 0}
        model = xgboost.train(params, xgboost.DMatrix(self.x, label=y), num_boost_round=40)
        pred = model.predict(xgboost.DMatrix([_features(k) for k in self.todo]))
        return sorted(range(len(self.todo)), key=lambda i: pred[i])


__all__ = ["Search", "KNOBS"]
