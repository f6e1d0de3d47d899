"""host/bench's imports run one way (ARCHITECTURE.md, "host/bench layers"):
every module sits in one layer of LAYERS, imports only modules of its own
or a lower layer, and no import circle exists (imports inside functions
count: a lazy import is still a circle). Checked on the source with `ast`,
and the checker shown to catch a circle and an upward import in a copy.
The test kinds' table (kinds.py) is checked against the matrix."""

import ast
import os
import shutil
import sys
import tempfile

from lib import TOP, Fail

BENCH = os.path.join(TOP, "host", "bench")
sys.path.insert(0, BENCH)

# Lowest first. A new module goes into the layer whose modules it may use.
LAYERS = (
    # base: processes, statistics, samplers, builds, backends, parsers
    ("base", ("procs", "stats", "cpu", "kvmstats", "variants", "backends", "idle", "mcload", "md", "tsccal",
              "xdprefl", "boottime", "loopback_server")),
    ("settings", ("matrix",)),  # the matrix file, its keys and its runs
    ("engine", ("runs", "peers", "guests")),  # the parts of a run: row, backend, guest, host peer
    ("kinds", ("peerrun", "hostgen", "ndr", "loadlat", "pairs")),  # test kinds, found through kinds.py
    ("registry", ("kinds",)),
    ("output", ("report", "plots", "compare")),
    ("cli", ("vnetbench",)),
)


def import_graph(folder):
    """{module: {module of folder it imports}}, every import statement of
    every .py file (inside functions too)."""
    mods = {f[:-3] for f in os.listdir(folder) if f.endswith(".py")}
    graph = {}
    for m in sorted(mods):
        with open(os.path.join(folder, m + ".py")) as f:
            tree = ast.parse(f.read(), m + ".py")
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            else:
                continue
            deps.update(n for n in names if n in mods and n != m)
        graph[m] = deps
    return graph


def circles(graph):
    """Each import circle once, as a list of modules [a, b, ..., a]."""
    found, seen = [], set()
    state = {}  # module -> 1 on the current path, 2 done

    def visit(m, path):
        state[m] = 1
        path.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                c = path[path.index(d):] + [d]
                key = frozenset(c)
                if key not in seen:
                    seen.add(key)
                    found.append(c)
            elif d not in state:
                visit(d, path)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return found


def problems(folder):
    """What breaks the rule in folder: circles, upward imports, modules in
    no layer (or a layer naming a module that is not there)."""
    graph = import_graph(folder)
    rank = {m: i for i, (_, ms) in enumerate(LAYERS) for m in ms}
    out = [f"import circle: {' -> '.join(c)}" for c in circles(graph)]
    out += [f"{m}.py is in no layer of LAYERS (tests/cases/test_harness_layers.py)" for m in sorted(graph)
            if m not in rank]
    out += [f"LAYERS names {m}, which {folder} does not have" for m in sorted(rank) if m not in graph]
    for m in sorted(graph):
        for d in sorted(graph[m]):
            if m in rank and d in rank and rank[d] > rank[m]:
                out.append(f"{m} ({LAYERS[rank[m]][0]}) imports {d} ({LAYERS[rank[d]][0]}): imports run downwards")
    return out


def test_harness_imports_one_way(t):
    bad = problems(BENCH)
    if bad:
        raise Fail("host/bench's imports: " + "; ".join(bad))


def _copy_with(edits):
    tmp = tempfile.mkdtemp(prefix="vnetlab-layers-")
    for f in os.listdir(BENCH):
        if f.endswith(".py"):
            shutil.copy(os.path.join(BENCH, f), tmp)
    for name, text in edits.items():
        with open(os.path.join(tmp, name), "a") as f:
            f.write(text)
    return tmp


def test_harness_imports_check_catches(t):
    # The checker on copies of host/bench with one bad import added each.
    cases = (
        # the old knot: the engine lazily importing a kind that imports it
        ({"runs.py": "\n\ndef _pair():\n    import pairs\n    return pairs\n"}, "import circle: ",
         ("runs", "pairs")),
        # two modules of one layer importing each other (peers <-> mcload was one)
        ({"peers.py": "\nimport guests\n"}, "import circle: ", ("guests", "peers")),
        # the settings importing a test kind (matrix -> loadlat was one)
        ({"matrix.py": "\nfrom loadlat import LOAD_SHORT\n"}, "matrix (settings) imports loadlat (kinds)", ()),
        # a new module nobody placed
        ({"newkind.py": "import runs\n"}, "newkind.py is in no layer", ()),
    )
    for edits, want, members in cases:
        tmp = _copy_with(edits)
        try:
            bad = problems(tmp)
        finally:
            shutil.rmtree(tmp)
        hit = [b for b in bad if want in b and all(f" {m} " in f" {b} " for m in members)]
        if not hit:
            raise Fail(f"adding {edits}: expected a problem /{want}/ naming {members}, the check said {bad}")


def test_harness_kinds_table(t):
    import kinds
    import matrix

    names = [n for n, _ in kinds.KINDS]
    if len(set(names)) != len(names):
        raise Fail(f"kinds.KINDS names a kind twice: {names}")
    for name, mod in kinds.KINDS:
        for attr in ("OPTIONS", "claims", "run_row", "REPORT"):
            if not hasattr(mod, attr):
                raise Fail(f"kind {name} ({mod.__name__}.py) lacks {attr} (kinds.py's interface)")
        unknown = [k for k in mod.OPTIONS if k not in matrix.KEYS]
        if unknown:
            raise Fail(f"kind {name}: OPTIONS {unknown} are not matrix keys")
        if not all(callable(f) for f in mod.REPORT):
            raise Fail(f"kind {name}: REPORT must hold table functions")
    # Every key of a test's own (dotted, but the run-wide pin.*) is some kind's.
    owned = {k for _, mod in kinds.KINDS for k in mod.OPTIONS}
    orphans = [k for k in matrix.KEYS if "." in k and not k.startswith("pin.") and k not in owned]
    if orphans:
        raise Fail(f"matrix keys no kind reads (kinds' OPTIONS): {orphans}")

    # Which kind runs what: the old order of runs.execute()'s branches.
    def run(test, guest="vnetlab", **params):
        return matrix.Run(index=0, rep=0, column="c", guest=guest, variant="default", test=test, backend="tap",
                          params=params)

    expect = (
        (run("tcp_rr", guest="pair"), "pairs"),
        (run("pkt_txonly", guest="pair"), "pairs"),
        (run("tcp_rr", load=50), "loadlat"),
        (run("udp_rr", load="max"), "loadlat"),
        (run("ndr"), "ndr"),
        (run("ndr", guest="reference"), "ndr"),  # the same search, no boot (issue 38)
        (run("pkt_rxonly"), "hostgen"),
        (run("pkt_macswap"), "hostgen"),
        (run("pkt_rr"), "hostgen"),
        (run("pkt_txonly", guest="reference"), "hostgen"),
        (run("pkt_txonly", generator="testpmd"), "hostgen"),
        (run("pkt_txonly", generator="python"), "peerrun"),
        (run("tcp_rr"), "peerrun"),
        (run("tcp_maerts", guest="linux"), "peerrun"),
        (run("ping"), "peerrun"),
        (run("memcached", guest="loopback"), "peerrun"),
    )
    by_mod = {mod: n for n, mod in kinds.KINDS}
    for r, want in expect:
        got = by_mod[kinds.find(r)]
        if got != want:
            raise Fail(f"{r.test} (guest {r.guest}, {r.params}): kind {got} claims it, expected {want}")
    for test in matrix.TESTS:
        kinds.find(run(test))  # raises for a test no kind runs
