#!/usr/bin/env bash
# What a huge page's first touch costs, with and without mmfold, on memory
# the host still backs ("warm") and on memory it has taken back ("cold").
#
# The workload is a Java-style heap: a PROT_NONE reservation committed
# read-write in 64 MiB MAP_FIXED mmaps, then every page written once
# (tools/bench/mprotect_loop.c -c 64 -r 0).  mmfold's default rule
# (MMFOLD_THP=auto) advises such a reservation with MADV_HUGEPAGE at once,
# so with mmfold the heap is touched as 2 MiB pages, without it as 4 KiB
# pages.  Each round runs, in this order:
#   cold none, cold default   each after a wait of TOUCH_SETTLE_S seconds:
#                             a VM with free page reporting (virtio-balloon)
#                             reports free 2 MiB blocks to the host 2 s
#                             after they are freed, and the host drops them
#   warm none, warm default   each right after 2 GiB were touched with
#                             MADV_HUGEPAGE and freed (blocks the host backs)
# and prints per state the touch time (median, min-max), the ratio default /
# none, minor faults and AnonHugePages.  On a machine without free page
# reporting, cold and warm should not differ.  Then, without mmfold, how the
# cost of a first touch grows with the time since the memory was freed: 2
# GiB touched as huge pages and freed, a wait of 0 to 20 s, then the heap
# touched with MADV_HUGEPAGE and with MADV_NOHUGEPAGE (TOUCH_SERIES=0 leaves
# this out).
#
# usage: tools/bench_touch.sh
# env:   MMFOLD_LIB      absolute path of libmmfold.so (default build/libmmfold.so)
#        BUILD           output directory (default build/bench_touch)
#        TOUCH_MB        heap size in MiB (default 1024)
#        TOUCH_REPS      rounds (default 7)
#        TOUCH_SERIES    1 (default) or 0: the series of waits
#        TOUCH_SETTLE_S  wait before a cold run (default 10: the host takes
#                        freed memory back in passes 2 s apart; after 3 s a
#                        huge page cost 60% of what it did after 10 s)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMFOLD_LIB=${MMFOLD_LIB:-$ROOT/build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/bench_touch}
MB=${TOUCH_MB:-1024}
REPS=${TOUCH_REPS:-7}
SETTLE=${TOUCH_SETTLE_S:-10}
SERIES=${TOUCH_SERIES:-1}
[[ $MB =~ ^[0-9]+$ && $REPS =~ ^[0-9]+$ && $SETTLE =~ ^[0-9]+$ ]] ||
	{ echo "bench_touch.sh: TOUCH_MB, TOUCH_REPS and TOUCH_SETTLE_S must be numbers" >&2; exit 2; }
((REPS > 0 && MB > 0)) || { echo "bench_touch.sh: TOUCH_REPS and TOUCH_MB must be positive" >&2; exit 2; }
[[ -f $MMFOLD_LIB ]] || { echo "bench_touch.sh: $MMFOLD_LIB not built (make lib)" >&2; exit 2; }
mkdir -p "$BUILD"
BIN=$BUILD/mprotect_loop
${CC:-gcc} -std=gnu11 -O2 -Wall -Wextra -Werror -o "$BIN" "$ROOT/tools/bench/mprotect_loop.c" -pthread
CLEAN_ENV=(-u LD_PRELOAD)
while IFS='=' read -r name _; do
	[[ $name == MMFOLD_* ]] && CLEAN_ENV+=(-u "$name")
done < <(env)

reporting=unknown
for f in /sys/bus/virtio/drivers/virtio_balloon/virtio*/features; do
	[[ -r $f ]] || continue
	# feature bit 5: VIRTIO_BALLOON_F_REPORTING (free page reporting)
	[[ $(cut -c6 "$f") == 1 ]] && reporting="on (virtio-balloon, reporting order $(cat /sys/module/page_reporting/parameters/page_reporting_order 2>/dev/null || echo '?'))" || reporting=off
done
[[ $reporting == unknown && ! -d /sys/bus/virtio/drivers/virtio_balloon ]] && reporting="off (no virtio-balloon)"

field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }
declare -A ms=() flt=() huge=()
T0=$(date +%s)
for ((r = 1; r <= REPS; r++)); do
	for state in cold warm; do
		for cfg in none default; do
			if [[ $state == cold ]]; then
				sleep "$SETTLE"
			else
				env "${CLEAN_ENV[@]}" "$BIN" -m 2048 -r 0 -p huge >/dev/null
			fi
			pre=()
			[[ $cfg == default ]] && pre=(LD_PRELOAD="$MMFOLD_LIB")
			line=$(env "${CLEAN_ENV[@]}" "${pre[@]}" "$BIN" -m "$MB" -r 0 -c 64)
			ms[$state.$cfg]+=" $(field "$line" touch_ms)"
			flt[$state.$cfg]+=" $(field "$line" minflt)"
			huge[$state.$cfg]+=" $(field "$line" anonhuge_kb)"
		done
	done
done

med() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
cell() { # values -> "median (min-max)"
	local s
	s=$(tr ' ' '\n' | grep . | sort -g)
	printf '%.0f (%.0f-%.0f)' "$(med <<<"$s")" "$(head -1 <<<"$s")" "$(tail -1 <<<"$s")"
}
{
	echo "First touch of a $MB MiB reservation committed in 64 MiB steps; $REPS rounds; medians (min-max)."
	echo "Free page reporting: $reporting; THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo absent); cold runs after ${SETTLE} s; warm runs after 2 GiB touched as huge pages and freed."
	echo
	echo "| memory | none: touch ms | default: touch ms | default/none | none: minor faults | default: minor faults | default: AnonHugePages MiB | none: ms per 2 MiB | default: ms per 2 MiB |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	for state in cold warm; do
		n=$(med <<<"${ms[$state.none]}")
		d=$(med <<<"${ms[$state.default]}")
		awk -v s="$state" -v cn="$(cell <<<"${ms[$state.none]}")" -v cd="$(cell <<<"${ms[$state.default]}")" \
			-v n="$n" -v d="$d" -v fn="$(med <<<"${flt[$state.none]}")" -v fd="$(med <<<"${flt[$state.default]}")" \
			-v h="$(med <<<"${huge[$state.default]}")" -v mb="$MB" 'BEGIN {
			printf "| %s | %s | %s | **%.2f** | %.0f | %.0f | %.0f | %.3f | %.3f |\n",
				s, cn, cd, d / n, fn, fd, h / 1024, n / (mb / 2), d / (mb / 2) }'
	done
	if [[ $SERIES == 1 ]]; then
		echo
		echo "Without mmfold: the same heap's first touch after 2 GiB were touched as huge pages, freed, and a wait (one run each):"
		echo
		echo "| wait s | MADV_HUGEPAGE: touch ms | MADV_NOHUGEPAGE: touch ms |"
		echo "|---:|---:|---:|"
		for w in 0 1 2 3 4 6 10 20; do
			row="| $w |"
			for p in huge nohuge; do
				env "${CLEAN_ENV[@]}" "$BIN" -m 2048 -r 0 -p huge >/dev/null
				sleep "$w"
				line=$(env "${CLEAN_ENV[@]}" "$BIN" -m "$MB" -r 0 -c 64 -p "$p")
				row+=" $(printf '%.0f' "$(field "$line" touch_ms)") |"
			done
			echo "$row"
		done
	fi
	echo
	echo "Command: \`TOUCH_MB=$MB TOUCH_REPS=$REPS TOUCH_SETTLE_S=$SETTLE TOUCH_SERIES=$SERIES tools/bench_touch.sh\`; $(($(date +%s) - T0)) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
} | tee "$BUILD/bench_touch.md"
