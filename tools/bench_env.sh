# Sourced by the benchmark scripts (bench_NAME.sh): sets ROOT, MMFOLD_LIB
# (absolute; default build/libmmfold.so), BUILD (created; default
# build/bench_NAME), CC, CLEAN_ENV (env(1) arguments that drop LD_PRELOAD and
# every MMFOLD_* variable, so that only what a script sets reaches a
# workload), and the functions now (seconds) and summary FILE (median, min
# and max of the numbers in FILE, one a line).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MMFOLD_LIB=${MMFOLD_LIB:-$ROOT/build/libmmfold.so}
BUILD=${BUILD:-$ROOT/build/$(basename "$0" .sh)}
case $MMFOLD_LIB in /*) ;; *) MMFOLD_LIB=$PWD/$MMFOLD_LIB ;; esac
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
mkdir -p "$BUILD"
CC=${CC:-gcc}

CLEAN_ENV=(-u LD_PRELOAD)
while read -r v; do
	[[ -n $v ]] && CLEAN_ENV+=(-u "$v")
done < <(compgen -e | grep '^MMFOLD_' || true)

now() { date +%s.%N; }
summary() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f\n", m, v[1], v[NR] }'
}
