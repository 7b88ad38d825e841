#!/usr/bin/env bash
# Real-client tests: run real programs (node, java, luajit, a libgc program,
# a jemalloc program, headless chromium) without and with mmfold preloaded
# and require that stdout and the exit status are identical (for chromium
# also stderr, modulo what differs between runs without mmfold too).  Then
# sum the per-process JSON statistics of the mmfold runs into
# $BUILD/clients-table.md.
#
# usage: tests/clients/run.sh [name...]
#   names: node-jit node-gc java-g1 java-parallel java-zgc java-npe luajit
#          boehm jemalloc chromium (also the groups: node java all);
#          default: all
# env:   MMFOLD_LIB  absolute path of libmmfold.so (default: build/libmmfold.so)
#        BUILD       output directory (default: build/clients)
#        CLIENT_MODE   MMFOLD_MODE of the preloaded run (default: safe)
#        CLIENT_ENV    extra "NAME=value" settings (space-separated) for the
#                      preloaded run only, e.g. CLIENT_ENV="MMFOLD_SIGCHAIN=on";
#                      an exported MMFOLD_SIGCHAIN is passed on the same way
#        CLIENT_TIMEOUT  seconds allowed for a baseline run (default 300); the
#                      run under mmfold gets max(60, 10 x baseline time), at
#                      most CLIENT_TIMEOUT, so a hang cannot eat the budget
#        CLIENT_REPEAT  runs with mmfold per client (default 1); each is
#                      compared with the one run without, and the summary
#                      counts identical, differing, crashed and hung runs
#                      (a hung run's processes, blocked signals and stacks
#                      go to $BUILD/NAME.runI.hang before it is stopped)
#        TEST_DEADLINE  seconds since the epoch (none by default): with
#                      CLIENT_REPEAT, each client gets an equal share of the
#                      time left to it and stops repeating (after its first
#                      run) when that share is spent; the summary says how
#                      many runs each client made (CI's budget, .ci/run)
#        JEMALLOC_LIB  path of libjemalloc.so.2 (default: searched)
#        CC, CLIENT_CFLAGS  compiler and extra flags for the C clients
# Only MMFOLD_MODE, MMFOLD_STATS, MMFOLD_STATS_FORMAT, MMFOLD_STATS_FILE,
# MMFOLD_SIGCHAIN and CLIENT_ENV reach the clients (mmfold warns about
# unknown MMFOLD_* variables).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SRC=$ROOT/tests/clients
MMFOLD_LIB=${MMFOLD_LIB:-$ROOT/build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/clients}
MODE=${CLIENT_MODE:-safe}
TIMEOUT=${CLIENT_TIMEOUT:-300}
REPEAT=${CLIENT_REPEAT:-1}
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: CLIENT_REPEAT=$REPEAT is not a positive count" >&2; exit 2; }
read -ra EXTRA_ENV <<<"${CLIENT_ENV:-}"
[[ -n ${MMFOLD_SIGCHAIN:-} ]] && EXTRA_ENV+=("MMFOLD_SIGCHAIN=$MMFOLD_SIGCHAIN")
for v in "${EXTRA_ENV[@]}"; do
	[[ $v == *=* ]] || { echo "run.sh: CLIENT_ENV entry '$v' is not NAME=value" >&2; exit 2; }
done

case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
if [[ ! -f $MMFOLD_LIB ]]; then
	echo "run.sh: MMFOLD_LIB=$MMFOLD_LIB does not exist (run make first)" >&2
	exit 2
fi
mkdir -p "$BUILD"

# Strip every MMFOLD_* variable from the clients' environment; the runs set
# exactly the ones they need.
CLEAN_ENV=()
while read -r v; do
	[[ -n $v ]] && CLEAN_ENV+=(-u "$v")
done < <(compgen -e | grep '^MMFOLD_' || true)

ALL=(node-jit node-gc java-g1 java-parallel java-zgc java-npe luajit boehm jemalloc chromium)
names=()
for a in "${@:-all}"; do
	case $a in
	all) names+=("${ALL[@]}") ;;
	node) names+=(node-jit node-gc) ;;
	java) names+=(java-g1 java-parallel java-zgc java-npe) ;;
	node-jit | node-gc | java-g1 | java-parallel | java-zgc | java-npe | luajit | boehm | jemalloc | chromium)
		names+=("$a") ;;
	*)
		echo "run.sh: unknown client '$a' (known: ${ALL[*]} node java all)" >&2
		exit 2
		;;
	esac
done

CC=${CC:-gcc}
CFLAGS="-O2 -Wall -Wextra -Werror ${CLIENT_CFLAGS:-}"

# ---------------------------------------------------------------- helpers

SKIP_REASON=""
PRE_LOAD=""   # libraries preloaded in both runs (jemalloc)
CMD=()

find_jemalloc() {
	local p
	if [[ -n ${JEMALLOC_LIB:-} ]]; then
		[[ -f $JEMALLOC_LIB ]] && { echo "$JEMALLOC_LIB"; return 0; }
		return 1
	fi
	for p in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 \
		/usr/lib64/libjemalloc.so.2 /usr/lib/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2; do
		[[ -f $p ]] && { echo "$p"; return 0; }
	done
	p=$(ldconfig -p 2>/dev/null | awk '/libjemalloc\.so\.2 /{print $NF; exit}') || true
	[[ -n $p && -f $p ]] && { echo "$p"; return 0; }
	return 1
}

# Compile a C client if the binary is missing or older than its source.
build_c() { # out src libs...
	local out=$1 src=$2
	shift 2
	if [[ ! -x $out || $src -nt $out ]]; then
		# shellcheck disable=SC2086
		$CC $CFLAGS -o "$out.tmp" "$src" "$@" >"$out.build.log" 2>&1 || {
			cat "$out.build.log" >&2
			return 1
		}
		mv "$out.tmp" "$out"
	fi
}

# Sets CMD (and PRE_LOAD) for a client, building it if needed.  Returns 1
# with SKIP_REASON set when the client cannot run on this machine, 2 when
# building it failed.
prepare() {
	local name=$1
	CMD=()
	PRE_LOAD=""
	SKIP_REASON=""
	case $name in
	node-jit | node-gc)
		command -v node >/dev/null || { SKIP_REASON="node not installed"; return 1; }
		if [[ $name == node-jit ]]; then
			CMD=("$(command -v node)" "$SRC/node_jit.js")
		else
			CMD=("$(command -v node)" --expose-gc "$SRC/node_gc.js")
		fi
		;;
	java-g1 | java-parallel | java-zgc)
		command -v java >/dev/null || { SKIP_REASON="java not installed"; return 1; }
		local cls=$BUILD/java/AllocChurn.class
		if [[ ! -f $cls || $SRC/AllocChurn.java -nt $cls ]]; then
			command -v javac >/dev/null || { SKIP_REASON="javac not installed"; return 1; }
			mkdir -p "$BUILD/java"
			timeout 300 javac -d "$BUILD/java" "$SRC/AllocChurn.java" || return 2
		fi
		local gc=-XX:+UseG1GC
		[[ $name == java-parallel ]] && gc=-XX:+UseParallelGC
		if [[ $name == java-zgc ]]; then
			gc=-XX:+UseZGC
			timeout 60 java "$gc" -Xmx1g -version >/dev/null 2>&1 ||
				{ SKIP_REASON="this JVM has no ZGC (java -XX:+UseZGC -version fails)"; return 1; }
		fi
		CMD=("$(command -v java)" "$gc" -Xms256m -Xmx1g -cp "$BUILD/java" AllocChurn)
		;;
	java-npe)
		command -v java >/dev/null || { SKIP_REASON="java not installed"; return 1; }
		local npe=$BUILD/java/NullChecks.class
		if [[ ! -f $npe || $SRC/NullChecks.java -nt $npe ]]; then
			command -v javac >/dev/null || { SKIP_REASON="javac not installed"; return 1; }
			mkdir -p "$BUILD/java"
			timeout 300 javac -d "$BUILD/java" "$SRC/NullChecks.java" || return 2
		fi
		CMD=("$(command -v java)" -Xmx256m -cp "$BUILD/java" NullChecks)
		;;
	luajit)
		command -v luajit >/dev/null || { SKIP_REASON="luajit not installed"; return 1; }
		CMD=("$(command -v luajit)" "$SRC/luajit_traces.lua")
		;;
	boehm)
		if ! echo '#include <gc.h>' | $CC -E -x c - >/dev/null 2>&1; then
			SKIP_REASON="libgc-dev (gc.h) not installed"
			return 1
		fi
		build_c "$BUILD/boehm_inc" "$SRC/boehm_inc.c" -lgc || return 2
		CMD=("$BUILD/boehm_inc")
		;;
	jemalloc)
		PRE_LOAD=$(find_jemalloc) || { SKIP_REASON="libjemalloc.so.2 not found"; return 1; }
		build_c "$BUILD/jemalloc_churn" "$SRC/jemalloc_churn.c" -pthread || return 2
		CMD=("$BUILD/jemalloc_churn")
		;;
	chromium)
		command -v chromium >/dev/null || { SKIP_REASON="chromium not installed"; return 1; }
		# A fresh profile for every run (fresh_state); no network, no
		# GPU process, no sandbox (the sandbox needs user namespaces or
		# a setuid helper, and root may not use it).
		CMD=("$(command -v chromium)" --headless --no-sandbox --disable-gpu --disable-quic
			--no-first-run --disable-background-networking --disable-component-update
			--disable-sync --user-data-dir="$BUILD/chromium-profile"
			--dump-dom "file://$SRC/chromium_page.html")
		;;
	esac
	return 0
}

# State a client keeps between runs is reset before each run.
fresh_state() { # name
	if [[ $1 == chromium ]]; then
		rm -rf "$BUILD/chromium-profile"
		mkdir -p "$BUILD/chromium-profile"
	fi
}

# stderr as compared (chromium only): its log prefix (pid, tid, time) and
# every number dropped, one line per distinct message.  Established by
# running chromium without mmfold: the set of messages is the same from run
# to run (28 D-Bus errors, the launcher's complaint about /dev/shm), their
# pids, times and counts are not; on a loaded machine a run without mmfold
# also printed "Message N rejected by interface blink.mojom.FrameWidgetHost"
# (a frame message racing the page's teardown), so that line is left out;
# so is the GPU process's "SharedImageManager::ProduceMemory ... from a
# non-existent mailbox", printed by 2 of 60 runs without mmfold in a row on
# this machine class (and by 1 of 40 lazy-mode runs with it).
norm_err() { # file
	sed -E 's/^\[[0-9:\/.]*:(ERROR|WARNING|INFO|FATAL|VERBOSE[0-9]*):/[\1:/; s/[0-9]+/N/g' "$1" |
		grep -v -e '^mmfold' -e 'rejected by interface blink.mojom.FrameWidgetHost' \
			-e 'SharedImageManager::ProduceMemory' |
		LC_ALL=C sort -u
}

# chromium's stderr against its runs without mmfold: every message that
# all of them printed must be there, and none that no run without mmfold
# printed.  The first comparison is with the baseline run alone; when it
# differs, three more runs without mmfold are taken (once per client), and
# a message that some of them print and others do not is Chromium's own
# variation (CI saw a run without mmfold print a GPU "SharedImageManager::
# ProduceMemory ... non-existent mailbox" message that 30 other runs, with
# and without mmfold, loaded and not, never printed).  Sets err_diff
# (the messages missing and extra) when it fails.
chromium_err_ok() {
	local m=$BUILD/$name.mmfold.err dir=$BUILD/$name.refs k
	err_diff=""
	cmp -s <(norm_err "$BUILD/$name.base.err") <(norm_err "$m") && return 0
	if [[ ! -f $dir/all ]]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		norm_err "$BUILD/$name.base.err" >"$dir/0" || true
		for k in 1 2 3; do
			fresh_state "$name"
			timeout -k 10 "$TIMEOUT" env "${CLEAN_ENV[@]}" "${base_env[@]}" "${CMD[@]}" \
				>/dev/null 2>"$dir/$k.err" || true
			norm_err "$dir/$k.err" >"$dir/$k" || true
		done
		cp "$dir/0" "$dir/all"
		for k in 1 2 3; do
			LC_ALL=C comm -12 "$dir/all" "$dir/$k" >"$dir/all.tmp"
			mv "$dir/all.tmp" "$dir/all"
		done
		LC_ALL=C sort -u "$dir"/[0-3] >"$dir/any"
	fi
	local missing extra
	missing=$(LC_ALL=C comm -23 "$dir/all" <(norm_err "$m"))
	extra=$(LC_ALL=C comm -13 "$dir/any" <(norm_err "$m"))
	[[ -z $missing && -z $extra ]] && return 0
	if [[ -n $missing ]]; then err_diff+="< ${missing//$'\n'/$'\n'< }"$'\n'; fi
	if [[ -n $extra ]]; then err_diff+="> ${extra//$'\n'/$'\n'> }"; fi
	return 1
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# Sum the JSON reports of one client: prints
#   procs  then for each kind in mprotect madvise mlock mmap: calls skipped unproven
sum_reports() { # files...
	cat "$@" 2>/dev/null | awk '
	function field(obj, key,   r) {
		if (match(obj, "\"" key "\":[0-9]+")) {
			r = substr(obj, RSTART, RLENGTH)
			sub(/^.*:/, "", r)
			return r + 0
		}
		return 0
	}
	/"mmfold"/ {
		procs++
		for (i = 1; i <= nk; i++) {
			k = kinds[i]
			if (match($0, "\"" k "\":[{][^}]*[}]")) {
				obj = substr($0, RSTART, RLENGTH)
				calls[k] += field(obj, "calls")
				skipped[k] += field(obj, "skipped")
				unproven[k] += field(obj, "unproven")
			}
		}
	}
	BEGIN { nk = split("mprotect madvise mlock mmap", kinds, " ") }
	END {
		printf "%d", procs
		for (i = 1; i <= nk; i++) {
			k = kinds[i]
			printf " %d %d %d", calls[k], skipped[k], unproven[k]
		}
		printf "\n"
	}'
}

# ---------------------------------------------------------------- run

TABLE=$BUILD/clients-table.md
rows=()
pass=0
fail=0
skip=0
failed_names=()

echo "mmfold real-client tests"
echo "  library: $MMFOLD_LIB"
echo "  mode:    MMFOLD_MODE=$MODE${EXTRA_ENV[*]:+ ${EXTRA_ENV[*]}}"
echo "  output:  $BUILD"

# What every process of a hung run (session $1) was doing: state, kernel
# wait channel, blocked signals, and each thread's stack when gdb is there.
hang_dump() { # sid
	local p
	ps -eo pid,ppid,sid,stat,wchan:32,args | awk -v s="$1" 'NR == 1 || $3 == s' | cut -c1-240
	for p in $(ps -eo pid,sid | awk -v s="$1" '$2 == s { print $1 }'); do
		echo "=== $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-160)"
		grep -E '^(State|SigBlk|SigCgt)' "/proc/$p/status" 2>/dev/null
		if command -v gdb >/dev/null; then
			timeout 60 gdb -p "$p" -batch -ex 'thread apply all bt 12' 2>/dev/null |
				grep -E '^(Thread|#)' | head -200
		fi
	done
}

# One run with mmfold (run number $1 of the client set up by prepare):
# sets why (empty when identical), kind (same, differ, crash, hang), tm and
# the summed statistics.
mm_run() { # i
	local i=$1 mrc=0 t1 t2
	rm -f "$BUILD/$name".[0-9]*.json
	fresh_state "$name"
	t1=$(now)
	# In its own session, so that a hang can be looked at (hang_dump) and
	# every process of it stopped.
	setsid -w env "${CLEAN_ENV[@]}" LD_PRELOAD="$mm_preload" MMFOLD_MODE="$MODE" "${EXTRA_ENV[@]}" MMFOLD_STATS=1 \
		MMFOLD_STATS_FORMAT=json MMFOLD_STATS_FILE="$BUILD/$name.%p.json" "${CMD[@]}" \
		>"$mm_out" 2>"$BUILD/$name.mmfold.err" &
	local pid=$! waited=0
	while kill -0 "$pid" 2>/dev/null && ((waited < 10 * mm_timeout)); do
		sleep 0.1
		waited=$((waited + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		hang_dump "$pid" >"$BUILD/$name.run$i.hang" 2>&1 || true
		kill -TERM -- "-$pid" 2>/dev/null || true
		sleep 5
		kill -KILL -- "-$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		mrc=124
	else
		wait "$pid" || mrc=$?
	fi
	t2=$(now)
	tm=$(elapsed "$t1" "$t2")

	shopt -s nullglob
	reports=("$BUILD/$name".[0-9]*.json)
	shopt -u nullglob
	read -r procs mp_c mp_s mp_u ma_c ma_s ma_u ml_c ml_s ml_u mm_c mm_s mm_u \
		< <(sum_reports "${reports[@]}" /dev/null)

	why=""
	kind=differ
	if [[ $mrc == 124 || $mrc == 137 ]]; then
		why="timed out after ${mm_timeout}s with mmfold (the run without took ${tb}s; processes and stacks in $BUILD/$name.run$i.hang)"
		kind=hang
	elif [[ $mrc != "$brc" ]]; then
		why="exit status differs: without $brc, with mmfold $mrc (see $BUILD/$name.mmfold.err)"
		if ((mrc > 128)); then kind=crash; fi
	elif ! cmp -s "$base_out" "$mm_out"; then
		why="stdout differs"
	elif [[ $name == chromium ]] && ! chromium_err_ok; then
		why="stderr differs (numbers and repeated lines ignored; < printed by every run without mmfold, > by none)"
	elif [[ $procs == 0 ]]; then
		why="no mmfold statistics written (MMFOLD_STATS_FILE=$BUILD/$name.%p.json)"
	elif [[ $name == chromium ]] && ((procs < 3)); then
		why="statistics from $procs process(es) only: the preload did not reach chromium's children"
	fi
	if [[ -z $why ]]; then kind=same; fi
	if [[ -n $why ]] && ((REPEAT > 1)); then
		# Keep the evidence of each run that differed.
		cp "$mm_out" "$BUILD/$name.run$i.out" 2>/dev/null || true
		cp "$BUILD/$name.mmfold.err" "$BUILD/$name.run$i.err" 2>/dev/null || true
	fi
	return 0
}

left_names=${#names[@]}
for name in "${names[@]}"; do
	left_names=$((left_names - 1))
	rc=0
	prepare "$name" || rc=$?
	if [[ $rc == 1 ]]; then
		echo "SKIP $name: $SKIP_REASON"
		skip=$((skip + 1))
		rows+=("| $name | skipped: $SKIP_REASON | | | | | | | | |")
		continue
	elif [[ $rc != 0 ]]; then
		echo "FAIL $name: could not build the client"
		fail=$((fail + 1))
		failed_names+=("$name")
		rows+=("| $name | build failed | | | | | | | | |")
		continue
	fi

	base_out=$BUILD/$name.base.out
	mm_out=$BUILD/$name.mmfold.out
	rm -rf "$BUILD/$name.refs"
	rm -f "$BUILD/$name".run[0-9]*.out "$BUILD/$name".run[0-9]*.err

	base_env=(-u LD_PRELOAD)
	mm_preload=$MMFOLD_LIB
	if [[ -n $PRE_LOAD ]]; then
		base_env=(LD_PRELOAD="$PRE_LOAD")
		mm_preload=$PRE_LOAD:$MMFOLD_LIB
	fi

	# Baseline: no mmfold.  timeout/env are outside the preload on purpose.
	fresh_state "$name"
	t0=$(now)
	brc=0
	timeout -k 10 "$TIMEOUT" env "${CLEAN_ENV[@]}" "${base_env[@]}" "${CMD[@]}" \
		>"$base_out" 2>"$BUILD/$name.base.err" || brc=$?
	t1=$(now)
	tb=$(elapsed "$t0" "$t1")
	if [[ $brc != 0 ]]; then
		echo "FAIL $name: baseline run failed (exit $brc, see $BUILD/$name.base.err)"
		fail=$((fail + 1))
		failed_names+=("$name")
		rows+=("| $name | baseline failed | | | | | | | $tb | |")
		continue
	fi
	# With mmfold; a hang must not eat the whole time budget.
	mm_timeout=$(awk -v t="$tb" -v cap="$TIMEOUT" 'BEGIN { t = int(10 * t) + 1; if (t < 60) t = 60; if (t > cap) t = cap; print t }')
	n_same=0 n_differ=0 n_crash=0 n_hang=0 first_why="" first_i=0
	# this client's share of the time to TEST_DEADLINE
	my_end=''
	if [[ -n ${TEST_DEADLINE:-} ]]; then
		t=$(date +%s)
		my_end=$((t + (TEST_DEADLINE - t) / (left_names + 1)))
	fi
	for ((i = 1; i <= REPEAT; i++)); do
		if ((i > 1)) && [[ -n $my_end ]] && (($(date +%s) >= my_end)); then
			echo "  $name: TEST_DEADLINE: its share of the time is spent after $((i - 1)) of $REPEAT runs"
			break
		fi
		mm_run "$i"
		case $kind in
		same) n_same=$((n_same + 1)) ;;
		differ) n_differ=$((n_differ + 1)) ;;
		crash) n_crash=$((n_crash + 1)) ;;
		hang) n_hang=$((n_hang + 1)) ;;
		esac
		if [[ -n $why && -z $first_why ]]; then
			first_why=$why
			first_i=$i
			[[ $why == "stdout differs" ]] && diff "$base_out" "$mm_out" | head -20 | sed 's/^/    /' || true
			[[ $why == stderr* ]] && echo "$err_diff" | head -20 | sed 's/^/    /' || true
			if [[ -s $BUILD/$name.mmfold.err ]]; then
				echo "    last lines of $BUILD/$name.mmfold.err (run $i):"
				tail -n 5 "$BUILD/$name.mmfold.err" | sed 's/^/    | /'
			fi
		fi
		if ((REPEAT > 1)); then echo "  $name run $i/$REPEAT: $kind${why:+ ($why)} ${tm}s"; fi
	done
	why=$first_why

	# The Boehm client is only worth running if libgc really write-protects
	# its heap (mprotect-based dirty bits).
	if [[ $name == boehm ]] && ! grep -q 'heap write-protected (mprotect dirty bits): yes' "$base_out"; then
		echo "NOTE boehm: libgc did not use mprotect-based dirty bits on this system"
	fi

	# Anything mmfold itself said on stderr is worth a look.
	if grep -q '^mmfold' "$BUILD/$name.mmfold.err" 2>/dev/null; then
		grep '^mmfold' "$BUILD/$name.mmfold.err" | sort | uniq -c | head -5 |
			sed "s/^/NOTE $name: mmfold wrote on stderr: /"
	fi

	chained=$(cat "${reports[@]}" /dev/null | { grep -o '"signals_chained":[0-9]*' || true; } | cut -d: -f2 |
		awk '{ s += $1 } END { print s + 0 }')
	pct=$(awk -v s="$mp_s" -v c="$mp_c" 'BEGIN { if (c > 0) printf "%.1f%%", 100 * s / c; else printf "-" }')
	runs=""
	nrun=$((n_same + n_differ + n_crash + n_hang))
	((REPEAT == 1)) || runs=" in $nrun runs: $n_same identical, $n_differ differing, $n_crash crashed, $n_hang hung"
	if [[ -z $why ]]; then
		echo "PASS $name$runs (${tb}s without, ${tm}s with mmfold; $procs process(es); mprotect $mp_c calls, $mp_s skipped, $mp_u unproven; madvise $ma_c/$ma_s; mmap $mm_c/$mm_s; signals chained $chained)"
		pass=$((pass + 1))
		status=PASS
	else
		echo "FAIL $name$runs: ${first_i:+run $first_i: }$why"
		fail=$((fail + 1))
		failed_names+=("$name")
		status=FAIL
	fi
	((REPEAT == 1)) || status="$status ($n_same/$nrun identical, $n_differ differ, $n_crash crash, $n_hang hang)"
	rows+=("| $name | $status | $procs | $mp_c / $mp_s / $mp_u | $pct | $ma_c / $ma_s / $ma_u | $ml_c / $ml_s / $ml_u | $mm_c / $mm_s / $mm_u | $tb | $tm |")
done

{
	echo "Real clients, MMFOLD_MODE=$MODE${EXTRA_ENV[*]:+ ${EXTRA_ENV[*]}}; each cell: calls / skipped / unproven, summed over all processes."
	echo "Times are single runs (seconds, wall clock) and only indicative."
	echo
	echo "| client | result | processes | mprotect | mprotect skipped | madvise | mlock | mmap | time without (s) | time with (s) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	printf '%s\n' "${rows[@]}"
} >"$TABLE"

echo
cat "$TABLE"
echo
if ((skip > 0)); then echo "$skip skipped"; fi
if ((fail > 0)); then echo "failed: ${failed_names[*]}"; fi
echo "$pass passed, $fail failed"
((fail == 0))
