#!/bin/bash
# tools/callgraph.sh [-v]: the file-level call graph of src/ and its circles.
# Each src/*.c is compiled alone; file A calls file B when A's object uses a
# symbol B's defines.  Prints the number of edges and the circles (strongly
# connected sets of files), "none" when the graph has none; -v lists every
# edge as "caller callee symbol".  Exit status 1 when there is a circle.
# docs/DESIGN.md 2 says which layer each file belongs to.
set -e
cd "$(dirname "$0")/.."
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for f in src/*.c; do
	${CC:-gcc} -std=gnu11 -D_GNU_SOURCE -fPIC -O2 -fvisibility=hidden -ftls-model=initial-exec \
		$(pkg-config --cflags libunwind 2>/dev/null) -c "$f" -o "$d/$(basename "${f%.c}").o"
done
for o in "$d"/*.o; do
	n=$(basename "${o%.o}")
	nm "$o" | awk -v n="$n" '$2 ~ /^[TDBRVW]$/ {print "D", n, $3} $1 == "U" {print "U", n, $2}'
done >"$d/syms"
awk '$1 == "D" {def[$3] = $2} $1 == "U" {u[NR] = $2 " " $3}
     END {for (i in u) {split(u[i], a, " ");
	  if (a[2] in def && def[a[2]] != a[1]) print a[1], def[a[2]], a[2]}}' "$d/syms" |
	sort -u >"$d/edges"
[ "$1" = -v ] && cat "$d/edges"
awk '{print $1, $2}' "$d/edges" | sort -u >"$d/fe"
echo "edges: $(wc -l <"$d/fe")"
# Circles: files that reach each other (transitive closure; a few dozen files).
awk '{e[$1, $2] = 1; n[$1] = 1; n[$2] = 1}
     END {
	for (k in n) for (i in n) if (e[i, k]) for (j in n) if (e[k, j]) e[i, j] = 1
	for (i in n) if (!(i in done)) {
		c = i; done[i] = 1
		for (j in n) if (j != i && e[i, j] && e[j, i]) { c = c " " j; done[j] = 1 }
		if (c != i) out = out (out ? " | " : "") c
	}
	print "circles:", out ? out : "none"
	exit out ? 1 : 0
     }' "$d/fe"
