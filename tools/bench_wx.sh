#!/usr/bin/env bash
# W^X flip benchmark (make bench-wx): programs that flip code areas between
# RW and RX, run without mmfold and with MMFOLD_WX=keep / relax, alternating
# (none keep relax wxoff none keep relax wxoff ...), BENCH_REPS rounds:
#   none   no LD_PRELOAD and no MMFOLD_* variable
#   keep   LD_PRELOAD=$MMFOLD_LIB (MMFOLD_WX=keep is the default)
#   relax  LD_PRELOAD=$MMFOLD_LIB MMFOLD_WX=relax
#   wxoff  LD_PRELOAD=$MMFOLD_LIB MMFOLD_WX=off (safe mode without the W^X
#          part: shows what keep itself changes)
#   oldkeep, oldrelax  keep and relax with another build of the library,
#          BENCH_OLD_LIB (to compare two versions side by side)
# Each cell: median (min-max) of wall, user and system time (/usr/bin/time), and
# the mprotect calls that reached the kernel (mmfold's statistics; for none
# from one extra untimed run with MMFOLD_MODE=off, which forwards all), and
# the W^X events of the first round (areas kept apart or relaxed, window
# regions and window flips recognised, windows kept).
# Outputs of every run must be identical to the first none run, else FAIL
# (of the C programs' output, the computed result: their "vma" lines show
# the VMA layout, which keep and relax change, and their "probe" lines show
# rwx under relax; tests/behaviour/check_wx.c compares those where they must
# not differ).
#
# Workloads (BENCH_ONLY takes their names):
#   luajit_flips   luajit tools/bench/luajit_flips.lua 400 175 (~140,000 flips)
#   luajit_traces  luajit tests/clients/luajit_traces.lua 40000 100
#   wxflip         tests/progs/wxflip 4 20000 (C: 4 adjacent 64 KiB areas)
#   yjit           ruby --yjit tools/bench/yjit_flips.rb 4000 30 (Ruby 3.1's
#                  YJIT: a page RW, then a 128 MiB code block RX; skipped,
#                  saying why, where ruby has no YJIT)
#   yjitflip       tests/progs/yjitflip 16 40000 (C: that shape, 16 MiB blocks
#                  so that touching them at start costs less than the flips)
#   yjitflip_rxpage  the same with rx=page: only the pages written are made
#                  RX (what trimming the RX call to the window would leave)
# env: MMFOLD_LIB, BENCH_OLD_LIB, BUILD (default build/bench_wx), BENCH_REPS (default 7),
#      BENCH_ONLY, BENCH_CONFIGS (default "none keep relax wxoff"), CC
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMFOLD_LIB=${MMFOLD_LIB:-$ROOT/build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/bench_wx}
REPS=${BENCH_REPS:-7}
CC=${CC:-gcc}
read -r -a CONFIGS <<<"${BENCH_CONFIGS:-none keep relax wxoff}"
read -r -a ONLY <<<"${BENCH_ONLY:-luajit_flips luajit_traces wxflip yjit yjitflip yjitflip_rxpage}"
case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
[[ -f $MMFOLD_LIB ]] || { echo "bench_wx.sh: no $MMFOLD_LIB (run make first)" >&2; exit 2; }
[[ $REPS =~ ^[0-9]+$ ]] && ((REPS >= 1)) || { echo "bench_wx.sh: BENCH_REPS must be a positive number" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "bench_wx.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
mkdir -p "$BUILD/raw"
"$CC" -std=gnu11 -O2 -o "$BUILD/wxflip" "$ROOT/tests/progs/wxflip.c"
"$CC" -std=gnu11 -O2 -o "$BUILD/yjitflip" "$ROOT/tests/progs/yjitflip.c"

# A clean environment: no LD_PRELOAD, no MMFOLD_* variable.
CLEAN=(-u LD_PRELOAD)
for v in $(compgen -e); do [[ $v == MMFOLD_* ]] && CLEAN+=(-u "$v"); done

cmd_of() {
	case $1 in
	luajit_flips) CMD=(luajit "$ROOT/tools/bench/luajit_flips.lua" 400 175) ;;
	luajit_traces) CMD=(luajit "$ROOT/tests/clients/luajit_traces.lua" 40000 100) ;;
	wxflip) CMD=("$BUILD/wxflip" 4 20000) ;;
	yjit) CMD=(ruby --yjit "$ROOT/tools/bench/yjit_flips.rb" 4000 30) ;;
	yjitflip) CMD=("$BUILD/yjitflip" 16 40000) ;;
	yjitflip_rxpage) CMD=("$BUILD/yjitflip" 16 40000 rx=page) ;;
	*) echo "bench_wx.sh: unknown workload $1" >&2; exit 2 ;;
	esac
}

env_of() {
	case $1 in
	none) ENVS=() ;;
	keep) ENVS=(LD_PRELOAD="$MMFOLD_LIB") ;;
	relax) ENVS=(LD_PRELOAD="$MMFOLD_LIB" MMFOLD_WX=relax) ;;
	wxoff) ENVS=(LD_PRELOAD="$MMFOLD_LIB" MMFOLD_WX=off) ;;
	oldkeep | oldrelax)
		[[ -f ${BENCH_OLD_LIB:-} ]] || { echo "bench_wx.sh: $1 needs BENCH_OLD_LIB" >&2; exit 2; }
		ENVS=(LD_PRELOAD="$BENCH_OLD_LIB" MMFOLD_WX="${1#old}") ;;
	*) echo "bench_wx.sh: unknown configuration $1" >&2; exit 2 ;;
	esac
}

# The number after "field": inside "mprotect":{...} of a JSON report.
jget() { sed -n 's/.*"mprotect":{[^}]*"'"$2"'":\([0-9]*\).*/\1/p' "$1" | head -1; }

# What must be the same in every run's output (stdout in $1).
result() { grep -v -e '^vma ' -e '^probe ' "$1" || true; }

# The W^X events that are not 0 in a JSON report, "name n, ...".
wxev() {
	local e
	e=$(grep -o '"wx_[a-z_]*":[0-9]*' "$1" | grep -v ':0$' | tr -d '"' | sed 's/:/ /' |
		paste -sd, - | sed 's/,/, /g') || true
	echo "${e:-none}"
}

# median (min-max) of the numbers on stdin
stat3() { sort -g | awk -v f="${1:-%.3g}" '{a[NR]=$1} END {if (!NR) {print "-"; exit} m = NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf f " (" f "-" f ")", m, a[1], a[NR]}'; }
median() { sort -g | awk '{a[NR]=$1} END {print NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

REPORT=$BUILD/bench_wx.md
{
	echo "# bench_wx $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "BENCH_REPS=$REPS, configurations alternating: ${CONFIGS[*]}; median (min-max)."
	echo
	echo "| workload | config | wall s | user s | system s | mprotect calls | to kernel | wall vs none | W^X events (round 1) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
} >"$REPORT"
status=0
for w in "${ONLY[@]}"; do
	cmd_of "$w"
	if [[ $w == yjit ]] && ! ruby --yjit -e 'exit(defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? 0 : 1)' 2>/dev/null; then
		echo "bench_wx.sh: cannot run yjit here: ruby --yjit has no YJIT ($(ruby --version 2>&1))" >&2
		echo "| yjit | - | cannot run here: \`ruby --yjit\` has no YJIT | | | | | | |" >>"$REPORT"
		continue
	fi
	rm -f "$BUILD/raw/$w".*
	# untimed: the call count without mmfold (MMFOLD_MODE=off forwards all)
	env "${CLEAN[@]}" LD_PRELOAD="$MMFOLD_LIB" MMFOLD_MODE=off MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json \
		MMFOLD_STATS_FILE="$BUILD/raw/$w.count.json" "${CMD[@]}" >/dev/null
	for ((r = 1; r <= REPS; r++)); do
		for c in "${CONFIGS[@]}"; do
			env_of "$c"
			base=$BUILD/raw/$w.$c.$r
			stats=()
			[[ $c != none ]] && stats=(MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json MMFOLD_STATS_FILE="$base.json")
			/usr/bin/time -f "%e %S %U" -o "$base.time" env "${CLEAN[@]}" "${ENVS[@]}" "${stats[@]}" \
				"${CMD[@]}" >"$base.out"
			if [[ -f $BUILD/raw/$w.none.1.out ]] && ! cmp -s <(result "$base.out") \
				<(result "$BUILD/raw/$w.none.1.out") &&
				[[ $c != none || $r != 1 ]]; then
				echo "FAIL: $w $c round $r: output differs from none" >&2
				status=1
			fi
			echo "$w $c $r: $(cat "$base.time") s (wall, sys, user)" >&2
		done
	done
	calls=$(jget "$BUILD/raw/$w.count.json" calls)
	none_wall=$(for f in "$BUILD/raw/$w.none."*.time; do cut -d' ' -f1 "$f"; done | median)
	for c in "${CONFIGS[@]}"; do
		wall=$(for f in "$BUILD/raw/$w.$c."*.time; do cut -d' ' -f1 "$f"; done)
		sys=$(for f in "$BUILD/raw/$w.$c."*.time; do cut -d' ' -f2 "$f"; done)
		user=$(for f in "$BUILD/raw/$w.$c."*.time; do cut -d' ' -f3 "$f"; done)
		if [[ $c == none ]]; then
			fwd=$calls
		else
			fwd=$(for f in "$BUILD/raw/$w.$c."*.json; do jget "$f" forwarded; done | stat3 %d)
		fi
		med=$(echo "$wall" | median)
		ratio=$(awk -v a="$none_wall" -v b="$med" 'BEGIN {if (b > 0) printf "%.2fx", a / b; else print "-"}')
		ev=-
		[[ $c != none ]] && ev=$(wxev "$BUILD/raw/$w.$c.1.json")
		echo "| $w | $c | $(echo "$wall" | stat3) | $(echo "$user" | stat3) | $(echo "$sys" | stat3) | $calls | $fwd | $ratio | $ev |" >>"$REPORT"
	done
done
cat "$REPORT"
exit $status
