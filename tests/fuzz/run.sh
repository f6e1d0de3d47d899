#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS BINARY...: run each libFuzzer target for SECONDS
# (hard-bounded) on a scratch copy of its seed corpus plus its regression
# inputs (tests/fuzz/regress/<target>/, every crash ever found), then print
# one line per target: executions, coverage (edges), corpus size, crashes.
# A crash leaves its input in build/fuzz/crashes/<target>/ (add it to
# tests/fuzz/regress/<target>/ once fixed) and makes the exit status 1.
set -u
secs=$1
shift
top=$(cd "$(dirname "$0")/../.." && pwd)
failed=0
for bin in "$@"; do
	name=$(basename "$bin")
	work=$(dirname "$bin")/work/$name
	crashes=$(dirname "$bin")/crashes/$name
	rm -rf "$work"
	mkdir -p "$work" "$crashes"
	cp "$top"/tests/fuzz/corpus/"$name"/* "$work"/ 2>/dev/null || true
	regress=("$top"/tests/fuzz/regress/"$name"/*)
	status=0
	# Regression inputs first, each must run clean.
	if [ -e "${regress[0]}" ]; then
		"$bin" -runs=0 "${regress[@]}" >"$work.regress.log" 2>&1 || status=$?
		if [ "$status" != 0 ]; then
			echo "fuzz FAIL $name: a regression input crashes again (log: $work.regress.log)"
			grep -E 'ERROR|invariant|runtime error|SUMMARY' "$work.regress.log" | head -5 | sed 's/^/    /'
			failed=$((failed + 1))
			continue
		fi
	fi
	log=$work.log
	touch "$log.start"
	timeout --kill-after=10 $((secs + 60)) "$bin" -max_total_time="$secs" -max_len=4096 -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/" "$work" >"$log" 2>&1 ||
		status=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
	ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
	corp=$(grep -oE 'corp: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
	ncrash=$(find "$crashes" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) -newer "$log.start" 2>/dev/null | wc -l)
	if [ "$status" != 0 ]; then
		ncrash=$((ncrash > 0 ? ncrash : 1))
	fi
	echo "fuzz $([ "$ncrash" = 0 ] && echo ok || echo FAIL) $name: ${secs} s, executions=${execs:-?} (${rate:-?}/s), coverage=${cov:-?} edges, features=${ft:-?}, corpus=${corp:-?}, crashes=$ncrash"
	if [ "$ncrash" != 0 ]; then
		failed=$((failed + 1))
		grep -E 'ERROR|invariant|runtime error|SUMMARY|Test unit written' "$log" | head -8 | sed 's/^/    /'
		echo "    (full log: $log)"
	fi
done
[ "$failed" = 0 ]
