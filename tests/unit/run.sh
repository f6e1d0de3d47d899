#!/usr/bin/env bash
# tests/unit/run.sh TIMEOUT BINARY...: run each unit-test binary with a hard
# timeout, print its verdict line, and on failure what it expected and saw.
# Exit status 1 if any binary failed, crashed or hung.
set -u
tmo=$1
shift
failed=0
for bin in "$@"; do
	log=$bin.log
	status=0
	timeout --kill-after=5 "$tmo" "$bin" >"$log" 2>&1 || status=$?
	name=${bin#*/unit/}
	name=${name%/test_vnet}
	summary=$(grep -E '^(test_(virtq|vnet|virtio_pci|virtio_mmio|offload|pci|paging|rx_contract)|mc_unit).*checks' "$log" | tail -1)
	if [ "$status" = 0 ]; then
		echo "unit ok   $name: ${summary#*: }"
		continue
	fi
	failed=$((failed + 1))
	case $status in
	124 | 137) why="hung: killed after ${tmo}s" ;;
	1) why="checks failed" ;;
	*) why="exit status $status (crash or sanitizer report)" ;;
	esac
	echo "unit FAIL $name: $why${summary:+ (${summary#*: })}"
	grep -E '^FAIL |ERROR|runtime error|AddressSanitizer|SUMMARY' "$log" | head -20 | sed 's/^/    /'
	echo "    (full log: $log)"
done
echo "unit: $# binaries, $failed failed"
[ "$failed" = 0 ]
