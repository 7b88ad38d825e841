#!/bin/bash
# make check-arm64-system: mmfold's tests on real arm64 kernels, in a
# full-system VM (qemu-system-aarch64, TCG: -machine virt -cpu max) on an
# x86_64 host.  By hand, after make lib-arm64 and the arm64 test programs:
#
#   MMFOLD_LIB=$PWD/build/arm64/libmmfold.so ARM64_BUILD=$PWD/build/arm64 tests/arm64/system.sh
#
# For each kernel flavour (ARM64_VM_KERNELS, default "arm64 arm64-16k":
# Debian's 4 KiB and 16 KiB page kernels; Debian ships no 64 KiB one):
#   1. the newest linux-image-FLAVOUR:arm64 that apt knows (bookworm-
#      backports: 6.12, with mTHP and CONFIG_ARM64_CONTPTE) is downloaded
#      with apt-get download (kept in ARM64_BUILD/vm/debs) and its
#      /boot/vmlinuz taken out with dpkg-deb; so are busybox-static:arm64
#      and bash-static:arm64.  No module is needed: the VM boots from an
#      initramfs and talks on the PL011 serial port, both built in.
#   2. an initramfs (cpio, built here) holds busybox, bash, the arm64
#      ld.so/libc and the libraries the programs need (from Debian's
#      multiarch arm64 packages), the cross-built library, Check runner,
#      test programs, tests/preload/run.sh and tests/arm64/vm-tests.sh,
#      with tests/arm64/vm-init as /init.
#   3. qemu boots it without network (-nic none), the console goes to
#      ARM64_BUILD/vm/console-FLAVOUR.log; vm-tests.sh runs the suites and
#      ends with "MMFOLD-ARM64-RESULT: N passed, M failed"; the VM powers
#      off.  No such line (the VM died, or ARM64_VM_TIMEOUT seconds passed
#      and qemu was killed) is a failure.
#
# Env: MMFOLD_LIB, ARM64_BUILD, ARM64_CC (aarch64-linux-gnu-gcc),
#      ARM64_VM_KERNELS, ARM64_VM_QEMU (qemu-system-aarch64), ARM64_VM_SMP
#      (2), ARM64_VM_MEM (MiB, 2048), ARM64_VM_TIMEOUT (seconds per VM,
#      1800; the tests inside get it less 240 s as their budget: a suite
#      that would start after it, or is still running at it, is reported
#      SKIP, not failed), ARM64_VM_PARALLEL (1: the VMs run at the same
#      time; 0: one after the other), ARM64_VM_SUITES (the Check suites run in the VM; default all
#      but tools and preload:differential; "none": no suite),
#      ARM64_VM_DIFF (tests/preload/run.sh's tests run one by one after
#      the suites; default: the differential case's 16 and jumpout,
#      flip and contract-alone; "none": none),
#      ARM64_VM_FOLIOS (0: no folio test),
#      ARM64_VM_REPEAT ("NAME:N ...": tests/preload/run.sh NAME N times
#      after the suites, none by default), ARM64_VM_FOLIO_ARGS
#      (tests/arm64/folios.c's arguments),
#      ARM64_VM_WALK_SEEDS (the walk's seeds, 6; make check runs 20),
#      ARM64_VM_FAIL_LINES (lines of a failed suite's log shown, 60).
# Output: the VM's PASS/FAIL/SKIP lines prefixed with the flavour, "# ..."
# notes, then "N passed, N failed" (", N skipped"); exit 0 when nothing
# failed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ARM64_BUILD=${ARM64_BUILD:-$ROOT/build/arm64}
case $ARM64_BUILD in /*) ;; *) ARM64_BUILD=$PWD/$ARM64_BUILD ;; esac
ARM64_CC=${ARM64_CC:-aarch64-linux-gnu-gcc}
KERNELS=${ARM64_VM_KERNELS:-arm64 arm64-16k}
QEMU=${ARM64_VM_QEMU:-qemu-system-aarch64}
SMP=${ARM64_VM_SMP:-2}
MEM=${ARM64_VM_MEM:-2048}
VM_TIMEOUT=${ARM64_VM_TIMEOUT:-1800}
VM=$ARM64_BUILD/vm
DEBS=$VM/debs
MULTIARCH=(/lib/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
CROSS=${ARM64_CC%gcc}

# shellcheck source=tally.sh
. "$HERE/tally.sh"
START=$SECONDS

if [ -z "${MMFOLD_LIB:-}" ] || [ ! -f "$MMFOLD_LIB" ]; then
	bad setup "no library (MMFOLD_LIB=${MMFOLD_LIB:-})"
	finish
fi
for t in "$QEMU" cpio dpkg-deb apt-get "$ARM64_CC"; do
	command -v "$t" >/dev/null || { bad setup "no $t (tests/arm64/deps.sh installs it)"; finish; }
done
mkdir -p "$DEBS" || exit 1

# ---- packages --------------------------------------------------------------
# newest PKG: the highest version of PKG:arm64 that apt knows.
newest() {
	local v best=''
	for v in $(apt-cache madison "$1:arm64" 2>/dev/null | awk -F' *[|] *' '{print $2}'); do
		if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
	done
	echo "$best"
}

# deb PKG [VERSION]: the path of PKG:arm64's .deb in $DEBS, downloaded if
# missing (the newest version when VERSION is empty).
deb() {
	local pkg=$1 ver=${2:-} f
	[ -n "$ver" ] || ver=$(newest "$pkg")
	[ -n "$ver" ] || return 1
	f=$DEBS/${pkg}_${ver//:/%3a}_arm64.deb
	if [ ! -s "$f" ]; then
		(cd "$DEBS" && apt-get download -q "$pkg:arm64=$ver") >"$DEBS/download.log" 2>&1 || return 1
	fi
	[ -s "$f" ] && echo "$f"
}

# kernel FLAVOUR: extracts the newest linux-image-FLAVOUR's vmlinuz and
# config into $VM (the meta-package names the image package).
kernel() {
	local fl=$1 meta ver dep d
	meta=linux-image-$fl
	ver=$(newest "$meta")
	[ -n "$ver" ] || { echo "apt knows no $meta:arm64 (dpkg --add-architecture arm64; apt-get update)"; return 1; }
	dep=$(apt-cache show "$meta:arm64=$ver" 2>/dev/null | sed -n 's/^Depends: *\(linux-image-[^ ,]*\).*/\1/p' | head -1)
	[ -n "$dep" ] || { echo "$meta:arm64 $ver names no image package"; return 1; }
	d=$(deb "$dep" "$ver") || { echo "apt-get download $dep:arm64=$ver failed ($DEBS/download.log)"; return 1; }
	rm -rf "$VM/x-$fl" && mkdir -p "$VM/x-$fl" &&
		dpkg-deb --fsys-tarfile "$d" | tar -x -C "$VM/x-$fl" ./boot || { echo "cannot unpack $d"; return 1; }
	mv "$VM/x-$fl"/boot/vmlinuz-* "$VM/vmlinuz-$fl" && mv "$VM/x-$fl"/boot/config-* "$VM/config-$fl" &&
		rm -rf "$VM/x-$fl" || return 1
	echo "$dep $ver"
}

# ---- the programs ------------------------------------------------------------
PB=$VM/progs
mkdir -p "$PB"
if ! BUILD_ONLY=1 CC="$ARM64_CC" BUILD="$PB/tests" MMFOLD_LIB="$MMFOLD_LIB" "$ROOT/tests/preload/run.sh" \
	>"$VM/build.log" 2>&1 ||
	! "$ARM64_CC" -std=gnu11 -O2 -g -Wall -Wextra -Werror -o "$PB/folios" "$HERE/folios.c" >>"$VM/build.log" 2>&1 ||
	! "$ARM64_CC" -std=gnu11 -O2 -Wall -Wextra -Werror -o "$PB/probe" "$HERE/probe.c" >>"$VM/build.log" 2>&1; then
	bad build "cross build of the test programs failed ($VM/build.log; tests/preload/out/build.log)"
	finish
fi

# ---- the initramfs -----------------------------------------------------------
R=$VM/root
rm -rf "$R" && mkdir -p "$R"/{bin,lib/aarch64-linux-gnu,mmfold/build/progs,mmfold/build/sigchain,mmfold/tests/preload,mmfold/tests/arm64} ||
	exit 1
bb=$(deb busybox-static) && bs=$(deb bash-static) || {
	bad setup "apt-get download busybox-static:arm64 / bash-static:arm64 failed ($DEBS/download.log)"
	finish
}
dpkg-deb --fsys-tarfile "$bb" | tar -xO ./bin/busybox >"$R/bin/busybox" &&
	dpkg-deb --fsys-tarfile "$bs" | tar -xO ./bin/bash-static >"$R/bin/bash" &&
	chmod 755 "$R/bin/busybox" "$R/bin/bash" || exit 1
install -m 755 "$HERE/vm-init" "$R/init"
install -m 755 "$HERE/vm-tests.sh" "$HERE/tally.sh" "$R/mmfold/tests/arm64/"
install -m 755 "$ROOT/tests/preload/run.sh" "$R/mmfold/tests/preload/"
M=$R/mmfold/build
cp "$MMFOLD_LIB" "$M/libmmfold.so" && cp "${MMFOLD_LIB%.so}-bypass.so" "$M/libmmfold-bypass.so" &&
	cp "$ARM64_BUILD/check_mmfold" "$M/" &&
	cp "$ARM64_BUILD"/progs/* "$M/progs/" && cp -r "$PB/tests" "$M/tests" &&
	rm -rf "$M/tests/out" && cp "$PB/tests/libsigctor.so" "$PB/tests/sigchain" "$M/sigchain/" &&
	cp "$PB/folios" "$PB/probe" "$M/" || {
	bad setup "missing build products (make check-arm64-system builds them)"
	finish
}
{
	[ -n "${ARM64_VM_SUITES:-}" ] && echo "SUITES='$ARM64_VM_SUITES'"
	[ -n "${ARM64_VM_FOLIO_ARGS:-}" ] && echo "FOLIO_ARGS='$ARM64_VM_FOLIO_ARGS'"
	[ -n "${ARM64_VM_WALK_SEEDS:-}" ] && echo "WALK_SEEDS='$ARM64_VM_WALK_SEEDS'"
	[ -n "${ARM64_VM_FAIL_LINES:-}" ] && echo "FAIL_LINES='$ARM64_VM_FAIL_LINES'"
	[ -n "${ARM64_VM_FOLIOS:-}" ] && echo "FOLIOS='$ARM64_VM_FOLIOS'"
	[ -n "${ARM64_VM_REPEAT:-}" ] && echo "REPEAT='$ARM64_VM_REPEAT'"
	[ -n "${ARM64_VM_DIFF:-}" ] && echo "DIFF='$ARM64_VM_DIFF'"
	# the suites' budget: what the VM may take, less boot, the folio tests
	# that follow the suites (10-60 s) and power-off
	echo "BUDGET=$((VM_TIMEOUT > 480 ? VM_TIMEOUT - 240 : VM_TIMEOUT / 2))"
} >"$R/mmfold/vm.conf"

# The shared libraries the programs load (NEEDED, recursively, plus
# libunwind.so.8, which the library dlopens for MMFOLD_PROFILE).
findlib() {
	local d
	for d in "${MULTIARCH[@]}"; do [ -e "$d/$1" ] && { echo "$d/$1"; return 0; }; done
	return 1
}
declare -A have=()
queue=()
for f in "$M/libmmfold.so" "$M/libmmfold-bypass.so" "$M/check_mmfold" "$M"/progs/* "$M"/tests/* "$M/folios" "$M/probe"; do
	queue+=($("${CROSS}readelf" -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'))
done
queue+=(libunwind.so.8)
while [ ${#queue[@]} -gt 0 ]; do
	n=${queue[0]}
	queue=("${queue[@]:1}")
	[ -n "${have[$n]:-}" ] && continue
	have[$n]=1
	case $n in libctorlib.so | libsigctor.so | libforklockl.so) continue ;; esac # rpath $ORIGIN
	p=$(findlib "$n") || { bad setup "no $n among the arm64 multiarch libraries (tests/arm64/deps.sh)"; finish; }
	cp -L "$p" "$R/lib/aarch64-linux-gnu/$n"
	queue+=($("${CROSS}readelf" -d "$p" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'))
done
cp -L "$(findlib ld-linux-aarch64.so.1)" "$R/lib/ld-linux-aarch64.so.1" || exit 1
find "$R/lib" "$M" -type f -exec "${CROSS}strip" --strip-debug {} + 2>/dev/null
(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$VM/initramfs.cpio" || exit 1
echo "# initramfs: $(($(stat -c %s "$VM/initramfs.cpio") >> 20)) MiB, $(find "$R" -type f | wc -l) files"

# ---- the VMs -----------------------------------------------------------------
# pauth-impdef: pointer authentication stays on (Debian's kernel signs its
# return addresses), with QEMU's cheap algorithm instead of emulating QARMA.
echo "# $("$QEMU" --version | head -1); TCG, -machine virt -cpu max,pauth-impdef=on -smp $SMP -m $MEM"
# Both VMs run at the same time (ARM64_VM_PARALLEL=0: one after the other):
# TCG keeps about 1.5 host cores busy per 2-vCPU VM, so two share the
# machine's cores better than one does.
# launch FLAVOUR: boots the VM in the background (pid in VMPID[FLAVOUR])
declare -A VMPID=() VMT0=()
launch() {
	local fl=$1
	VMT0[$fl]=$SECONDS
	# (TIMEFORMAT: the CPU time qemu took, which a loaded machine changes
	# far less than the wall time)
	(
		TIMEFORMAT="%U %S"
		{ time timeout -k 10 "$VM_TIMEOUT" "$QEMU" -machine virt -cpu max,pauth-impdef=on -smp "$SMP" -m "$MEM" \
			-kernel "$VM/vmlinuz-$fl" -initrd "$VM/initramfs.cpio" \
			-append "console=ttyAMA0 panic=-1 quiet" -no-reboot -nic none \
			-display none -monitor none -serial "file:$VM/console-$fl.log" </dev/null >"$VM/qemu-$fl.log" 2>&1; } 2>"$VM/time-$fl"
	) &
	VMPID[$fl]=$!
}
# report FLAVOUR: waits for the VM and reads what it said
report() {
	local fl=$1 log=$VM/console-$1.log rc cpu res why line
	wait "${VMPID[$fl]}"
	rc=$?
	cpu=$(awk '{printf "%.0f", $1 + $2}' "$VM/time-$fl" 2>/dev/null)
	tr -d '\r' <"$log" >"$log.txt"
	while IFS= read -r line; do
		case $line in
		"PASS "*) ok "$fl: ${line#PASS }" ;;
		"FAIL "*) line=${line#FAIL }; bad "$fl: ${line%%: *}" "${line#*: }" ;;
		"SKIP "*) line=${line#SKIP }; skip "$fl: ${line%%: *}" "${line#*: }" ;;
		"# "*) echo "# $fl: ${line#\# }" ;;
		esac
	done <"$log.txt"
	res=$(sed -n 's/^MMFOLD-ARM64-RESULT: //p' "$log.txt" | tail -1)
	if [ -z "$res" ]; then
		why="qemu exit $rc"
		[ $rc = 124 ] && why="killed after $VM_TIMEOUT s"
		bad "vm-$fl" "no result line from the VM ($why); last console lines: $(tail -5 "$log.txt" | tr '\n' '|') ($log)"
	else
		echo "# $fl: VM said $res; $((SECONDS - VMT0[$fl])) s with boot and power-off (qemu used ${cpu:-?} s of CPU)"
	fi
}
started=()
for fl in $KERNELS; do
	if ! k=$(kernel "$fl"); then
		bad "vm-$fl" "$k"
		continue
	fi
	echo "# $fl: $k ($(grep -E '^CONFIG_ARM64_(4K|16K|64K)_PAGES=y|^CONFIG_ARM64_CONTPTE=y|^CONFIG_TRANSPARENT_HUGEPAGE=y' "$VM/config-$fl" | tr '\n' ' '))"
	launch "$fl"
	started+=("$fl")
	[ "${ARM64_VM_PARALLEL:-1}" = 0 ] && report "$fl"
done
if [ "${ARM64_VM_PARALLEL:-1}" != 0 ]; then
	for fl in "${started[@]}"; do report "$fl"; done
fi
echo "# $((SECONDS - START)) s in all"
finish
