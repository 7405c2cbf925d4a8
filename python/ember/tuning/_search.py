"""Which candidates to measure next. Every strategy measures the default first.

"model" (the default): a random start, then per batch the candidates that a learned cost
model ranks fastest (gradient-boosted trees from xgboost, trained on the log of the
measured ones), with one random pick per batch to keep exploring. Without xgboost it is an
evolutionary search: the candidates one or two knob changes away from the fastest ones
measured so far. "random": uniformly random candidates (the baseline that
benchmarks/tuning.py --compare-search measures the others against)."""
import math
import random

from ._log import KNOBS, knob_tuple

STRATEGIES = ("model", "evolution", "random")


def _features(knobs):
    """The knobs and what they add up to: accumulators (rows x vectors x partial sums) and
    the FMAs of one unrolled reduction step (accumulators x unroll)."""
    k = dict(zip(KNOBS, knob_tuple(knobs)))
    acc = k["tile_rows"] * max(k["tile_vectors"], 1) * max(k["partial_sums"], 1)
    return list(knob_tuple(knobs)) + [acc, acc * max(k["unroll"], 1)]


class Search:
    """Candidate order for one workload's `space` (a list of knob dicts, default first),
    skipping `measured` (a set of knob tuples)."""

    def __init__(self, space, measured, seed=0, random_start=8, strategy="model"):
        if strategy not in STRATEGIES:
            raise ValueError(f"search strategy must be one of {', '.join(STRATEGIES)}, "
                             f"got {strategy!r}")
        self.rng = random.Random(seed)
        self.seed = seed
        self.space = space
        self.strategy = strategy
        self.todo = [k for k in space if knob_tuple(k) not in measured]
        self.random_start = random_start
        self.x, self.y, self.knobs = [], [], []

    def observe(self, knobs, status, ms):
        """Adds one measurement; failed and wrong candidates count as very slow."""
        self.x.append(_features(knobs))
        self.y.append(math.log(ms) if status == "ok" and ms else None)
        self.knobs.append(knob_tuple(knobs))

    def next_batch(self, n):
        if not self.todo or n <= 0:
            return []
        n = min(n, len(self.todo))
        batch = []
        if self.todo[0] is self.space[0]:  # the default is always a candidate
            batch.append(self.todo.pop(0))
        rest = n - len(batch)
        ranked = None
        if self.strategy != "random" and len(self.y) >= self.random_start:
            ranked = self._ranked() if self.strategy == "model" else None
            if ranked is None:
                ranked = self._neighbours()
        if ranked is None:
            picks = self.rng.sample(range(len(self.todo)), rest)
        else:
            picks = ranked[:max(rest - 1, 0)]
            chosen = set(picks)
            others = [i for i in range(len(self.todo)) if i not in chosen]
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
        params = {"max_depth": 3, "eta": 0.3, "nthread": 1, "verbosity": 0,
                  "seed": self.seed}
        model = xgboost.train(params, xgboost.DMatrix(self.x, label=y), num_boost_round=40)
        pred = model.predict(xgboost.DMatrix([_features(k) for k in self.todo]))
        return sorted(range(len(self.todo)), key=lambda i: pred[i])

    def _neighbours(self, parents=4):
        """Indices of todo that differ from one of the `parents` fastest measured candidates
        in the fewest knobs (the fastest parent first; ties in random order), then the rest."""
        ok = sorted((y, i) for i, y in enumerate(self.y) if y is not None)
        best = [self.knobs[i] for _, i in ok[:parents]]
        if not best:
            return None

        def distance(i):
            t = knob_tuple(self.todo[i])
            return min((sum(a != b for a, b in zip(t, p)), rank) for rank, p in enumerate(best))

        keys = {i: (distance(i), self.rng.random()) for i in range(len(self.todo))}
        return sorted(keys, key=keys.get)


__all__ = ["Search", "KNOBS", "STRATEGIES"]
