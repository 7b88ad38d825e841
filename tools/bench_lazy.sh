#!/bin/bash
# Lazy mode and the batch API against plain calls, with and without mmfold
# in one run (configurations alternating, BENCH_REPS rounds, default 5).
#
#   MMFOLD_LIB=build/libmmfold.so BUILD=build/bench_lazy tools/bench_lazy.sh
#
# Configurations: none (no LD_PRELOAD), safe, lazy (MMFOLD_MODE=lazy).
# Workloads (tools/bench/lazy_loops.c, tools/bench/batch_calls.c):
#   flip        1 GiB touched, mprotect R then RW 40 times, no access between
#   fliptouch   the same, one byte per 64 KiB written after each RW
#   flip4k      flip with MMFOLD_THP=off (4 KiB pages: mmfold's huge-page
#               advice out of the picture)
#   mlock       mlock/munlock 64 MiB, 500 times (root)
#   promote1/2  one page R -> RW and a write, 20000 times, 1 or 2 threads
#   dontneed1/2 64 one-page MADV_DONTNEED: plain (none) vs the batch API
#               (safe), 1 or 2 threads
# Prints median (min-max) per configuration and the ratios to none.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build/bench_lazy}
REPS=${BENCH_REPS:-5}
CC=${CC:-gcc}
: "${MMFOLD_LIB:?set MMFOLD_LIB to libmmfold.so}"
case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
mkdir -p "$BUILD"
$CC -O2 -g -o "$BUILD/lazy_loops" "$ROOT/tools/bench/lazy_loops.c" -pthread || exit 1
$CC -O2 -g -o "$BUILD/batch_calls" "$ROOT/tools/bench/batch_calls.c" -pthread || exit 1

# A clean environment: nothing of mmfold's, no preload.
CLEAN=()
while IFS='=' read -r k _; do
	case $k in MMFOLD_* | LD_PRELOAD) CLEAN+=(-u "$k") ;; esac
done < <(env)

# name | configs | command
W=(
	"flip|none safe lazy|lazy_loops flip 1024 40"
	"fliptouch|none safe lazy|lazy_loops fliptouch 1024 40"
	"flip4k|none safe lazy|lazy_loops flip 256 40"
	"mlock|none safe lazy|lazy_loops mlock 64 500"
	"promote1|none safe lazy|lazy_loops promote 1"
	"promote2|none safe lazy|lazy_loops promote 2"
	"dontneed1|none safe|batch_calls dontneed 1 2000"
	"dontneed2|none safe|batch_calls dontneed 2 2000"
)
declare -A VALS
for ((r = 1; r <= REPS; r++)); do
	for w in "${W[@]}"; do
		IFS='|' read -r name cfgs cmd <<<"$w"
		for c in $cfgs; do
			e=()
			[ "$c" != none ] && e=(LD_PRELOAD="$MMFOLD_LIB" MMFOLD_MODE="$c")
			[ "$name" = flip4k ] && [ "$c" != none ] && e+=(MMFOLD_THP=off)
			# shellcheck disable=SC2086
			v=$(env "${CLEAN[@]}" "${e[@]}" "$BUILD"/$cmd | awk '{print $1}')
			VALS[$name.$c]+="$v "
		done
	done
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.4g (%.4g-%.4g)", m, v[1], v[NR]}'; }
medv() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; print m}'; }
echo "bench_lazy: $REPS alternating rounds, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
echo "| workload | unit | none | safe | lazy | none/safe | none/lazy | safe/lazy |"
echo "|---|---|---|---|---|---|---|---|"
for w in "${W[@]}"; do
	IFS='|' read -r name cfgs cmd <<<"$w"
	unit="ms"; [[ $name == dontneed* ]] && unit="ns/64 calls"
	n=$(echo "${VALS[$name.none]}" | med); nm=$(echo "${VALS[$name.none]}" | medv)
	s=$(echo "${VALS[$name.safe]}" | med); sm=$(echo "${VALS[$name.safe]}" | medv)
	l="-"; lm=""
	[ -n "${VALS[$name.lazy]:-}" ] && { l=$(echo "${VALS[$name.lazy]}" | med); lm=$(echo "${VALS[$name.lazy]}" | medv); }
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.3gx", a / b; else printf "-" }'; }
	echo "| $name (\`$cmd\`) | $unit | $n | $s | $l | $(ratio "$nm" "$sm") | $(ratio "$nm" "$lm") | $(ratio "$sm" "$lm") |"
done
