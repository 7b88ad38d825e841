#!/usr/bin/awk -f
# Sums a /proc/PID/smaps copy (runstat -s) by kind of mapping, to see where
# resident memory goes: one line per group with the mappings, their size,
# Rss and AnonHugePages in KiB, and how densely the group is touched
# (Rss / size).  Groups: file-backed mappings by name, [heap], [stack],
# and anonymous mappings split by whether the VMA carries MADV_HUGEPAGE
# ("hg" in VmFlags), MADV_NOHUGEPAGE ("nh") or neither, and by size
# (below 2 MiB, 2-64 MiB, 64 MiB and more).
#   usage: awk -f tools/smaps_sum.awk FILE
function flush() {
	if (!have) return
	if (name == "") {
		k = "anon"
		k = k (flags ~ / hg/ ? " hg" : flags ~ / nh/ ? " nh" : "")
		k = k (size < 2048 ? " <2M" : size < 65536 ? " 2-64M" : " >=64M")
	} else if (name ~ /^\[/) {
		k = name
	} else {
		k = "file"
	}
	n[k]++; sz[k] += size; rss[k] += r; ahp[k] += h
	have = 0
}
/^[0-9a-f]+-[0-9a-f]+ / {
	flush()
	have = 1; name = $6; size = 0; r = 0; h = 0; flags = ""
	next
}
/^Size:/ { size = $2 }
/^Rss:/ { r = $2 }
/^AnonHugePages:/ { h = $2 }
/^VmFlags:/ { flags = $0 }
END {
	flush()
	for (k in n) { tr += rss[k]; printf "%-16s %5d maps %10d kB size %8d kB rss %8d kB huge  %5.1f%% touched\n", k, n[k], sz[k], rss[k], ahp[k], sz[k] ? 100 * rss[k] / sz[k] : 0 | "sort -k6 -n -r" }
	close("sort -k6 -n -r")
	printf "total rss %d kB\n", tr
}
