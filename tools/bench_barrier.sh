#!/bin/bash
# Write barriers through userfaultfd (MMFOLD_BARRIER=uffd) against plain
# mprotect, on Boehm GC programs in incremental mode: configurations none
# (no LD_PRELOAD), safe, uffd (safe + MMFOLD_BARRIER=uffd) alternating,
# BENCH_REPS rounds (default 7).
#
#   MMFOLD_LIB=build/libmmfold.so BUILD=build/bench_barrier tools/bench_barrier.sh
#
# Workloads:
#   boehm_inc  tests/clients/boehm_inc.c (Debian's libgc)
#   demo       tools/demo_gc.c (make demo's program: alternating pointer-
#              bearing and pointer-free blocks), 4000 records, 300 rounds
#   blocks     the same with 25000 records, 60 rounds: many live blocks,
#              tens of thousands of VMAs under plain mprotect
#   (limit)    once, 40000 records: plain mprotect reaches vm.max_map_count
#              (libgc aborts: "mprotect vdb failed", ENOMEM); the exit
#              status of none and uffd is printed
#   gctest     bdwgc's gctest with GC_ENABLE_INCREMENTAL=1, when BDWGC_BUILD
#              (default /tmp/bdwgc/b) holds one built by hand (bdwgc's code
#              is never part of this repository)
# Per run: wall, user + system and system seconds (GNU time) and the
# largest number of VMAs the process had (/proc/PID/maps sampled every
# 20 ms).  Every output is compared with the run without mmfold (gctest's
# counts depend on its threads' timing: its last line only).  Prints median
# (min-max).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build/bench_barrier}
REPS=${BENCH_REPS:-7}
CC=${CC:-gcc}
BDWGC_BUILD=${BDWGC_BUILD:-/tmp/bdwgc/b}
: "${MMFOLD_LIB:?set MMFOLD_LIB to libmmfold.so}"
case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
mkdir -p "$BUILD"
$CC -O2 -o "$BUILD/boehm_inc" "$ROOT/tests/clients/boehm_inc.c" -lgc || exit 1
$CC -O2 -o "$BUILD/demo_gc" "$ROOT/tools/demo_gc.c" -lgc || exit 1
[ -x /usr/bin/time ] || { echo "bench_barrier: needs GNU time (/usr/bin/time)"; exit 77; }

CLEAN=()
while IFS='=' read -r k _; do
	case $k in MMFOLD_* | LD_PRELOAD | GC_*) CLEAN+=(-u "$k") ;; esac
done < <(env)

# name | extra environment | command
W=(
	"boehm_inc||$BUILD/boehm_inc"
	"demo||$BUILD/demo_gc 4000 300"
	"blocks||$BUILD/demo_gc 25000 60"
)
if [ -x "$BDWGC_BUILD/gctest" ]; then
	W+=("gctest|GC_ENABLE_INCREMENTAL=1|$BDWGC_BUILD/gctest")
else
	echo "bench_barrier: no $BDWGC_BUILD/gctest: gctest left out"
fi
CONFIGS="none safe uffd"

# one NAME CONFIG ENV CMD...: prints "wall cpu sys maxvmas"; output in
# $BUILD/NAME.CONFIG.out
one() {
	local name=$1 c=$2 extra=$3
	shift 3
	local e=()
	[ "$c" != none ] && e=(LD_PRELOAD="$MMFOLD_LIB" MMFOLD_MODE=safe)
	[ "$c" = uffd ] && e+=(MMFOLD_BARRIER=uffd)
	[ -n "$extra" ] && e+=("$extra")
	local tf=$BUILD/$name.$c.time
	/usr/bin/time -f "%e %U %S" -o "$tf" env "${CLEAN[@]}" "${e[@]}" "$@" >"$BUILD/$name.$c.out" 2>&1 &
	local tp=$! max=0 n kid
	while kill -0 "$tp" 2>/dev/null; do
		kid=$(pgrep -P "$tp" | head -1)
		if [ -n "$kid" ] && n=$({ wc -l <"/proc/$kid/maps"; } 2>/dev/null); then
			[ "$n" -gt "$max" ] && max=$n
		fi
		sleep 0.02
	done
	wait "$tp"
	local wall user sys
	read -r wall user sys < <(tail -1 "$tf")
	echo "$wall $(awk -v a="$user" -v b="$sys" 'BEGIN {print a + b}') $sys $max"
}

declare -A WALL CPU SYS VMA
for ((r = 1; r <= REPS; r++)); do
	for w in "${W[@]}"; do
		IFS='|' read -r name extra cmd <<<"$w"
		for c in $CONFIGS; do
			# shellcheck disable=SC2086
			read -r wall cpu sys vmas < <(one "$name" "$c" "$extra" $cmd)
			WALL[$name.$c]+="$wall "
			CPU[$name.$c]+="$cpu "
			SYS[$name.$c]+="$sys "
			VMA[$name.$c]+="$vmas "
			local_a=$BUILD/$name.none.out local_b=$BUILD/$name.$c.out
			if [ "$name" = gctest ]; then
				tail -1 "$local_a" >"$local_a.last"
				tail -1 "$local_b" >"$local_b.last"
				local_a=$local_a.last local_b=$local_b.last
			fi
			if [ "$c" != none ] && ! cmp -s "$local_a" "$local_b"; then
				echo "bench_barrier: $name in $c printed something else than without mmfold ($BUILD/$name.$c.out)"
			fi
		done
	done
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.3g (%.3g-%.3g)", m, v[1], v[NR]}'; }
medi() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%d (%d-%d)", m, v[1], v[NR]}'; }
echo "bench_barrier: $REPS alternating rounds, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
echo "| workload | configuration | wall s | user + system s | system s | most VMAs |"
echo "|---|---|---:|---:|---:|---:|"
for w in "${W[@]}"; do
	IFS='|' read -r name extra cmd <<<"$w"
	for c in $CONFIGS; do
		echo "| $name | $c | $(echo "${WALL[$name.$c]}" | med) | $(echo "${CPU[$name.$c]}" | med) | $(echo "${SYS[$name.$c]}" | med) | $(echo "${VMA[$name.$c]}" | medi) |"
	done
done
for c in none uffd; do
	read -r wall cpu sys vmas < <(one limit "$c" "" "$BUILD/demo_gc" 40000 60)
	echo "limit (demo_gc 40000 60), $c: $(tail -1 "$BUILD/limit.$c.out"), most VMAs $vmas, wall $wall s"
done
