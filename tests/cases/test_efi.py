"""UEFI boot under OVMF: the disk image from `make image`, and the two ways
the EFI front-end gets a command line (\\EFI\\BOOT\\CMDLINE.TXT on the
image, and the load options the UEFI Shell passes)."""

import os
import subprocess
import tempfile

from lib import BUILD, TOP, Fail

IMAGE = os.path.join(BUILD, "vnetlab.img")
EFI_APP = os.path.join(BUILD, "BOOTX64.EFI")
MKIMAGE = os.path.join(TOP, "host", "mkimage.sh")

# OVMF alone needs ~3.5 s under TCG to reach the application; the Shell
# case adds its 5 s startup.nsh countdown. Generous, but bounded.
TIMEOUT = 60

# host/mkimage.sh starts the EFI System Partition at sector 2048.
ESP = "@@1048576"


def mkimage(dirname, cmdline):
    img = os.path.join(dirname, "vnetlab.img")
    r = subprocess.run(["bash", MKIMAGE, img, EFI_APP, cmdline], capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise Fail(f"host/mkimage.sh failed ({r.returncode}): {r.stderr.strip()}")
    return img


def mtools(*argv):
    env = dict(os.environ, MTOOLS_SKIP_CHECK="1")
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, env=env)
    if r.returncode:
        raise Fail(f"{' '.join(argv)} failed: {r.stderr.strip()}")


def expect_bogus_rejected(g, cmdline):
    b = g.banner()
    if b["boot"] != "efi" or b["cmdline"] != f'"{cmdline}"':
        raise Fail(f'expected boot=efi cmdline="{cmdline}", banner says boot={b["boot"]} cmdline={b["cmdline"]}')
    g.expect(r'^ERROR \{"where":"cmdline","msg":"unknown key \'bogus\'"')
    g.expect_not(r"^vnetlab ready")
    g.expect_status(2)


def test_efi_image_boots(t):
    if not os.path.exists(IMAGE):
        raise Fail(f"{IMAGE} missing: the runner builds it with `make image`")
    g = t.boot(image=IMAGE, timeout=TIMEOUT)
    g.expect_ok()
    efi = g.banner()
    if efi["boot"] != "efi":
        raise Fail(f"expected boot=efi, banner says boot={efi['boot']}")
    # Same kernel, other front-end: the banner must carry the same fields.
    pvh = t.boot()
    pvh.expect_ok()
    if set(efi) != set(pvh.banner()):
        raise Fail(f"EFI banner fields {sorted(efi)} differ from PVH's {sorted(pvh.banner())}")
    # The memory map conversion: -m 512 minus what OVMF keeps (~45 MiB of
    # boot/runtime services, ACPI and our own image) must remain as RAM.
    if not 400 <= int(efi["mem_mib"]) <= 512:
        raise Fail(f"expected mem_mib in 400..512 for -m 512, banner says {efi['mem_mib']}")
    g.expect(r"^pci [0-9a-f]{2}:[0-9a-f]{2}\.\d 1af4:1041 class=020000$")


def test_efi_cmdline_file(t):
    # OVMF boots the removable path with no text load options, so the
    # command line comes from \EFI\BOOT\CMDLINE.TXT.
    with tempfile.TemporaryDirectory() as d:
        g = t.boot(image=mkimage(d, "halt=0 bogus=1"), timeout=TIMEOUT)
    expect_bogus_rejected(g, "halt=0 bogus=1")


def test_efi_cmdline_shell_load_options(t):
    # No \EFI\BOOT\BOOTX64.EFI: OVMF falls back to its built-in UEFI Shell,
    # whose startup.nsh runs the application with arguments. The Shell
    # passes the whole line, image path first, as UCS-2 load options; the
    # front-end must drop the path and normalise the spacing. No NIC, so
    # OVMF has no network boot option to try (and time out on) first.
    with tempfile.TemporaryDirectory() as d:
        img = mkimage(d, "")
        nsh = os.path.join(d, "startup.nsh")
        with open(nsh, "w") as f:
            f.write("fs0:\\VNETLAB.EFI   halt=0  bogus=1\r\n")
        mtools("mdel", "-i", img + ESP, "::/EFI/BOOT/BOOTX64.EFI", "::/EFI/BOOT/CMDLINE.TXT")
        mtools("mcopy", "-i", img + ESP, EFI_APP, "::/VNETLAB.EFI")
        mtools("mcopy", "-i", img + ESP, nsh, "::/startup.nsh")
        g = t.boot(image=img, net="none", timeout=TIMEOUT)
    expect_bogus_rejected(g, "halt=0 bogus=1")
