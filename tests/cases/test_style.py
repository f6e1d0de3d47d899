"""The tree follows its one .clang-format, and no archive host is written in it."""

import subprocess

from lib import TOP, Fail


def test_clang_format_clean(t):
    files = subprocess.run(["git", "ls-files", "*.c", "*.h"], cwd=TOP, capture_output=True, text=True,
                           timeout=30).stdout.split()
    if not files:
        raise Fail("git ls-files found no C files")
    r = subprocess.run(["clang-format", "--dry-run", "-Werror"] + files, cwd=TOP, capture_output=True,
                       text=True, timeout=120)
    if r.returncode:
        bad = sorted({l.split(":")[0] for l in r.stderr.splitlines() if ": error:" in l})
        raise Fail(f"not clang-formatted (run `make format`): {bad[:10]}")


def test_no_archive_host_in_repo(t):
    # The archive's address is read from the machine's apt sources at run
    # time (host/deps.sh); the repo must not carry it.
    hosts = set()
    for path in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        try:
            text = open(path).read()
        except OSError:
            continue
        for word in text.split():
            if "://" in word:
                hosts.add(word.split("://", 1)[1].split("/", 1)[0])
    if not hosts:
        raise Fail("found no archive URI in /etc/apt sources to check against")
    for h in sorted(hosts):
        r = subprocess.run(["git", "grep", "-n", "-I", "-F", h], cwd=TOP, capture_output=True, text=True,
                           timeout=30)
        if r.stdout:
            raise Fail(f"archive host {h} is written in the repo: {r.stdout.splitlines()[:3]}")
