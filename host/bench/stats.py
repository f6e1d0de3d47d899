"""stats.py: what one table cell says about its repetitions.

A cell is the set of values one metric took over the repetitions of one
configuration. It is summarised as median with min-max (the spread the
2011 testers could not see), the coefficient of variation as the noise
figure, and -- against the baseline column's cell -- the % change of the
medians and whether the difference means anything: if the two min-max
ranges overlap, it does not (marked "n.s."). With fewer than two
repetitions on either side nothing can be said ("?").
"""

import statistics


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
            # Sample standard deviation over the mean; 0 for one value.
            if self.n >= 2 and self.mean:
                self.cv = statistics.stdev(self.values) / abs(self.mean)
            else:
                self.cv = 0.0 if self.n == 1 else None
        else:
            self.median = self.min = self.max = self.mean = self.cv = None

    def __bool__(self):
        return self.n > 0


SIGNIFICANT = "sig"
NOT_SIGNIFICANT = "n.s."
UNKNOWN = "?"


def overlaps(a, b):
    """Do the [min, max] ranges of two cells overlap?"""
    return a.min <= b.max and b.min <= a.max


def significance(cell, base):
    """sig / n.s. / ? of cell against the baseline cell."""
    if not cell or not base or cell.n < 2 or base.n < 2:
        return UNKNOWN
    return NOT_SIGNIFICANT if overlaps(cell, base) else SIGNIFICANT


def pct_change(cell, base):
    """% change of the medians, None when it is undefined."""
    if not cell or not base or not base.median:
        return None
    return 100.0 * (cell.median - base.median) / abs(base.median)
