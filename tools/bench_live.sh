#!/usr/bin/env bash
# Cost of live statistics: each workload runs under mmfold (safe mode)
# without and with MMFOLD_LIVE=1.
#  1. instructions (callgrind, the whole process, deterministic): one run
#     each of a shorter workload;
#  2. wall time, alternating (0, 1, 0, 1, ...), BENCH_REPS rounds each
#     (default 9, at least 5): median, min and max, ratio of the medians.
#
# usage: tools/bench_live.sh   (make bench-live)
# env:   MMFOLD_LIB  absolute path of libmmfold.so (default build/libmmfold.so)
#        BUILD       output directory (default build/bench_live)
#        BENCH_REPS  wall-time rounds per configuration
# Workloads: demo_gc (tools/demo_gc.c, the demo's Boehm-GC program: about
# 250,000 mprotect calls at its default size) and boehm_inc (tests/clients).
set -euo pipefail

# shellcheck source=tools/bench_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_env.sh"
REPS=${BENCH_REPS:-9}
((REPS >= 5)) || REPS=5

if ! echo '#include <gc.h>' | $CC -E -x c - >/dev/null 2>&1; then
	echo "SKIP: libgc-dev (gc.h) is not installed (make deps-clients)"
	exit 0
fi
$CC -O2 -o "$BUILD/demo_gc" "$ROOT/tools/demo_gc.c" -lgc
$CC -O2 -o "$BUILD/boehm_inc" "$ROOT/tests/clients/boehm_inc.c" -lgc
# name|wall-time command|callgrind command (none: boehm_inc uses the
# kernel's soft-dirty bits, which valgrind does not emulate)
WL=("demo_gc|$BUILD/demo_gc|$BUILD/demo_gc 2000 40" "boehm_inc|$BUILD/boehm_inc|")

run() { # live cmd...
	local live=$1
	shift
	env "${CLEAN_ENV[@]}" LD_PRELOAD="$MMFOLD_LIB" MMFOLD_LIVE="$live" "$@"
}
echo "MMFOLD_LIVE cost: MMFOLD_LIVE=0 vs 1, both LD_PRELOAD=$MMFOLD_LIB (safe mode)"
echo "  $(nproc) CPU(s), $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg)"
if command -v valgrind >/dev/null; then
	echo "instructions (valgrind --tool=callgrind, whole process, one run each):"
	printf '  %-10s %-22s %16s %16s %9s\n' workload command "LIVE=0" "LIVE=1" "1/0"
	for w in "${WL[@]}"; do
		IFS='|' read -r name _ cg <<<"$w"
		[[ -n $cg ]] || continue
		read -r -a cmd <<<"$cg"
		for live in 0 1; do
			run "$live" valgrind --tool=callgrind --callgrind-out-file="$BUILD/$name.cg.$live" \
				"${cmd[@]}" >/dev/null 2>"$BUILD/$name.cg.$live.log"
			grep -o 'Collected : [0-9]*' "$BUILD/$name.cg.$live.log" | awk '{print $3}' >"$BUILD/$name.ir.$live"
		done
		i0=$(cat "$BUILD/$name.ir.0") i1=$(cat "$BUILD/$name.ir.1")
		printf '  %-10s %-22s %16s %16s %9s\n' "$name" "$(basename "${cmd[0]}") ${cmd[*]:1}" "$i0" "$i1" \
			"$(awk -v a="$i1" -v b="$i0" 'BEGIN { printf "%.5f", a / b }')"
		# the call path: instructions in the interposed mprotect and mmf_run
		for f in "preload/mman.c:mprotect " "src/engine.c:mmf_run " "src/stats.h:mmf_run"; do
			c0=$(callgrind_annotate "$BUILD/$name.cg.0" 2>/dev/null | grep -F "$f" | awk '{print $1}' | head -1)
			c1=$(callgrind_annotate "$BUILD/$name.cg.1" 2>/dev/null | grep -F "$f" | awk '{print $1}' | head -1)
			printf '  %-10s   in %-26s %16s %16s\n' "" "$f" "${c0:-?}" "${c1:-?}"
		done
	done
else
	echo "SKIP instructions: valgrind is not installed"
fi
echo "wall time ($REPS rounds, alternating LIVE=0, LIVE=1; one warm-up run first):"
printf '  %-10s %-26s %-26s %s\n' workload "LIVE=0: median (min-max) s" "LIVE=1: median (min-max) s" "1/0"
for w in "${WL[@]}"; do
	IFS='|' read -r name wall _ <<<"$w"
	read -r -a cmd <<<"$wall"
	: >"$BUILD/$name.t0"
	: >"$BUILD/$name.t1"
	run 0 "${cmd[@]}" >/dev/null
	for ((i = 0; i < REPS; i++)); do
		for live in 0 1; do
			t0=$(now)
			run "$live" "${cmd[@]}" >/dev/null
			t1=$(now)
			awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }' >>"$BUILD/$name.t$live"
		done
	done
	read -r m0 a0 b0 <<<"$(summary "$BUILD/$name.t0")"
	read -r m1 a1 b1 <<<"$(summary "$BUILD/$name.t1")"
	printf '  %-10s %-26s %-26s %s\n' "$name" "$m0 ($a0-$b0)" "$m1 ($a1-$b1)" \
		"$(awk -v a="$m1" -v b="$m0" 'BEGIN { printf "%.3f", a / b }')"
done
