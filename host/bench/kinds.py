"""kinds.py: the table of test kinds, and the one call that runs a row.

A test kind is a module with the same small interface:

    OPTIONS               the matrix keys (matrix.KEYS) it reads
    claims(run)           does it run this matrix.Run?
    run_row(run, m, guest, logdir, execute) -> row
                          run it: one row (runs.base_row() first), every
                          process it started ended; execute is
                          kinds.execute, for a kind that hands a run on
                          (loadlat.py's load points are plain rr runs)
    REPORT                functions (rows, columns) -> report.md lines:
                          the tables it adds, in this order

execute() asks the kinds in KINDS' order and the first that claims a run
runs it; peerrun.py, the last, takes every test a host peer drives. The
engine below (runs.py, guests.py, peers.py) and the settings
(matrix.py) import no kind; report.py takes the kinds' tables from
here. A new kind is one new file with that interface and one line here
(ARCHITECTURE.md, "host/bench layers"; host/bench/README.md, "Adding a
test kind").
"""

import hostgen
import loadlat
import ndr
import pairs
import peerrun
from procs import BenchError

KINDS = (
    ("pairs", pairs),  # run.guest "pair": two guests against each other
    ("ndr", ndr),  # test ndr: the NDR/PDR search, its trials in one boot
    ("loadlat", loadlat),  # rr.mps = load: the closed-loop maximum, then open-loop points
    ("hostgen", hostgen),  # packet tests with testpmd as generator or sink, the reference column
    ("peerrun", peerrun),  # one guest against a stock host peer: rr, stream, ping, memcached, pkt_txonly
)


def find(run):
    """The module of the first kind that claims run."""
    for _, kind in KINDS:
        if kind.claims(run):
            return kind
    raise BenchError(f"no test kind runs {run.test} for guest {run.guest} (kinds.KINDS)")


def execute(run, m, guest, logdir):
    """Run one configuration; always returns a row, never leaves anything
    running."""
    return find(run).run_row(run, m, guest, logdir, execute)


def report_tables():
    """The kinds' report.md tables, in KINDS' order."""
    return [table for _, kind in KINDS for table in kind.REPORT]
