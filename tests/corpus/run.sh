#!/usr/bin/env bash
# The corpus of runtimes: a small deterministic workload per runtime that
# Debian packages (allocation, collection, JIT), run without mmfold and with
# it in each configuration asked for; stdout and the exit status must be the
# same in every configuration.  Every run goes through runstat
# (tools/bench/runstat.c: wall time, minor faults and peak RSS of the
# process tree from wait4's rusage); the per-process JSON statistics of the
# mmfold runs are summed.  The table is written to $BUILD/corpus-table.md.
#
# usage: tests/corpus/run.sh [name...]
#   names: cpython pypy mono guile ruby ruby-yjit sbcl erlang racket gforth
#          php-jit chez ghc java-serial java-zgc java-shenandoah java-g1
#          java-parallel node node-jitless (groups: java node all; default all)
# env:   MMFOLD_LIB   absolute path of libmmfold.so (default build/libmmfold.so)
#        BUILD        output directory (default build/corpus)
#        CORPUS_CONFIGS  configurations, run in this order in every round
#                     (default "none safe lazy"):
#                       none    no LD_PRELOAD
#                       safe    MMFOLD_MODE=safe (the defaults: MMFOLD_THP=auto)
#                       lazy    MMFOLD_MODE=lazy
#                       advise  MMFOLD_MODE=safe MMFOLD_THP=advise
#                       thpoff  MMFOLD_MODE=safe MMFOLD_THP=off
#                     the first must be none (the reference output)
#        CORPUS_REPS  rounds (default 1); cells are the median (min-max)
#        CORPUS_STRICT=1  a runtime that is not installed is a failure (the
#                     make targets install them first), not a skip
#        CLIENT_ENV   extra "NAME=value" settings for every mmfold run
#        CLIENT_TIMEOUT  seconds allowed for a run without mmfold (default
#                     300); a run with mmfold gets max(60, 10 x that run's
#                     time), at most CLIENT_TIMEOUT
#        CORPUS_PREWARM_MB  before every run, touch and free this many MiB
#                     with MADV_HUGEPAGE (tools/bench/mprotect_loop.c; default
#                     0: none).  On a VM with free page reporting the host
#                     takes free 2 MiB blocks back within seconds and the
#                     next huge page's first touch costs host faults
#                     ("cold"); pre-warming measures the "warm" state
#        CORPUS_SETTLE_S  before every run, wait this many seconds (default
#                     0) so that the host has taken back the memory the
#                     previous run freed: the kernel reports free 2 MiB
#                     blocks to the host 2 s after they are freed, so
#                     without a wait a run may find the previous run's
#                     huge pages still backed (neither cold nor warm)
#        CORPUS_SMAPS=1  also keep /proc/PID/smaps of every run's main
#                     process at its peak Rss ($BUILD/raw/NAME.CONFIG.ROUND.smaps,
#                     sampled every 50 ms; tools/smaps_sum.awk sums one)
# Only MMFOLD_MODE, MMFOLD_THP, MMFOLD_STATS* and CLIENT_ENV reach the
# runtimes.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SRC=$ROOT/tests/corpus
MMFOLD_LIB=${MMFOLD_LIB:-$ROOT/build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/corpus}
read -ra CONFIGS <<<"${CORPUS_CONFIGS:-none safe lazy}"
REPS=${CORPUS_REPS:-1}
TIMEOUT=${CLIENT_TIMEOUT:-300}
STRICT=${CORPUS_STRICT:-0}
SMAPS=${CORPUS_SMAPS:-0}
PREWARM_MB=${CORPUS_PREWARM_MB:-0}
[[ $PREWARM_MB =~ ^[0-9]+$ ]] || { echo "run.sh: CORPUS_PREWARM_MB must be a number of MiB" >&2; exit 2; }
SETTLE_S=${CORPUS_SETTLE_S:-0}
[[ $SETTLE_S =~ ^[0-9]+$ ]] || { echo "run.sh: CORPUS_SETTLE_S must be a number of seconds" >&2; exit 2; }
read -ra EXTRA_ENV <<<"${CLIENT_ENV:-}"
for v in "${EXTRA_ENV[@]}"; do
	[[ $v == *=* ]] || { echo "run.sh: CLIENT_ENV entry '$v' is not NAME=value" >&2; exit 2; }
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: CORPUS_REPS must be a positive number" >&2; exit 2; }
[[ ${CONFIGS[0]:-} == none ]] || { echo "run.sh: CORPUS_CONFIGS must start with none" >&2; exit 2; }
for c in "${CONFIGS[@]}"; do
	case $c in none | safe | lazy | advise | thpoff) ;;
	*) echo "run.sh: unknown configuration '$c' (none safe lazy advise thpoff)" >&2; exit 2 ;;
	esac
done

case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
if [[ ! -f $MMFOLD_LIB ]]; then
	echo "run.sh: MMFOLD_LIB=$MMFOLD_LIB does not exist (run make first)" >&2
	exit 2
fi
mkdir -p "$BUILD/raw" "$BUILD/bin"
rm -f "$BUILD"/raw/*

CLEAN_ENV=(-u LD_PRELOAD)
while read -r v; do
	[[ -n $v ]] && CLEAN_ENV+=(-u "$v")
done < <(compgen -e | grep '^MMFOLD_' || true)

ALL=(cpython pypy mono guile ruby ruby-yjit sbcl erlang racket gforth php-jit chez ghc
	java-serial java-zgc java-shenandoah java-g1 java-parallel node node-jitless)
names=()
for a in "${@:-all}"; do
	case $a in
	all) names+=("${ALL[@]}") ;;
	java) names+=(java-serial java-zgc java-shenandoah java-g1 java-parallel) ;;
	node) names+=(node node-jitless) ;;
	*)
		if [[ " ${ALL[*]} " == *" $a "* ]]; then
			names+=("$a")
		else
			echo "run.sh: unknown runtime '$a' (known: ${ALL[*]} java node all)" >&2
			exit 2
		fi
		;;
	esac
done

# runstat counts the process tree; built here if missing.
RUNSTAT=$BUILD/bin/runstat
if [[ ! -x $RUNSTAT || $ROOT/tools/bench/runstat.c -nt $RUNSTAT ]]; then
	${CC:-gcc} -std=gnu11 -O2 -Wall -Wextra -Werror -o "$RUNSTAT" "$ROOT/tools/bench/runstat.c" -pthread
fi

PREWARM=$BUILD/bin/mprotect_loop
if ((PREWARM_MB > 0)) && [[ ! -x $PREWARM || $ROOT/tools/bench/mprotect_loop.c -nt $PREWARM ]]; then
	${CC:-gcc} -std=gnu11 -O2 -Wall -Wextra -Werror -o "$PREWARM" "$ROOT/tools/bench/mprotect_loop.c" -pthread
fi

# ---------------------------------------------------------------- runtimes

SKIP_REASON=""
CMD=()

have() { command -v "$1" >/dev/null; }

# Rebuilds $1 from $2 with the rest of the arguments when $1 is missing or
# older than $2; the compiler's output goes to $1.log.
compiled() { # out src cmd...
	local out=$1 src=$2
	shift 2
	[[ -e $out && ! $src -nt $out ]] && return 0
	timeout 600 "$@" >"$out.log" 2>&1 || { cat "$out.log" >&2; return 1; }
	[[ -e $out ]] || { echo "run.sh: $* did not write $out" >&2; return 1; }
}

# Sets CMD for a runtime, compiling its workload if needed.  Returns 1 with
# SKIP_REASON when the runtime is not installed, 2 when compiling failed.
prepare() {
	local name=$1 B=$BUILD/bin
	CMD=()
	SKIP_REASON=""
	case $name in
	cpython)
		have python3 || { SKIP_REASON="python3 not installed"; return 1; }
		# Debian's own interpreter, not one found first on PATH.
		local py=/usr/bin/python3
		[[ -x $py ]] || py=$(command -v python3)
		CMD=("$py" "$SRC/churn.py")
		;;
	pypy)
		have pypy3 || { SKIP_REASON="pypy3 not installed"; return 1; }
		CMD=("$(command -v pypy3)" "$SRC/churn.py")
		;;
	mono)
		have mono || { SKIP_REASON="mono-runtime not installed"; return 1; }
		have mcs || { SKIP_REASON="mcs (mono-mcs) not installed"; return 1; }
		compiled "$B/Churn.exe" "$SRC/Churn.cs" mcs -out:"$B/Churn.exe" "$SRC/Churn.cs" || return 2
		CMD=("$(command -v mono)" "$B/Churn.exe")
		;;
	guile)
		have guile || { SKIP_REASON="guile-3.0 not installed"; return 1; }
		compiled "$B/churn.go" "$SRC/churn.scm" guile --no-auto-compile -c \
			"(use-modules (system base compile)) (compile-file \"$SRC/churn.scm\" #:output-file \"$B/churn.go\")" || return 2
		CMD=("$(command -v guile)" --no-auto-compile -c "(load-compiled \"$B/churn.go\")")
		;;
	ruby | ruby-yjit)
		have ruby || { SKIP_REASON="ruby not installed"; return 1; }
		CMD=("$(command -v ruby)")
		if [[ $name == ruby-yjit ]]; then
			ruby --yjit -e 'exit(RubyVM::YJIT.enabled? ? 0 : 1)' 2>/dev/null ||
				{ SKIP_REASON="this ruby has no YJIT"; return 1; }
			CMD+=(--yjit)
		fi
		CMD+=("$SRC/churn.rb")
		;;
	sbcl)
		have sbcl || { SKIP_REASON="sbcl not installed"; return 1; }
		CMD=("$(command -v sbcl)" --script "$SRC/churn.lisp")
		;;
	erlang)
		have erl && have erlc || { SKIP_REASON="erlang-nox not installed"; return 1; }
		compiled "$B/churn.beam" "$SRC/churn.erl" erlc -o "$B" "$SRC/churn.erl" || return 2
		CMD=("$(command -v erl)" -noshell -pa "$B" -eval 'churn:main(), halt().')
		;;
	racket)
		have racket || { SKIP_REASON="racket not installed"; return 1; }
		# churn.scm as a Racket module (list-head is take there).
		if [[ ! -e $B/churn.rkt || $SRC/churn.scm -nt $B/churn.rkt ]]; then
			{
				printf '#lang racket/base\n(require racket/list)\n(define (list-head l n) (take l n))\n'
				cat "$SRC/churn.scm"
			} >"$B/churn.rkt"
		fi
		CMD=("$(command -v racket)" "$B/churn.rkt")
		;;
	gforth)
		have gforth || { SKIP_REASON="gforth not installed"; return 1; }
		CMD=("$(command -v gforth)" "$SRC/churn.fs")
		;;
	php-jit)
		have php || { SKIP_REASON="php-cli not installed"; return 1; }
		CMD=("$(command -v php)" -d opcache.enable_cli=1 -d opcache.jit=tracing
			-d opcache.jit_buffer_size=64M "$SRC/churn.php")
		;;
	chez)
		have chezscheme || { SKIP_REASON="chezscheme not installed"; return 1; }
		CMD=("$(command -v chezscheme)" --script "$SRC/churn.scm")
		;;
	ghc)
		have ghc || { SKIP_REASON="ghc not installed"; return 1; }
		compiled "$B/churn-hs" "$SRC/Churn.hs" ghc -O -outputdir "$B/ghc" -o "$B/churn-hs" "$SRC/Churn.hs" || return 2
		CMD=("$B/churn-hs")
		;;
	java-*)
		have java && have javac || { SKIP_REASON="a JDK (default-jdk-headless) not installed"; return 1; }
		mkdir -p "$B/java"
		compiled "$B/java/AllocChurn.class" "$ROOT/tests/clients/AllocChurn.java" \
			javac -d "$B/java" "$ROOT/tests/clients/AllocChurn.java" || return 2
		local gc
		case $name in
		java-serial) gc=-XX:+UseSerialGC ;;
		java-zgc) gc=-XX:+UseZGC ;;
		java-shenandoah) gc=-XX:+UseShenandoahGC ;;
		java-g1) gc=-XX:+UseG1GC ;;
		java-parallel) gc=-XX:+UseParallelGC ;;
		esac
		java "$gc" -version >/dev/null 2>&1 || { SKIP_REASON="this JDK has no $gc"; return 1; }
		CMD=("$(command -v java)" "$gc" -Xms256m -Xmx1g -cp "$B/java" AllocChurn)
		;;
	node | node-jitless)
		have node || { SKIP_REASON="nodejs not installed"; return 1; }
		CMD=("$(command -v node)")
		[[ $name == node-jitless ]] && CMD+=(--jitless)
		CMD+=("$SRC/churn.js")
		;;
	esac
	return 0
}

config_env() { # config -> words for env(1)
	case $1 in
	none) ;;
	safe) echo "LD_PRELOAD=$MMFOLD_LIB MMFOLD_MODE=safe" ;;
	lazy) echo "LD_PRELOAD=$MMFOLD_LIB MMFOLD_MODE=lazy" ;;
	advise) echo "LD_PRELOAD=$MMFOLD_LIB MMFOLD_MODE=safe MMFOLD_THP=advise" ;;
	thpoff) echo "LD_PRELOAD=$MMFOLD_LIB MMFOLD_MODE=safe MMFOLD_THP=off" ;;
	esac
}

# Sums the JSON reports given: calls skipped deferred thp_advised
# thp_advised_bytes procs (all call kinds).
sum_reports() {
	cat "$@" /dev/null | awk '
	/"mmfold"/ {
		procs++
		s = $0
		while (match(s, /"(calls|skipped|deferred)":[0-9]+/)) {
			kv = substr(s, RSTART + 1, RLENGTH - 1)
			split(kv, p, "\":")
			tot[p[1]] += p[2]
			s = substr(s, RSTART + RLENGTH)
		}
		if (match($0, /"thp_advised":[0-9]+/)) adv += substr($0, RSTART + 14, RLENGTH - 14)
		if (match($0, /"thp_advised_bytes":[0-9]+/)) advb += substr($0, RSTART + 20, RLENGTH - 20)
	}
	END { printf "%.0f %.0f %.0f %.0f %.0f %d\n", tot["calls"], tot["skipped"], tot["deferred"], adv, advb, procs }'
}

field() { # raw-line key
	sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"
}

# median (min-max) of numbers, with a scale divisor and a format.
summary() { # div fmt numbers...
	local div=$1 fmt=$2
	shift 2
	printf '%s\n' "$@" | sort -g | awk -v d="$div" -v f="$fmt" '
	{ v[NR] = $1 / d }
	END {
		if (NR == 0) { printf "-"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf f, m
		if (NR > 1) { printf " (" f "-" f ")", v[1], v[NR] }
	}'
}

median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (!NR) print 0; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# ---------------------------------------------------------------- run

TABLE=$BUILD/corpus-table.md
rows=()
pass=0
fail=0
skip=0
failed_names=()
T_START=$(date +%s)

echo "mmfold corpus of runtimes"
echo "  library: $MMFOLD_LIB"
echo "  configurations: ${CONFIGS[*]}${EXTRA_ENV[*]:+ (mmfold runs also: ${EXTRA_ENV[*]})}; rounds: $REPS; pre-warm: ${PREWARM_MB} MiB; settle: ${SETTLE_S} s"
echo "  THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo absent); output: $BUILD"

for name in "${names[@]}"; do
	rc=0
	prepare "$name" || rc=$?
	if [[ $rc == 1 ]]; then
		if [[ $STRICT == 1 ]]; then
			echo "FAIL $name: $SKIP_REASON (CORPUS_STRICT=1)"
			fail=$((fail + 1))
			failed_names+=("$name")
		else
			echo "SKIP $name: $SKIP_REASON"
			skip=$((skip + 1))
		fi
		rows+=("| $name | not run: $SKIP_REASON |")
		continue
	elif [[ $rc != 0 ]]; then
		echo "FAIL $name: could not compile its workload"
		fail=$((fail + 1))
		failed_names+=("$name")
		rows+=("| $name | compile failed |")
		continue
	fi

	why=""
	declare -A rss=() wall=() flt=()
	base_time=$TIMEOUT
	for ((rep = 1; rep <= REPS; rep++)); do
		for cfg in "${CONFIGS[@]}"; do
			tag=$name.$cfg.$rep
			read -ra cenv <<<"$(config_env "$cfg")"
			stats=()
			t=$TIMEOUT
			if [[ $cfg != none ]]; then
				stats=("${EXTRA_ENV[@]}" MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json
					MMFOLD_STATS_FILE="$BUILD/raw/$tag.%p.json")
				t=$(awk -v b="$base_time" -v cap="$TIMEOUT" 'BEGIN { t = int(10 * b) + 1; if (t < 60) t = 60; if (t > cap) t = cap; print t }')
			fi
			sm=(-i 0)
			[[ $SMAPS == 1 ]] && sm=(-i 50 -s "$BUILD/raw/$tag.smaps")
			((SETTLE_S > 0)) && sleep "$SETTLE_S"
			if ((PREWARM_MB > 0)); then
				env "${CLEAN_ENV[@]}" "$PREWARM" -m "$PREWARM_MB" -r 0 -p huge >/dev/null || true
			fi
			st=0
			timeout -k 10 "$t" "$RUNSTAT" "${sm[@]}" -o "$BUILD/raw/$tag.stat" -- \
				env "${CLEAN_ENV[@]}" "${cenv[@]}" "${stats[@]}" "${CMD[@]}" \
				>"$BUILD/raw/$tag.out" 2>"$BUILD/raw/$tag.err" </dev/null || st=$?
			line=$(tail -n 1 "$BUILD/raw/$tag.stat" 2>/dev/null || true)
			if [[ -z $line ]]; then
				why="$cfg run $rep: killed after ${t}s (exit $st)"
				break 2
			fi
			rss[$cfg]+=" $(field "$line" maxrss_kb)"
			wall[$cfg]+=" $(field "$line" wall_s)"
			flt[$cfg]+=" $(field "$line" minflt)"
			if [[ $cfg == none ]]; then
				[[ $rep == 1 ]] && base_time=$(field "$line" wall_s)
				if [[ $st != 0 ]]; then
					why="run without mmfold failed (exit $st, see $BUILD/raw/$tag.err)"
					break 2
				fi
				continue
			fi
			ref=$BUILD/raw/$name.none.$rep.out
			if [[ $st != 0 ]]; then
				why="$cfg: exit status $st, without mmfold 0 (see $BUILD/raw/$tag.err)"
			elif ! cmp -s "$ref" "$BUILD/raw/$tag.out"; then
				why="$cfg: stdout differs from the run without mmfold"
				diff "$ref" "$BUILD/raw/$tag.out" | head -10 | sed 's/^/    /' || true
			elif ! compgen -G "$BUILD/raw/$tag.[0-9]*.json" >/dev/null; then
				why="$cfg: no mmfold statistics written"
			fi
			[[ -n $why ]] && break 2
			if grep -q '^mmfold' "$BUILD/raw/$tag.err"; then
				grep '^mmfold' "$BUILD/raw/$tag.err" | sort | uniq -c | head -3 | sed "s/^/NOTE $tag: /"
			fi
		done
	done

	# Counters of the first mmfold configuration, first round.
	counters="-"
	for cfg in "${CONFIGS[@]}"; do
		[[ $cfg == none ]] && continue
		shopt -s nullglob
		reps=("$BUILD/raw/$name.$cfg.1".[0-9]*.json)
		shopt -u nullglob
		read -r calls skipped deferred adv advb procs < <(sum_reports "${reps[@]}")
		counters="$calls / $skipped / $deferred / $adv ($((advb >> 20)) MiB) / $procs"
		break
	done
	cells=""
	for cfg in "${CONFIGS[@]}"; do
		# shellcheck disable=SC2086
		cells+=" $(summary 1024 %.1f ${rss[$cfg]:-}) |"
	done
	base_rss=$(median ${rss[none]:-0})
	for cfg in "${CONFIGS[@]}"; do
		[[ $cfg == none ]] && continue
		# shellcheck disable=SC2086
		m=$(median ${rss[$cfg]:-0})
		cells+=" $(awk -v a="$m" -v b="$base_rss" 'BEGIN { if (b > 0 && a > 0) printf "%+.1f%%", 100 * (a - b) / b; else printf "-" }') |"
	done
	for cfg in "${CONFIGS[@]}"; do
		# shellcheck disable=SC2086
		cells+=" $(summary 1 %.2f ${wall[$cfg]:-}) |"
	done
	for cfg in "${CONFIGS[@]}"; do
		# shellcheck disable=SC2086
		cells+=" $(summary 1 %.0f ${flt[$cfg]:-}) |"
	done
	if [[ -z $why ]]; then
		echo "PASS $name (calls / skipped / deferred / advised / processes: $counters; RSS MiB:$(for c in "${CONFIGS[@]}"; do printf ' %s %s' "$c" "$(summary 1024 %.1f ${rss[$c]})"; done))"
		pass=$((pass + 1))
		rows+=("| $name | PASS | $counters |$cells")
	else
		echo "FAIL $name: $why"
		fail=$((fail + 1))
		failed_names+=("$name")
		rows+=("| $name | FAIL: $why | $counters |$cells")
	fi
	unset rss wall flt
done

hdr="| runtime | result | calls / skipped / deferred / THP-advised mappings / processes |"
sep="|---|---|---|"
for c in "${CONFIGS[@]}"; do hdr+=" RSS $c (MiB) |"; sep+="---:|"; done
for c in "${CONFIGS[@]}"; do [[ $c != none ]] && { hdr+=" RSS $c vs none |"; sep+="---:|"; }; done
for c in "${CONFIGS[@]}"; do hdr+=" wall $c (s) |"; sep+="---:|"; done
for c in "${CONFIGS[@]}"; do hdr+=" minor faults $c |"; sep+="---:|"; done
{
	echo "Corpus of runtimes: configurations ${CONFIGS[*]}${EXTRA_ENV[*]:+ (mmfold runs also ${EXTRA_ENV[*]})}, $REPS round(s), alternating in each round."
	echo "Counters: all intercepted calls of the first mmfold configuration, first round, summed over processes."
	echo "RSS: peak of the largest process (wait4 rusage); cells are median (min-max) over the rounds; memory pre-warmed before every run: ${PREWARM_MB} MiB (0: cold), after a wait of ${SETTLE_S} s."
	echo "THP setting: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo absent); $(nproc) CPUs; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "$hdr"
	echo "$sep"
	printf '%s\n' "${rows[@]}"
} >"$TABLE"

echo
cat "$TABLE"
echo
echo "corpus: $(($(date +%s) - T_START)) s"
((skip > 0)) && echo "$skip skipped"
((fail > 0)) && echo "failed: ${failed_names[*]}"
echo "$pass passed, $fail failed"
((fail == 0))
