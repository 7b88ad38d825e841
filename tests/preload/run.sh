#!/bin/bash
# Behaviour tests for the mmfold LD_PRELOAD library.
#
#   MMFOLD_LIB=/abs/path/libmmfold.so tests/preload/run.sh [TEST...]
#
# Env: MMFOLD_LIB (required), BUILD (default build/tests), CC (default gcc),
#      WALK_SEEDS (default 20), WALK_STEPS (default 300),
#      RUN_TIMEOUT (default 90): seconds each run of a program may take
#      (the arm64 VM, emulated, raises it),
#      WALK_SEED_LIST (default: 1..WALK_SEEDS, then 1001 and 1002 with five
#      times the steps): the walk seeds to run instead,
#      LAZYSTRESS_THREADS (default "4 8 16"), LAZYSTRESS_SEEDS (default 4),
#      LAZYSTRESS_REPEAT (default 6), LAZYSTRESS_STEPS (default 300): the
#      lazystress test runs each seed REPEAT times per thread count in lazy
#      mode (make soak raises them),
#      BUILD_ONLY=1: build the programs into BUILD and stop (a cross build),
#      TESTS_PREBUILT=1: use the programs already in BUILD, build nothing
#      (a machine without a compiler: the arm64 VM of make check-arm64-system),
#      BARRIER_UFFD_RUNS (default 20): runs of the barrier-uffd test,
#      SIGREENTRY_ITER (default 25000): main-loop iterations per phase of
#      the sigreentry test (make check's share: 60000 took 157 s of it),
#      CLONEFORK_ROUNDS (default 30): children per way of the clonefork test,
#      FORKLOCK_FORKS (default 300): forks of the forklock test,
#      MMFOLD_LIB_BYPASS (default: MMFOLD_LIB's directory's
#      libmmfold-bypass.so, which make builds), WALK_BYPASS_REPEAT (default
#      2): the walk-bypass test,
#      BYPASS_SEEDS (default 2; make soak-bypass runs 8), BYPASS_REPEAT (default 4), BYPASS_THREADS
#      (default 8), BYPASS_ROUNDS (default 20): the bypass test,
#      FLIP_SEEDS (default 4), FLIP_REPEAT (default 5), FLIP_THREADS
#      (default 8), FLIP_ROUNDS (default 150), FLIP_RACE_CYCLES (default
#      50000), FLIP_PAIR_CYCLES (default 10000): the flip test (make
#      soak-flip raises them),
#      TEST_DEADLINE (seconds since the epoch; none by default): lazystress,
#      bypass and flip start no seed after it (the first seed always runs) and
#      say how many of their seeds ran (CI's time budget, .ci/run),
# Tests: walk walk-shape walk-bypass pastmap walk-stats errno_matrix contract contract-alone contract-stats setuid barrier uffd barrier-uffd ctor sigreentry jumpout lazyreuse flip clonefork forklock broken
# sigchain barrier-sigchain lazystress stopworld bypass (default: all; the last two run with
# MMFOLD_SIGCHAIN=on, so mmfold's SIGSEGV handler runs first).  Each program runs without the library (reference) and
# with it in modes off, safe and observe; stdout and exit status must be
# identical (stderr too, except in observe mode).  Prints "PASS name" or
# "FAIL name: reason (file)" per test, then "N passed, N failed".
# Exit 0 all passed, 1 some failed, 77 no library.

set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CC=${CC:-gcc}
BUILD=${BUILD:-$ROOT/build/tests}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
WALK_SEEDS=${WALK_SEEDS:-20}
WALK_STEPS=${WALK_STEPS:-300}
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
CFLAGS=(-O2 -g -Wall -Wextra -Werror -pthread)
OUT=$BUILD/out
unset LD_PRELOAD MMFOLD_MODE MMFOLD_STATS MMFOLD_STATS_FILE MMFOLD_STATS_FORMAT MMFOLD_BARRIER

pass=0 fail=0
# past_deadline: true once TEST_DEADLINE (epoch seconds) has passed.
past_deadline() { [ -n "${TEST_DEADLINE:-}" ] && [ "$(date +%s)" -ge "$TEST_DEADLINE" ]; }
# seed_cut S N: true when seed S of N must not start (past the deadline;
# the first always starts), with CUT saying how many ran.
seed_cut() {
	[ "$1" -gt 1 ] && past_deadline || return 1
	CUT=" (TEST_DEADLINE reached: $(($1 - 1)) of $2 seeds ran)"
}
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }
# A run that went wrong, said at once (on stderr): a test's FAIL line comes
# after all its runs, and a test stopped before then (the arm64 VM's
# budget) is only reported SKIP when no such line was printed.
run_failed() { echo "DIFFERS $*" >&2; }

if [ -z "${MMFOLD_LIB:-}" ] || [ ! -f "$MMFOLD_LIB" ]; then
	echo "skip: no library"
	exit 77
fi
case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
MMFOLD_LIB_BYPASS=${MMFOLD_LIB_BYPASS:-${MMFOLD_LIB%.so}-bypass.so}

mkdir -p "$BUILD" "$OUT" || exit 1
rm -f "$OUT"/*

build() {
	local log=$OUT/build.log
	{
		"$CC" "${CFLAGS[@]}" -o "$BUILD/walk" "$HERE/walk.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/lazystress" "$HERE/lazystress.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/stopworld" "$HERE/stopworld.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/bypass" "$HERE/bypass.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/pastmap" "$HERE/pastmap.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/errno_matrix" "$HERE/errno_matrix.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/contract" "$HERE/contract.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/setuid" "$HERE/setuid.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/barrier" "$HERE/barrier.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/uffd" "$HERE/uffd.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/sigreentry" "$HERE/sigreentry.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/jumpout" "$HERE/jumpout.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/lazyreuse" "$HERE/lazyreuse.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/flip" "$HERE/flip.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/clonefork" "$HERE/clonefork.c" &&
		"$CC" "${CFLAGS[@]}" -shared -fPIC -o "$BUILD/libforklockl.so" "$HERE/forklockl.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/forklock" "$HERE/forklock.c" \
			-L"$BUILD" -lforklockl -Wl,-rpath,"\$ORIGIN" &&
		"$CC" "${CFLAGS[@]}" -shared -fPIC -o "$BUILD/libctorlib.so" "$HERE/ctorlib.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/ctor_main" "$HERE/ctor_main.c" \
			-L"$BUILD" -lctorlib -Wl,-rpath,"\$ORIGIN" &&
		"$CC" "${CFLAGS[@]}" -shared -fPIC -o "$BUILD/broken.so" "$HERE/broken.c" &&
		"$CC" "${CFLAGS[@]}" -shared -fPIC -o "$BUILD/libsigctor.so" "$HERE/sigctor.c" &&
		"$CC" "${CFLAGS[@]}" -o "$BUILD/sigchain" "$HERE/sigchain.c" \
			-L"$BUILD" -lsigctor -Wl,-rpath,"\$ORIGIN"
	} >"$log" 2>&1
}
PROGRAMS=(walk bypass pastmap errno_matrix barrier uffd sigreentry clonefork libforklockl.so forklock libctorlib.so ctor_main broken.so libsigctor.so sigchain)
if [ -n "${TESTS_PREBUILT:-}" ]; then
	for p in "${PROGRAMS[@]}"; do
		[ -f "$BUILD/$p" ] || bad build "TESTS_PREBUILT is set but $BUILD/$p is missing"
	done
	[ $fail = 0 ] || { echo "$pass passed, $fail failed"; exit 1; }
elif ! build; then
	bad build "compiler failed ($OUT/build.log)"
	echo "$pass passed, $fail failed"
	exit 1
fi
[ -n "${BUILD_ONLY:-}" ] && exit 0

# run FILE MODE PROG [ARGS...]: MODE is ref (no preload), broken, or an
# MMFOLD_MODE value.  FILE gets stdout, the exit status, then stderr.
run() {
	local file=$1 mode=$2
	shift 2
	local pre=()
	case $mode in
	ref) ;;
	broken) pre=(env LD_PRELOAD="$BUILD/broken.so") ;;
	uffd | lazyuffd)
		local mm=safe
		[ "$mode" = lazyuffd ] && mm=lazy
		pre=(env -u MMFOLD_LIB -u MMFOLD_BUILD LD_PRELOAD="$MMFOLD_LIB" MMFOLD_MODE=$mm
			MMFOLD_BARRIER=uffd MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json
			MMFOLD_STATS_FILE="$OUT/uffd-stats.json") ;;
	*) pre=(env -u MMFOLD_LIB -u MMFOLD_BUILD LD_PRELOAD="$MMFOLD_LIB" MMFOLD_MODE="$mode") ;;
	esac
	local rc
	# (the outer 2>/dev/null silences bash's "Segmentation fault" notes)
	{ timeout -k 5 "$RUN_TIMEOUT" "${pre[@]}" "$@" >"$file" 2>"$file.stderr"; rc=$?; } 2>/dev/null
	{
		echo "## exit $rc"
		echo "## stderr"
		cat "$file.stderr"
	} >>"$file"
	rm -f "$file.stderr"
	return 0
}

# same NAME REF OTHER MODE: compare; prints the diff path on mismatch.
same() {
	local ref=$2 other=$3 mode=$4 d=$OUT/$1.diff
	if [ "$mode" = observe ]; then
		diff <(sed '/^## stderr$/,$d' "$ref") <(sed '/^## stderr$/,$d' "$other") >"$d"
	elif [ "$mode" = lazy ]; then
		# Lazy mode changes VMA flags later than the program asked (fork
		# advice waits for the fork), so VMAs split and merge at other
		# times, and flags a VMA keeps from its history can differ: the
		# kernel's overcommit flag VM_ACCOUNT ("ac" in smaps, dropped by
		# mprotect on a never-faulted anonymous VMA) and VM_MAYBE_GUARD
		# ("gu": set on the whole VMA a guard region is installed in, and
		# kept by its parts): README lists both among lazy mode's caveats.
		diff <(sed -E 's/,(ac|gu)([],])/\2/g' "$ref") <(sed -E 's/,(ac|gu)([],])/\2/g' "$other") >"$d"
	elif [ "$mode" = uffd ] || [ "$mode" = lazyuffd ]; then
		# A write tried on a write-protected page that was never touched
		# allocates it before the fault is reported (README, "Write
		# barriers"): later it is resident where it would not be, and
		# no view tells which pages that happened to.  And a page made
		# read-only stays in a read-write VMA, so VMAs split and merge
		# otherwise, and the flags of their history (ac, gu) differ as
		# in lazy mode.
		diff <(sed -E 's/ mc[01] / mc? /; s/,(ac|gu)([],])/\2/g' "$ref") \
			<(sed -E 's/ mc[01] / mc? /; s/,(ac|gu)([],])/\2/g' "$other") >"$d"
	else
		diff "$ref" "$other" >"$d"
	fi && { rm -f "$d"; return 0; }
	[ -n "${EXPECT_DIFF:-}" ] || run_failed "$1: $d"
	echo "$d"
	return 1
}

exit_of() { sed -n 's/^## exit //p' "$1"; }

# MMFOLD_BARRIER=uffd (write barriers through userfaultfd) is a fifth mode
# of every differential test where the kernel lets this process use
# userfaultfd write-protection; elsewhere it is reported as not run, with
# the reason mmfold gives.  In that mode the programs translate /proc's view
# of write-protected pages (common.h, barrier_uffd); the uffd test compares
# the untranslated view.
# Whether it can run is asked of the kernel by a program of ours without
# the library (uffd kernel): where the kernel gives this process what the
# barrier needs and the library still reports it off, the uffd tests fail
# (UFFD_BROKEN) instead of being skipped.
UFFD_MODE= UFFD_WHY= UFFD_BROKEN=
uffd_probe() {
	local f=$OUT/uffd-probe
	# a program of ours: true may be static (busybox in the arm64 VM),
	# which never loads the library and writes no report
	run "$f" uffd env MMFOLD_STATS_FILE="$f.json" "$BUILD/uffd" probe
	run "$f.kernel" ref "$BUILD/uffd" kernel
	if grep -q '"barrier":{"uffd":true' "$f.json" 2>/dev/null; then
		UFFD_MODE=uffd
	else
		UFFD_WHY=$(grep -o '"why":"[^"]*"' "$f.json" 2>/dev/null || echo "no report ($f)")
		if grep -q '^uffd-wp: yes' "$f.kernel"; then
			UFFD_BROKEN="the kernel gives this process userfaultfd write-protection ($f.kernel) but the library reports the barrier off: $UFFD_WHY"
			echo "uffd mode: $UFFD_BROKEN"
		else
			echo "uffd mode: cannot run here: $UFFD_WHY; $(grep '^uffd-wp' "$f.kernel" || echo "no kernel probe ($f.kernel)")"
		fi
	fi
}

# differential NAME PROG [ARGS...]: reference run must exit 0, then off,
# safe and observe must match it.  Sets REASON on failure.
differential() {
	local name=$1
	shift
	run "$OUT/$name.ref" ref "$@"
	local rc
	rc=$(exit_of "$OUT/$name.ref")
	if [ "$rc" != 0 ]; then
		REASON="reference run exited $rc ($OUT/$name.ref)"
		run_failed "$name: $REASON"
		return 1
	fi
	local m d
	for m in off safe observe lazy $UFFD_MODE; do
		run "$OUT/$name.$m" "$m" "$@"
		if ! d=$(same "$name.$m" "$OUT/$name.ref" "$OUT/$name.$m" "$m"); then
			REASON="mode $m differs from no-preload run ($d)"
			return 1
		fi
	done
	return 0
}

# A walk seed's steps: above 1000, five times WALK_STEPS (the default list's
# two long walks).  Every test that shares a seed's reference run
# ($OUT/walk-SEED.ref) runs the seed with these steps.
walk_steps() {
	if [ "$1" -gt 1000 ]; then echo $((WALK_STEPS * 5)); else echo "$WALK_STEPS"; fi
}

t_walk() {
	local s first='' seeds=''
	for s in ${WALK_SEED_LIST:-$(seq 1 "$WALK_SEEDS") 1001 1002}; do
		local steps
		steps=$(walk_steps "$s")
		if ! differential "walk-$s" "$BUILD/walk" "$s" "$steps"; then
			seeds="$seeds $s"
			[ -z "$first" ] && first="seed $s: $REASON"
		fi
	done
	if [ -n "$first" ]; then bad walk "failing seeds:$seeds; $first"; else ok walk; fi
}

# The walk's seeds with range shaping forced (MMFOLD_SHAPE=trim, widen):
# safe mode must match the run without mmfold, and across the seeds both
# policies must really have shaped calls (counted from the JSON reports).
t_walk_shape() {
	local s pol first='' n d tot steps
	for pol in trim widen; do
		local f=$OUT/walk-shape-$pol.json
		rm -f "$f"
		for s in ${WALK_SEED_LIST:-$(seq 1 "$WALK_SEEDS")}; do
			n=walk-shape-$pol-$s
			steps=$(walk_steps "$s")
			[ -s "$OUT/walk-$s.ref" ] || run "$OUT/walk-$s.ref" ref "$BUILD/walk" "$s" "$steps"
			run "$OUT/$n.safe" safe env MMFOLD_SHAPE=$pol MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json \
				MMFOLD_STATS_FILE="$f" "$BUILD/walk" "$s" "$steps"
			if ! d=$(same "$n" "$OUT/walk-$s.ref" "$OUT/$n.safe" safe); then
				[ -z "$first" ] && first="MMFOLD_SHAPE=$pol seed $s differs from no-preload run ($d)"
			fi
		done
		tot=$(grep -o "\"shaped_${pol}[a-z]*ed\":[0-9]*" "$f" 2>/dev/null | cut -d: -f2 |
			awk '{s += $1} END {print s + 0}')
		[ -z "$first" ] && [ "$tot" -eq 0 ] && first="MMFOLD_SHAPE=$pol shaped no call in any seed ($f)"
	done
	if [ -n "$first" ]; then bad walk-shape "$first"; else ok walk-shape; fi
}

# bypassed JSON: calls that bypassed the map, summed over the reports in JSON
bypassed() {
	grep -o '"bypassed":[0-9]*' "$1" 2>/dev/null | cut -d: -f2 | awk '{s += $1} END {print s + 0}'
}

# bypass_verdict NAME FAILURE BYPASSED: a failure (its text), or nothing
# bypassed, fails test NAME
bypass_verdict() {
	if [ -n "$2" ]; then
		bad "$1" "$2"
	elif [ "$3" = 0 ]; then
		bad "$1" "no call bypassed the map: the test tested nothing"
	else
		ok "$1"
	fi
}

# The walk's seeds under the forced-bypass build (make's libmmfold-bypass.so:
# one writer section in three, at random, bypasses the map, as when the lock
# holder is descheduled for longer than MMFOLD_LOCK_WAIT), WALK_BYPASS_REPEAT
# runs each in safe mode: every kind of call, failed ones included, goes
# past the map, and what it changed must be forgotten before anything is
# skipped there again.  Fails when nothing bypassed.
t_walk_bypass() {
	local s i first='' n=0 nbad=0 byp=0 rep=${WALK_BYPASS_REPEAT:-2}
	local f=$OUT/walk-bypass.json
	if [ ! -f "$MMFOLD_LIB_BYPASS" ]; then
		bad walk-bypass "no forced-bypass library $MMFOLD_LIB_BYPASS (make builds it)"
		return
	fi
	rm -f "$f"
	for s in ${WALK_SEED_LIST:-$(seq 1 "$WALK_SEEDS") 1001 1002}; do
		local steps
		steps=$(walk_steps "$s")
		[ -s "$OUT/walk-$s.ref" ] || run "$OUT/walk-$s.ref" ref "$BUILD/walk" "$s" "$steps"
		for i in $(seq 1 "$rep"); do
			local nm=walk-bypass-$s-$i d
			MMFOLD_LIB="$MMFOLD_LIB_BYPASS" run "$OUT/$nm.safe" safe env MMFOLD_STATS=1 \
				MMFOLD_STATS_FORMAT=json MMFOLD_STATS_FILE="$f" "$BUILD/walk" "$s" "$steps"
			n=$((n + 1))
			if ! d=$(same "$nm" "$OUT/walk-$s.ref" "$OUT/$nm.safe" safe); then
				nbad=$((nbad + 1))
				[ -z "$first" ] && first="seed $s run $i differs from no-preload run ($d)"
			fi
		done
	done
	byp=$(bypassed "$f")
	echo "walk-bypass: $n runs, $nbad differ, $byp calls bypassed the map"
	bypass_verdict walk-bypass "${first:+$nbad of $n runs: $first}" "$byp"
}

# pastmap.c: calls past the map that change more than the range they
# name (mlockall's future state; a failed mremap's destination), in safe
# mode with the library and 4 times with the forced-bypass build (which must
# have bypassed the map).
t_pastmap() {
	local d js=$OUT/pastmap.json
	run "$OUT/pastmap.ref" ref "$BUILD/pastmap"
	if [ "$(exit_of "$OUT/pastmap.ref")" != 0 ]; then
		bad pastmap "reference run failed ($OUT/pastmap.ref)"
		return
	fi
	run "$OUT/pastmap.safe" safe "$BUILD/pastmap"
	if ! d=$(same pastmap "$OUT/pastmap.ref" "$OUT/pastmap.safe" safe); then
		bad pastmap "safe mode differs from no-preload run ($d)"
		return
	fi
	rm -f "$js"
	local i first=''
	for i in 1 2 3 4; do
		MMFOLD_LIB="$MMFOLD_LIB_BYPASS" run "$OUT/pastmap.bypass-$i" safe env MMFOLD_STATS=1 \
			MMFOLD_STATS_FORMAT=json MMFOLD_STATS_FILE="$js" "$BUILD/pastmap"
		if ! d=$(same pastmap-bypass-$i "$OUT/pastmap.ref" "$OUT/pastmap.bypass-$i" safe); then
			[ -n "$first" ] || first=$d
		fi
	done
	bypass_verdict pastmap "${first:+the forced-bypass build differs from no-preload run ($first)}" \
		"$(bypassed "$js")"
}

t_walk_stats() {
	local f=$OUT/walk-stats.json
	rm -f "$f"
	run "$OUT/walk-stats.out" ref "$BUILD/walk" 7 "$WALK_STEPS"
	run "$OUT/walk-stats.safe" safe env MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json \
		MMFOLD_STATS_FILE="$f" "$BUILD/walk" 7 "$WALK_STEPS"
	local d
	if ! d=$(same walk-stats "$OUT/walk-stats.out" "$OUT/walk-stats.safe" safe); then
		bad walk-stats "output with MMFOLD_STATS=1 differs ($d)"
		return
	fi
	if [ ! -s "$f" ]; then
		bad walk-stats "no stats written ($f)"
		return
	fi
	# One JSON object per line; add up kinds.mprotect.skipped.
	local skipped
	skipped=$(grep -o '"mprotect":{[^}]*}' "$f" | grep -o '"skipped":[0-9]*' |
		cut -d: -f2 | awk '{s += $1} END {print s + 0}')
	if ! grep -q '"mode":"safe"' "$f"; then
		bad walk-stats "stats do not say mode safe ($f)"
	elif [ "$skipped" -gt 0 ]; then
		ok walk-stats
	else
		bad walk-stats "safe mode skipped no mprotect call ($f)"
	fi
}

# What the report counts for a call mmfold made twice (case thpjoin: an
# mremap made again once the VMAs mmfold's huge-page advice kept apart
# are joined): the program's one call, forwarded once, an error only
# where the program saw one; and the joins themselves, so that the case
# is known to have gone through them.
t_contract_stats() {
	local f=$OUT/contract-stats.json
	rm -f "$f"
	run "$OUT/contract-stats.out" ref "$BUILD/contract" thpjoin
	run "$OUT/contract-stats.safe" safe env MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json \
		MMFOLD_STATS_FILE="$f" "$BUILD/contract" thpjoin
	local d
	if ! d=$(same contract-stats "$OUT/contract-stats.out" "$OUT/contract-stats.safe" safe); then
		bad contract-stats "output with MMFOLD_STATS=1 differs ($d)"
		return
	fi
	local m calls fwd err joined want
	m=$(grep -o '"mremap":{[^}]*}' "$f" | head -1)
	calls=$(grep -o '"calls":[0-9]*' <<<"$m" | cut -d: -f2)
	fwd=$(grep -o '"forwarded":[0-9]*' <<<"$m" | cut -d: -f2)
	err=$(grep -o '"errors":[0-9]*' <<<"$m" | cut -d: -f2)
	joined=$(grep -o '"thp_joined":[0-9]*' "$f" | head -1 | cut -d: -f2)
	want=$(grep -c '^mremap .*: E[A-Z]*$' "$OUT/contract-stats.out")
	if [ -z "$calls" ] || [ -z "$joined" ]; then
		bad contract-stats "no mremap counts or thp_joined in the report ($f)"
	elif [ "$calls" != 3 ] || [ "$fwd" != 3 ] || [ "$err" != "$want" ]; then
		bad contract-stats "mremap calls $calls forwarded $fwd errors $err, want 3, 3 and $want ($f)"
	elif [ "$joined" = 0 ] && ! grep -q '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then
		bad contract-stats "no join made: the counts were not tested ($f)"
	else
		ok contract-stats
	fi
}

# A set-user-ID program run by another user, mmfold loaded through
# /etc/ld.so.preload in a private mount namespace (root, unshare, setpriv):
# the caller's MMFOLD_STATS_FILE names a file only root may write, and
# mmfold, running as root there, must leave it alone (AT_SECURE: the
# defaults, no MMFOLD_* variable).
t_setuid() {
	if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! command -v setpriv >/dev/null; then
		echo "SKIP setuid: needs root, unshare and setpriv"
		return
	fi
	# under /tmp: user nobody must reach the program
	local d
	d=$(mktemp -d /tmp/mmfold-setuid.XXXXXX) || { bad setuid "mktemp failed"; return; }
	mkdir -p "$d/etc" "$d/victim"
	chmod 755 "$d"
	chmod 700 "$d/victim"
	: >"$d/victim/file"
	chmod 600 "$d/victim/file"
	install -m 4755 "$BUILD/setuid" "$d/prog"
	cp -a /etc/. "$d/etc/" 2>/dev/null
	echo "$MMFOLD_LIB" >"$d/etc/ld.so.preload"
	unshare -m sh -c 'mount --bind "$1/etc" /etc && exec setpriv --reuid=65534 --regid=65534 --clear-groups env MMFOLD_STATS=1 MMFOLD_STATS_FILE="$1/victim/file" MMFOLD_LOG=3 "$1/prog"' sh "$d" >"$d/out" 2>&1
	if ! grep -q '^AT_SECURE 1, euid 0$' "$d/out"; then
		bad setuid "the program did not run set-user-ID root ($d/out)"
	elif [ -s "$d/victim/file" ]; then
		bad setuid "mmfold wrote its report as root into a file the caller cannot write ($d/victim/file)"
	elif [ "$(wc -l <"$d/out")" != 1 ]; then
		bad setuid "output beyond the program's one line: MMFOLD_LOG was honoured ($d/out)"
	else
		ok setuid
		rm -rf "$d"
	fi
}

t_simple() { # NAME PROG [ARGS...]
	local name=$1 d
	if differential "$@"; then
		ok "$name"
	else
		bad "$name" "$REASON"
		# the difference itself: the files may be gone when the caller
		# looks (a VM, a later run of this script)
		for d in "$OUT/$name".*.diff; do
			[ -f "$d" ] && head -20 "$d" | sed "s|^|# ${d##*/}: |"
		done
	fi
}

t_broken() {
	# The walk must notice an interposer that skips mprotect(RW) calls.
	local s caught=0
	for s in 1 2 3; do
		run "$OUT/broken-$s.off" off "$BUILD/walk" "$s" "$WALK_STEPS"
		run "$OUT/broken-$s.broken" broken "$BUILD/walk" "$s" "$WALK_STEPS"
		# a difference is what this test wants: not a DIFFERS line
		EXPECT_DIFF=1 same "broken-$s" "$OUT/broken-$s.off" "$OUT/broken-$s.broken" broken >/dev/null ||
			caught=$((caught + 1))
	done
	if [ $caught = 3 ]; then
		ok broken
	else
		bad broken "walk missed the broken interposer in $((3 - caught)) of 3 seeds ($OUT/broken-*.broken)"
	fi
}

# Threads racing on the same pages while calls bypass the map (bypass.c):
# each seed runs once without the library (the reference), BYPASS_REPEAT
# times in safe mode with MMFOLD_LOCK_WAIT=0 (a call that finds the writer
# lock taken bypasses the map at once; every other run with
# MMFOLD_SHAPE=trim, so that calls are trimmed to what the map says
# changes), then once with the default wait.  A run fails when its output
# differs from the reference or it counted a mismatch (a page allowing
# other than it was set to); the test fails too when the MMFOLD_LOCK_WAIT=0
# runs bypassed nothing (then it tested nothing).
t_bypass() {
	local s i n=0 nbad=0 first='' byp=0
	local seeds=${BYPASS_SEEDS:-2} rep=${BYPASS_REPEAT:-4} th=${BYPASS_THREADS:-8}
	local rounds=${BYPASS_ROUNDS:-20}
	CUT=''
	for s in $(seq 1 "$seeds"); do
		seed_cut "$s" "$seeds" && break
		local name=bypass-$s
		run "$OUT/$name.ref" ref "$BUILD/bypass" "$s" "$th" "$rounds"
		if [ "$(exit_of "$OUT/$name.ref")" != 0 ]; then
			bad bypass "reference run failed ($OUT/$name.ref)"
			return
		fi
		sed -i '/^## stderr$/,$d' "$OUT/$name.ref"
		for i in $(seq 1 $((rep + 1))); do
			local f=$OUT/$name.$i js=$OUT/$name.$i.json
			local cfg=(MMFOLD_LOCK_WAIT=0 MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json MMFOLD_STATS_FILE="$js")
			[ $((i % 2)) = 0 ] && cfg+=(MMFOLD_SHAPE=trim)
			[ "$i" = $((rep + 1)) ] && cfg=(MMFOLD_SHAPE=auto)
			rm -f "$js"
			run "$f" safe env "${cfg[@]}" "$BUILD/bypass" "$s" "$th" "$rounds"
			n=$((n + 1))
			if [ -f "$js" ]; then
				local b
				b=$(grep -o '"bypassed":[0-9]*' "$js" | head -1 | cut -d: -f2)
				byp=$((byp + ${b:-0}))
			fi
			if [ "$(exit_of "$f")" != 0 ] ||
				! diff -q "$OUT/$name.ref" <(sed '/^## stderr$/,$d' "$f") >/dev/null; then
				nbad=$((nbad + 1))
				run_failed "bypass: run $i of seed $s ($f)"
				[ -n "$first" ] || first="run $i of seed $s ($f)"
			else
				rm -f "$f" "$js"
			fi
		done
	done
	echo "bypass: $n runs, $nbad failed, $byp calls bypassed the map$CUT"
	bypass_verdict bypass "${first:+$nbad of $n runs failed; first: $first}" "$byp"
}

# Threads racing lazy mode's deferred promotions (lazystress.c): every
# seed and thread count runs once without the library (the reference, which
# must find nothing), once in safe mode, then LAZYSTRESS_REPEAT times in lazy
# mode (every other run with MMFOLD_LAZY_TOUCHED=100: every promotion that
# may wait does, however often they are touched).  A run fails when its output differs from the reference or when it
# counted a spurious or a missed fault (exit 1, details on stderr).  The
# summary line gives the runs, the failures, the faults probed and the calls
# lazy mode deferred (from the lazy runs' JSON reports): none deferred fails,
# since the runs would then have raced nothing.
t_lazystress() {
	local th s i n=0 nbad=0 first='' sp=0 faults=0 dfr js=$OUT/lazystress.json
	local seeds=${LAZYSTRESS_SEEDS:-4} rep=${LAZYSTRESS_REPEAT:-6} steps=${LAZYSTRESS_STEPS:-300}
	CUT=''
	rm -f "$js"
	# seed by seed, every thread count for each, so that a run cut short
	# by TEST_DEADLINE has covered every thread count
	for s in $(seq 1 "$seeds"); do
		seed_cut "$s" "$seeds" && break
		for th in ${LAZYSTRESS_THREADS:-4 8 16}; do
			local name=lazystress-$th-$s
			run "$OUT/$name.ref" ref "$BUILD/lazystress" "$s" "$th" "$steps"
			if [ "$(exit_of "$OUT/$name.ref")" != 0 ]; then
				bad lazystress "reference run failed ($OUT/$name.ref)"
				return
			fi
			sed -i '/^## stderr$/,$d' "$OUT/$name.ref"
			for i in $(seq 0 "$rep"); do
				local m=lazy f=$OUT/$name.lazy.$i touched=75
				local st=(MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json MMFOLD_STATS_FILE="$js")
				[ "$i" = 0 ] && m=safe f=$OUT/$name.safe st=()
				# every other run defers every promotion it can
				[ $((i % 2)) = 1 ] && touched=100
				run "$f" "$m" env MMFOLD_LAZY_TOUCHED=$touched "${st[@]}" "$BUILD/lazystress" "$s" "$th" "$steps"
				n=$((n + 1))
				local nf
				nf=$(sed -n 's/^lazystress: .*: \([0-9]*\) faults probed.*/\1/p' "$f")
				faults=$((faults + ${nf:-0}))
				if grep -q 'SPURIOUS\|MISSED' "$f"; then
					sp=$((sp + $(grep -c 'SPURIOUS\|MISSED' "$f")))
				fi
				if ! diff -q "$OUT/$name.ref" <(sed '/^## stderr$/,$d' "$f") >/dev/null; then
					nbad=$((nbad + 1))
					run_failed "lazystress: $m run $i of seed $s with $th threads ($f)"
					[ -n "$first" ] || first="$m run $i of seed $s with $th threads ($f)"
				else
					rm -f "$f"
				fi
			done
		done
	done
	dfr=$(grep -o '"deferred":[0-9]*' "$js" 2>/dev/null | cut -d: -f2 | awk '{s += $1} END {print s + 0}')
	echo "lazystress: $n runs, $nbad differing, $sp spurious or missed faults, $faults faults probed, $dfr calls deferred in lazy mode$CUT"
	if [ -n "$first" ]; then
		bad lazystress "$nbad of $n runs failed; first: $first"
	elif [ "$dfr" = 0 ]; then
		bad lazystress "lazy mode deferred no call ($js): the runs raced nothing"
	else
		ok lazystress
	fi
}

uffd_probe
# Sums one event over the uffd-mode runs' reports so far.
uffd_count() {
	grep -o "\"$1\":[0-9]*" "$OUT/uffd-stats.json" 2>/dev/null | cut -d: -f2 |
		awk '{s += $1} END {print s + 0}'
}

# MMFOLD_BARRIER=uffd on its own (uffd.c): what a program sees must equal
# the run without mmfold (semantics, in every mode); the exit status of a
# program that dies of the fault (139 from a shell); and /proc's view of
# write-protected pages must differ from the plain one exactly as README.md
# says: maps rw-p for r--p, smaps' VmFlags wr and uw, pagemap's uffd-wp bit,
# and mincore 1 for a never-touched page a write was tried on (the kernel
# allocates it before it reports the protection).
t_uffd() {
	if [ -n "$UFFD_BROKEN" ]; then
		bad uffd "$UFFD_BROKEN"
		return
	fi
	if [ -z "$UFFD_MODE" ]; then
		echo "SKIP uffd: cannot run here: $UFFD_WHY"
		return
	fi
	if ! differential uffd "$BUILD/uffd" semantics; then
		bad uffd "$REASON"
		return
	fi
	local m rc d
	# lazy mode with the barrier (the differential runs it in safe mode)
	run "$OUT/uffd.lazyuffd" lazyuffd "$BUILD/uffd" semantics
	if ! d=$(same uffd-lazy "$OUT/uffd.ref" "$OUT/uffd.lazyuffd" lazy); then
		bad uffd "lazy mode with the barrier differs from no-preload run ($d)"
		return
	fi
	for m in ref uffd; do
		run "$OUT/uffd-die.$m" "$m" sh -c '"$1" die; echo "status $?"' sh "$BUILD/uffd"
		rc=$(sed -n 's/^status //p' "$OUT/uffd-die.$m")
		if [ "$rc" != 139 ]; then
			bad uffd "a write without a handler: status $rc in $m, 139 expected ($OUT/uffd-die.$m)"
			return
		fi
	done
	# userfaultfd refused (seccomp, EPERM): plain mprotect, the same output,
	# and the report says why
	run "$OUT/uffd-deny.uffd" uffd env MMFOLD_STATS_FILE="$OUT/uffd-deny.json" \
		"$BUILD/uffd" deny "$BUILD/uffd" semantics
	if ! d=$(same uffd-deny "$OUT/uffd.ref" "$OUT/uffd-deny.uffd" uffd); then
		bad uffd "with userfaultfd refused the output differs ($d)"
		return
	fi
	if ! grep -q '"barrier":{"uffd":false,"why":"userfaultfd not permitted' "$OUT/uffd-deny.json"; then
		bad uffd "with userfaultfd refused the report does not say so ($OUT/uffd-deny.json)"
		return
	fi
	run "$OUT/uffd-proc.ref" ref "$BUILD/uffd" proc
	run "$OUT/uffd-proc.uffd" uffd "$BUILD/uffd" proc
	sed -e 's/maps r--p/maps rw-p/' -e 's/flags \[rd,mr,mw,me,ac\]/flags [rd,wr,mr,mw,me,uw,ac]/' \
		-e 's/uffd-wp 0/uffd-wp 1/' -e 's/mincore 0/mincore 1/' "$OUT/uffd-proc.ref" >"$OUT/uffd-proc.expected"
	if ! diff "$OUT/uffd-proc.expected" "$OUT/uffd-proc.uffd" >"$OUT/uffd-proc.diff"; then
		bad uffd "/proc differs otherwise than documented ($OUT/uffd-proc.diff)"
		return
	fi
	ok uffd
}

# The write-barrier test (barrier.c: 4 mutator threads, 2 spinners and the
# collector on 2 cores) many times with MMFOLD_BARRIER=uffd (every other
# run in lazy mode, the others in safe mode): every run must
# find the set of faulting pages equal to the set written in each of its 16
# rounds (no lost and no extra fault) and every write in place.
t_barrier_uffd() {
	local n=${BARRIER_UFFD_RUNS:-20} i nbad=0 first=''
	if [ -n "$UFFD_BROKEN" ]; then
		bad barrier-uffd "$UFFD_BROKEN"
		return
	fi
	if [ -z "$UFFD_MODE" ]; then
		echo "SKIP barrier-uffd: cannot run here: $UFFD_WHY"
		return
	fi
	local f0 f1
	f0=$(uffd_count barrier_faults)
	for i in $(seq 1 "$n"); do
		local m=uffd
		[ $((i % 2)) = 0 ] && m=lazyuffd
		run "$OUT/barrier-uffd.$i" $m "$BUILD/barrier" "$i"
		if [ "$(exit_of "$OUT/barrier-uffd.$i")" != 0 ] || ! grep -q '^barrier ok' "$OUT/barrier-uffd.$i"; then
			nbad=$((nbad + 1))
			run_failed "barrier-uffd: $OUT/barrier-uffd.$i"
			[ -n "$first" ] || first=$OUT/barrier-uffd.$i
		else
			rm -f "$OUT/barrier-uffd.$i"
		fi
	done
	f1=$(uffd_count barrier_faults)
	echo "barrier-uffd: $n runs, $nbad failed, $((f1 - f0)) faults passed on as SIGSEGV"
	if [ -n "$first" ]; then
		bad barrier-uffd "$nbad of $n runs failed; first: $first"
	elif [ $((f1 - f0)) -eq 0 ]; then
		bad barrier-uffd "no fault went through the barrier ($OUT/uffd-stats.json)"
	else
		ok barrier-uffd
	fi
}

# Flipping records (flip.c): FLIP_SEEDS seeds (default 4), each a
# differential (every mode against the run without mmfold), then
# FLIP_REPEAT more safe-mode runs (default 5) with FLIP_THREADS threads
# (default 8, four times the cores) that must print the same; a run that
# found a page allowing other than it asked for exits 1 and fails.  Then
# "flip race" (FLIP_RACE_CYCLES cycles, default 50000) the same way, then
# "flip pair" with two pages per thread and with three, records moving
# under them (FLIP_PAIR_CYCLES calls per thread, default 10000;
# FLIP_THREADS threads, a signal handler's calls between theirs) the same
# way, and
# "flip redundant" in safe mode with the JSON report: records made
# flipping (flip_begun) and given a protection again (flip_ended), and of
# its 1040 mprotect calls the 1000 that change nothing skipped but the one
# that ends the flipping.
t_flip() {
	local s k first='' seeds='' n=${FLIP_THREADS:-8} r=${FLIP_ROUNDS:-150} d runs=0
	local nseeds=${FLIP_SEEDS:-4}
	CUT=''
	for s in $(seq 1 "$nseeds"); do
		seed_cut "$s" "$nseeds" && break
		runs=$((runs + 1))
		if ! differential "flip-$s" "$BUILD/flip" "$s" "$r" "$n"; then
			seeds="$seeds $s"
			[ -z "$first" ] && first="seed $s: $REASON"
			continue
		fi
		for k in $(seq 1 "${FLIP_REPEAT:-5}"); do
			runs=$((runs + 1))
			run "$OUT/flip-$s.safe$k" safe "$BUILD/flip" "$s" "$r" "$n"
			if ! d=$(same "flip-$s.safe$k" "$OUT/flip-$s.ref" "$OUT/flip-$s.safe$k" safe); then
				seeds="$seeds $s"
				[ -z "$first" ] && first="seed $s, safe-mode run $k of ${FLIP_REPEAT:-5} differs ($d)"
				run_failed "flip: $first"
				break
			fi
		done
	done
	echo "flip: $runs safe-mode runs with $n threads (a seed's first in every mode), failing seeds:${seeds:- none}$CUT"
	if [ -n "$first" ]; then
		bad flip "failing seeds:$seeds; $first"
		return
	fi
	# "flip race": two threads meet on a flipping page, one ending the
	# flipping while the other's call is in flight; in every mode, then
	# FLIP_REPEAT more safe-mode runs
	local c=${FLIP_RACE_CYCLES:-50000}
	if ! differential flip-race "$BUILD/flip" race "$c"; then
		bad flip "flip race: $REASON"
		return
	fi
	for k in $(seq 1 "${FLIP_REPEAT:-5}"); do
		past_deadline && break
		run "$OUT/flip-race.safe$k" safe "$BUILD/flip" race "$c"
		if ! d=$(same "flip-race.safe$k" "$OUT/flip-race.ref" "$OUT/flip-race.safe$k" safe); then
			run_failed "flip race: safe-mode run $k differs ($d)"
			bad flip "flip race: safe-mode run $k of ${FLIP_REPEAT:-5} differs ($d)"
			return
		fi
	done
	# "flip pair": each thread's two pages in turn (the hint's other
	# slot), a signal handler learning another page's record in between;
	# then three pages in turn (neither slot holds the next: the record
	# looked up in the map and learned) while another thread moves the
	# workers' records in the map ("shift"); each in every mode, then
	# FLIP_REPEAT more safe-mode runs
	local pc=${FLIP_PAIR_CYCLES:-10000} np t
	for np in 2 "3 shift"; do
		t=flip-pair${np%% *}
		# shellcheck disable=SC2086 # np: the pages, and "shift"
		if ! differential "$t" "$BUILD/flip" pair "$pc" "$n" $np; then
			bad flip "flip pair $np: $REASON"
			return
		fi
		for k in $(seq 1 "${FLIP_REPEAT:-5}"); do
			past_deadline && break
			# shellcheck disable=SC2086
			run "$OUT/$t.safe$k" safe "$BUILD/flip" pair "$pc" "$n" $np
			if ! d=$(same "$t.safe$k" "$OUT/$t.ref" "$OUT/$t.safe$k" safe); then
				run_failed "flip pair $np: safe-mode run $k differs ($d)"
				bad flip "flip pair $np: safe-mode run $k of ${FLIP_REPEAT:-5} differs ($d)"
				return
			fi
		done
	done
	local f=$OUT/flip-stats.json
	rm -f "$f"
	run "$OUT/flip-redundant.ref" ref "$BUILD/flip" redundant
	run "$OUT/flip-redundant.safe" safe env MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json \
		MMFOLD_STATS_FILE="$f" "$BUILD/flip" redundant
	if ! d=$(same flip-redundant "$OUT/flip-redundant.ref" "$OUT/flip-redundant.safe" safe); then
		bad flip "flip redundant differs ($d)"
		return
	fi
	local m skipped begun ended
	m=$(grep -o '"mprotect":{[^}]*}' "$f" | head -1)
	skipped=$(grep -o '"skipped":[0-9]*' <<<"$m" | cut -d: -f2)
	begun=$(grep -o '"flip_begun":[0-9]*' "$f" | head -1 | cut -d: -f2)
	ended=$(grep -o '"flip_ended":[0-9]*' "$f" | head -1 | cut -d: -f2)
	if [ -z "$skipped" ] || [ -z "$begun" ] || [ -z "$ended" ]; then
		bad flip "no mprotect counts or flip events in the report ($f)"
	elif [ "$begun" -lt 1 ] || [ "$ended" -lt 1 ] || [ "$skipped" != 999 ]; then
		bad flip "flip redundant: flip_begun $begun, flip_ended $ended, skipped $skipped; want at least 1, at least 1, 999 ($f)"
		return
	fi
	# "flip failing": the kernel refuses a call the hot flip forwards
	# (EACCES), 20 times, each after the page became flipping again
	if ! differential flip-failing "$BUILD/flip" failing; then
		bad flip "flip failing: $REASON"
		return
	fi
	f=$OUT/flip-failing-stats.json
	rm -f "$f"
	run "$OUT/flip-failing.stats" safe env MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json \
		MMFOLD_STATS_FILE="$f" "$BUILD/flip" failing
	local errors
	m=$(grep -o '"mprotect":{[^}]*}' "$f" | head -1)
	errors=$(grep -o '"errors":[0-9]*' <<<"$m" | cut -d: -f2)
	begun=$(grep -o '"flip_begun":[0-9]*' "$f" | head -1 | cut -d: -f2)
	if [ "${errors:-0}" != 20 ] || [ "${begun:-0}" -lt 20 ]; then
		bad flip "flip failing: mprotect errors ${errors:-none}, flip_begun ${begun:-none}; want 20, at least 20 ($f)"
	else
		ok flip
	fi
}

tests=("$@")
[ ${#tests[@]} = 0 ] && tests=(walk walk-shape walk-bypass pastmap walk-stats errno_matrix contract contract-alone contract-stats setuid barrier uffd barrier-uffd ctor
	sigreentry jumpout lazyreuse flip clonefork forklock broken sigchain barrier-sigchain lazystress stopworld bypass)
for t in "${tests[@]}"; do
	case $t in
	walk) t_walk ;;
	walk-shape) t_walk_shape ;;
	walk-bypass) t_walk_bypass ;;
	pastmap) t_pastmap ;;
	walk-stats) t_walk_stats ;;
	errno_matrix) t_simple errno_matrix "$BUILD/errno_matrix" ;;
	contract) t_simple contract "$BUILD/contract" ;;
	# cases whose course depends on what mmfold learned before them
	# (huge-page density, W^X detection): each in a process of its own
	contract-alone) for c in thpjoin wxdontunmap lazyorder lockdrop; do t_simple "contract-$c" "$BUILD/contract" "$c"; done ;;
	contract-stats) t_contract_stats ;;
	setuid) t_setuid ;;
	barrier) t_simple barrier "$BUILD/barrier" 1 ;;
	uffd) t_uffd ;;
	barrier-uffd) t_barrier_uffd ;;
	ctor) t_simple ctor "$BUILD/ctor_main" ;;
	sigreentry) t_simple sigreentry "$BUILD/sigreentry" "${SIGREENTRY_ITER:-25000}" ;;
	jumpout) t_simple jumpout "$BUILD/jumpout" "${JUMPOUT_ROUNDS:-140}" ;;
	lazyreuse) t_simple lazyreuse "$BUILD/lazyreuse" 20000 "${LAZYREUSE_RUNS:-6}" ;;
	flip) t_flip ;;
	clonefork) t_simple clonefork "$BUILD/clonefork" "${CLONEFORK_ROUNDS:-30}" ;;
	forklock) t_simple forklock "$BUILD/forklock" "${FORKLOCK_FORKS:-300}" ;;
	broken) t_broken ;;
	lazystress) t_lazystress ;;
	stopworld) t_simple stopworld "$BUILD/stopworld" 2000 ;;
	bypass) t_bypass ;;
	sigchain) t_simple sigchain env MMFOLD_SIGCHAIN=on "$BUILD/sigchain" all ;;
	barrier-sigchain) t_simple barrier-sigchain env MMFOLD_SIGCHAIN=on "$BUILD/barrier" 2 ;;
	*) bad "$t" "unknown test" ;;
	esac
done
if [ -n "$UFFD_MODE" ]; then
	echo "uffd mode: $(uffd_count barrier_protected) calls write-protected, $(uffd_count barrier_unprotected) unprotected, $(uffd_count barrier_faults) faults passed on as SIGSEGV, $(uffd_count barrier_unwrapped) ranges made plain for another call"
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
