# The PASS/FAIL tally of the arm64 test scripts (sourced by run.sh,
# system.sh and, inside the VM, vm-tests.sh): ok NAME, bad NAME REASON...,
# skip NAME REASON...; finish prints "N passed, N failed" (and ", N
# skipped" when something was) and exits 0 only when nothing failed.
pass=0 fail=0 skipped=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() {
	local name=$1
	shift
	echo "FAIL $name: $*"
	fail=$((fail + 1))
}
skip() {
	local name=$1
	shift
	echo "SKIP $name: $*"
	skipped=$((skipped + 1))
}
finish() {
	if [ "$skipped" = 0 ]; then echo "$pass passed, $fail failed"; else echo "$pass passed, $fail failed, $skipped skipped"; fi
	[ "$fail" = 0 ]
	exit
}
