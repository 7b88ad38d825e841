#!/usr/bin/env bash
# Cost of the call-site profile: each workload runs under mmfold (safe mode)
# without and with MMFOLD_PROFILE=10, alternating (off, on, off, on, ...),
# BENCH_REPS times each (default 5).  Prints the median, min and max wall
# time of both and the ratio of the medians.
#
# usage: tools/bench_profile.sh
# env:   MMFOLD_LIB  absolute path of libmmfold.so (default build/libmmfold.so)
#        BUILD       output directory (default build/bench_profile)
#        BENCH_REPS  repetitions per configuration (default 5, minimum 5)
# Workloads: demo_gc (tools/demo_gc.c) and boehm_inc (tests/clients), libgc
# in incremental mode; luajit_traces.lua (tests/clients), when installed.
set -euo pipefail

# shellcheck source=tools/bench_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_env.sh"
REPS=${BENCH_REPS:-5}
((REPS >= 5)) || REPS=5

WL=()
if echo '#include <gc.h>' | $CC -E -x c - >/dev/null 2>&1; then
	$CC -O2 -o "$BUILD/demo_gc" "$ROOT/tools/demo_gc.c" -lgc
	$CC -O2 -o "$BUILD/boehm_inc" "$ROOT/tests/clients/boehm_inc.c" -lgc
	WL+=("demo_gc|$BUILD/demo_gc" "boehm_inc|$BUILD/boehm_inc")
else
	echo "SKIP boehm: libgc-dev (gc.h) not installed"
fi
if command -v luajit >/dev/null; then
	WL+=("luajit|$(command -v luajit) $ROOT/tests/clients/luajit_traces.lua")
else
	echo "SKIP luajit: not installed"
fi

run_once() { # profile cmd...
	local prof=$1 t0 t1
	shift
	t0=$(now)
	env "${CLEAN_ENV[@]}" LD_PRELOAD="$MMFOLD_LIB" MMFOLD_PROFILE="$prof" "$@" >/dev/null
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}
echo "call-site profile cost: MMFOLD_PROFILE=0 vs 10, both LD_PRELOAD=$MMFOLD_LIB (safe mode)"
echo "  $(nproc) CPU(s), $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg); $REPS rounds, alternating"
printf '%-10s %-26s %-26s %s\n' workload "off: median (min-max) s" "on: median (min-max) s" "on/off"
for w in "${WL[@]}"; do
	name=${w%%|*}
	read -r -a cmd <<<"${w#*|}"
	: >"$BUILD/$name.0"
	: >"$BUILD/$name.10"
	run_once 0 "${cmd[@]}" >/dev/null # warm-up (page cache, libraries)
	for ((i = 0; i < REPS; i++)); do
		run_once 0 "${cmd[@]}" >>"$BUILD/$name.0"
		run_once 10 "${cmd[@]}" >>"$BUILD/$name.10"
	done
	read -r m0 a0 b0 <<<"$(summary "$BUILD/$name.0")"
	read -r m1 a1 b1 <<<"$(summary "$BUILD/$name.10")"
	printf '%-10s %-26s %-26s %s\n' "$name" "$m0 ($a0-$b0)" "$m1 ($a1-$b1)" \
		"$(awk -v a="$m1" -v b="$m0" 'BEGIN { printf "%.3f", a / b }')"
done
