"""stats.py: what one table cell says about its repetitions.

A cell is the set of values one metric took over the repetitions of one
configuration: n, median with min-max, and -- only for n >= 2 -- the
coefficient of variation as the noise figure.

Against the baseline column's cell:
  - the % change of the medians;
  - a 95 % confidence interval of that change: percentile bootstrap of the
    difference of medians (both cells resampled with replacement,
    BOOT_RESAMPLES times, fixed seed so a report is reproducible), in % of
    the baseline median;
  - significance from the two-sided Mann-Whitney U test (exact
    permutation distribution of U, ties by mid-ranks; normal approximation
    with tie correction above EXACT_MAX combinations): "sig" when
    p < ALPHA, "n.s." when not, "?" when either side has fewer than 2
    values or when no outcome of these sample sizes could reach p < ALPHA
    (3 vs 3 repetitions: the smallest possible p is 0.1), i.e. more
    repetitions are needed to tell.

Overlapping min-max ranges, the old criterion, declare two samples of one
distribution "significant" 10 % of the time with 3 repetitions (33 % with
2); the test above is wrong at most ALPHA of the time.
"""

import itertools
import math
import random
import statistics

ALPHA = 0.05
BOOT_RESAMPLES = 4000
BOOT_SEED = 20111
EXACT_MAX = 20000  # combinations C(n1+n2, n1) enumerated exactly


class Cell:
    __slots__ = ("values", "n", "median", "min", "max", "mean", "cv")

    def __init__(self, values):
        self.values = [v for v in values if v is not None]
        self.n = len(self.values)
        if self.n:
            self.median = statistics.median(self.values)
            self.min = min(self.values)
            self.max = max(self.values)
            self.mean = statistics.fmean(self.values)
            # Sample standard deviation over the mean; undefined for one value.
            if self.n >= 2 and self.mean:
                self.cv = statistics.stdev(self.values) / abs(self.mean)
            else:
                self.cv = None
        else:
            self.median = self.min = self.max = self.mean = self.cv = None

    def __bool__(self):
        return self.n > 0


SIGNIFICANT = "sig"
NOT_SIGNIFICANT = "n.s."
UNKNOWN = "?"


def _ranks(values):
    """Mid-ranks (1-based) of values, ties averaged."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def mann_whitney(a, b):
    """Two-sided p-value of the Mann-Whitney U test of samples a and b."""
    n1, n2 = len(a), len(b)
    if not n1 or not n2:
        return None
    pooled = list(a) + list(b)
    ranks = _ranks(pooled)
    r1 = sum(ranks[:n1])
    u1 = r1 - n1 * (n1 + 1) / 2.0
    mean_u = n1 * n2 / 2.0
    if math.comb(n1 + n2, n1) <= EXACT_MAX:
        # Exact: every way of assigning the pooled ranks to sample a.
        dev = abs(u1 - mean_u)
        hits = total = 0
        for idx in itertools.combinations(range(n1 + n2), n1):
            u = sum(ranks[i] for i in idx) - n1 * (n1 + 1) / 2.0
            total += 1
            if abs(u - mean_u) >= dev - 1e-9:
                hits += 1
        return hits / total
    n = n1 + n2
    ties = {}
    for v in pooled:
        ties[v] = ties.get(v, 0) + 1
    t = sum(c ** 3 - c for c in ties.values())
    var = n1 * n2 / 12.0 * ((n + 1) - t / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u1 - mean_u) - 0.5) / math.sqrt(var)
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def min_p(n1, n2):
    """Smallest two-sided p the exact test can give for these sizes."""
    if not n1 or not n2:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def bootstrap_ci(cell, base, level=0.95):
    """(low, high) of the difference of medians cell - base, in % of the
    base median; None when it cannot be computed."""
    if not cell or not base or cell.n < 2 or base.n < 2 or not base.median:
        return None
    rng = random.Random(BOOT_SEED)
    a, b = cell.values, base.values
    diffs = []
    for _ in range(BOOT_RESAMPLES):
        ma = statistics.median(rng.choices(a, k=len(a)))
        mb = statistics.median(rng.choices(b, k=len(b)))
        diffs.append(ma - mb)
    diffs.sort()
    lo = diffs[int((1 - level) / 2 * len(diffs))]
    hi = diffs[min(len(diffs) - 1, int((1 + level) / 2 * len(diffs)))]
    scale = 100.0 / abs(base.median)
    return (lo * scale, hi * scale)


def p_value(cell, base):
    if not cell or not base or cell.n < 2 or base.n < 2:
        return None
    return mann_whitney(cell.values, base.values)


def significance(cell, base):
    """sig / n.s. / ? of cell against the baseline cell (module docstring)."""
    if not cell or not base or cell.n < 2 or base.n < 2:
        return UNKNOWN
    p = mann_whitney(cell.values, base.values)
    if p < ALPHA:
        return SIGNIFICANT
    if min_p(cell.n, base.n) >= ALPHA:
        return UNKNOWN
    return NOT_SIGNIFICANT


def overlaps(a, b):
    """Do the [min, max] ranges of two cells overlap? (Shown for reference
    only; not a significance criterion.)"""
    return a.min <= b.max and b.min <= a.max


def pct_change(cell, base):
    """% change of the medians, None when it is undefined."""
    if not cell or not base or not base.median:
        return None
    return 100.0 * (cell.median - base.median) / abs(base.median)


def pooled_percentiles(hists, pcts=(50, 90, 99, 99.9)):
    """Percentiles of the union of several guest histograms (HIST lines:
    lists of [low, width, count]), nearest rank, the bucket's midpoint, as
    apps/lib/hist.c reports them. {p: value} or {} when empty."""
    buckets = {}
    for h in hists:
        for low, width, count in h:
            key = (low, width)
            buckets[key] = buckets.get(key, 0) + count
    total = sum(buckets.values())
    if not total:
        return {}
    ordered = sorted(buckets.items())
    out = {}
    for p in pcts:
        rank = max(1, math.ceil(total * p / 100.0))
        seen = 0
        for (low, width), c in ordered:
            seen += c
            if seen >= rank:
                out[p] = low + width // 2
                break
    return out


def cdf(hists):
    """[(value, cumulative fraction)] of merged histograms, for plots."""
    buckets = {}
    for h in hists:
        for low, width, count in h:
            buckets[(low, width)] = buckets.get((low, width), 0) + count
    total = sum(buckets.values())
    out, seen = [], 0
    for (low, width), c in sorted(buckets.items()):
        seen += c
        out.append((low + width, seen / total))
    return out
