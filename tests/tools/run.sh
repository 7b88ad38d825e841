#!/usr/bin/env bash
# Tests of the tools: make install into a staging directory, the public API
# through pkg-config, the man pages, the launcher (run, report, bench) as
# installed.  Run by make check (tests/behaviour/check_tools.c); alone:
#
#   MMFOLD_LIB=$PWD/build/libmmfold.so MMFOLD_BUILD=$PWD/build tests/tools/run.sh
#
# Prints one line per check (ok / FAIL / SKIP with the reason) and ends with
# "tools: N passed, N failed, N skipped"; exit status 1 if any failed.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LIB=${MMFOLD_LIB:?MMFOLD_LIB must name build/libmmfold.so}
BUILD=${MMFOLD_BUILD:?MMFOLD_BUILD must name the build directory}
# Not passed on: the library would warn about MMFOLD_BUILD, and the installed
# launcher must find its library without MMFOLD_LIB.
unset MMFOLD_LIB MMFOLD_BUILD
PY=/usr/bin/python3
CC=${CC:-gcc}
T=$(mktemp -d /tmp/mmfold-tools.XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$ROOT" || exit 1
# The outer make's job server and flags are not for the make run here.
unset MAKEFLAGS MFLAGS MAKELEVEL

PASS=0 FAILS=0 SKIPS=0
ok() { echo "ok   $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }
skip() { echo "SKIP $*"; SKIPS=$((SKIPS + 1)); }
# check NAME CONDITION-COMMAND...: ok if the command succeeds.
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n"; fi; }
has() { grep -qF -- "$2" "$1"; }     # file contains the fixed string
hasre() { grep -qE -- "$2" "$1"; }   # file matches the extended regex
show() { sed 's/^/     | /' "$1" | head -40; }

VERSION=$(sed -n 's/^#define MMFOLD_VERSION "\(.*\)"$/\1/p' include/mmfold.h)
STAGE=$T/stage
S=$STAGE/usr
MMF=$S/bin/mmfold
SLIB=$S/lib/libmmfold.so
# The installed launcher runs with MMFOLD_LIB unset: it must find its own library.
mmf() { "$MMF" "$@"; }

# ------------------------------------------------------------- the source tree
tools/mmfold --version >"$T/v" 2>&1
check "tools/mmfold --version says mmfold $VERSION (include/mmfold.h)" \
	test "$(cat "$T/v")" = "mmfold $VERSION"
tools/mmfold --help >"$T/h" 2>&1 && tools/mmfold run --help >"$T/rh" 2>&1
check "--help and run --help work and name the subcommands and options" \
	eval 'has "$T/h" run && has "$T/h" report && has "$T/h" bench && has "$T/rh" --profile-depth'

# ------------------------------------------------------------- make install
if ! make -s --no-print-directory install DESTDIR="$STAGE" PREFIX=/usr BUILD="$BUILD" >"$T/install.log" 2>&1; then
	fail "make install DESTDIR=$STAGE PREFIX=/usr"
	show "$T/install.log"
	echo "tools: $PASS passed, $((FAILS)) failed, $SKIPS skipped"
	exit 1
fi
ok "make install DESTDIR=... PREFIX=/usr"
missing=""
for f in bin/mmfold lib/libmmfold.so lib/pkgconfig/mmfold.pc include/mmfold.h \
	share/man/man1/mmfold.1 share/man/man7/mmfold.7 \
	libexec/mmfold/noop_mprotect libexec/mmfold/toggle libexec/mmfold/threads_noop; do
	[[ -f $S/$f ]] || missing+=" $f"
done
check "installed files are all there${missing:+ (missing:$missing)}" test -z "$missing"
mmf --version >"$T/iv" 2>&1
check "installed mmfold --version says mmfold $VERSION (filled in by make install)" \
	eval 'test "$(cat "$T/iv")" = "mmfold $VERSION" && grep -q "^INSTALL = {" "$MMF"'

# ------------------------------------------------------------- pkg-config and the API
PKG="env PKG_CONFIG_SYSROOT_DIR=$STAGE PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$S/lib/pkgconfig pkg-config"
flags=$(echo $($PKG --cflags --libs mmfold 2>&1))
check "pkg-config --cflags --libs mmfold: '$flags' points into the staged tree" \
	test "$flags" = "-I$S/include -L$S/lib -lmmfold"
check "pkg-config --modversion mmfold is $VERSION" test "$($PKG --modversion mmfold)" = "$VERSION"
# shellcheck disable=SC2086
if $CC -std=gnu11 -Wall -Wextra -Werror -o "$T/api" tests/tools/api.c $flags 2>"$T/cc.log" &&
	$CC -std=gnu11 -Wall -Wextra -Werror -DWEAK -o "$T/api_weak" tests/tools/api.c \
		$($PKG --cflags mmfold) 2>>"$T/cc.log"; then
	ok "a program using <mmfold.h> builds with pkg-config's flags (linked, and weak)"
	env -u LD_PRELOAD -u MMFOLD_LIB LD_LIBRARY_PATH="$S/lib" "$T/api" >"$T/api.out" 2>&1
	check "linked, without LD_PRELOAD: version $VERSION, mode safe, EINVAL, a JSON report" \
		eval 'test "$(head -2 "$T/api.out")" = "version $VERSION header $VERSION mode safe
bad format: -1 EINVAL" && sed -n 3p "$T/api.out" | $PY -c "import json,sys; r=json.load(sys.stdin); sys.exit(r[\"mmfold\"] != \"$VERSION\")"'
	env LD_LIBRARY_PATH="$S/lib" LD_PRELOAD="$SLIB" MMFOLD_MODE=observe "$T/api" >"$T/api.out2" 2>&1
	check "linked, with LD_PRELOAD and MMFOLD_MODE=observe: mode observe" \
		eval 'test "$(head -1 "$T/api.out2")" = "version $VERSION header $VERSION mode observe"'
	env -u LD_PRELOAD "$T/api_weak" >"$T/weak.out" 2>&1
	check "weak, without mmfold: runs and says it is not loaded" \
		test "$(cat "$T/weak.out")" = "mmfold not loaded (header $VERSION)"
	env LD_PRELOAD="$SLIB" "$T/api_weak" >"$T/weak.out2" 2>&1
	check "weak, with LD_PRELOAD: version $VERSION, mode safe" \
		eval 'test "$(head -1 "$T/weak.out2")" = "version $VERSION header $VERSION mode safe"'
else
	fail "a program using <mmfold.h> builds with pkg-config's flags"
	show "$T/cc.log"
fi

# ------------------------------------------------------------- man pages
for p in 1 7; do
	page=$S/share/man/man$p/mmfold.$p
	groff -man -ww -z "$page" >"$T/groff.$p" 2>&1
	check "groff -man -ww -z mmfold.$p: no warning" test ! -s "$T/groff.$p"
	MANWIDTH=80 man -l "$page" >"$T/man.$p" 2>"$T/manerr.$p"
	check "man -l mmfold.$p renders (no message on stderr)" \
		eval 'test ! -s "$T/manerr.$p" && has "$T/man.$p" "SEE ALSO"'
done
# Every variable of the library (src/config.h) is documented in mmfold(7) and
# README.md, the profiler's (being added) in mmfold(7), and every option of
# mmfold run --help in mmfold(1).
undoc=""
for v in $(grep -o '"MMFOLD_[A-Z_]*"' src/config.h | tr -d '"'); do
	grep -q "\`$v\`" README.md || undoc+=" $v(README.md)"
done
for v in $(grep -o '"MMFOLD_[A-Z_]*"' src/config.h | tr -d '"') MMFOLD_PROFILE MMFOLD_PROFILE_DEPTH; do
	grep -q "^\.B $v\$" man/mmfold.7 || undoc+=" $v(mmfold.7)"
done
for o in $(grep -oE '^ +(-[a-z], )?--[a-z-]+' "$T/rh" | grep -oE -- '--[a-z-]+' | sort -u); do
	[[ $o == --help ]] && continue
	grep -qF -- "${o//-/\\-}" man/mmfold.1 || undoc+=" $o(mmfold.1)"
done
check "every MMFOLD_* variable and run option is documented${undoc:+ (not:$undoc)}" test -z "$undoc"

# ------------------------------------------------------------- mmfold run
SCEN=$BUILD/progs/scenario
mmf run -- "$SCEN" noop 100 >"$T/run.out" 2>"$T/run.err"
st=$?
check "run -- scenario noop 100: status 0, stdout only the program's" \
	eval 'test $st = 0 && test "$(cat "$T/run.out")" = "noop ok"'
check "run: the report on stderr shows mprotect 102 calls, 2 forwarded, 100 skipped" \
	hasre "$T/run.err" '^  mprotect +102 +2 +100 '
if command -v node >/dev/null; then
	mmf run -- node -e 'console.log(42)' >"$T/node.out" 2>"$T/node.err"
	st=$?
	check "run -- node -e 'console.log(42)': status 0, stdout exactly 42" \
		eval 'test $st = 0 && test "$(cat "$T/node.out")" = 42'
	check "run -- node: the report names mprotect and mmap with counts" \
		eval 'hasre "$T/node.err" "^  mprotect +[0-9]+ +[0-9]+ +[0-9]+" && hasre "$T/node.err" "^  mmap +[0-9]+ +[0-9]+ +[0-9]+"'
	[[ $FAILS == 0 ]] || show "$T/node.err"
else
	skip "run -- node: node is not installed (make deps-clients installs it)"
fi
mmf run -q -- sh -c 'exit 7'
check "run -- sh -c 'exit 7' exits 7" test $? = 7
mmf run -q -- sh -c 'kill -TERM $$'
check "run: a command killed by SIGTERM gives 143 (128+15)" test $? = 143
mmf run -- /nonexistent/cmd 2>/dev/null
check "run: a command that does not exist gives 127" test $? = 127
mmf run --mode bogus -- true 2>/dev/null
check "run: a bad option gives 125" test $? = 125
$CC -shared -fPIC -o "$T/other.so" tests/tools/other.c
LD_PRELOAD=$T/other.so MMFOLD_THP=off mmf run --mode observe --profile 3 -e VERIFY=1 -- env >"$T/env.out" 2>"$T/env.err"
check "run: LD_PRELOAD is appended to, not replaced ($T/other.so:$SLIB)" \
	has "$T/env.out" "LD_PRELOAD=$T/other.so:$SLIB"
check "run: options and -e become MMFOLD_* variables; inherited ones stay" \
	eval 'has "$T/env.out" MMFOLD_MODE=observe && has "$T/env.out" MMFOLD_PROFILE=3 &&
	      has "$T/env.out" MMFOLD_VERIFY=1 && has "$T/env.out" MMFOLD_THP=off &&
	      has "$T/env.out" MMFOLD_STATS_FORMAT=json && hasre "$T/env.out" "^MMFOLD_STATS_FILE=.*/%p\\.json$"'
check "run: nothing of mmfold on the command's stdout" \
	eval '! grep -q "^mmfold\|^  mprotect\|^  kind" "$T/env.out"'
mmf run --json "$T/multi.json" -- sh -c "$SCEN noop 10 >/dev/null; $SCEN noop 20 >/dev/null" \
	>/dev/null 2>"$T/multi.err"
check "run: two processes, two reports kept by --json, the total sums them, one line each" \
	eval '$PY - "$T/multi.json" "$T/multi.err" <<"EOF"
import json, re, sys
reps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
err = open(sys.argv[2]).read()
calls = sum(r["kinds"]["mprotect"]["calls"] for r in reps)
tot = re.search(r"^  mprotect +(\d+) ", err, re.M)
per = re.findall(r"^  pid (\d+): ", err, re.M)
sys.exit(not (len(reps) >= 2 and tot and int(tot.group(1)) == calls and calls >= 34
              and sorted(per) == sorted(str(r["pid"]) for r in reps)))
EOF'

# ------------------------------------------------------------- mmfold report
# svgcheck FILE.svg NAME: well-formed SVG, no external reference, a <text> with NAME
svgcheck() {
	$PY - "$1" "$2" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
for el in root.iter():
    for k, v in el.attrib.items():
        assert "href" not in k and "url(" not in v, (el.tag, k, v)
    assert el.tag not in (ns + "script", ns + "image", ns + "foreignObject"), el.tag
texts = [t.text or "" for t in root.iter(ns + "text")]
assert any(sys.argv[2] in t for t in texts), "no <text> names %s" % sys.argv[2]
EOF
}
cp tests/tools/fixture.json "$T/fx.json"
mmf report "$T/fx.json" >"$T/fx.txt" 2>"$T/fx.err"
st=$?
check "report fixture.json: status 0, writes fx.svg next to it" eval 'test $st = 0 && test -s "$T/fx.svg"'
check "report: the SVG is well-formed XML, self-contained, and names the top call site GC_protect_heap" \
	svgcheck "$T/fx.svg" GC_protect_heap
check "report: the table shows mprotect's counts and the top call site first" \
	eval 'hasre "$T/fx.txt" "^  mprotect +1425 +1265 +160 +0 +5 +0 " &&
	      grep -A2 "mprotect by calls:" "$T/fx.txt" | tail -1 | grep -q "1000 .*GC_protect_heap+0x1c (libgc.so.1.5.1+0x12310)"'
cat tests/tools/fixture.json tests/tools/fixture.json >"$T/two.json"
mmf report "$T/two.json" -o "$T/two-out.svg" >"$T/two.txt" 2>/dev/null
check "report of two reports: summed (2850 mprotect calls, site 2000), -o honoured" \
	eval 'hasre "$T/two.txt" "^  mprotect +2850 " && grep -q " 2000 .*GC_protect_heap" "$T/two.txt" && svgcheck "$T/two-out.svg" GC_protect_heap'
echo '{"not":"a report"}' >"$T/bad.json"
mmf report "$T/bad.json" >/dev/null 2>&1
check "report of something else fails (status 1)" test $? = 1

# A real profile (MMFOLD_PROFILE).
if $CC -std=gnu11 -O1 -g -rdynamic -fno-omit-frame-pointer -fno-inline -o "$T/sites" tests/tools/sites.c; then
	mmf run -q --profile 5 --json "$T/prof.json" -- "$T/sites" >"$T/sites.out" 2>"$T/sites.err"
	if ! grep -q '"profile"' "$T/prof.json" 2>/dev/null; then
		fail "real profile: mmfold run --profile 5 wrote no \"profile\" section ($T/prof.json)"
	else
		mmf report "$T/prof.json" -o "$T/prof.svg" >"$T/prof.txt" 2>&1
		check "real profile: mmfold run --profile 5, report: the SVG names hot_mprotect_site" \
			svgcheck "$T/prof.svg" hot_mprotect_site
		check "real profile: hot_mprotect_site (300 calls) heads mprotect by calls" \
			eval 'grep -A2 "mprotect by calls:" "$T/prof.txt" | tail -1 | grep -q " 300 .*hot_mprotect_site"'
		[[ $FAILS == 0 ]] || show "$T/prof.txt"
	fi
else
	fail "tests/tools/sites.c builds"
fi

# ------------------------------------------------------------- names from the ELF file
# named.cc: no -rdynamic, stripped, debug information in a separate file
# (.gnu_debuglink): dladdr names none of its sites; the report must.
CXX=${CXX:-g++}
mkdir -p "$T/named"
if $CXX -std=c++17 -O1 -g -fno-omit-frame-pointer -fno-inline -o "$T/named/named" tests/tools/named.cc 2>"$T/named.cc.log" &&
	objcopy --only-keep-debug "$T/named/named" "$T/named/named.debug" &&
	strip --strip-all "$T/named/named" && objcopy --add-gnu-debuglink="$T/named/named.debug" "$T/named/named"; then
	dyn=$(nm -D --defined-only "$T/named/named" | grep -c 'protect\|seal_pages')
	syms=$(nm "$T/named/named" 2>&1 | grep -c 'protect\|seal_pages')
	check "named: no site is a dynamic symbol ($dyn), the program has no symbol table ($syms)" \
		test "$dyn" = 0 -a "$syms" = 0
	# namedcheck FILE: the three sites, demangled, exact counts
	namedcheck() {
		grep -A2 "mprotect by calls:" "$1" | tail -1 | grep -q " 300 .*alpha_protect(char\*, unsigned long) at .*named.cc:[0-9]* (named+0x" &&
		grep -A3 "mprotect by calls:" "$1" | tail -1 | grep -q " 30 .*beta_protect(char\*, unsigned long) at .*named.cc:" &&
		grep -A2 "madvise by calls:" "$1" | tail -1 | grep -q " 17 .*gc::Heap::seal_pages(int) at .*named.cc:"
	}
	(cd "$T" && mmf run --profile 5 --json "$T/named.json" --svg "$T/named.svg" -- named/named >"$T/named.out" 2>"$T/named.err")
	check "named: mmfold run --profile: alpha_protect 300, beta_protect 30, gc::Heap::seal_pages(int) 17, with source lines" \
		namedcheck "$T/named.err"
	check "named: the SVG names alpha_protect(char*, unsigned long)" svgcheck "$T/named.svg" "alpha_protect(char*, unsigned long)"
	[[ $FAILS == 0 ]] || show "$T/named.err"
	# The library's own JSON (no names in it), rendered later by mmfold report.
	(cd "$T/named" && env LD_PRELOAD="$SLIB" MMFOLD_PROFILE=5 MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json \
		MMFOLD_STATS_FILE="$T/named-lib.json" ./named >/dev/null)
	check "named: the library's JSON has module, ELF address and build-id, and no name" \
		eval '$PY - "$T/named-lib.json" "$(readelf -n "$T/named/named" | sed -n "s/.*Build ID: //p")" <<"EOF"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
s = r["profile"]["kinds"]["mprotect"]["by_count"][0]
sys.exit(not (s["function"] == "?" and s["library"].endswith("/named/named") and
              s["library"].startswith("/") and s["elf_address"].startswith("0x") and
              s["build_id"] == sys.argv[2] and len(sys.argv[2]) == 40 and
              r["command"] == "./named" and r["report"] == "exit"))
EOF'
	mmf report "$T/named-lib.json" -o "$T/named-lib.svg" >"$T/named-lib.txt" 2>/dev/null
	check "named: mmfold report on the library's JSON names the three sites the same way" namedcheck "$T/named-lib.txt"
	# Another machine: the program is not where the report says; --symbols finds a copy by name.
	mkdir -p "$T/elsewhere"
	cp "$T/named/named" "$T/named/named.debug" "$T/elsewhere/"
	sed "s|$T/named/named|/nonexistent/named|g" "$T/named-lib.json" >"$T/moved.json"
	mmf report "$T/moved.json" --no-svg >"$T/moved0.txt" 2>/dev/null
	mmf report "$T/moved.json" --no-svg --symbols "$T/elsewhere" >"$T/moved.txt" 2>/dev/null
	check "named: a report from elsewhere: no names without the files, named with --symbols DIR" \
		eval '! grep -q alpha_protect "$T/moved0.txt" && namedcheck "$T/moved.txt"'
	$CXX -std=c++17 -O0 -g -o "$T/elsewhere/named" tests/tools/named.cc
	mmf report "$T/moved.json" --no-svg --symbols "$T/elsewhere" >"$T/moved2.txt" 2>/dev/null
	check "named: a copy with another build-id is not used" eval '! grep -q alpha_protect "$T/moved2.txt"'
else
	fail "tests/tools/named.cc builds and strips ($CXX, objcopy, strip)"
	show "$T/named.cc.log"
fi

# ------------------------------------------------------------- the SVG and HTML report
mmf run -q --profile 5 --json "$T/tree.json" --svg "$T/tree.svg" --html "$T/tree.html" -- \
	sh -c "$SCEN noop 1 >/dev/null; $T/named/named >/dev/null"
check "svg: the title is the command, per-process lines, the folio line, '1 call' not '1 calls'" \
	eval '$PY - "$T/tree.svg" "$T/tree.json" <<"EOF"
import json, re, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
texts = [t.text or "" for t in ET.parse(sys.argv[1]).getroot().iter(ns + "text")]
reps = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
assert texts[0].startswith("mmfold: sh -c "), texts[0]
assert sum(1 for t in texts if re.match(r"pid \d+: ", t)) == len(reps) >= 2, texts
assert any(t.startswith("folios: THP ") for t in texts), texts
assert any(re.match(r"^1 call(,|$)", t) for t in texts), "no label says 1 call"
assert not any(re.match(r"^1 calls", t) for t in texts)
assert any("alpha_protect(char*, unsigned long)" in t for t in texts)
EOF'
cat "$T/tree.json" "$T/named.json" >"$T/trees.json"
mmf report "$T/trees.json" -o "$T/trees.svg" --html "$T/trees.html" >/dev/null 2>&1
check "report of two runs: one picture per process tree, each titled with its command" \
	eval '$PY - "$T/trees.svg" <<"EOF"
import sys, xml.etree.ElementTree as ET
texts = [t.text or "" for t in ET.parse(sys.argv[1]).getroot().iter("{http://www.w3.org/2000/svg}text")]
titles = [t for t in texts if t.startswith("mmfold: ")]
assert len(titles) == 2 and "scenario noop 1" in titles[0] and titles[1] == "mmfold: named/named", titles
EOF'
check "svg: events show byte counts as sizes (thp_advised_bytes in MiB in fixture.json)" \
	eval 'mmf report "$T/fx.json" -o "$T/fx2.svg" >/dev/null 2>&1 && $PY - "$T/fx2.svg" <<"EOF"
import sys, xml.etree.ElementTree as ET
texts = [t.text or "" for t in ET.parse(sys.argv[1]).getroot().iter("{http://www.w3.org/2000/svg}text")]
ev = " ".join(texts)
assert "thp_advised_bytes " in ev and " MiB" in ev and "thp_advised_bytes 6" not in ev, ev
EOF'
# No two labels overlap: boxes from the font size (0.6 em per character,
# as the layout assumes; tests/tools/browser.sh measures real glyphs).
overlapcheck() {
	$PY - "$1" <<'EOF'
import sys, xml.etree.ElementTree as ET
boxes = []
for t in ET.parse(sys.argv[1]).getroot().iter("{http://www.w3.org/2000/svg}text"):
    x, y, size = float(t.get("x")), float(t.get("y")), float(t.get("font-size"))
    w = len(t.text or "") * size * 0.6
    x0 = x - w if t.get("text-anchor") == "end" else x
    boxes.append((x0, y - size * 0.8, x0 + w, y + size * 0.2, t.text))
bad = [(a[4], b[4]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
       if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]
assert not bad, bad[:5]
EOF
}
check "svg: no two text labels overlap (run with a profile, and fixture.json)" \
	eval 'overlapcheck "$T/tree.svg" && overlapcheck "$T/fx2.svg"'
check "html: a page with the SVG inline and the text report, no script" \
	eval 'grep -q "^<svg xmlns" "$T/tree.html" && grep -q "<pre>mmfold " "$T/tree.html" && ! grep -qi "<script" "$T/tree.html"'

# ------------------------------------------------------------- live statistics
LIVEP=$T/live
sum='import json,sys; r=json.load(open(sys.argv[1])); print(sum(c["calls"] for c in r["kinds"].values()))'
# start_live OUT ARGS...: the command under the library with MMFOLD_LIVE=1,
# in the background, until it prints "ready"; sets LPID
start_live() {
	local out=$1; shift
	env LD_PRELOAD="$SLIB" MMFOLD_LIVE=1 "$@" >"$out" 2>&1 &
	LPID=$!
	for _ in $(seq 600); do grep -qs ready "$out" && return 0; sleep 0.1; done
	return 1
}
if $CC -std=gnu11 -O1 -o "$LIVEP" tests/tools/live.c -pthread; then
	calls_of() { sed -n 's/^  mprotect  *\([0-9]*\) .*/\1/p' "$1"; }
	start_live "$T/live.out" "$LIVEP" run
	mmf stat "$LPID" >"$T/stat1" 2>&1
	sleep 0.5
	mmf stat "$LPID" >"$T/stat2" 2>&1
	c1=$(calls_of "$T/stat1") c2=$(calls_of "$T/stat2")
	check "stat PID: the exit report's table, mprotect calls grow ($c1 -> $c2) while it runs" \
		eval 'has "$T/stat1" "mmfold $VERSION: pid $LPID, mode safe, threads 2" && test "${c1:-0}" -gt 0 && test "${c2:-0}" -gt "${c1:-0}"'
	mmf stat --json "$LPID" >"$T/stat.json" 2>&1
	check "stat --json: kinds and events of the library's JSON, \"report\":\"live\"" \
		eval '$PY -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not (r[\"report\"] == \"live\" and r[\"kinds\"][\"mprotect\"][\"calls\"] > 0 and \"reentered\" in r[\"events\"]))" "$T/stat.json"'
	mmf top -b -n 1 -d 0.5 >"$T/top1" 2>&1
	check "top -b -n 1: the process with calls per second, share skipped, kernel time per second" \
		eval 'grep -E "^ +$LPID +[1-9][0-9]* +[0-9]+ +[0-9.]+% +[0-9.]+ms +2 +[0-9]+ safe +$LIVEP run$" "$T/top1" >/dev/null'
	[[ $FAILS == 0 ]] || { show "$T/stat1"; show "$T/top1"; }
	env LD_PRELOAD="$SLIB" "$LIVEP" run >"$T/nolive.out" 2>&1 &
	NPID=$!
	for _ in $(seq 300); do grep -qs ready "$T/nolive.out" && break; sleep 0.1; done
	mmf top -b -n 1 -d 0.1 >"$T/top4" 2>&1
	kill -KILL "$NPID"; wait "$NPID" 2>/dev/null
	check "top also names a process with mmfold loaded but without MMFOLD_LIVE=1" \
		eval 'grep -q "^without MMFOLD_LIVE=1 (no counters to show): .*$NPID $LIVEP run" "$T/top4" && ! grep -q "^ *$NPID " "$T/top4"'
	kill -KILL "$LPID"; wait "$LPID" 2>/dev/null
	check "SIGKILL leaves /dev/shm/mmfold.$LPID behind" test -e "/dev/shm/mmfold.$LPID"
	mmf top -b -n 1 -d 0.1 >"$T/top2" 2>"$T/top2.err"
	check "top recognises it as stale, removes it and says so" \
		eval 'test ! -e "/dev/shm/mmfold.$LPID" && has "$T/top2.err" "removed stale /dev/shm/mmfold.$LPID (pid $LPID exited)" && ! grep -q "^ *$LPID " "$T/top2"'
	mmf stat "$LPID" >/dev/null 2>"$T/stat3"
	st=$?
	check "stat of a process without a segment fails (status 1) and says why" \
		eval 'test $st = 1 && has "$T/stat3" "no live statistics for pid $LPID"'
	# after an execve into a program without mmfold the pid lives on: the
	# segment is stale because the process no longer maps it
	env LD_PRELOAD="$SLIB" MMFOLD_LIVE=1 sh -c 'exec env -u LD_PRELOAD sleep 3' &
	EPID=$!
	for _ in $(seq 50); do [[ -e /dev/shm/mmfold.$EPID ]] && ! grep -q libmmfold "/proc/$EPID/maps" && break; sleep 0.1; done
	mmf top -b -n 1 -d 0.1 >/dev/null 2>"$T/top3.err"
	check "exec into a program without mmfold: top removes the segment (pid alive, not mapped)" \
		eval 'kill -0 $EPID && test ! -e "/dev/shm/mmfold.$EPID" && has "$T/top3.err" "removed stale /dev/shm/mmfold.$EPID (pid $EPID no longer maps it"'
	kill "$EPID" 2>/dev/null; wait "$EPID" 2>/dev/null
	# profiled: mmfold stat shows the running process's call sites, named
	$CC -std=gnu11 -O1 -g -fno-inline -o "$T/liveg" tests/tools/live.c -pthread
	start_live "$T/liveg.out" env MMFOLD_PROFILE=5 "$T/liveg" run
	mmf stat --top 2 "$LPID" >"$T/pstat1" 2>&1
	sleep 0.5
	mmf stat --top 2 "$LPID" >"$T/pstat2" 2>&1
	kill -KILL "$LPID"; wait "$LPID" 2>/dev/null; rm -f "/dev/shm/mmfold.$LPID"
	b1=$(grep -A2 "mprotect by calls:" "$T/pstat1" | tail -1 | awk '{print $1}')
	b2=$(grep -A2 "mprotect by calls:" "$T/pstat2" | tail -1 | awk '{print $1}')
	check "stat of a profiled process: its top site, burst at live.c, grows ($b1 -> $b2)" \
		eval 'grep -A2 "mprotect by calls:" "$T/pstat2" | tail -1 | grep -q " burst+0x[0-9a-f]* at .*live.c:[0-9]* (liveg+0x" &&
		      test "${b1:-0}" -gt 0 && test "${b2:-0}" -gt "${b1:-0}"'
	[[ $FAILS == 0 ]] || show "$T/pstat2"
	# a forked child has its own segment, counting from zero
	start_live "$T/livef.out" "$LIVEP" fork
	for _ in $(seq 300); do [[ $(grep -c ready "$T/livef.out") -ge 2 ]] && break; sleep 0.1; done
	kids=$(grep -o "ready [0-9]*" "$T/livef.out" | awk '{print $2}' | sort -u | tr '\n' ' ')
	segs=0; for k in $kids; do [[ -e /dev/shm/mmfold.$k ]] && segs=$((segs + 1)); done
	check "fork: parent and child each have a segment (pids $kids)" test "$segs" = 2
	thr=""; for k in $kids; do thr+="$(mmf stat --json "$k" 2>&1 | $PY -c 'import json,sys; print(json.load(sys.stdin)["threads"])' 2>&1) "; done
	check "fork: each counts its own two threads, the child from zero (threads: $thr)" test "$thr" = "2 2 "
	for k in $kids; do kill -KILL "$k" 2>/dev/null; done
	wait "$LPID" 2>/dev/null
	for k in $kids; do rm -f "/dev/shm/mmfold.$k"; done
	start_live "$T/live3.out" "$LIVEP" for 0.3
	wait "$LPID"
	check "a process that exits removes its segment" test ! -e "/dev/shm/mmfold.$LPID"
	env LD_PRELOAD="$SLIB" MMFOLD_LIVE=1 sh -c 'echo $$; (exit 3)' >"$T/shpid" 2>&1
	st=$?
	check "a process leaving through _exit (a shell) removes its segment too, with its status" \
		eval 'test $st = 3 && test ! -e "/dev/shm/mmfold.$(cat "$T/shpid")"'
	start_live "$T/livev.out" "$LIVEP" vfork
	check "a vfork child's _exit leaves its parent's segment alone" test -e "/dev/shm/mmfold.$LPID"
	kill -TERM "$LPID"; wait "$LPID" 2>/dev/null; rm -f "/dev/shm/mmfold.$LPID"
	# periodic reports: two or more in 3.5 s with MMFOLD_STATS_INTERVAL=1, then the one at exit
	env LD_PRELOAD="$SLIB" MMFOLD_STATS_INTERVAL=1 MMFOLD_STATS=1 MMFOLD_STATS_FORMAT=json \
		MMFOLD_STATS_FILE="$T/periodic.json" "$LIVEP" for 3.5 >/dev/null
	check "MMFOLD_STATS_INTERVAL=1: periodic JSON reports with growing counts, then the exit report" \
		eval '$PY - "$T/periodic.json" <<"EOF"
import json, sys
reps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kinds = [r["report"] for r in reps]
calls = [r["kinds"]["mprotect"]["calls"] for r in reps]
assert kinds[:-1] == ["periodic"] * (len(reps) - 1) and kinds[-1] == "exit" and len(reps) >= 3, kinds
assert calls == sorted(calls) and calls[0] > 0, calls
EOF'
	mmf report "$T/periodic.json" --no-svg >"$T/periodic.txt" 2>&1
	last=$($PY -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["kinds"]["mprotect"]["calls"])' "$T/periodic.json")
	check "report of periodic reports: the last of the process counts, not the sum ($last)" \
		hasre "$T/periodic.txt" "^  mprotect +$last "
else
	fail "tests/tools/live.c builds"
fi

# Real services: the counters of a Node server and of a Java program grow.
if command -v node >/dev/null; then
	cat >"$T/server.js" <<'EOF'
const http = require("http");
http.createServer((q, r) => r.end("ok")).listen(0, () => console.log("ready " + process.pid));
let n = 0;
// new code every few milliseconds: V8 flips its code pages to write it
setInterval(() => { for (let i = 0; i < 20; i++) new Function("x", "return x + " + (n++))(1); }, 5);
EOF
	if start_live "$T/node.live" node "$T/server.js"; then
		sleep 1
		mmf stat --json "$LPID" >"$T/n1" 2>&1; sleep 1.5; mmf stat --json "$LPID" >"$T/n2" 2>&1
		mmf top -b -n 1 -d 1 >"$T/ntop" 2>&1
	fi
	kill -TERM "$LPID"; wait "$LPID" 2>/dev/null
	n1=$($PY -c "$sum" "$T/n1" 2>/dev/null) n2=$($PY -c "$sum" "$T/n2" 2>/dev/null)
	check "node server: mmfold stat shows its calls growing (${n1:-none} -> ${n2:-none}), mmfold top lists it" \
		eval 'test "${n1:-0}" -gt 0 && test "${n2:-0}" -gt "${n1:-0}" && grep -q "node $T/server.js" "$T/ntop"'
	rm -f "/dev/shm/mmfold.$LPID"
else
	skip "live node server: node is not installed (make deps-clients installs it)"
fi
if command -v java >/dev/null; then
	cat >"$T/Live.java" <<'EOF'
public class Live {
    public static void main(String[] a) throws Exception {
        System.out.println("ready " + ProcessHandle.current().pid());
        for (;;) { // threads come and go: stacks mapped, guard pages protected
            Thread t = new Thread(() -> { byte[] b = new byte[1 << 20]; b[7] = 1; });
            t.start(); t.join(); Thread.sleep(10);
        }
    }
}
EOF
	if start_live "$T/java.live" java -XX:+UseSerialGC "$T/Live.java"; then
		sleep 1
		mmf stat --json "$LPID" >"$T/j1" 2>&1; sleep 1.5; mmf stat --json "$LPID" >"$T/j2" 2>&1
	fi
	kill -TERM "$LPID"; wait "$LPID" 2>/dev/null
	j1=$($PY -c "$sum" "$T/j1" 2>/dev/null) j2=$($PY -c "$sum" "$T/j2" 2>/dev/null)
	check "java program: mmfold stat shows its calls growing (${j1:-none} -> ${j2:-none})" \
		eval 'test "${j1:-0}" -gt 0 && test "${j2:-0}" -gt "${j1:-0}"'
	[[ $FAILS == 0 ]] || { show "$T/java.live"; show "$T/j2"; }
	rm -f "/dev/shm/mmfold.$LPID"
else
	skip "live java program: java is not installed (make deps-clients installs it)"
fi

# ------------------------------------------------------------- mmfold bench (installed)
(cd / && mmf bench --reps 1 --scale 0.01 --only noop_64k --only toggle >"$T/bench.out" 2>"$T/bench.err")
st=$?
check "installed bench (libexec programs): a table with both benchmarks and the ratios" \
	eval 'test $st = 0 && hasre "$T/bench.out" "^noop_64k +ns/call .* [0-9.]+x$" &&
	      hasre "$T/bench.out" "^toggle +ns/call .* [0-9.]+x$" && has "$T/bench.out" "$SLIB"'
[[ $st == 0 ]] || show "$T/bench.err"
mmf bench --only nosuch >/dev/null 2>&1
check "bench --only with an unknown name fails (status 2)" test $? = 2

# ------------------------------------------------------------- make uninstall
make -s --no-print-directory uninstall DESTDIR="$STAGE" PREFIX=/usr BUILD="$BUILD" >"$T/un.log" 2>&1
left=$(find "$STAGE" -type f | sed "s|^$STAGE||")
check "make uninstall removes every installed file${left:+ (left: $left)}" test -z "$left"

echo "tools: $PASS passed, $FAILS failed, $SKIPS skipped"
[[ $FAILS == 0 ]]
