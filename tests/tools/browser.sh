#!/usr/bin/env bash
# The report as people see it: headless Chromium renders the HTML report of
# a real profiled run and this checks what it drew (make check-browser).
#
#   MMFOLD_LIB=$PWD/build/libmmfold.so BUILD=$PWD/build/browser tests/tools/browser.sh
#
# 1. Layout measured by the browser (real glyphs, not the launcher's
#    estimate): a copy of the page with a script that takes every SVG
#    <text>'s getBBox(); no two labels overlap, every label lies inside the
#    picture, the top call site's name is drawn.  Read with --dump-dom.
# 2. A screenshot of the page as written (no script): decoded here, the
#    bars' colours are on it.  SHOT=FILE.png keeps a copy (docs/report.png).
# Ends with "browser: N passed, N failed, N skipped"; status 1 on a failure.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LIB=${MMFOLD_LIB:?MMFOLD_LIB must name build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/browser}
mkdir -p "$BUILD"
cd "$ROOT" || exit 1
PY=/usr/bin/python3
PASS=0 FAILS=0 SKIPS=0
ok() { echo "ok   $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }
skip() { echo "SKIP $*"; SKIPS=$((SKIPS + 1)); }
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n"; fi; }
finish() { echo "browser: $PASS passed, $FAILS failed, $SKIPS skipped"; [[ $FAILS == 0 ]]; exit $?; }

BROWSER=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $BROWSER ]]; then
	skip "headless Chromium is not installed (make deps-browser installs the Debian package chromium)"
	finish
fi
browser() {
	local prof
	prof=$(mktemp -d "$BUILD/profile.XXXXXX")
	timeout 120 "$BROWSER" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$prof" "$@" 2>"$BUILD/chromium.log"
	local st=$?
	rm -rf "$prof"
	return $st
}

# A real profiled run: the Boehm-GC demo program (libgc's own functions,
# exported) when libgc is there, and the stripped C++ program of the tools
# tests (names from the ELF file).
CXX=${CXX:-g++}
$CXX -std=c++17 -O1 -g -fno-omit-frame-pointer -fno-inline -o "$BUILD/named" tests/tools/named.cc &&
	objcopy --only-keep-debug "$BUILD/named" "$BUILD/named.debug" && strip --strip-all "$BUILD/named" &&
	objcopy --add-gnu-debuglink="$BUILD/named.debug" "$BUILD/named" || { fail "tests/tools/named.cc builds"; finish; }
cmd=("$BUILD/named")
if [[ -f /usr/include/gc.h ]] && ${CC:-gcc} -O2 -o "$BUILD/demo_gc" tools/demo_gc.c -lgc 2>/dev/null; then
	cmd=(sh -c "$BUILD/demo_gc 2000 40 >/dev/null; $BUILD/named >/dev/null")
else
	skip "Boehm GC demo: libgc-dev is not installed (the page shows the C++ program only)"
fi
MMFOLD_LIB=$LIB tools/mmfold run -q --profile 5 --json "$BUILD/report.json" --html "$BUILD/report.html" \
	-- "${cmd[@]}" >/dev/null || { fail "mmfold run --profile 5 --html"; finish; }
top=$($PY -c '
import json, sys
sys.path.insert(0, "tools")
reps = [json.loads(l) for l in open(sys.argv[1])]
named = [(s["calls"], s.get("symbol") or s["function"]) for r in reps
         for k in r["profile"]["kinds"].values() for s in k["by_count"]
         if (s.get("symbol") or s["function"]) != "?"]
print(max(named)[1].split("(")[0] if named else "")' "$BUILD/report.json")
echo "     | the top named call site: ${top:-none}"
check "the report names call sites (the top one: ${top:-none})" test -n "$top"

# 1. layout, measured by the browser
$PY - "$BUILD/report.html" "$BUILD/measure.html" "$top" <<'EOF'
import sys
page = open(sys.argv[1]).read()
script = """<pre id="result">pending</pre><script>
const want = %r;
const svg = document.querySelector("svg");
const W = svg.viewBox.baseVal.width, H = svg.viewBox.baseVal.height;
const boxes = [...svg.querySelectorAll("text")].map(t => [t.getBBox(), t.textContent]);
const bad = [];
for (let i = 0; i < boxes.length; i++) {
  const [a, at] = boxes[i];
  if (a.x < 0 || a.y < 0 || a.x + a.width > W + 0.5 || a.y + a.height > H + 0.5) bad.push("outside: " + at);
  for (let j = i + 1; j < boxes.length; j++) {
    const [b, bt] = boxes[j];
    const ox = Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x);
    const oy = Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y);
    if (ox > 0.5 && oy > 2) bad.push("overlap: " + at + " | " + bt);
  }
}
const named = boxes.filter(([b, t]) => t.includes(want) && b.width > 20);
document.getElementById("result").textContent =
  (bad.length === 0 && named.length > 0 ? "LAYOUT-OK" : "LAYOUT-BAD") +
  " texts=" + boxes.length + " named=" + named.length + " " + bad.slice(0, 5).join("; ");
</script>""" % sys.argv[3]
open(sys.argv[2], "w").write(page.replace("</body>", script + "</body>"))
EOF
browser --virtual-time-budget=5000 --dump-dom "file://$BUILD/measure.html" >"$BUILD/measured.html"
res=$(sed -n 's/.*<pre id="result">\([^<]*\)<\/pre>.*/\1/p' "$BUILD/measured.html")
echo "     | browser says: ${res:-nothing (see $BUILD/chromium.log)}"
check "Chromium lays the report out: no overlapping label, none outside the picture, '$top' drawn" \
	eval '[[ $res == LAYOUT-OK* ]]'

# 2. the screenshot of the page as written
rm -f "$BUILD/report.png"
browser --hide-scrollbars --screenshot="$BUILD/report.png" --window-size=1100,1500 "file://$BUILD/report.html" >/dev/null
check "Chromium takes a screenshot of the HTML report" test -s "$BUILD/report.png"
check "the screenshot shows the bars: forwarded (blue), skipped (green), kernel time (red)" \
	$PY tests/tools/png.py colours "$BUILD/report.png" 4e79a7 59a14f e15759
# SHOT=FILE.png: the picture alone at its own size, as a palette PNG (docs/report.png)
if [[ -n ${SHOT:-} ]]; then
	$PY - "$BUILD/report.html" "$BUILD/picture.svg" <<'EOF'
import sys
h = open(sys.argv[1]).read()
open(sys.argv[2], "w").write('<?xml version="1.0" encoding="UTF-8"?>\n' + h[h.index("<svg"):h.index("</svg>") + 6])
EOF
	size=$(sed -n 's/^<svg [^>]*width="\([0-9]*\)" height="\([0-9]*\)".*/\1,\2/p' "$BUILD/picture.svg")
	browser --hide-scrollbars --screenshot="$BUILD/picture.png" --window-size="$size" "file://$BUILD/picture.svg" >/dev/null &&
		$PY tests/tools/png.py palette "$BUILD/picture.png" "$SHOT" && echo "     | wrote $SHOT ($size)"
fi

finish
