#!/usr/bin/env bash
# boot/efi/efi-sections.sh SO KEPT...: check the ELF shared object SO before
# objcopy turns it into an EFI application keeping only the sections KEPT
# (shell patterns). Fails if an allocated, non-empty section would be
# dropped, unless it is one only an ELF dynamic loader or debugger reads:
# .hash/.gnu.hash/.dynstr (symbol lookup; GNU-EFI's _relocate uses none),
# .eh_frame (unwinding; we never unwind) and .note.* (build id).
#
# Why: GNU-EFI's linker script collects .text*, .rodata*, .data*, .got and
# .bss, but not e.g. .bss.* or .init_array. Such a section lands in the ELF
# as an orphan, objcopy drops it silently, and the kernel would then run
# with that code or data missing.
set -euo pipefail

[ $# -ge 2 ] || {
	echo "usage: $0 SO KEPT-SECTION..." >&2
	exit 2
}
so=$1
shift

bad=0
# objdump -hw: "Idx Name Size VMA LMA File-off Align Flags", one per line.
while read -r name size flags; do
	case "$flags" in *ALLOC*) ;; *) continue ;; esac
	[ $((16#$size)) -eq 0 ] && continue
	keep=0
	for pat in "$@" .hash .gnu.hash .dynstr .eh_frame '.note.*'; do
		# shellcheck disable=SC2053 # $pat is a pattern on purpose
		if [[ $name == $pat ]]; then
			keep=1
			break
		fi
	done
	if [ $keep = 0 ]; then
		echo "efi-sections: $so: allocated section $name (0x$size bytes) would be dropped" \
			"from the EFI image; collect it in a kept section" >&2
		bad=1
	fi
done < <(objdump -hw "$so" | awk '$1 ~ /^[0-9]+$/ { f = ""; for (i = 8; i <= NF; i++) f = f $i; print $2, $3, f }')
exit $bad
