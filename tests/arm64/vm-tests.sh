#!/bin/bash
# The tests run inside the arm64 VM of make check-arm64-system (started by
# tests/arm64/vm-init as root, cwd /mmfold: the initramfs that
# tests/arm64/system.sh built; programs cross-built on the host).
#
#   unit-SUITE     the Check runner's suites (CK_RUN_SUITE=SUITE, and
#                  CK_RUN_CASE for SUITE:CASE), all but
#                  "tools" (make install, man pages: host work): the shadow
#                  map, lazy table, configuration, the kernel-view checks
#                  (verify), signal chaining (sigchain), and the behaviour
#                  suites of tests/behaviour/ that run programs under
#                  LD_PRELOAD (preload: counts, folio placement, batch,
#                  lazy, shape; sigchain_preload; wx), on a real arm64
#                  kernel
#   diff-NAME      tests/preload/run.sh NAME, one test at a time (DIFF; the
#                  Check runner's "preload:differential" runs the same
#                  tests as one case, which on this VM takes 700 s to more
#                  than 1200 s: alone, a single slow test would stop it
#                  with no summary and lose the others' results)
#   folios-*       tests/arm64/folios.c with the 64 KiB mTHP size set to
#                  "always" and then "madvise", without and with mmfold:
#                  the kernel's own view (pagemap, kpageflags, hugepages-
#                  64kB/stats) of which blocks got a 64 KiB folio, before and
#                  after mprotect toggles over every region
#
#   repeat-NAME-I  tests/preload/run.sh NAME, run N times (REPEAT="NAME:N
#                  ..."; none by default): a test that failed once in the VM,
#                  run again until it shows why (its diff is printed)
#
# Settings from /mmfold/vm.conf (written by system.sh): SUITES ("none":
# no Check suite), BUDGET (seconds from the start of this script, 0: none;
# a suite or repeat that would start after it is not run, one still running
# at it is stopped, and either is reported "SKIP ... budget"; a suite
# stopped there that had already reported a failing check fails),
# DIFF (tests/preload/run.sh's tests run one by one; "none": none),
# FOLIOS (0: no folio test), REPEAT, FOLIO_ARGS,
# TIMEOUT_MULT, WALK_SEEDS (tests/preload/run.sh's; it reaches run.sh
# through the Check runner's environment), FAIL_LINES (of a failed suite's
# log shown, 60).  Prints PASS/FAIL lines, "# ..." notes, then the sentinel
# "MMFOLD-ARM64-RESULT: N passed, M failed" that the host script reads.
set -u
SUITES="map map_fill dispatch batch shape stats lazy config verify thp preload:behaviour preload:folio preload:batch preload:lazy
	preload:shape preload:profile sigchain sigchain_preload wx"
# (after the suites: two thirds of the VM's time; the walk first, the
# differential that covers the most)
DIFF="walk errno_matrix contract contract-alone jumpout flip sigreentry pastmap ctor barrier uffd barrier-uffd clonefork forklock broken
	stopworld bypass lazystress walk-shape walk-bypass"
BUDGET=0
FOLIO_ARGS="-n 512 -l 64 -h 256 -t 8"
TIMEOUT_MULT=10
WALK_SEEDS=6
FOLIOS=1
REPEAT=
# shellcheck source=/dev/null
[ -f /mmfold/vm.conf ] && . /mmfold/vm.conf
export WALK_SEEDS
# A program of tests/preload/run.sh runs 30 to 100 times slower here than
# on the host (TCG on a loaded 2-core machine): 300 s each, not 90.
export RUN_TIMEOUT=300
# and the programs' own watchdogs (tests/preload/common.h) 5 times theirs
export WATCHDOG_SCALE=5
# The write-barrier test under MMFOLD_BARRIER=uffd: 4 runs, not 50 (one
# run takes about 1 s on the host, 30 s or more here).
export BARRIER_UFFD_RUNS=4
# The clonefork test: 5 children per way, not 30.
export CLONEFORK_ROUNDS=5
export FORKLOCK_FORKS=50
# The flip test: one seed, 4 threads, 60 rounds, 2 more safe-mode runs;
# the race 5000 cycles; the pair 1000 calls per thread, for its two
# configurations (20,000 took the test from 450 s to 705 s here; 2000 for
# each of the two, 463 -> 497 and 526 s, and the 16 KiB VM's budget then
# cut its last two suites).
export FLIP_SEEDS=1 FLIP_REPEAT=2 FLIP_THREADS=4 FLIP_ROUNDS=60 FLIP_RACE_CYCLES=5000 \
	FLIP_PAIR_CYCLES=1000
# The bypass test: one seed, 4 threads, 5 rounds, 3 runs with mmfold.
export BYPASS_SEEDS=1 BYPASS_REPEAT=2 BYPASS_THREADS=4 BYPASS_ROUNDS=5
export MMFOLD_LIB=/mmfold/build/libmmfold.so MMFOLD_BUILD=/mmfold/build TESTS_PREBUILT=1
export CK_DEFAULT_TIMEOUT=300 CK_TIMEOUT_MULTIPLIER=$TIMEOUT_MULT
B=/mmfold/build
OUT=/tmp/out
mkdir -p "$OUT"
# shellcheck source=tally.sh
. /mmfold/tests/arm64/tally.sh
START=$(cut -d. -f1 /proc/uptime)
# run_cut SECONDS CMD...: CMD in a session of its own, stopped with all it
# started (SIGTERM, SIGKILL 10 s later) after SECONDS; its exit status, or
# 124 when it was stopped.
run_cut() {
	local t=$1 pid w rc flag=/tmp/cut.$$.$RANDOM
	shift
	setsid "$@" &
	pid=$!
	(
		sleep "$t"
		: >"$flag"
		kill -TERM -- -"$pid" 2>/dev/null
		sleep 10
		kill -KILL -- -"$pid" 2>/dev/null
	) &
	w=$!
	wait "$pid"
	rc=$?
	kill "$w" 2>/dev/null
	wait "$w" 2>/dev/null
	[ -e "$flag" ] && rc=124 && rm -f "$flag"
	return $rc
}
# budget_left: seconds left of BUDGET (a large number when there is none)
budget_left() {
	if [ "$BUDGET" = 0 ]; then echo 1000000; else echo $((START + BUDGET - $(cut -d. -f1 /proc/uptime))); fi
}

echo "# kernel $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPUs"
"$B/probe" 2>&1 | sed 's/^/# /'

# ---- the Check runner's suites ---------------------------------------------
[ "$SUITES" = none ] && SUITES=
for s in $SUITES; do
	log=$OUT/unit-$s.log
	t0=$(cut -d. -f1 /proc/uptime)
	case $s in
	# CK_LOG_FILE_NAME=-: each test's result as it ends (a failure is in
	# the log even when the suite is stopped at the budget before its summary)
	*:*) run=(env CK_LOG_FILE_NAME=- CK_RUN_SUITE="${s%%:*}" CK_RUN_CASE="${s#*:}") ;;
	*) run=(env CK_LOG_FILE_NAME=- CK_RUN_SUITE="$s") ;;
	esac
	tmo=$((600 * TIMEOUT_MULT / 5)) left=$(budget_left) cut=0
	if [ "$left" -le 0 ]; then
		skip "unit-$s" "not run: the VM's budget of $BUDGET s is spent"
		continue
	fi
	[ "$left" -lt "$tmo" ] && tmo=$left cut=1
	run_cut "$tmo" "${run[@]}" "$B/check_mmfold" >"$log" 2>&1
	rc=$?
	t1=$(cut -d. -f1 /proc/uptime)
	summary=$(grep -m1 -E '^[0-9]+%: Checks' "$log")
	if [ $rc = 0 ]; then
		ok "unit-$s ($summary; $((t1 - t0)) s)"
	elif [ $cut = 1 ] && [ $rc = 124 ] && ! grep -q ':[EF]:' "$log"; then
		skip "unit-$s" "stopped after $((t1 - t0)) s at the VM's budget of $BUDGET s, no failure reported before"
	else
		bad "unit-$s" "exit $rc: ${summary:-no summary}"
		# the failures with the lines that follow them (program output)
		sed -n '/:[EF]:/,$p' "$log" | head -${FAIL_LINES:-60} | sed 's/^/#   /'
		[ -n "$summary" ] || tail -20 "$log" | sed 's/^/#   /'
	fi
done

# ---- tests/preload/run.sh's tests, one at a time ----------------------------
# Each its own PASS/FAIL/SKIP: stopped at the budget with no FAIL line
# and no run reported wrong (run.sh's DIFFERS lines) printed, a test is
# SKIP; stopped by its own limit (a hang), it fails.
[ "$DIFF" = none ] && DIFF=
for name in $DIFF; do
	log=$OUT/diff-$name.log
	t0=$(cut -d. -f1 /proc/uptime)
	tmo=$((600 * TIMEOUT_MULT / 5)) left=$(budget_left) cut=0
	if [ "$left" -le 0 ]; then
		skip "diff-$name" "not run: the VM's budget of $BUDGET s is spent"
		continue
	fi
	[ "$left" -lt "$tmo" ] && tmo=$left cut=1
	BUILD=$B/tests run_cut "$tmo" tests/preload/run.sh "$name" >"$log" 2>&1
	rc=$?
	t1=$(cut -d. -f1 /proc/uptime)
	grep -E '^(SKIP |uffd mode: |walk-bypass: |bypass: )' "$log" | sort -u | sed 's/^/# /'
	if [ $rc = 0 ]; then
		ok "diff-$name ($((t1 - t0)) s)"
	elif [ $cut = 1 ] && [ $rc = 124 ] && ! grep -qE '^(FAIL|DIFFERS) ' "$log"; then
		skip "diff-$name" "stopped after $((t1 - t0)) s at the VM's budget of $BUDGET s, no failure reported before"
	else
		bad "diff-$name" "exit $rc after $((t1 - t0)) s: $(grep -m1 '^FAIL' "$log")"
		for d in "$B"/tests/out/*.diff; do
			[ -f "$d" ] || continue
			echo "#   $d:"
			head -${FAIL_LINES:-60} "$d" | sed 's/^/#   /'
		done
		grep -q '^FAIL' "$log" || tail -20 "$log" | sed 's/^/#   /'
	fi
done

# ---- tests/preload/run.sh's tests, again and again -------------------------
for r in $REPEAT; do
	name=${r%%:*} n=${r#*:}
	[ "$n" = "$r" ] && n=10
	nbad=0 t0=$(cut -d. -f1 /proc/uptime)
	for i in $(seq 1 "$n"); do
		if [ "$(budget_left)" -le 0 ]; then
			skip "repeat-$name" "runs $i to $n not run: the VM's budget of $BUDGET s is spent"
			n=$((i - 1))
			break
		fi
		log=$OUT/repeat-$name-$i.log
		BUILD=$B/tests timeout -k 10 600 tests/preload/run.sh "$name" >"$log" 2>&1
		rc=$?
		# what did not run here and why (a SKIP passes), what the barrier did
		grep -E '^(SKIP |uffd mode: )' "$log" | sort -u | sed 's/^/# /'
		if [ $rc = 0 ]; then
			ok "repeat-$name-$i"
		else
			nbad=$((nbad + 1))
			bad "repeat-$name-$i" "exit $rc: $(grep -m1 '^FAIL' "$log")"
			for d in "$B"/tests/out/*.diff; do
				[ -f "$d" ] || continue
				echo "#   $d:"
				head -${FAIL_LINES:-60} "$d" | sed 's/^/#   /'
			done
		fi
	done
	echo "# repeat $name: $nbad of $n runs failed, $(($(cut -d. -f1 /proc/uptime) - t0)) s"
done

# ---- folios: the kernel's view ---------------------------------------------
THP=/sys/kernel/mm/transparent_hugepage
F=64
# kv LINE KEY: the value of KEY=... in LINE
kv() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

# thp MODE: the F kB size in MODE, every other size and the top level never
thp() {
	local d
	echo never >"$THP/enabled"
	for d in "$THP"/hugepages-*kB; do
		# (sizes for shmem only have no "enabled")
		[ -f "$d/enabled" ] && echo never >"$d/enabled"
	done
	echo "$1" >"$THP/hugepages-${F}kB/enabled"
}

# folio NAME [env ...] -- [folios args]: runs it; sets PLACE FAULT TOGGLE
folio() {
	local name=$1
	shift
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	# shellcheck disable=SC2086
	env "${envs[@]}" "$B/folios" -f $F $FOLIO_ARGS "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
	local rc=$?
	PLACE=$(grep '^place ' "$OUT/$name.out") FAULT=$(grep '^fault ' "$OUT/$name.out")
	TOGGLE=$(grep '^toggle ' "$OUT/$name.out")
	sed "s/^/# $name: /" "$OUT/$name.out"
	# mmfold's own count of the calls (MMFOLD_STATS=1): made, forwarded
	grep -E '^(call|mmap|munmap|mprotect|madvise) ' "$OUT/$name.err" | sed "s/^/# $name: stats: /"
	if [ $rc != 0 ] || [ -z "$TOGGLE" ]; then
		bad "$name" "folios exited $rc: $(head -3 "$OUT/$name.err")"
		return 1
	fi
	return 0
}

# kept NAME: the toggles kept every folio, frame and VMA, and split nothing
kept() {
	local f t why=''
	f=$(kv "$FAULT" folios)
	t=$(kv "$TOGGLE" folios)
	[ "$t" = "$f" ] || why="$why folios $f -> $t;"
	[ "$(kv "$TOGGLE" same_frames)" = "$f" ] || why="$why same frames $(kv "$TOGGLE" same_frames) of $f;"
	[ "$(kv "$TOGGLE" vmas)" = "$(kv "$TOGGLE" vmas_before)" ] ||
		why="$why VMAs $(kv "$TOGGLE" vmas_before) -> $(kv "$TOGGLE" vmas);"
	for k in split split_deferred split_failed; do
		case $(kv "$TOGGLE" $k) in 0 | na) ;; *) why="$why $k $(kv "$TOGGLE" $k);" ;; esac
	done
	if [ -z "$why" ]; then ok "$1-toggle-kept"; else bad "$1-toggle-kept" "$why"; fi
}

if [ "$FOLIOS" = 0 ]; then
	:
elif [ ! -w "$THP/hugepages-${F}kB/enabled" ]; then
	bad folios "no $THP/hugepages-${F}kB (this kernel has no ${F} KiB mTHP size)"
else
	thp always
	none_f=-1
	if folio folios-always-none --; then
		none_f=$(kv "$FAULT" folios)
		kept folios-always-none
	fi
	if folio folios-always-mmfold LD_PRELOAD="$MMFOLD_LIB" MMFOLD_STATS=1 --; then
		p=$(kv "$PLACE" possible) f=$(kv "$FAULT" folios) n=$(kv "$PLACE" regions)
		if [ "$(kv "$PLACE" aligned)" = "$n" ] && [ "$f" = "$p" ] && [ "$(kv "$PLACE" blocks)" = "$p" ]; then
			ok "folios-always-mmfold (every one of the $p possible ${F} KiB blocks is a folio)"
		else
			bad folios-always-mmfold "aligned $(kv "$PLACE" aligned) of $n regions, folios $f of $p possible"
		fi
		kept folios-always-mmfold
		if [ "$none_f" -ge 0 ] && [ "$none_f" -lt "$f" ]; then
			ok "folios-always-fewer-without ($none_f without mmfold, $f with)"
		else
			bad folios-always-fewer-without "$none_f without mmfold, $f with: want fewer without"
		fi
	fi

	thp madvise
	if folio folios-madvise-none --; then
		f=$(kv "$FAULT" folios)
		if [ "$f" = 0 ]; then ok folios-madvise-none; else bad folios-madvise-none "$f folios without advice"; fi
	fi
	own_f=-1
	folio folios-madvise-own -- -H && own_f=$(kv "$FAULT" folios)
	# MMFOLD_THP=advise: the default (auto) advises a read-write mapping
	# only once later calls find it densely touched, which a region that
	# is mapped, touched once and toggled is not; advise is the rule that
	# advises every mapping of at least MMFOLD_THP_MIN at once.
	if folio folios-madvise-mmfold LD_PRELOAD="$MMFOLD_LIB" MMFOLD_STATS=1 MMFOLD_THP=advise MMFOLD_THP_MIN=${F}K --; then
		p=$(kv "$PLACE" possible) f=$(kv "$FAULT" folios)
		if [ "$f" = "$p" ]; then
			ok "folios-madvise-mmfold (MMFOLD_THP=advise MMFOLD_THP_MIN=${F}K: all $p)"
		else
			bad folios-madvise-mmfold "folios $f of $p possible"
		fi
		kept folios-madvise-mmfold
		if [ "$own_f" -ge 0 ] && [ "$own_f" -lt "$f" ]; then
			ok "folios-madvise-fewer-own-advice ($own_f with the program's own advice, $f with mmfold's)"
		else
			bad folios-madvise-fewer-own-advice "$own_f with the program's advice, $f with mmfold's"
		fi
	fi
fi

echo "# $(($(cut -d. -f1 /proc/uptime) - START)) s in the VM"
if [ "$skipped" = 0 ]; then
	echo "MMFOLD-ARM64-RESULT: $pass passed, $fail failed"
else
	echo "MMFOLD-ARM64-RESULT: $pass passed, $fail failed, $skipped skipped"
fi
