"""The receive path under libFuzzer + ASan/UBSan (tests/fuzz/): the driver's
RX and used-ring handling against the simulated device, the same against a
device that rewrites its memory between the driver's reads, and netif +
lwIP input with arbitrary frames. A bounded run here (FUZZ_TEST_SECONDS each,
default 20); `make fuzz` runs each target 10 minutes."""

import os
import re
import subprocess

from lib import BUILD, TOP, Fail

SECONDS = int(os.environ.get("FUZZ_TEST_SECONDS", "20"))
TARGETS = ("fuzz_vnet_rx", "fuzz_vnet_dev", "fuzz_netif")


def test_fuzz_receive_path_bounded(t):
    r = subprocess.run(["make", "-s", "-j2", "fuzz-build"], cwd=TOP, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise Fail(f"make fuzz-build failed: {(r.stdout + r.stderr)[-1500:]}")
    bins = [os.path.join(BUILD, "fuzz", n) for n in TARGETS]
    r = subprocess.run(["bash", "tests/fuzz/run.sh", str(SECONDS)] + bins, cwd=TOP, capture_output=True,
                       text=True, timeout=len(bins) * (SECONDS + 120))
    out = r.stdout.strip().splitlines()
    for name in TARGETS:
        line = [l for l in out if re.match(rf"fuzz (ok|FAIL) {name}:", l)]
        if not line or not line[-1].startswith("fuzz ok") or not line[-1].endswith("crashes=0"):
            raise Fail(f"{name}: expected 'fuzz ok {name}: ... crashes=0', saw:\n" + "\n".join(out[-20:]) + r.stderr[-500:])
        m = re.search(r"executions=(\d+)", line[-1])
        if not m or int(m.group(1)) < 1000:
            raise Fail(f"{name}: fewer than 1000 executions in {SECONDS} s: {line[-1]}")
        print("    " + line[-1])
    if r.returncode:
        raise Fail(f"tests/fuzz/run.sh exited {r.returncode}: {out[-5:]}")


def test_fuzz_regression_inputs_caught_without_the_fix(t):
    """The regression inputs are real: with netif.c's short-frame check
    removed, the netif target crashes on them (lwIP reads past the frame)."""
    src = open(os.path.join(TOP, "net", "netif.c")).read()
    if "if (!big && too_short(&f)) {" not in src:
        raise Fail("net/netif.c no longer has the too_short() check this test removes")
    scratch = os.path.join(BUILD, "fuzz", "mutant")
    os.makedirs(os.path.join(scratch, "net"), exist_ok=True)
    with open(os.path.join(scratch, "net", "netif.c"), "w") as f:
        f.write(src.replace("if (!big && too_short(&f)) {", "if (!big && too_short(&f) && 0) {"))
    binary = os.path.join(scratch, "fuzz_netif")
    r = subprocess.run(["make", "-s", "FUZZ_NETIF_SRC=" +
                        os.path.join(scratch, "net", "netif.c"), f"FUZZ_NETIF_OUT={binary}", binary],
                       cwd=TOP, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise Fail(f"building the mutant failed: {(r.stdout + r.stderr)[-1500:]}")
    regress = os.path.join(TOP, "tests", "fuzz", "regress", "fuzz_netif")
    for name in sorted(os.listdir(regress)):
        r = subprocess.run([binary, "-runs=1", os.path.join(regress, name)], capture_output=True, text=True, timeout=60)
        if r.returncode == 0 or "AddressSanitizer" not in r.stderr:
            raise Fail(f"regression input {name} ran clean without the fix (status {r.returncode})")
    print(f"    {len(os.listdir(regress))} regression inputs crash lwIP without netif.c's check")


def build_netif_mutant(find, replace, tag):
    """fuzz_netif built from a scratch netif.c with one edit; its path."""
    src = open(os.path.join(TOP, "net", "netif.c")).read()
    if src.count(find) != 1:
        raise Fail(f"net/netif.c no longer has exactly one {find!r}, which this test removes")
    scratch = os.path.join(BUILD, "fuzz", "mutant-" + tag)
    os.makedirs(os.path.join(scratch, "net"), exist_ok=True)
    with open(os.path.join(scratch, "net", "netif.c"), "w") as f:
        f.write(src.replace(find, replace))
    binary = os.path.join(scratch, "fuzz_netif")
    r = subprocess.run(["make", "-s", "FUZZ_NETIF_SRC=" + os.path.join(scratch, "net", "netif.c"),
                        f"FUZZ_NETIF_OUT={binary}", binary], cwd=TOP, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise Fail(f"building the mutant failed: {(r.stdout + r.stderr)[-1500:]}")
    return binary


def test_fuzz_netif_tx_headroom_of_first_data_pbuf(t):
    """Issue 23 finding 3: fuzz_netif's start-up check sends a zero-length
    head followed by a PBUF_ROM pbuf. With has_headroom() asking the head
    (today's bug put back) the driver writes its 12-byte header in front of
    the ROM memory and ASan stops the target; with the fix it runs clean."""
    r = subprocess.run(["make", "-s", "-j2", "fuzz-build"], cwd=TOP, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise Fail(f"make fuzz-build failed: {(r.stdout + r.stderr)[-1500:]}")
    binary = build_netif_mutant("\twhile (p && !p->len)\n\t\tp = p->next;\n", "", "headroom")
    seed = os.path.join(TOP, "tests", "fuzz", "corpus", "fuzz_netif", "ping")
    r = subprocess.run([binary, "-runs=0", seed], capture_output=True, text=True, timeout=60)
    if r.returncode == 0 or "AddressSanitizer" not in r.stderr:
        raise Fail(f"headroom checked on the empty head: expected an ASan report, got status {r.returncode}: "
                   f"{r.stderr[-600:]}")
    r = subprocess.run([os.path.join(BUILD, "fuzz", "fuzz_netif"), "-runs=0", seed], capture_output=True, text=True,
                       timeout=60)
    if r.returncode:
        raise Fail(f"fuzz_netif with the fix: status {r.returncode}: {r.stderr[-600:]}")
    print("    zero-length head + PBUF_ROM: flattened into a copy (the bug put back: ASan underflow)")


def test_fuzz_vnet_dev_regressions_catch_a_double_fetch(t):
    """Issue 23 finding 2: with vnet_rx.c reading the RX header from device
    memory again after checking it (the bug put back), a fuzz_vnet_dev
    regression input (the device rewrites gso_size after the check) breaks
    its invariant; with the one-copy header they all run clean (run.sh replays
    them before every fuzz run, test_fuzz_receive_path_bounded above)."""
    src = open(os.path.join(TOP, "drivers", "virtio", "vnet_rx.c")).read()
    find = "\t\tvnet_rx_hdr_once(&hdr, b + VNET_RX_HDR_OFF);\n"
    if src.count(find) != 1:
        raise Fail("drivers/virtio/vnet_rx.c no longer has the one vnet_rx_hdr_once() call this test undoes")
    scratch = os.path.join(BUILD, "fuzz", "mutant-rxhdr")
    os.makedirs(scratch, exist_ok=True)
    mutant = os.path.join(scratch, "vnet_rx.c")
    with open(mutant, "w") as f:
        f.write(src.replace(find, find + "\t\th = (const struct virtio_net_hdr *)(b + VNET_RX_HDR_OFF);\n"))
    binary = os.path.join(scratch, "fuzz_vnet_dev")
    r = subprocess.run(["make", "-s", f"FUZZ_VNET_RX_SRC={mutant}", f"FUZZ_VNET_DEV_OUT={binary}", binary], cwd=TOP,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise Fail(f"building the mutant failed: {(r.stdout + r.stderr)[-1500:]}")
    regress = os.path.join(TOP, "tests", "fuzz", "regress", "fuzz_vnet_dev")
    names = sorted(os.listdir(regress))
    broke = []
    for name in names:
        r = subprocess.run([binary, "-runs=1", os.path.join(regress, name)], capture_output=True, text=True, timeout=60)
        if r.returncode and "invariant broken" in r.stderr:
            broke.append(name)
    # Each input starts rewriting after a different number of driver reads;
    # which one lands between the check and the second fetch depends on how
    # the compiler laid the reads out, so at least one must.
    if not broke:
        raise Fail(f"none of the {len(names)} regression inputs breaks an invariant with the header fetched twice")
    print(f"    {len(broke)} of {len(names)} regression inputs break fuzz_vnet_dev's invariant with the header "
          f"fetched twice ({', '.join(broke)})")
