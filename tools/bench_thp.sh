#!/usr/bin/env bash
# mmfold large-folio benchmarks: what THP advice (MMFOLD_THP) and folio
# alignment (MMFOLD_ALIGN) do to real programs and to mprotect-heavy loops.
#
# Every workload runs in several configurations, alternating (none, off,
# default, none, off, default, ...), BENCH_REPS rounds:
#   none     no LD_PRELOAD (jemalloc: LD_PRELOAD=libjemalloc.so.2 only)
#   off      LD_PRELOAD=$MMFOLD_LIB MMFOLD_MODE=off (interposed, does nothing)
#   default  LD_PRELOAD=$MMFOLD_LIB and no MMFOLD_* variable: the defaults
#            (MMFOLD_MODE=safe, MMFOLD_THP=auto, MMFOLD_ALIGN=auto; a build
#            without the large-folio feature does nothing more than off)
# and, where there is one, a reference without mmfold that shows what the
# feature should reach:
#   thpref    java -XX:+UseTransparentHugePages (the JVM madvises its heap)
#   selfalign the test program aligns its mappings to 64 KiB itself (-a 64)
# Each cell is the median (min-max) over the rounds.  Every process runs
# under tools/bench/runstat.c, which counts minor faults of the whole
# process tree (getrusage RUSAGE_CHILDREN), its peak RSS, the peak
# AnonHugePages of the command, and the system-wide THP fault counters.
#
# Sections (BENCH_ONLY takes these names or the group names):
#   java:     java_g1 java_parallel java_shenandoah java_zgc
#             (tools/bench/ThpAlloc.java)
#   clients:  node luajit boehm jemalloc
#   mthp:     mthp_always mthp_inherit (tools/bench/small_maps.c; sets
#             hugepages-64kB/enabled)
#   mprotect: mprotect_4k mprotect_64k mprotect_2m mprotect_default
#             mprotect_many mprotect_many_4k (tools/bench/mprotect_loop.c; sets
#             hugepages-64kB/enabled)
# Every sysfs file the script writes is restored when the workload ends,
# and again on exit (also on errors and on SIGINT/SIGTERM); if the script
# is killed with SIGKILL, run $BUILD/restore_sysfs.sh.
#
# usage: tools/bench_thp.sh            (root needed for the mthp and mprotect
#                                       sections that change sysfs settings)
# env:   MMFOLD_LIB   absolute path of libmmfold.so (default build/libmmfold.so)
#        BUILD        output directory (default build/bench_thp); the report
#                     is $BUILD/bench_thp.md, raw figures in $BUILD/raw
#        BENCH_REPS   rounds (default 5; fewer is allowed for a smoke test and
#                     is marked so in the report)
#        BENCH_ONLY   space-separated workload or group names (default: all)
#        BENCH_TIMEOUT     seconds allowed per run (default 300)
#        BENCH_MPROTECT_MB size of the single mapping of the mprotect loop
#                     (default 1024)
#        BENCH_PREWARM_MB  before every measured run, touch and free this many
#                     MiB with MADV_HUGEPAGE (default 2048; 0 = no
#                     pre-warming).  On a VM with free page reporting the
#                     guest hands free 2 MiB blocks back to the host within
#                     seconds, and a huge page's first touch then costs host
#                     faults: without pre-warming, a THP run after a 4 KiB
#                     run was up to 2x slower than after another THP run
#        BENCH_ORDER  alternate (default: every round runs the configurations
#                     in the same order, A B C A B C ...) or mirror (odd
#                     rounds A B C, even rounds C B A: each configuration
#                     follows different ones, which evens out what the
#                     previous run left in memory)
#        BENCH_DEFAULT_ENV extra VAR=value words for the default
#                     configuration (e.g. "MMFOLD_ALIGN=off"); default none
#        JEMALLOC_LIB path of libjemalloc.so.2 (default: searched)
#        CC, CLIENT_CFLAGS  compiler and extra flags for the C programs
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMFOLD_LIB=${MMFOLD_LIB:-$ROOT/build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/bench_thp}
REPS=${BENCH_REPS:-5}
TIMEOUT=${BENCH_TIMEOUT:-300}
MPROTECT_MB=${BENCH_MPROTECT_MB:-1024}
PREWARM_MB=${BENCH_PREWARM_MB:-2048}
ORDER=${BENCH_ORDER:-alternate}
case $ORDER in alternate | mirror) ;; *) echo "bench_thp.sh: BENCH_ORDER must be alternate or mirror" >&2; exit 2 ;; esac
read -r -a DEFAULT_ENV <<<"${BENCH_DEFAULT_ENV:-}"
case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
if [[ ! -f $MMFOLD_LIB ]]; then
	echo "bench_thp.sh: MMFOLD_LIB=$MMFOLD_LIB does not exist (run make first)" >&2
	exit 2
fi
if [[ ! $REPS =~ ^[0-9]+$ ]] || ((REPS < 1)); then
	echo "bench_thp.sh: BENCH_REPS must be a positive number" >&2
	exit 2
fi
for v in TIMEOUT MPROTECT_MB PREWARM_MB; do
	if [[ ! ${!v} =~ ^[0-9]+$ ]]; then
		echo "bench_thp.sh: $v must be a number (got '${!v}')" >&2
		exit 2
	fi
done
CC=${CC:-gcc}
CFLAGS="-O2 -Wall -Wextra -Werror ${CLIENT_CFLAGS:-}"
THP=/sys/kernel/mm/transparent_hugepage
SRC=$ROOT/tools/bench
mkdir -p "$BUILD/raw" "$BUILD/java"
rm -f "$BUILD"/raw/*
T_START=$(date +%s)

# Only the variables set below reach the benchmarks.
CLEAN_ENV=(-u LD_PRELOAD)
while read -r v; do
	[[ -n $v ]] && CLEAN_ENV+=(-u "$v")
done < <(compgen -e | grep '^MMFOLD_' || true)

# ---------------------------------------------------------------- sysfs
# ORIG[file] = the value found before the first write; restored on exit.
declare -A ORIG=()
SYSFS_OK=1
SYSFS_WHY=""
if [[ ! -d $THP ]]; then
	SYSFS_OK=0
	SYSFS_WHY="$THP does not exist"
elif [[ $(id -u) != 0 ]]; then
	SYSFS_OK=0
	SYSFS_WHY="not root (cannot write $THP)"
fi

sysfs_get() { # file -> the selected value ("[x]"), or the content
	local s
	s=$(cat "$1" 2>/dev/null) || { echo "?"; return; }
	if [[ $s =~ \[([a-z+]+)\] ]]; then echo "${BASH_REMATCH[1]}"; else echo "$s"; fi
}

sysfs_set() { # file value
	local f=$1 v=$2
	if [[ -z ${ORIG[$f]+x} ]]; then
		ORIG[$f]=$(sysfs_get "$f")
		echo "echo ${ORIG[$f]} > $f" >>"$BUILD/restore_sysfs.sh"
	fi
	[[ $(sysfs_get "$f") == "$v" ]] && return 0
	if ! echo "$v" >"$f" 2>/dev/null || [[ $(sysfs_get "$f") != "$v" ]]; then
		echo "bench_thp.sh: cannot set $f to $v" >&2
		return 1
	fi
}

sysfs_restore() {
	local f
	for f in "${!ORIG[@]}"; do
		if [[ $(sysfs_get "$f") != "${ORIG[$f]}" ]]; then
			echo "${ORIG[$f]}" >"$f" 2>/dev/null || true
			if [[ $(sysfs_get "$f") != "${ORIG[$f]}" ]]; then
				echo "bench_thp.sh: could NOT restore $f to ${ORIG[$f]} (now $(sysfs_get "$f"))" >&2
			fi
		fi
	done
}
printf '#!/bin/sh\n# written by tools/bench_thp.sh: restores the THP settings it changed\n' >"$BUILD/restore_sysfs.sh"
chmod +x "$BUILD/restore_sysfs.sh"
trap 'sysfs_restore' EXIT
trap 'sysfs_restore; trap - EXIT; exit 130' INT
trap 'sysfs_restore; trap - EXIT; exit 143' TERM
trap 'sysfs_restore; trap - EXIT; exit 129' HUP

thp_settings() { # one line: the THP settings now
	local d s=""
	s="enabled=$(sysfs_get $THP/enabled) defrag=$(sysfs_get $THP/defrag)"
	for d in $(printf '%s\n' "$THP"/hugepages-*kB | sort -t- -k2 -n); do
		[[ -f $d/enabled ]] && s+=" ${d##*/}=$(sysfs_get "$d/enabled")"
	done
	echo "$s"
}
THP_AT_START=$(thp_settings)

# ---------------------------------------------------------------- build
build_c() { # out src libs...
	local out=$1 src=$2
	shift 2
	if [[ ! -x $out || $src -nt $out || $SRC/common.h -nt $out || $SRC/thp_common.h -nt $out ]]; then
		# shellcheck disable=SC2086
		$CC $CFLAGS -o "$out.tmp" "$src" "$@"
		mv "$out.tmp" "$out"
	fi
}
build_c "$BUILD/runstat" "$SRC/runstat.c" -pthread
for b in small_maps mprotect_loop; do
	build_c "$BUILD/$b" "$SRC/$b.c"
done
HAVE_GC=1
if echo '#include <gc.h>' | $CC -E -x c - >/dev/null 2>&1; then
	build_c "$BUILD/demo_gc" "$ROOT/tools/demo_gc.c" -lgc
else
	HAVE_GC=0
fi
build_c "$BUILD/jemalloc_churn" "$ROOT/tests/clients/jemalloc_churn.c" -pthread

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

JAVA_OK=""
java_ready() {
	[[ -n $JAVA_OK ]] && { [[ $JAVA_OK == yes ]]; return; }
	JAVA_OK=no
	command -v java >/dev/null && command -v javac >/dev/null || return 1
	if [[ ! -f $BUILD/java/ThpAlloc.class || $SRC/ThpAlloc.java -nt $BUILD/java/ThpAlloc.class ]]; then
		timeout 300 javac -d "$BUILD/java" "$SRC/ThpAlloc.java" || return 1
	fi
	JAVA_OK=yes
}

# ---------------------------------------------------------------- workloads
ALL=(java_g1 java_parallel java_shenandoah java_zgc node luajit boehm jemalloc mthp_always mthp_inherit
	mprotect_4k mprotect_64k mprotect_2m mprotect_default mprotect_many mprotect_many_4k)
declare -A GROUP=(
	[java]="java_g1 java_parallel java_shenandoah java_zgc"
	[clients]="node luajit boehm jemalloc"
	[mthp]="mthp_always mthp_inherit"
	[mprotect]="mprotect_4k mprotect_64k mprotect_2m mprotect_default mprotect_many mprotect_many_4k"
	[all]="${ALL[*]}"
)
selected=()
for w in ${BENCH_ONLY:-all}; do
	if [[ -n ${GROUP[$w]:-} ]]; then
		read -r -a g <<<"${GROUP[$w]}"
		selected+=("${g[@]}")
	elif [[ " ${ALL[*]} " == *" $w "* ]]; then
		selected+=("$w")
	else
		echo "bench_thp.sh: unknown workload '$w' (known: ${ALL[*]}; groups: java clients mthp mprotect all)" >&2
		exit 2
	fi
done

JAVA_ARGS=(-Xms64m -Xmx1536m -cp "$BUILD/java" ThpAlloc 384 120)
SMALL_ARGS=(-n 2000 -l 64 -h 1024)
MANY_ARGS=(-n 2000 -l 64 -h 128 -r 40)
H64=$THP/hugepages-64kB/enabled

# define NAME: sets KIND CMD PRE_LOAD SYSFS CFGS DESC CHECK INTERVAL SKIP
define() {
	KIND="" CMD=() PRE_LOAD="" SYSFS=() CFGS=(none off default) DESC="" CHECK=1 INTERVAL=100 SKIP=""
	case $1 in
	java_g1 | java_parallel | java_shenandoah | java_zgc)
		KIND=java
		local gc=-XX:+UseG1GC
		[[ $1 == java_parallel ]] && gc=-XX:+UseParallelGC
		[[ $1 == java_shenandoah ]] && gc=-XX:+UseShenandoahGC
		[[ $1 == java_zgc ]] && gc=-XX:+UseZGC
		java_ready || SKIP="java/javac not available or ThpAlloc.java did not compile"
		[[ -z $SKIP ]] && ! java "$gc" -version >/dev/null 2>&1 && SKIP="this JDK has no $gc"
		CMD=("$(command -v java || echo java)" "$gc" "${JAVA_ARGS[@]}")
		CFGS=(none off default thpref)
		DESC="ThpAlloc (384 MiB live set, 120 churn rounds), $gc"
		;;
	node)
		KIND=client
		command -v node >/dev/null || SKIP="node not installed"
		CMD=("$(command -v node || echo node)" --expose-gc "$ROOT/tests/clients/node_gc.js")
		DESC="node, GC-heavy (tests/clients/node_gc.js)"
		;;
	luajit)
		KIND=client
		command -v luajit >/dev/null || SKIP="luajit not installed"
		CMD=("$(command -v luajit || echo luajit)" "$ROOT/tests/clients/luajit_traces.lua")
		DESC="luajit (tests/clients/luajit_traces.lua)"
		;;
	boehm)
		KIND=client
		((HAVE_GC)) || SKIP="libgc-dev (gc.h) not installed"
		CMD=("$BUILD/demo_gc")
		DESC="Boehm GC incremental (tools/demo_gc.c)"
		;;
	jemalloc)
		KIND=client
		PRE_LOAD=$(find_jemalloc) || SKIP="libjemalloc.so.2 not found"
		CMD=("$BUILD/jemalloc_churn")
		DESC="jemalloc churn, libjemalloc.so.2 preloaded first (tests/clients/jemalloc_churn.c)"
		;;
	mthp_always | mthp_inherit)
		KIND=mthp
		CHECK=0 INTERVAL=0
		CFGS=(none off default selfalign)
		[[ -f $H64 ]] || SKIP="no 64 KiB mTHP on this kernel ($H64)"
		((SYSFS_OK)) || SKIP=$SYSFS_WHY
		CMD=("$BUILD/small_maps" "${SMALL_ARGS[@]}")
		if [[ $1 == mthp_always ]]; then
			SYSFS=("$H64=always")
			DESC="2000 mappings of 64 KiB-1 MiB interleaved with 4/12 KiB ones, 64 KiB mTHP always"
		else
			SYSFS=("$H64=inherit")
			CMD+=(-H)
			DESC="same, 64 KiB mTHP inherit (top-level $(sysfs_get $THP/enabled)), program madvises MADV_HUGEPAGE"
			[[ $(sysfs_get $THP/enabled) == never ]] && SKIP="top-level THP is never"
		fi
		;;
	mprotect_*)
		KIND=mprotect
		CHECK=0 INTERVAL=0
		[[ -f $H64 ]] || SKIP="no 64 KiB mTHP on this kernel ($H64)"
		((SYSFS_OK)) || SKIP=$SYSFS_WHY
		CMD=("$BUILD/mprotect_loop" -m "$MPROTECT_MB" -r 40)
		case $1 in
		mprotect_4k)
			SYSFS=("$H64=never")
			CMD+=(-p nohuge)
			DESC="$MPROTECT_MB MiB, MADV_NOHUGEPAGE (4 KiB pages)"
			;;
		mprotect_64k)
			SYSFS=("$H64=always")
			CMD+=(-p none)
			DESC="$MPROTECT_MB MiB, no advice, 64 KiB mTHP always"
			;;
		mprotect_2m)
			SYSFS=("$H64=never")
			CMD+=(-p huge)
			DESC="$MPROTECT_MB MiB, MADV_HUGEPAGE (PMD THP)"
			;;
		mprotect_default)
			SYSFS=("$H64=never")
			CMD+=(-p none)
			DESC="$MPROTECT_MB MiB, no advice, 64 KiB mTHP never (what a program that does nothing gets)"
			;;
		mprotect_many)
			SYSFS=("$H64=always")
			CMD=("$BUILD/mprotect_loop" "${MANY_ARGS[@]}")
			CFGS=(none off default selfalign)
			DESC="2000 mappings of 64-128 KiB between 4/12 KiB PROT_NONE guards, 64 KiB mTHP always"
			;;
		mprotect_many_4k)
			SYSFS=("$H64=never")
			CMD=("$BUILD/mprotect_loop" "${MANY_ARGS[@]}")
			CFGS=(none off default selfalign)
			DESC="control: the same with 64 KiB mTHP never (4 KiB pages only; alignment cannot matter)"
			;;
		esac
		;;
	esac
	return 0
}

# cfg NAME CFG: sets RUN_ENV and RUN_CMD (after define NAME)
cfg() {
	local c=$2
	RUN_ENV=()
	RUN_CMD=("${CMD[@]}")
	local pre=$MMFOLD_LIB
	[[ -n $PRE_LOAD ]] && pre=$PRE_LOAD:$MMFOLD_LIB
	case $c in
	none | thpref | selfalign)
		[[ -n $PRE_LOAD ]] && RUN_ENV=(LD_PRELOAD="$PRE_LOAD")
		;;
	off) RUN_ENV=(LD_PRELOAD="$pre" MMFOLD_MODE=off) ;;
	default) RUN_ENV=(LD_PRELOAD="$pre" "${DEFAULT_ENV[@]}") ;;
	esac
	if [[ $c == thpref ]]; then
		RUN_CMD=("${CMD[0]}" -XX:+UseTransparentHugePages "${CMD[@]:1}")
	elif [[ $c == selfalign ]]; then
		RUN_CMD+=(-a 64)
	fi
	return 0
}

cfg_label() {
	case $1 in
	none) echo "none" ;;
	off) echo "off" ;;
	default) echo "default" ;;
	thpref) echo "ref: none + -XX:+UseTransparentHugePages" ;;
	selfalign) echo "ref: none, program aligns to 64 KiB (-a 64)" ;;
	esac
}

short() { # a command line with $BUILD and $ROOT shortened
	local s="$*"
	# shellcheck disable=SC2016 # a literal $BUILD in the report
	s=${s//"$BUILD"/'$BUILD'}
	s=${s//"$ROOT"\//}
	echo "$s"
}

declare -A FAILS=() OUTDIFF=() LIB_SAID=() CMDS=() SYSFS_USED=() SKIPPED=() DESCS=() WCFGS=() WKIND=()
NFAIL=0

run_one() { # name cfg rep
	local w=$1 c=$2 r=$3 rc=0
	local stat=$BUILD/raw/$w.$c.$r.stat out=$BUILD/raw/$w.$c.$r.out err=$BUILD/raw/$w.$c.$r.err
	cfg "$w" "$c"
	if ((PREWARM_MB > 0)); then
		timeout -k 10 "$TIMEOUT" env "${CLEAN_ENV[@]}" "$BUILD/mprotect_loop" -m "$PREWARM_MB" -r 0 -p huge >/dev/null || true
	fi
	timeout -k 10 "$TIMEOUT" env "${CLEAN_ENV[@]}" "$BUILD/runstat" -o "$stat" -i "$INTERVAL" -- \
		env "${RUN_ENV[@]}" "${RUN_CMD[@]}" >"$out" 2>"$err" || rc=$?
	if ((rc != 0)) || [[ ! -s $stat ]]; then
		FAILS[$w]+="$c#$r(exit $rc) "
		NFAIL=$((NFAIL + 1))
		echo "   FAIL $c round $r: exit $rc; last lines of $err:" >&2
		tail -n 5 "$err" | sed 's/^/     | /' >&2
		rm -f "$stat"
		return 0
	fi
	if ((CHECK)); then
		if [[ ! -f $BUILD/raw/$w.ref.out ]]; then
			cp "$out" "$BUILD/raw/$w.ref.out"
		elif ! cmp -s "$out" "$BUILD/raw/$w.ref.out"; then
			OUTDIFF[$w]+="$c#$r "
		fi
	else
		# The program's own figures, prefixed p_.
		sed -E 's/(^| )([a-z0-9_]+)=/\1p_\2=/g' "$out" >>"$stat"
	fi
	if grep -q '^mmfold' "$err"; then
		LIB_SAID[$w]+="$(grep '^mmfold' "$err" | head -3 | tr '\n' ' ')"
	fi
}

# ---------------------------------------------------------------- figures
getv() { # statfile key -> value
	awk -v k="$2" '{ for (i = 1; i <= NF; i++) { n = index($i, "="); if (n && substr($i, 1, n - 1) == k) { print substr($i, n + 1); exit } } }' "$1"
}
# value of a key; derived keys: mthp64 / mthp2048 (runstat's mthp field)
value() { # statfile key
	local v
	case $2 in
	mthp[0-9]*)
		v=$(getv "$1" mthp)
		awk -v s="$v" -v kb="${2#mthp}" 'BEGIN { n = split(s, a, ","); for (i = 1; i <= n; i++) { split(a[i], b, ":"); if (b[1] == kb "kB") { print b[2]; exit } } print 0 }'
		;;
	*) getv "$1" "$2" ;;
	esac
}
# median min max of KEY over the rounds of NAME CFG ("nan nan nan" if none)
stat3() { # name cfg key
	local f
	for f in "$BUILD/raw/$1.$2".*.stat; do
		[[ -f $f ]] && value "$f" "$3"
	done | grep -E '^-?[0-9.]+(e[-+]?[0-9]+)?$' | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan nan nan"; exit }
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.10g %.10g %.10g\n", m, v[1], v[NR] }'
}
fmt() { # number [scale] -> compact
	awk -v x="$1" -v s="${2:-1}" 'BEGIN {
		if (x == "nan" || x == "") { print "-"; exit }
		x = x / s
		if (x == int(x) && x < 1e12) printf "%d", x
		else if (x >= 1000) printf "%.0f", x
		else if (x >= 100) printf "%.1f", x
		else if (x >= 10) printf "%.2f", x
		else printf "%.3g", x }'
}
cell() { # name cfg key [scale]
	local m lo hi
	read -r m lo hi < <(stat3 "$1" "$2" "$3")
	[[ $m == nan ]] && { echo "-"; return; }
	if [[ $lo == "$hi" ]]; then fmt "$m" "${4:-1}"; return; fi
	echo "$(fmt "$m" "${4:-1}") ($(fmt "$lo" "${4:-1}")–$(fmt "$hi" "${4:-1}"))"
}
med() { local m _a _b; read -r m _a _b < <(stat3 "$@"); echo "$m"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "nan" && b != "nan" && b > 0) printf "%.3f", a / b; else printf "-" }'; }

# ---------------------------------------------------------------- run
echo "mmfold large-folio benchmarks"
echo "  command:  BENCH_REPS=$REPS MMFOLD_LIB=$MMFOLD_LIB BUILD=$BUILD${BENCH_ONLY:+ BENCH_ONLY=\"$BENCH_ONLY\"} $ROOT/tools/bench_thp.sh"
echo "  machine:  $(nproc) CPU(s), $(uname -sr), $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  THP:      $THP_AT_START"
echo "  prewarm:  ${PREWARM_MB} MiB before every run; order of configurations: $ORDER"
((SYSFS_OK)) || echo "  NOTE: $SYSFS_WHY: the mthp and mprotect sections are skipped"
[[ $(sysfs_get $THP/enabled) == madvise ]] || echo "  NOTE: top-level THP is '$(sysfs_get $THP/enabled)', not madvise: MMFOLD_THP=auto only acts under madvise"
echo "  restore:  $BUILD/restore_sysfs.sh (if this script is killed with SIGKILL)"
echo

ran=()
for w in "${selected[@]}"; do
	define "$w"
	DESCS[$w]=$DESC
	WKIND[$w]=$KIND
	if [[ -n $SKIP ]]; then
		echo "SKIP $w: $SKIP"
		SKIPPED[$w]=$SKIP
		continue
	fi
	ran+=("$w")
	WCFGS[$w]="${CFGS[*]}"
	# sysfs settings for this workload
	sset=""
	for s in "${SYSFS[@]}"; do
		sysfs_set "${s%%=*}" "${s#*=}"
		sset+="${s#"$THP"/}; "
	done
	sset=${sset%; }
	SYSFS_USED[$w]=$sset
	echo "== $w: $DESC${sset:+ [sysfs: $sset]}"
	cmds=""
	for c in "${CFGS[@]}"; do
		cfg "$w" "$c"
		line=$(short "${RUN_ENV[@]}" "${RUN_CMD[@]}")
		echo "   $c: $line"
		cmds+="$c|$line"$'\n'
	done
	CMDS[$w]=$cmds
	for ((r = 1; r <= REPS; r++)); do
		line="   round $r:"
		order=("${CFGS[@]}")
		if [[ $ORDER == mirror ]] && ((r % 2 == 0)); then
			order=()
			for ((k = ${#CFGS[@]} - 1; k >= 0; k--)); do order+=("${CFGS[k]}"); done
		fi
		for c in "${order[@]}"; do
			run_one "$w" "$c" "$r"
			f=$BUILD/raw/$w.$c.$r.stat
			if [[ ! -f $f ]]; then
				line+=" $c FAIL"
			elif [[ $KIND == java || $KIND == client ]]; then
				line+=" $c $(fmt "$(value "$f" wall_s)")s/$(fmt "$(value "$f" minflt)")flt"
			elif [[ $KIND == mthp ]]; then
				line+=" $c 64K:$(value "$f" p_mthp64k)/flt:$(value "$f" p_minflt)"
			else
				line+=" $c $(fmt "$(value "$f" p_ns_per_call)" 1000)us"
			fi
		done
		echo "$line"
	done
	sysfs_restore
	echo
done

# ---------------------------------------------------------------- report
T_END=$(date +%s)
MD=$BUILD/bench_thp.md
has() { local x; for x in "${ran[@]}"; do [[ $x == "$1" ]] && return 0; done; return 1; }
any_kind() { local x; for x in "${ran[@]}"; do [[ ${WKIND[$x]} == "$1" ]] && return 0; done; return 1; }
outcell() { # name
	if [[ -n ${OUTDIFF[$1]:-} ]]; then echo "DIFFERS (${OUTDIFF[$1]% })"; else echo "identical"; fi
}

{
	echo "# mmfold large-folio benchmarks"
	echo
	echo "- Command: \`BENCH_REPS=$REPS${BENCH_ONLY:+ BENCH_ONLY=\"$BENCH_ONLY\"}${BENCH_DEFAULT_ENV:+ BENCH_DEFAULT_ENV=\"$BENCH_DEFAULT_ENV\"}$( ((PREWARM_MB != 2048)) && echo " BENCH_PREWARM_MB=$PREWARM_MB")$([[ $ORDER != alternate ]] && echo " BENCH_ORDER=$ORDER") tools/bench_thp.sh\` (MMFOLD_LIB=$MMFOLD_LIB, BUILD=$BUILD); $(date -u '+%Y-%m-%d %H:%M UTC'); total run time $((T_END - T_START)) s."
	echo "- Machine: $(nproc) CPU(s), $(uname -sr), $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
	echo "- THP settings at start: \`$THP_AT_START\`; after the run: \`$(thp_settings)\`."
	echo "- Library: $MMFOLD_LIB ($(stat -c '%s bytes, modified %y' "$MMFOLD_LIB" | cut -d. -f1)); source tree $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)."
	echo "- Configurations, alternating in every round ($REPS rounds, order: $ORDER$( ((REPS < 5)) && echo ': FEWER THAN 5, a smoke test only')): **none** = no LD_PRELOAD; **off** = LD_PRELOAD=libmmfold.so MMFOLD_MODE=off; **default** = LD_PRELOAD=libmmfold.so, no MMFOLD_* variable${BENCH_DEFAULT_ENV:+ except $BENCH_DEFAULT_ENV}; **ref** rows run without mmfold and show what the feature should reach."
	echo "- Cells: median (min–max). Minor faults and peak RSS cover the whole process tree (getrusage RUSAGE_CHILDREN in tools/bench/runstat.c; peak RSS is that of the largest process). THP fault counts are deltas of system-wide counters (/proc/vmstat thp_fault_alloc, hugepages-64kB/stats/anon_fault_alloc) and include any other process faulting at the same time."
	if ((PREWARM_MB > 0)); then
		echo "- Memory was pre-warmed: right before every measured run, $PREWARM_MB MiB were touched (MADV_HUGEPAGE) and freed (\`mprotect_loop -m $PREWARM_MB -r 0 -p huge\`), so each run starts with memory the host backs, whatever ran before it. Without this, on a VM with free page reporting, a THP-backed run that follows a 4 KiB-page run gets huge pages whose first touch costs host faults (a JVM run was up to 2x slower for that reason alone)."
	else
		echo "- Memory was not pre-warmed: the runs follow each other back to back, so a run may get pages that an earlier run freed and the host still backs, or pages the guest already handed back (free page reporting), whose first touch is several times slower. Wall and touch times carry that noise; the fault and folio counts do not."
	fi
	echo
	if any_kind java || any_kind client; then
		echo "## Java and other real clients"
		echo
		echo "| workload | config | wall s | user s | sys s | minor faults | peak RSS MiB | AnonHugePages peak MiB | PMD THP faults | 64K mTHP faults | output |"
		echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
		for w in "${ran[@]}"; do
			[[ ${WKIND[$w]} == java || ${WKIND[$w]} == client ]] || continue
			for c in ${WCFGS[$w]}; do
				echo "| $w | $(cfg_label "$c") | $(cell "$w" "$c" wall_s) | $(cell "$w" "$c" user_s) | $(cell "$w" "$c" sys_s) | $(cell "$w" "$c" minflt) | $(cell "$w" "$c" maxrss_kb 1024) | $(cell "$w" "$c" anonhuge_peak_kb 1024) | $(cell "$w" "$c" thp_fault_alloc) | $(cell "$w" "$c" mthp64) | $(outcell "$w") |"
			done
		done
		echo
		echo "Ratios of medians (default/none, off/none). Target for the clients (node, luajit, boehm, jemalloc): wall time at most +2%, peak RSS at most +10%, default against none; the java rows are judged the same way for information. Where off/none is as far from 1 as default/none, the difference is interposition or noise, not the large-folio feature."
		echo
		echo "| workload | wall default/none | wall off/none | minor faults default/none | peak RSS default/none | target | ref: minor faults ref/none, wall ref/none |"
		echo "|---|---:|---:|---:|---:|---|---|"
		for w in "${ran[@]}"; do
			[[ ${WKIND[$w]} == java || ${WKIND[$w]} == client ]] || continue
			wn=$(med "$w" none wall_s); wd=$(med "$w" default wall_s); wo=$(med "$w" off wall_s)
			rn=$(med "$w" none maxrss_kb); rd=$(med "$w" default maxrss_kb)
			fn=$(med "$w" none minflt); fd=$(med "$w" default minflt)
			tgt=$(awk -v a="$(ratio "$wd" "$wn")" -v b="$(ratio "$rd" "$rn")" 'BEGIN {
				if (a == "-" || b == "-") { print "-"; exit }
				printf "%s (wall %+.1f%%, RSS %+.1f%%)", (a <= 1.02 && b <= 1.10) ? "met" : "NOT met", 100 * (a - 1), 100 * (b - 1) }')
			refc="-"
			if [[ " ${WCFGS[$w]} " == *" thpref "* ]]; then
				refc="$(ratio "$(med "$w" thpref minflt)" "$fn"), $(ratio "$(med "$w" thpref wall_s)" "$wn")"
			fi
			echo "| $w | $(ratio "$wd" "$wn") | $(ratio "$wo" "$wn") | $(ratio "$fd" "$fn") | $(ratio "$rd" "$rn") | $tgt | $refc |"
		done
		echo
	fi
	if any_kind mthp; then
		echo "## 64 KiB mTHP: medium mappings among small ones (tools/bench/small_maps.c)"
		echo
		echo "Counts are taken by the program around its map-and-touch phase. \"possible\" = the 64 KiB folios that fit if every medium mapping started on a 64 KiB boundary."
		echo
		echo "| setting | config | 64 KiB folios faulted | possible | medium mappings 64K-aligned | minor faults (touch) | 64K fallbacks | touch ms | minor faults (whole run) |"
		echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
		for w in "${ran[@]}"; do
			[[ ${WKIND[$w]} == mthp ]] || continue
			for c in ${WCFGS[$w]}; do
				echo "| $w | $(cfg_label "$c") | $(cell "$w" "$c" p_mthp64k) | $(cell "$w" "$c" p_best64k) | $(cell "$w" "$c" p_aligned64k) of $(cell "$w" "$c" p_maps) | $(cell "$w" "$c" p_minflt) | $(cell "$w" "$c" p_fb64k) | $(cell "$w" "$c" p_touch_ms) | $(cell "$w" "$c" minflt) |"
			done
		done
		echo
		for w in "${ran[@]}"; do
			[[ ${WKIND[$w]} == mthp ]] || continue
			echo "- $w: 64 KiB folios default/none $(ratio "$(med "$w" default p_mthp64k)" "$(med "$w" none p_mthp64k)"), off/none $(ratio "$(med "$w" off p_mthp64k)" "$(med "$w" none p_mthp64k)"), reference self-aligned/none $(ratio "$(med "$w" selfalign p_mthp64k)" "$(med "$w" none p_mthp64k)"); minor faults default/none $(ratio "$(med "$w" default p_minflt)" "$(med "$w" none p_minflt)"), self-aligned/none $(ratio "$(med "$w" selfalign p_minflt)" "$(med "$w" none p_minflt)")"
		done
		echo
	fi
	if any_kind mprotect; then
		echo "## The seeds' loop: mprotect RO/RW 40 times over touched memory (tools/bench/mprotect_loop.c)"
		echo
		echo "Figure: µs per mprotect call (lower is better). Folio counts are taken by the program around its touch phase."
		echo
		echo "| variant | config | µs per mprotect | none/config (speed-up) | 64 KiB folios | PMD THP faults | AnonHugePages MiB | minor faults (touch) | touch ms |"
		echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
		for w in "${ran[@]}"; do
			[[ ${WKIND[$w]} == mprotect ]] || continue
			n=$(med "$w" none p_ns_per_call)
			for c in ${WCFGS[$w]}; do
				echo "| $w | $(cfg_label "$c") | $(cell "$w" "$c" p_ns_per_call 1000) | $(ratio "$n" "$(med "$w" "$c" p_ns_per_call)") | $(cell "$w" "$c" p_mthp64k) | $(cell "$w" "$c" p_thp_fault_alloc) | $(cell "$w" "$c" p_anonhuge_kb 1024) | $(cell "$w" "$c" p_minflt) | $(cell "$w" "$c" p_touch_ms) |"
			done
		done
		echo
		if has mprotect_4k; then
			b=$(med mprotect_4k none p_ns_per_call)
			for w in mprotect_64k mprotect_2m mprotect_default; do
				has "$w" && echo "- $w vs mprotect_4k (none): $(ratio "$b" "$(med "$w" none p_ns_per_call)")x faster without mmfold, $(ratio "$b" "$(med "$w" default p_ns_per_call)")x with mmfold default"
			done
		fi
		if has mprotect_many; then
			awk -v n="$(med mprotect_many none p_ns_per_call)" -v d="$(med mprotect_many default p_ns_per_call)" -v s="$(med mprotect_many selfalign p_ns_per_call)" 'BEGIN {
				printf "- mprotect_many, target default at least 1.5x faster than none: %s (%.2fx; the self-aligned reference gives %.2fx)\n", (n / d >= 1.5 ? "met" : "NOT met"), n / d, n / s }'
		fi
		if has mprotect_many && has mprotect_many_4k; then
			echo "- mprotect_many (64 KiB mTHP always) vs mprotect_many_4k (4 KiB pages only), none: $(ratio "$(med mprotect_many_4k none p_ns_per_call)" "$(med mprotect_many none p_ns_per_call)")x faster; self-aligned: $(ratio "$(med mprotect_many_4k selfalign p_ns_per_call)" "$(med mprotect_many selfalign p_ns_per_call)")x"
		fi
		echo
	fi
	if ((${#SKIPPED[@]} > 0)); then
		echo "## Skipped"
		echo
		for w in "${!SKIPPED[@]}"; do echo "- $w: ${SKIPPED[$w]}"; done
		echo
	fi
	if ((NFAIL > 0)) || ((${#OUTDIFF[@]} > 0)) || ((${#LIB_SAID[@]} > 0)); then
		echo "## Problems"
		echo
		for w in "${!FAILS[@]}"; do echo "- $w: failed runs: ${FAILS[$w]}(see $BUILD/raw/$w.*.err)"; done
		for w in "${!OUTDIFF[@]}"; do echo "- $w: output differs from the first run in: ${OUTDIFF[$w]}(see $BUILD/raw/$w.*.out)"; done
		for w in "${!LIB_SAID[@]}"; do echo "- $w: mmfold wrote on stderr: \`${LIB_SAID[$w]:0:300}\`"; done
		echo
	fi
	echo "## Commands"
	echo
	echo "Relative to the repository; \$BUILD = $BUILD. Each ran as \`\$BUILD/runstat -o STATFILE -i MS -- env [VAR=value...] COMMAND\` under \`timeout $TIMEOUT\`, with every MMFOLD_* variable and LD_PRELOAD removed from the environment first."
	echo
	echo "| workload | what | sysfs set for it | config | command |"
	echo "|---|---|---|---|---|"
	for w in "${ran[@]}"; do
		while IFS='|' read -r c line; do
			[[ -n $c ]] || continue
			echo "| $w | ${DESCS[$w]} | ${SYSFS_USED[$w]:-(none)} | $c | \`$line\` |"
		done <<<"${CMDS[$w]}"
	done
} >"$MD"

echo "== results (also in $MD)"
cat "$MD"
echo
echo "total run time: $((T_END - T_START)) s"
((NFAIL == 0))
