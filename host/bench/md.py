"""md.py: what the report.md tables of every module share (report.py, the
test kinds' REPORT tables, idle.py): a section's head and the median of a
row key."""

import statistics


def section(title, *text):
    """A section's first lines: a blank line, `## title`, a blank line, text."""
    return ["", f"## {title}", "", *text]


def median_of(rows, key):
    """The median of key's numbers over rows (bools and missing values left
    out), or None."""
    v = [r[key] for r in rows if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
    return statistics.median(v) if v else None
