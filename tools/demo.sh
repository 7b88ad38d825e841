#!/usr/bin/env bash
# mmfold demo (make demo): run a Boehm-GC program, a real client and a Java
# heap with mmfold switched off and on, alternating, and show what it did.
#
# env: MMFOLD_LIB  absolute path of libmmfold.so (default build/libmmfold.so)
#      BUILD       output directory (default build/demo)
#      DEMO_RUNS   runs per mode (default 3)
set -euo pipefail

# shellcheck source=tools/bench_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench_env.sh"
RUNS=${DEMO_RUNS:-3}
if [[ ! -f $MMFOLD_LIB ]]; then
	echo "demo.sh: MMFOLD_LIB=$MMFOLD_LIB does not exist (run make first)" >&2
	exit 2
fi

PREWARM=() # a command run before every measured run (part 3)
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
rule() { printf '%s\n' "------------------------------------------------------------------------"; }

# Runs "$@" RUNS times in each mode, alternating off/safe, printing each
# run's time and mmfold's text report, then the medians.  Every run must
# print the same output.  $1 is a short tag for the files.
compare_modes() {
	local tag=$1
	shift
	local i mode n=0 first="" t0 t1 secs stats out
	: >"$BUILD/$tag.times.off"
	: >"$BUILD/$tag.times.safe"
	for ((i = 1; i <= RUNS; i++)); do
		for mode in off safe; do
			n=$((n + 1))
			stats=$BUILD/$tag.run$n.$mode.stats
			out=$BUILD/$tag.run$n.$mode.out
			rm -f "$stats"
			if ((${#PREWARM[@]})); then
				"${PREWARM[@]}" >/dev/null 2>&1 || true
			fi
			t0=$(now)
			timeout -k 10 300 env "${CLEAN_ENV[@]}" LD_PRELOAD="$MMFOLD_LIB" MMFOLD_MODE=$mode \
				MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=text MMFOLD_STATS_FILE="$stats" "$@" \
				>"$out" 2>"$BUILD/$tag.run$n.$mode.err" || {
				echo "demo.sh: run $n (MMFOLD_MODE=$mode) failed, see $BUILD/$tag.run$n.$mode.err" >&2
				exit 1
			}
			t1=$(now)
			secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
			echo "$secs" >>"$BUILD/$tag.times.$mode"
			echo
			printf 'run %d of %d   MMFOLD_MODE=%-4s  %6.3f s wall\n' "$n" $((2 * RUNS)) "$mode" "$secs"
			if [[ -s $stats ]]; then
				sed 's/^/    /' "$stats"
			else
				echo "    (no statistics written)"
			fi
			if [[ -z $first ]]; then
				first=$out
			elif ! cmp -s "$first" "$out"; then
				echo
				echo "OUTPUT DIFFERS between $first and $out -- this is a bug in mmfold:"
				diff "$first" "$out" | head -20
				exit 1
			fi
		done
	done
	local moff msafe
	moff=$(median <"$BUILD/$tag.times.off")
	msafe=$(median <"$BUILD/$tag.times.safe")
	echo
	echo "The program printed the same output in all $((2 * RUNS)) runs:"
	sed 's/^/    /' "$first"
	echo
	awk -v o="$moff" -v s="$msafe" -v r="$RUNS" 'BEGIN {
		printf "median wall time of %d runs:  MMFOLD_MODE=off %.3f s   MMFOLD_MODE=safe %.3f s\n", r, o, s
		if (o > 0) printf "ratio safe/off: %.3f  (%s)\n", s / o, s < o ? sprintf("%.1f%% less time", 100 * (1 - s / o)) : sprintf("%.1f%% more time", 100 * (s / o - 1))
	}'
}

cat <<EOF
========================================================================
 mmfold demo
========================================================================
library: $MMFOLD_LIB
machine: $(nproc) CPU(s), $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg)

mmfold intercepts mprotect, madvise, mlock, mmap, ... and, in its default
"safe" mode, answers calls that provably change nothing without entering
the kernel.  Each program below runs $RUNS times with MMFOLD_MODE=off (mmfold
loaded but passing every call through) and $RUNS times with MMFOLD_MODE=safe,
alternating.  After each run mmfold's report is shown: "calls" made by the
program, "forwarded" to the kernel, "skipped" (proven no-ops).
EOF

# ---------------------------------------------------------------- part 1
echo
rule
echo "1. A Boehm-GC program in incremental mode (tools/demo_gc.c)"
rule
if ! echo '#include <gc.h>' | $CC -E -x c - >/dev/null 2>&1; then
	echo "SKIP: libgc-dev (gc.h) is not installed (apt-get install libgc-dev)"
else
	if [[ ! -x $BUILD/demo_gc || $ROOT/tools/demo_gc.c -nt $BUILD/demo_gc ]]; then
		$CC -O2 -Wall -Wextra -Werror -o "$BUILD/demo_gc" "$ROOT/tools/demo_gc.c" -lgc
	fi
	cat <<'EOF'
libgc finds the objects written since its last collection by write-protecting
its heap: at every collection it calls mprotect(PROT_READ) on each run of
pointer-bearing heap blocks, and on the first write to a block its SIGSEGV
handler makes it writable again.  The demo program keeps 6000 records, each
in its own block between pointer-free blocks, and writes only a few of them
between collections, so most of those mprotect calls ask for the protection
the block already has.
EOF
	echo "command: $BUILD/demo_gc"
	compare_modes gc "$BUILD/demo_gc"
fi

# ---------------------------------------------------------------- part 2
echo
rule
client=()
if command -v luajit >/dev/null; then
	echo "2. A real client: LuaJIT compiling thousands of traces (tests/clients/luajit_traces.lua)"
	client=("$(command -v luajit)" "$ROOT/tests/clients/luajit_traces.lua")
	note="LuaJIT flips its machine-code area between writable and executable around
every trace it compiles; it tracks the protection itself, so few of its calls
are no-ops.  This shows what mmfold costs a busy, well-behaved client."
elif command -v node >/dev/null; then
	echo "2. A real client: node running a JIT-heavy script (tests/clients/node_jit.js)"
	client=("$(command -v node)" "$ROOT/tests/clients/node_jit.js")
	note="V8 reserves, commits and protects code and heap pages as it compiles."
fi
rule
if ((${#client[@]} == 0)); then
	echo "SKIP: neither luajit nor node is installed"
else
	echo "$note"
	echo "command: ${client[*]}"
	compare_modes client "${client[@]}"
fi

# ---------------------------------------------------------------- part 3
echo
rule
echo "3. A Java heap and large folios (tools/bench/ThpAlloc.java, G1)"
rule
if ! command -v java >/dev/null || ! command -v javac >/dev/null; then
	echo "SKIP: java/javac not installed"
else
	if [[ ! -f $BUILD/java/ThpAlloc.class || $ROOT/tools/bench/ThpAlloc.java -nt $BUILD/java/ThpAlloc.class ]]; then
		mkdir -p "$BUILD/java"
		timeout 300 javac -d "$BUILD/java" "$ROOT/tools/bench/ThpAlloc.java"
	fi
	cat <<'EOF'
The JVM reserves its heap as one large mapping and commits parts of it with
mmap(MAP_FIXED).  With the system's THP setting "madvise" (Debian's
default) none of it gets huge pages unless someone advises it: mmfold does,
and places large mappings on 2 MiB boundaries.  Watch "AnonHugePages" in the
folio line of each safe-mode report (with MMFOLD_MODE=off nothing is
advised), and the time: every huge page saves 511 page faults.  Times vary
a lot on a virtual machine whose freed memory goes back to the host, so
memory is warmed before each run; make bench-thp also counts the faults
(BENCHMARKS.md).
EOF
	# This VM hands freed memory back to the host, and the first touch of
	# such memory is several times slower, more so for a huge page: touch
	# and free 2 GiB before every run, in both modes alike.
	if [[ ! -x $BUILD/mprotect_loop || $ROOT/tools/bench/mprotect_loop.c -nt $BUILD/mprotect_loop ]]; then
		$CC -O2 -Wall -Wextra -Werror -I"$ROOT/tools/bench" -o "$BUILD/mprotect_loop" \
			"$ROOT/tools/bench/mprotect_loop.c"
	fi
	PREWARM=("$BUILD/mprotect_loop" -m 2048 -r 0 -p huge)
	echo "before each run: ${PREWARM[*]} (touches and frees 2 GiB)"
	jcmd=("$(command -v java)" -XX:+UseG1GC -Xms64m -Xmx1g -cp "$BUILD/java" ThpAlloc 256 80)
	echo "command: ${jcmd[*]}"
	compare_modes java "${jcmd[@]}"
fi
echo
echo "demo finished; files in $BUILD"
