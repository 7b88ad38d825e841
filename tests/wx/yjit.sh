#!/usr/bin/env bash
# Ruby's YJIT under the preload (make check-wx-yjit): its W^X flips (a 4 KiB
# page RW, then a whole 128 MiB code block RX) must be recognised, and the
# program must not tell the difference.
#   ruby --yjit tools/bench/yjit_flips.rb 1000 20, run without mmfold and
#   with MMFOLD_WX=off, keep and relax; requires:
#   - stdout and exit status identical to the run without mmfold;
#   - keep and relax: both code blocks recognised (wx_window_regions 2) and
#     at least 1000 window flips counted; wxoff: none;
#   - keep: the flips reach the kernel (99% of the calls do, as with
#     MMFOLD_WX=off: the number of compilations, and of the calls that are
#     redundant, varies a little from run to run, so they are not compared
#     exactly), and no rwx mapping is in any sample of /proc/PID/maps taken
#     while it runs;
#   - relax: fewer than 1 in 20 mprotect calls reach the kernel.
# Exits 0 when all hold, 1 when one failed, 77 when it cannot run here
# (no ruby, or a ruby without YJIT), saying why.
# env: MMFOLD_LIB (default build/libmmfold.so), BUILD (default build/wx)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MMFOLD_LIB=${MMFOLD_LIB:-$ROOT/build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/wx}
case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
[[ -f $MMFOLD_LIB ]] || { echo "yjit.sh: no $MMFOLD_LIB (run make first)" >&2; exit 2; }
command -v ruby >/dev/null || { echo "yjit.sh: cannot run here: ruby is not installed"; exit 77; }
if ! ruby --yjit -e 'exit(defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? 0 : 1)' 2>/dev/null; then
	echo "yjit.sh: cannot run here: $(ruby --version) has no YJIT"
	exit 77
fi
mkdir -p "$BUILD"
CLEAN=(-u LD_PRELOAD)
for v in $(compgen -e); do [[ $v == MMFOLD_* ]] && CLEAN+=(-u "$v"); done
CMD=(ruby --yjit "$ROOT/tools/bench/yjit_flips.rb" 1000 20)

# run NAME [VAR=value...]: output in $BUILD/NAME.out, report in NAME.json,
# samples of /proc/PID/maps with an rwx line counted in NAME.rwx.
run() {
	local name=$1 pid n=0 bad=0
	shift
	env "${CLEAN[@]}" "$@" "${CMD[@]}" >"$BUILD/$name.out" &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		if grep -q ' rwxp ' "/proc/$pid/maps" 2>/dev/null; then bad=$((bad + 1)); fi
		n=$((n + 1))
	done
	wait "$pid" && echo "status 0" >>"$BUILD/$name.out" || echo "status $?" >>"$BUILD/$name.out"
	echo "$bad of $n" >"$BUILD/$name.rwx"
}
ev() { grep -o "\"$2\":[0-9]*" "$BUILD/$1.json" | head -1 | cut -d: -f2; }
mp() { sed -n 's/.*"mprotect":{[^}]*"'"$2"'":\([0-9]*\).*/\1/p' "$BUILD/$1.json" | head -1; }

rm -f "$BUILD"/*.json
run none
for c in wxoff keep relax; do
	wx=$c; [[ $c == wxoff ]] && wx=off
	run "$c" LD_PRELOAD="$MMFOLD_LIB" MMFOLD_WX="$wx" MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json \
		MMFOLD_STATS_FILE="$BUILD/$c.json"
done

fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1 ($3)"; fail=1; fi; }
for c in wxoff keep relax; do
	check "$c: output and status as without mmfold" "cmp -s '$BUILD/none.out' '$BUILD/$c.out'" \
		"$(diff "$BUILD/none.out" "$BUILD/$c.out" | head -3 | tr '\n' ' ')"
done
check "wxoff: nothing recognised" "[[ \$(ev wxoff wx_window_regions) == 0 ]]" "$(ev wxoff wx_window_regions)"
for c in keep relax; do
	check "$c: both code blocks recognised" "[[ \$(ev $c wx_window_regions) == 2 ]]" \
		"wx_window_regions $(ev "$c" wx_window_regions)"
	check "$c: window flips counted" "(( \$(ev $c wx_window_flips) >= 1000 ))" \
		"wx_window_flips $(ev "$c" wx_window_flips)"
done
check "keep: the flips reach the kernel (99% of the calls, as with MMFOLD_WX=off)" \
	"(( \$(mp keep forwarded) * 100 >= \$(mp keep calls) * 99 ))" "$(mp keep forwarded) of $(mp keep calls)"
check "keep: windows kept apart" "(( \$(ev keep wx_windows_kept) > 0 ))" "wx_windows_kept $(ev keep wx_windows_kept)"
check "keep: never rwx" "[[ \$(cut -d' ' -f1 '$BUILD/keep.rwx') == 0 ]]" "$(cat "$BUILD/keep.rwx") samples"
check "keep: sampled while it ran" "(( \$(cut -d' ' -f3 '$BUILD/keep.rwx') >= 5 ))" "$(cat "$BUILD/keep.rwx") samples"
check "relax: under 1 in 20 mprotect calls reach the kernel" \
	"(( \$(mp relax forwarded) * 20 < \$(mp relax calls) ))" "$(mp relax forwarded) of $(mp relax calls)"
echo "yjit: mprotect calls $(mp wxoff calls); forwarded: wxoff $(mp wxoff forwarded), keep $(mp keep forwarded), relax $(mp relax forwarded); window flips keep $(ev keep wx_window_flips), windows kept $(ev keep wx_windows_kept)"
exit $fail
