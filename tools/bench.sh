#!/usr/bin/env bash
# mmfold benchmarks: each workload runs without mmfold (no LD_PRELOAD), with
# mmfold in MMFOLD_MODE=off (interposed, never skips) and with mmfold in
# MMFOLD_MODE=safe, the three alternating, BENCH_REPS times (default 5).
# Prints median/min/max per configuration and the ratios, and writes the
# same as a markdown table to $BUILD/bench.md.
#
# usage: tools/bench.sh
# env:   MMFOLD_LIB   absolute path of libmmfold.so (default build/libmmfold.so)
#        BUILD        output directory (default build/bench)
#        BENCH_REPS   repetitions per configuration (default 5, minimum 5)
#        BENCH_ONLY   space-separated workload names to run (default: all):
#                     noop_64k noop_64m toggle threads_1t threads_2t spin_1t
#                     spin_2t boehm
#        CC, CLIENT_CFLAGS  compiler and extra flags for the programs
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMFOLD_LIB=${MMFOLD_LIB:-$ROOT/build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/bench}
REPS=${BENCH_REPS:-5}
case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
((REPS >= 5)) || REPS=5
if [[ ! -f $MMFOLD_LIB ]]; then
	echo "bench.sh: MMFOLD_LIB=$MMFOLD_LIB does not exist (run make first)" >&2
	exit 2
fi
CC=${CC:-gcc}
CFLAGS="-O2 -Wall -Wextra -Werror ${CLIENT_CFLAGS:-}"
mkdir -p "$BUILD/raw" "$BUILD/stats"
rm -f "$BUILD"/raw/* "$BUILD"/stats/*

# Only the variables set below reach the benchmarks.
CLEAN_ENV=(-u LD_PRELOAD)
while read -r v; do
	[[ -n $v ]] && CLEAN_ENV+=(-u "$v")
done < <(compgen -e | grep '^MMFOLD_' || true)

# ---------------------------------------------------------------- build
build() { # name src libs...
	local out=$BUILD/$1 src=$2
	shift 2
	if [[ ! -x $out || $src -nt $out || $ROOT/tools/bench/common.h -nt $out ]]; then
		# shellcheck disable=SC2086
		$CC $CFLAGS -o "$out" "$src" "$@"
	fi
}
for b in noop_mprotect toggle threads_noop batch_calls; do
	build "$b" "$ROOT/tools/bench/$b.c" -pthread
done
HAVE_GC=1
if echo '#include <gc.h>' | $CC -E -x c - >/dev/null 2>&1; then
	build demo_gc "$ROOT/tools/demo_gc.c" -lgc
else
	HAVE_GC=0
fi

# ---------------------------------------------------------------- workloads
# name | unit | better (lower/higher) | command (relative to $BUILD)
WORKLOADS=(
	"noop_64k|ns/call|lower|noop_mprotect 65536 1000000"
	"noop_64m|ns/call|lower|noop_mprotect 67108864 1000000"
	"toggle|ns/toggle|lower|toggle 400000"
	"threads_1t|calls/s|higher|threads_noop 1 500"
	"threads_2t|calls/s|higher|threads_noop 2 500"
	"threads_churn|calls/s|higher|threads_noop 1 500 churn"
	"spin_1t|loops/s|higher|threads_noop 1 500 spin"
	"spin_2t|loops/s|higher|threads_noop 2 500 spin"
	"batch_dontneed_1t|ns/64 calls|lower|batch_calls dontneed 1 2000"
	"batch_dontneed_2t|ns/64 calls|lower|batch_calls dontneed 2 2000"
	"batch_mprotect|ns/128 calls|lower|batch_calls mprotect 1 2000"
	"boehm|s|lower|demo_gc"
)
CONFIGS=(none off safe)

cfg_env() { # config -> env assignments
	case $1 in
	none) ;;
	off) echo "LD_PRELOAD=$MMFOLD_LIB MMFOLD_MODE=off" ;;
	safe) echo "LD_PRELOAD=$MMFOLD_LIB MMFOLD_MODE=safe" ;;
	esac
}

now() { date +%s.%N; }

# Runs one workload once; prints its figure.  The boehm workload prints the
# wall time measured here; the others print their own figure first.
run_once() { # name config cmd...
	local name=$1 cfg=$2
	shift 2
	local envs
	read -r -a envs <<<"$(cfg_env "$cfg")"
	local t0 t1 out
	t0=$(now)
	out=$(timeout -k 10 300 env "${CLEAN_ENV[@]}" "${envs[@]}" "$@") || {
		echo "bench.sh: '$*' failed in config $cfg" >&2
		return 1
	}
	t1=$(now)
	if [[ $name == boehm ]]; then
		awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
	else
		echo "$out" | awk 'NR == 1 { print $1 }'
	fi
}

# median min max of the numbers in a file
summary() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan nan nan"; exit }
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.6g %.6g %.6g\n", m, v[1], v[NR] }'
}

# Sum mprotect calls/skipped over the JSON reports given.
mprotect_stats() {
	cat "$@" /dev/null | awk '
	/"mmfold"/ && match($0, "\"mprotect\":[{][^}]*[}]") {
		o = substr($0, RSTART, RLENGTH)
		if (match(o, "\"calls\":[0-9]+")) { s = substr(o, RSTART, RLENGTH); sub(/.*:/, "", s); c += s }
		if (match(o, "\"skipped\":[0-9]+")) { s = substr(o, RSTART, RLENGTH); sub(/.*:/, "", s); k += s }
	}
	END { printf "%d %d\n", c, k }'
}

fmt() { # number -> compact
	awk -v x="$1" 'BEGIN {
		if (x == "nan") { print "-"; exit }
		if (x >= 1e6) printf "%.3gM", x / 1e6
		else if (x >= 100) printf "%.0f", x
		else printf "%.3g", x }'
}

echo "mmfold benchmarks"
echo "  command: BENCH_REPS=$REPS MMFOLD_LIB=$MMFOLD_LIB BUILD=$BUILD $ROOT/tools/bench.sh"
echo "  machine: $(nproc) CPU(s), $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  configs: none = no LD_PRELOAD; off = LD_PRELOAD + MMFOLD_MODE=off; safe = LD_PRELOAD + MMFOLD_MODE=safe"
echo "  each workload: $REPS rounds of none, off, safe (alternating)"
echo

declare -A MED MIN MAX UNIT BETTER CMDLINE SKIPS
selected=()
for w in "${WORKLOADS[@]}"; do
	IFS='|' read -r name unit better cmd <<<"$w"
	if [[ -n ${BENCH_ONLY:-} && " $BENCH_ONLY " != *" $name "* ]]; then continue; fi
	if [[ $name == boehm && $HAVE_GC == 0 ]]; then
		echo "SKIP boehm: libgc-dev (gc.h) not installed"
		continue
	fi
	selected+=("$name")
	read -r -a argv <<<"$cmd"
	argv[0]=$BUILD/${argv[0]}
	UNIT[$name]=$unit
	BETTER[$name]=$better
	CMDLINE[$name]="${argv[*]}"
	configs=("${CONFIGS[@]}")
	[[ $name == spin_* ]] && configs=(none) # machine calibration only
	echo "== $name ($unit, $better is better)"
	for cfg in "${configs[@]}"; do
		e=$(cfg_env "$cfg")
		echo "   $cfg: ${e:+$e }${argv[*]}"
	done
	for ((r = 1; r <= REPS; r++)); do
		line="   round $r:"
		for cfg in "${configs[@]}"; do
			v=$(run_once "$name" "$cfg" "${argv[@]}")
			echo "$v" >>"$BUILD/raw/$name.$cfg"
			line+=" $cfg $(fmt "$v")"
		done
		echo "$line"
	done
	for cfg in "${configs[@]}"; do
		k=$name.$cfg
		read -r "MED[$k]" "MIN[$k]" "MAX[$k]" < <(summary "$BUILD/raw/$k")
	done
	# One extra, untimed run in safe mode with statistics: how many of the
	# mprotect calls did mmfold skip?
	if [[ $name != spin_* ]]; then
		timeout -k 10 300 env "${CLEAN_ENV[@]}" LD_PRELOAD="$MMFOLD_LIB" MMFOLD_MODE=safe MMFOLD_STATS=1 \
			MMFOLD_STATS_FORMAT=json MMFOLD_STATS_FILE="$BUILD/stats/$name.%p.json" "${argv[@]}" >/dev/null
		shopt -s nullglob
		files=("$BUILD/stats/$name".*.json)
		shopt -u nullglob
		read -r c k < <(mprotect_stats "${files[@]}")
		SKIPS[$name]="$k of $c"
		echo "   mmfold safe skipped $k of $c mprotect calls"
	fi
	echo
done

# ---------------------------------------------------------------- report
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a == a + 0) printf "%.3f", a / b; else printf "-" }'; }
cell() { # name cfg
	local k=$1.$2
	if [[ -z ${MED[$k]:-} ]]; then echo "-"; return; fi
	echo "$(fmt "${MED[$k]}") ($(fmt "${MIN[$k]}")–$(fmt "${MAX[$k]}"))"
}

MD=$BUILD/bench.md
{
	echo "Benchmarks: median (min–max) of $REPS alternating runs per configuration."
	echo "none = no LD_PRELOAD; off = LD_PRELOAD=libmmfold.so MMFOLD_MODE=off; safe = MMFOLD_MODE=safe."
	echo "Machine: $(nproc) CPU(s), $(uname -sr); $(date -u +%Y-%m-%d)."
	echo "Command: \`BENCH_REPS=$REPS tools/bench.sh\` (MMFOLD_LIB=$MMFOLD_LIB, BUILD=$BUILD)"
	echo
	echo "| workload | unit | none | off | safe | off/none | safe/none | mprotect skipped (safe) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	for name in "${selected[@]}"; do
		echo "| $name (\`${CMDLINE[$name]#"$BUILD"/}\`) | ${UNIT[$name]} (${BETTER[$name]} is better) | $(cell "$name" none) | $(cell "$name" off) | $(cell "$name" safe) | $(ratio "${MED[$name.off]:-}" "${MED[$name.none]:-}") | $(ratio "${MED[$name.safe]:-}" "${MED[$name.none]:-}") | ${SKIPS[$name]:-} |"
	done
	echo
	if [[ -n ${MED[toggle.none]:-} ]]; then
		awk -v n="${MED[toggle.none]}" -v o="${MED[toggle.off]}" -v s="${MED[toggle.safe]}" 'BEGIN {
			d = 100 * (s / n - 1); e = 100 * (o / n - 1)
			printf "- toggle (calls mmfold cannot skip), medians: safe adds %+.1f%%, off adds %+.1f%% per call (target: at most +3%%): %s\n", d, e, (d <= 3 ? "met" : "NOT met") }'
		awk -v n="${MIN[toggle.none]}" -v o="${MIN[toggle.off]}" -v s="${MIN[toggle.safe]}" 'BEGIN {
			printf "- toggle, fastest runs (less sensitive to a busy machine): safe adds %+.1f%%, off adds %+.1f%%\n", 100 * (s / n - 1), 100 * (o / n - 1) }'
	fi
	if [[ -n ${MED[threads_1t.none]:-} && -n ${MED[threads_2t.none]:-} ]]; then
		for cfg in none off safe; do
			echo "- threads_noop scaling 2T/1T, $cfg: $(ratio "${MED[threads_2t.$cfg]}" "${MED[threads_1t.$cfg]}")x"
		done
		if [[ -n ${MED[spin_1t.none]:-} ]]; then
			echo "- machine ceiling (compute loop, no system calls) 2T/1T: $(ratio "${MED[spin_2t.none]}" "${MED[spin_1t.none]}")x"
		fi
		awk -v a="${MED[threads_2t.safe]}" -v b="${MED[threads_1t.safe]}" \
			-v c="${MED[spin_2t.none]:-0}" -v d="${MED[spin_1t.none]:-0}" 'BEGIN {
			r = a / b; m = (d > 0) ? c / d : 0
			printf "- target: safe scaling >= 1.7x: %s (%.2fx", (r >= 1.7 ? "met" : "NOT met"), r
			if (m > 0) printf "; %.0f%% of what this machine gives a compute loop", 100 * r / m
			printf ")\n" }'
	fi
	if [[ -n ${MED[boehm.none]:-} ]]; then
		echo "- boehm (demo_gc, libgc incremental mode) wall time safe/none: $(ratio "${MED[boehm.safe]}" "${MED[boehm.none]}")"
	fi
} >"$MD"

echo "== results (also in $MD)"
cat "$MD"
