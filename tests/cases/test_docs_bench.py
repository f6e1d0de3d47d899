"""The documented harness commands still run as written (test_docs.py
checks links, matrix files and make lines; this, whole command lines): every
`host/bench/vnetbench.py ...` and `make bench BENCH_ARGS="..."` line of the
README, ARCHITECTURE.md, docs/ and the READMEs under host/bench/ and
tests/ parses and expands its matrix (`--list`: nothing is built or
booted). Synopsis lines (`[...]`, continuations, placeholders) and the
commands that need a results folder (`compare`, `--rereport`) are left
out."""

import glob
import os
import re
import shlex
import sys

from lib import TOP, Fail, run_all

VNETBENCH = os.path.join(TOP, "host", "bench", "vnetbench.py")
DOCS = ["README.md", "ARCHITECTURE.md", "host/bench/README.md", "tests/README.md"] + sorted(
    os.path.relpath(p, TOP) for p in glob.glob(os.path.join(TOP, "docs", "**", "*.md"), recursive=True))


def documented_commands():
    """[(file:line, argv after vnetbench.py)] of the cheap ones."""
    out = []
    for doc in DOCS:
        try:
            lines = open(os.path.join(TOP, doc)).read().splitlines()
        except OSError:
            continue
        for n, line in enumerate(lines, 1):
            cmd = line.strip()
            if not line.startswith("    ") or "[" in cmd or cmd.endswith("\\") or "OLD" in cmd:
                continue
            cmd = re.sub(r"\s+#.*$", "", cmd)
            try:
                words = shlex.split(cmd)
            except ValueError:
                continue
            if words[:2] == ["make", "bench"] and len(words) == 3 and words[2].startswith("BENCH_ARGS="):
                args = shlex.split(words[2][len("BENCH_ARGS="):])
            elif words and words[0] in ("host/bench/vnetbench.py", "python3") and \
                    "host/bench/vnetbench.py" in words[:2]:
                args = words[words.index("host/bench/vnetbench.py") + 1:]
            else:
                continue
            if not args or args[0] == "compare" or "--rereport" in args or "--help" in args:
                continue
            out.append((f"{doc}:{n}", args))
    return out


def test_docs_bench_commands_parse(t):
    cmds = documented_commands()
    if len(cmds) < 5:
        raise Fail(f"expected at least 5 documented vnetbench commands, found {len(cmds)}: {cmds}")
    runs = run_all([[sys.executable, VNETBENCH, *args, "--list"] for _, args in cmds], 120)
    for (where, args), r in zip(cmds, runs):
        if r.returncode or not r.stdout.strip():
            raise Fail(f"{where}: `host/bench/vnetbench.py {shlex.join(args)}` does not parse as written "
                       f"(status {r.returncode}): {(r.stderr or r.stdout).strip()[-600:]}")
    print(f"    {len(cmds)} documented harness commands parse and expand")
