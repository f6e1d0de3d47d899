#!/usr/bin/env bash
# host/mkimage.sh OUT.img BOOTX64.EFI "CMDLINE": build a UEFI-bootable disk
# image, without root and without loop devices.
#
# Layout: a GPT disk (VNETLAB_IMG_MIB MiB, default 64) with one EFI System
# Partition from 1 MiB to the end, formatted FAT32, holding
#   \EFI\BOOT\BOOTX64.EFI  the removable-media boot path, which firmware
#                          boots from a disk that has no boot entry of its
#                          own (UEFI 2.10 section 3.5.1.1), so a fresh OVMF
#                          boots it unattended
#   \EFI\BOOT\CMDLINE.TXT  the appliance command line (one line), read by
#                          boot/efi when the firmware passes no load options
#
# sgdisk writes the GPT into the image file; mtools formats and fills the
# partition in place through "IMAGE@@OFFSET". The image is written to a
# temporary file and renamed, so OUT is either complete or untouched.
set -euo pipefail

die() {
	echo "mkimage: error: $*" >&2
	exit 1
}

[ $# -eq 3 ] || die "usage: $0 OUT.img BOOTX64.EFI \"CMDLINE\""
out=$1
efi=$2
cmdline=$3
size_mib=${VNETLAB_IMG_MIB:-64}

for tool in sgdisk mformat mmd mcopy; do
	command -v "$tool" >/dev/null ||
		die "$tool not found (Debian packages gdisk and mtools; run host/deps.sh)"
done
[ -f "$efi" ] || die "EFI application $efi does not exist (run make efi)"
# Same limits boot/efi enforces at boot (BOOT_CMDLINE_MAX in
# kernel/boot_info.h, printable ASCII), reported here at build time.
[ ${#cmdline} -lt 1024 ] || die "command line is ${#cmdline} bytes; at most 1023 fit"
LC_ALL=C
case "$cmdline" in *[![:print:]]*) die "command line has a non-printable character" ;; esac
# FAT32 needs at least 65525 clusters; mformat picks 1-sector clusters on
# small disks, so 34 MiB is the floor with room for the GPT.
if ! [[ $size_mib =~ ^[0-9]+$ ]] || [ "$size_mib" -lt 34 ]; then
	die "VNETLAB_IMG_MIB=$size_mib: need a whole number of MiB, at least 34"
fi

mkdir -p "$(dirname "$out")"
tmp=$(mktemp "$out.XXXXXX")
txt=$(mktemp)
trap 'rm -f "$tmp" "$txt"' EXIT

truncate -s "${size_mib}M" "$tmp" || die "cannot create $tmp"
# Partition 1: from sector 2048 (1 MiB, aligned for any erase block) to the
# last usable sector; type EF00 is the EFI System Partition.
sgdisk --clear --new=1:2048:0 --typecode=1:EF00 --change-name=1:"EFI system partition" \
	"$tmp" >/dev/null || die "sgdisk could not partition $tmp"
read -r first last < <(sgdisk --info=1 "$tmp" |
	awk '/^First sector:/ { f = $3 } /^Last sector:/ { l = $3 } END { print f, l }')
if [ -z "${first:-}" ] || [ -z "${last:-}" ]; then
	die "sgdisk did not report partition 1 of $tmp"
fi

# mtools addresses the partition by byte offset; -T gives its size in
# sectors, which mtools cannot learn from an offset alone, and -H records
# the sectors before it in the boot sector, as a partitioned FAT should.
fat="$tmp@@$((first * 512))"
export MTOOLS_SKIP_CHECK=1
mformat -i "$fat" -F -T $((last - first + 1)) -H "$first" -v VNETLAB :: || die "mformat failed on $fat"
mmd -i "$fat" ::/EFI ::/EFI/BOOT || die "mmd failed on $fat"
mcopy -i "$fat" "$efi" ::/EFI/BOOT/BOOTX64.EFI || die "mcopy of $efi failed"
printf '%s\n' "$cmdline" >"$txt"
mcopy -i "$fat" "$txt" ::/EFI/BOOT/CMDLINE.TXT || die "mcopy of CMDLINE.TXT failed"

chmod a+r "$tmp" # mktemp made it private
mv "$tmp" "$out"
