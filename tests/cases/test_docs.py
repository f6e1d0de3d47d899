"""The documentation against the tree: every link and repository path in
README.md, ARCHITECTURE.md, docs/ and host/bench/README.md exists, every
documented matrix parses, every documented `make` line is accepted by make
(dry run: a policy value that no longer exists is an error at parse time),
and the cheap documented boots (app=none, app=pkt on slirp) run as
written."""

import glob
import os
import re
import shlex
import subprocess
import sys

from lib import TOP, Fail, run_all

DOCS = ["README.md", "ARCHITECTURE.md", "host/bench/README.md", "tests/README.md"] + sorted(
    os.path.relpath(p, TOP) for p in glob.glob(os.path.join(TOP, "docs", "**", "*.md"), recursive=True))
TOP_DIRS = ("boot", "kernel", "drivers", "net", "apps", "linker", "tests", "host", "mk", "docs")


def docs():
    for d in DOCS:
        p = os.path.join(TOP, d)
        if os.path.exists(p):
            yield d, open(p).read()


def commands():
    """Indented code-block lines that are shell commands, comments cut."""
    out = []
    for d, text in docs():
        for line in text.splitlines():
            m = re.match(r"^    ((?:make|host/|python3|ip ) ?.*)$", line)
            if m:
                cmd = re.sub(r"\s+#.*$", "", m.group(1)).rstrip(" \\")
                out.append((d, cmd))
    return out


def test_docs_links_and_paths_exist(t):
    missing = []
    for d, text in docs():
        base = os.path.dirname(os.path.join(TOP, d))
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            if not os.path.exists(os.path.normpath(os.path.join(base, target))):
                missing.append(f"{d}: link {target}")
        for path in re.findall(r"`((?:%s)/[A-Za-z0-9_./-]+)`" % "|".join(TOP_DIRS), text):
            path = path.rstrip("./")
            if "*" in path or "NAME" in path or "<" in path:
                continue
            if not os.path.exists(os.path.join(TOP, path)):
                missing.append(f"{d}: path `{path}`")
    if missing:
        raise Fail("the docs name what the tree does not have:\n  " + "\n  ".join(missing))


def test_docs_matrices_parse(t):
    mats = sorted({m for _, text in docs() for m in re.findall(r"host/bench/matrices/[\w-]+\.txt", text)})
    if not mats:
        raise Fail("no documented matrix found: the extraction is broken")
    bad, parse = [], []
    for m in mats:
        if not os.path.exists(os.path.join(TOP, m)):
            bad.append(f"{m}: no such file")
        elif os.path.basename(m) == "pairs.txt" and os.path.exists(os.path.join(TOP, "host/bench/pairs.py")):
            continue  # pairs.py's own format (test_memcached checks it)
        else:
            parse.append(m)
    runs = run_all([[sys.executable, "host/bench/vnetbench.py", "--matrix", m, "--list"] for m in parse], 120)
    for m, r in zip(parse, runs):
        if r.returncode != 0:
            bad.append(f"{m}: {r.stderr.strip()[-300:]}")
    if bad:
        raise Fail("documented matrices that do not parse:\n  " + "\n  ".join(bad))
    print(f"    {len(mats)} documented matrices parse")


def test_docs_make_lines_accepted(t):
    seen, bad, lines = set(), [], []
    for d, cmd in commands():
        if not cmd.startswith("make ") or cmd in seen:
            continue
        seen.add(cmd)
        lines.append((d, cmd))
    # -n: make parses the variables (mk/variants.mk refuses unknown
    # policy values) and plans the recipe without running it.
    runs = run_all([["make", "-n", *shlex.split(cmd)[1:]] for _, cmd in lines], 120)
    for (d, cmd), r in zip(lines, runs):
        if r.returncode != 0:
            bad.append(f"{d}: `{cmd}`: {r.stderr.strip()[-200:]}")
    if len(seen) < 10:
        raise Fail(f"only {len(seen)} documented make lines found: the extraction is broken")
    if bad:
        raise Fail("documented make lines that make refuses:\n  " + "\n  ".join(bad))
    print(f"    {len(seen)} documented make lines accepted by make -n")


def test_fresh_clone_make_run_plans_the_fetch_first(t):
    """README's quick start on a fresh clone: `make run` with no deps/ yet
    must plan host/deps.sh and then the lwIP objects, not stop with "No
    rule to make target ..." (it did, before the lwIP sources had a rule
    saying the fetch makes them). Dry run against an empty DEPS and O."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run(["make", "-n", "run", f"DEPS={d}/deps", f"O={d}/build"], cwd=TOP,
                           capture_output=True, text=True, timeout=120)
        out = r.stdout + r.stderr
        if r.returncode != 0 or "No rule to make target" in out:
            raise Fail(f"make -n run without deps/: status {r.returncode}: {out[-400:]}")
        fetch = out.find("bash host/deps.sh")
        lwip = out.find(f"{d}/deps/lwip/src/core/def.c")
        if fetch < 0 or lwip < 0 or lwip < fetch:
            raise Fail("make -n run without deps/ must run host/deps.sh before compiling lwIP: "
                       f"fetch at {fetch}, lwIP at {lwip}")


def test_docs_cheap_boots_run_as_written(t):
    ran = []
    for d, cmd in commands():
        # A plain boot: qemu-run.sh with app=none, or app=pkt on slirp, and
        # nothing that needs a namespace or an image.
        plain = '"app=none"' in cmd or ('"app=pkt ' in cmd and "--net user" in cmd)
        if cmd.startswith("host/qemu-run.sh") and plain and "--net tap" not in cmd:
            r = subprocess.run(shlex.split(cmd), cwd=TOP, capture_output=True, text=True, timeout=120)
            if r.returncode != 0 or "vnetlab exit status=0" not in r.stdout:
                raise Fail(f"{d}: `{cmd}` ended with {r.returncode}: {r.stderr[-300:]}")
            ran.append(cmd)
    if not ran:
        raise Fail("no documented plain boot found: the extraction is broken")
    print(f"    ran as written: {ran}")
