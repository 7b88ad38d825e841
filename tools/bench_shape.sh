#!/usr/bin/env bash
# mmfold range-shaping benchmark: the call patterns of tools/bench/shape.c
# with and without shaping, with 4 KiB pages, 64 KiB mTHP and PMD THP.
#
# Configurations, alternating in every round (none, off, auto, forced, ...):
#   none    no LD_PRELOAD, no MMFOLD_* variable
#   off     LD_PRELOAD=$MMFOLD_LIB MMFOLD_SHAPE=off (safe mode, no shaping)
#   auto    LD_PRELOAD=$MMFOLD_LIB MMFOLD_SHAPE=auto (the cost model decides)
#   forced  MMFOLD_SHAPE=trim (prefix, split, asis) or widen (widen)
# Each cell is the median (min-max) of ns per iteration over the rounds.
# Kernel calls per iteration come from MMFOLD_STATS (mprotect forwarded).
# "model" checks the cost model against the figures: where auto shaped,
# its median must not be above off's ("SLOWER" otherwise); where forced was
# faster in every round than off in every round and auto did not shape
# (forced did), the row says "missed".
#
# Memory: 4k = MADV_NOHUGEPAGE; 64k = hugepages-64kB/enabled set to always
# for the run (root; restored on exit, also on errors and signals); 2m =
# MADV_HUGEPAGE with 2 MiB chunks.  Not pre-warmed beyond the program's own
# touch of its memory before the timed loop.
#
# usage: tools/bench_shape.sh
# env:   MMFOLD_LIB  absolute path of libmmfold.so (default build/libmmfold.so)
#        BUILD       output directory (default build/bench_shape); report in
#                    $BUILD/bench_shape.md, raw figures in $BUILD/raw
#        BENCH_REPS  rounds (default 5)
#        BENCH_ITERS iterations per run (default 10000)
#        BENCH_MEM   memory kinds (default "4k 64k 2m")
#        BENCH_PATTERNS  pattern:K words (default: all of the table)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIB=${MMFOLD_LIB:-$ROOT/build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/bench_shape}
REPS=${BENCH_REPS:-5}
ITERS=${BENCH_ITERS:-10000}
MEMS=${BENCH_MEM:-4k 64k 2m}
# The baseline must not see the library or its variables.
for v in $(env | sed -n 's/^\(MMFOLD_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_PRELOAD
[ -f "$LIB" ] || { echo "bench_shape: no library at $LIB (make first)" >&2; exit 1; }
mkdir -p "$BUILD/raw"
rm -f "$BUILD"/raw/*
gcc -O2 -Wall -Wextra -Werror -o "$BUILD/shape" "$ROOT/tools/bench/shape.c" || exit 1

SYS64=/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled
saved64=""
if [ -w "$SYS64" ]; then
	saved64=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$SYS64")
fi
restore() { [ -n "$saved64" ] && echo "$saved64" >"$SYS64" 2>/dev/null; }
trap restore EXIT
trap 'exit 130' INT TERM

read -ra PATTERNS <<<"${BENCH_PATTERNS:-prefix:1 prefix:8 prefix:16 prefix:64 split:1 split:64 split:128 widen:0 asis:1 asis:16}"
PATTERNS=("${PATTERNS[@]/:/ }")
CONFIGS=(none off auto forced)

# run MEM PATTERN K CONFIG ROUND: appends "ns calls shaped" to a raw file.
run1() {
	local mem=$1 pat=$2 k=$3 cfg=$4 st=$BUILD/raw/stats.json
	local forced=trim
	[ "$pat" = widen ] && forced=widen
	local envs=()
	case $cfg in
	none) envs=() ;;
	off) envs=(LD_PRELOAD="$LIB" MMFOLD_SHAPE=off) ;;
	auto) envs=(LD_PRELOAD="$LIB" MMFOLD_SHAPE=auto) ;;
	forced) envs=(LD_PRELOAD="$LIB" MMFOLD_SHAPE=$forced) ;;
	esac
	rm -f "$st"
	[ "$cfg" != none ] && envs+=(MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json MMFOLD_STATS_FILE="$st")
	local out ns calls=- shaped=-
	out=$(env "${envs[@]}" "$BUILD/shape" "$pat" "$k" "$mem" "$ITERS") || { echo "run failed: $mem $pat $k $cfg" >&2; return 1; }
	ns=${out%% *}
	if [ -s "$st" ]; then
		calls=$(grep -o '"mprotect":{[^}]*}' "$st" | grep -o '"forwarded":[0-9]*' | cut -d: -f2)
		shaped=$(grep -o '"shaped_\(trimmed\|widened\)":[0-9]*' "$st" | cut -d: -f2 | awk '{s+=$1} END {print s+0}')
	fi
	echo "$ns $calls $shaped" >>"$BUILD/raw/$mem.$pat.$k.$cfg"
}

for mem in $MEMS; do
	if [ "$mem" = 64k ]; then
		[ -n "$saved64" ] || { echo "bench_shape: cannot write $SYS64 (root needed): skipping 64k" >&2; continue; }
		echo always >"$SYS64"
	elif [ -n "$saved64" ]; then
		echo never >"$SYS64"
	fi
	for ((r = 1; r <= REPS; r++)); do
		for p in "${PATTERNS[@]}"; do
			read -r pat k <<<"$p"
			for cfg in "${CONFIGS[@]}"; do
				run1 "$mem" "$pat" "$k" "$cfg" || exit 1
			done
		done
	done
	restore
done

# stat FILE: "median min max" of column 1
stat() { sort -g "$1" | awk '{v[NR]=$1} END {printf "%s %s %s", (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2), v[1], v[NR]}'; }
cell() { printf "%.0f (%.0f–%.0f)" $1 $2 $3; }

rep=$BUILD/bench_shape.md
{
	echo "Range shaping: ns per iteration, median (min–max) of $REPS alternating rounds, $ITERS iterations per run; $(uname -r), $(nproc) vCPU, load $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| mem | pattern | none | off | auto | forced | forced/off | auto/off | mprotect calls/iter off → forced | auto shaped | model |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|"
	for mem in $MEMS; do
		for p in "${PATTERNS[@]}"; do
			read -r pat k <<<"$p"
			b=$BUILD/raw/$mem.$pat.$k
			[ -s "$b.off" ] || continue
			read -r nm nl nh <<<"$(stat "$b.none")"
			read -r om ol oh <<<"$(stat "$b.off")"
			read -r am al ah <<<"$(stat "$b.auto")"
			read -r fm fl fh <<<"$(stat "$b.forced")"
			oc=$(awk -v n="$ITERS" 'NR==1 {printf "%.2f", $2/n}' "$b.off")
			fc=$(awk -v n="$ITERS" 'NR==1 {printf "%.2f", $2/n}' "$b.forced")
			as=$(awk 'NR==1 {print $3}' "$b.auto")
			fs=$(awk 'NR==1 {print $3}' "$b.forced")
			verdict=ok
			if [ "$as" != 0 ] && awk -v a="$am" -v o="$om" 'BEGIN {exit !(a > o)}'; then
				verdict=SLOWER
			elif [ "$as" = 0 ] && [ "$fs" != 0 ] && awk -v f="$fh" -v o="$ol" 'BEGIN {exit !(f < o)}'; then
				verdict=missed
			fi
			fname=trim
			[ "$pat" = widen ] && fname=widen
			printf "| %s | %s K=%s | %s | %s | %s | %s (%s) | %.3f | %.3f | %s → %s | %s | %s |\n" \
				"$mem" "$pat" "$k" "$(cell $nm $nl $nh)" "$(cell $om $ol $oh)" "$(cell $am $al $ah)" \
				"$(cell $fm $fl $fh)" "$fname" "$(awk -v a="$fm" -v b="$om" 'BEGIN {print a/b}')" \
				"$(awk -v a="$am" -v b="$om" 'BEGIN {print a/b}')" "$oc" "$fc" "$as" "$verdict"
		done
	done
	echo
	echo "Derived (medians, per memory kind): vma_ns = (off - trim) of prefix K=64 / 64 (the kernel's cost of walking a VMA it does not change, which trimming saves); call_ns = (trim - off) of split K=1 + vma_ns (a split's extra system call)."
	for mem in $MEMS; do
		b=$BUILD/raw/$mem
		[ -s "$b.prefix.64.off" ] || continue
		v=$(awk -v o="$(stat "$b.prefix.64.off" | cut -d' ' -f1)" -v t="$(stat "$b.prefix.64.forced" | cut -d' ' -f1)" 'BEGIN {printf "%.1f", (o-t)/64}')
		c=$(awk -v o="$(stat "$b.split.1.off" | cut -d' ' -f1)" -v t="$(stat "$b.split.1.forced" | cut -d' ' -f1)" -v v="$v" 'BEGIN {printf "%.0f", t-o+v}')
		echo "- $mem: vma_ns ≈ $v, call_ns ≈ $c"
	done
} >"$rep"
cat "$rep"
grep -q "| SLOWER |" "$rep" && { echo "bench_shape: the cost model chose a shape that measured slower" >&2; exit 3; }
exit 0
