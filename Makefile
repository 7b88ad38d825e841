# mmfold: make builds build/libmmfold.so; make check runs the tests;
# make demo runs a real workload with and without mmfold.
# Run as root on Debian, missing packages are installed with apt-get;
# otherwise the exact command to run is printed.

SHELL    := /bin/bash
# The version is written once, in include/mmfold.h (MMFOLD_VERSION).
VERSION  := $(shell sed -n 's/^\#define MMFOLD_VERSION "\(.*\)"$$/\1/p' include/mmfold.h)
PREFIX   ?= /usr/local
LIBDIR   ?= $(PREFIX)/lib
INCDIR   ?= $(PREFIX)/include
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
LIBEXECDIR ?= $(PREFIX)/libexec/mmfold
BUILD    ?= build
CC       ?= gcc
PKG_CONFIG ?= pkg-config

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS   ?= -O2 -g -flto=auto
BASEFLAGS := -std=gnu11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -fno-strict-aliasing \
	     -fno-stack-protector -ftls-model=initial-exec $(WARN)
LIBFLAGS := -shared -Wl,--version-script=preload/libmmfold.map -Wl,-z,now -Wl,-z,relro \
	    -Wl,--no-undefined -Wl,-soname,libmmfold.so
LIBS     := -ldl -pthread
# libunwind's headers (the call-site profile); the library itself is
# dlopen'ed at run time, only when MMFOLD_PROFILE > 0 (preload/unwind.c).
UNWIND_CFLAGS = $(shell $(PKG_CONFIG) --cflags libunwind 2>/dev/null)

ENGINE_SRC  := src/sys.c src/map.c src/mapread.c src/fast.c src/fmt.c src/config.c src/stats.c src/base.c src/wlock.c \
	       src/question.c src/record.c src/decide.c src/lazymode.c src/life.c src/engine.c src/fastrun.c \
	       src/report.c src/verify.c src/folio.c src/batch.c src/lazy.c src/sigchain.c \
	       src/sigrestore.S src/profile.c src/shape.c src/wxtab.c src/wx.c src/live.c src/thp.c src/barrier.c src/barrierbits.c src/barrieropen.c
PRELOAD_SRC := preload/next.c preload/init.c preload/mman.c preload/madvise.c \
	       preload/mlock.c preload/misc.c preload/syscall.c preload/batch.c preload/signal.c \
	       preload/io.c preload/stdio.c preload/scanf.c preload/sigmask.c preload/unwind.c preload/exit.c preload/fds.c \
	       preload/fork.c
HEADERS     := $(wildcard src/*.h preload/*.h include/*.h)
LIB         := $(BUILD)/libmmfold.so

# Packages the build, the tests and the clients need (Debian names).
DEPS_BUILD   := gcc make pkg-config libc6-dev libunwind-dev
DEPS_CHECK   := check libsubunit-dev libunwind-dev binutils g++ valgrind
DEPS_CLIENTS := luajit libgc-dev libjemalloc-dev libjemalloc2 nodejs default-jdk-headless chromium
# The corpus of runtimes (tests/corpus/run.sh); python3 is Debian's CPython.
DEPS_CORPUS  := python3 pypy3 mono-runtime mono-mcs guile-3.0 ruby sbcl erlang-nox racket gforth \
		php-cli chezscheme ghc

.PHONY: all lib check check-unit check-preload soak soak-bypass soak-flip check-clients check-clients-repeat check-corpus check-browser deps-browser \
	bench-live bench-barrier bench-instr check-symbols check-footprint check-layers check-wx-yjit demo bench bench-thp bench-shape bench-lazy bench-wx bench-corpus bench-touch \
	bench-bin asan tsan valgrind deps-build deps-check deps-clients deps-corpus install uninstall clean

all: lib

lib: $(LIB)

$(LIB): $(ENGINE_SRC) $(PRELOAD_SRC) $(HEADERS) preload/libmmfold.map | deps-build
	@mkdir -p $(BUILD)
	$(CC) $(BASEFLAGS) $(CFLAGS) $(UNWIND_CFLAGS) $(LIBFLAGS) -o $@ $(ENGINE_SRC) $(PRELOAD_SRC) $(LIBS)

# The same library with one writer section in three, at random, bypassing
# the map (src/wlock.c, MMF_FORCE_BYPASS): what a held lock makes rare, made
# common, for tests/preload/run.sh's walk-bypass and pastmap.  Never
# installed.
BYPASS_LIB := $(BUILD)/libmmfold-bypass.so
$(BYPASS_LIB): $(ENGINE_SRC) $(PRELOAD_SRC) $(HEADERS) preload/libmmfold.map | deps-build
	@mkdir -p $(BUILD)
	$(CC) $(BASEFLAGS) $(CFLAGS) -DMMF_FORCE_BYPASS=3 $(UNWIND_CFLAGS) $(LIBFLAGS) -o $@ \
	  $(ENGINE_SRC) $(PRELOAD_SRC) $(LIBS)

# ---- dependencies --------------------------------------------------------
# $(call need,packages): installs (root) or names the command (otherwise).
define need
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if ! command -v dpkg-query >/dev/null; then echo "mmfold: not Debian; make sure these are installed:$$missing"; \
	  elif [ "$$(id -u)" = 0 ]; then \
	    echo "mmfold: installing$$missing"; \
	    (apt-get install -y -q $$missing || (apt-get update -q && apt-get install -y -q $$missing)) >&2 || exit 1; \
	  else echo "mmfold: missing packages; run:  sudo apt-get install -y$$missing"; exit 1; fi; \
	fi
endef

deps-build:
	$(call need,$(DEPS_BUILD))
deps-check: deps-build
	$(call need,$(DEPS_CHECK))
deps-clients: deps-build
	@if command -v node >/dev/null && command -v java >/dev/null; then \
	  $(MAKE) --no-print-directory deps-clients-min; \
	else $(MAKE) --no-print-directory deps-clients-all; fi
.PHONY: deps-clients-min deps-clients-all
deps-clients-min:
	$(call need,luajit libgc-dev libjemalloc-dev libjemalloc2 chromium)
deps-clients-all:
	$(call need,$(DEPS_CLIENTS))
deps-corpus: deps-clients
	$(call need,$(DEPS_CORPUS))

# ---- tests ---------------------------------------------------------------
CHECK_CFLAGS = $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
# One Check runner (tests/unit/check_main.c) holds both kinds of suite:
# the unit suites of tests/unit/ (modules linked without LD_PRELOAD) and the
# behaviour suites of tests/behaviour/ (programs run under LD_PRELOAD).
UNIT_SRC     := $(wildcard tests/unit/check_*.c) tests/unit/fake_kernel.c
BEHAVIOUR_SRC := $(wildcard tests/behaviour/check_*.c) tests/behaviour/behaviour.c
CHECK_SRC    := $(UNIT_SRC) $(BEHAVIOUR_SRC)
CHECK_HDRS   := tests/unit/suites.h tests/unit/fake_kernel.h tests/behaviour/behaviour.h
UNIT_BIN     := $(BUILD)/check_mmfold

$(UNIT_BIN): $(CHECK_SRC) $(ENGINE_SRC) $(HEADERS) $(CHECK_HDRS) | deps-check
	@mkdir -p $(BUILD)
	$(CC) -std=gnu11 -D_GNU_SOURCE -Isrc -Itests/unit $(WARN) $(CFLAGS) $(CHECK_CFLAGS) -o $@ \
	  $(CHECK_SRC) $(ENGINE_SRC) $(CHECK_LIBS) -pthread

# tests/progs/*.c are programs, but for the libraries listed in PROG_LIBS.
PROG_LIBS := tests/progs/nextcount.c
PROG_SRC := $(filter-out $(PROG_LIBS),$(wildcard tests/progs/*.c))
PROGS := $(patsubst tests/progs/%.c,$(BUILD)/progs/%,$(PROG_SRC)) $(BUILD)/progs/libnextcount.so
$(BUILD)/progs/%: tests/progs/%.c tests/progs/jitcode.h tests/preload/fault.h
	@mkdir -p $(BUILD)/progs
	$(CC) -std=gnu11 $(WARN) -O2 -g -o $@ $< -pthread

# A second preloaded library that counts the calls mmfold passes on.
$(BUILD)/progs/libnextcount.so: tests/progs/nextcount.c
	@mkdir -p $(BUILD)/progs
	$(CC) -std=gnu11 $(WARN) -O2 -g -shared -fPIC -o $@ $<

# The call-site profile test names functions: frame pointers, and their
# symbols exported for dladdr.
PROFILE_PROG_FLAGS := -fno-omit-frame-pointer -rdynamic
$(BUILD)/progs/profile: tests/progs/profile.c
	@mkdir -p $(BUILD)/progs
	$(CC) -std=gnu11 $(WARN) -O2 -g $(PROFILE_PROG_FLAGS) -o $@ $< -pthread

# The Check runner runs every suite: the unit suites (tests/unit/) and the
# behaviour suites (tests/behaviour/), so Check's summary line ends the run.
# The tools suite (tests/tools/run.sh) runs make install into a staging
# directory: the benchmark programs are built first so it has nothing to build.
check: deps-check $(LIB) $(BYPASS_LIB) $(UNIT_BIN) $(PROGS) bench-bin check-symbols check-footprint check-layers
	MMFOLD_LIB=$(abspath $(LIB)) MMFOLD_BUILD=$(abspath $(BUILD)) CK_DEFAULT_TIMEOUT=300 \
	  $(UNIT_BIN)

# The unit suites (tests/unit/): modules linked without LD_PRELOAD, the
# kernel faked where a test injects failures (tests/unit/fake_kernel.h);
# the behaviour suites of tests/behaviour/ are left out.  About 15 s.
UNIT_SUITES := map map_fill lazy config verify thp sigchain dispatch batch shape stats
# Of those, the suites whose tests share one process well (CK_FORK=no, for
# the sanitizers and valgrind): the engine's suites start an engine per
# test and keep Check's fork.
ENGINE_SUITES := dispatch batch shape stats
check-unit: $(UNIT_BIN)
	@for s in $(UNIT_SUITES); do c=; case $$s in *:*) c=$${s#*:};; esac; \
	  env CK_RUN_SUITE=$${s%%:*} $${c:+CK_RUN_CASE=$$c} $(UNIT_BIN) || exit 1; done

# Lazy mode's fault path under threads, at length: 500 lazy-mode runs per
# thread count (4, 8, 16), each seed repeated, every run checked for
# spurious and missed faults and compared with the run without mmfold.
SOAK_SEEDS  ?= 50
SOAK_REPEAT ?= 10
soak: $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/soak LAZYSTRESS_SEEDS=$(SOAK_SEEDS) \
	  LAZYSTRESS_REPEAT=$(SOAK_REPEAT) tests/preload/run.sh lazystress

# Calls bypassing the map under many threads, at length: bypass.c with 16
# threads (8 times the cores), 8 seeds, 6 runs each with mmfold
# (MMFOLD_LOCK_WAIT=0 but the last), every page checked after each round.
SOAK_BYPASS_SEEDS ?= 8
soak-bypass: $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/soak-bypass BYPASS_SEEDS=$(SOAK_BYPASS_SEEDS) \
	  BYPASS_REPEAT=5 BYPASS_THREADS=16 tests/preload/run.sh bypass

# Flipping records at length: flip.c with 16 threads (8 times the cores),
# 20 seeds, each in every mode and then 10 more safe-mode runs.
SOAK_FLIP_SEEDS ?= 20
soak-flip: $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/soak-flip FLIP_SEEDS=$(SOAK_FLIP_SEEDS) \
	  FLIP_REPEAT=10 FLIP_THREADS=16 FLIP_ROUNDS=300 FLIP_PAIR_CYCLES=20000 tests/preload/run.sh flip

check-preload: $(LIB) $(BYPASS_LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/tests tests/preload/run.sh

# The library's writable segment (.data + .bss) stays within 4 KiB: a
# conservative collector (libgc, Guile) scans it as roots, and a larger one
# changed what bdwgc's realloc_test printed.  Tables live in memory the
# library maps when it first needs them.
check-footprint: $(LIB)
	@set -o pipefail; n=$$(size -A $(LIB) | awk '$$1 == ".data" || $$1 == ".bss" {s += $$2; k++} END {if (k != 2) exit 1; print s}') || \
	  { echo "check-footprint: size -A $(LIB) gave no .data and .bss sizes"; exit 1; }; \
	if [ "$$n" -gt 4096 ]; then echo "check-footprint: .data + .bss = $$n bytes, more than 4096"; exit 1; fi; \
	echo "check-footprint: .data + .bss = $$n bytes (at most 4096)"

# No circle of files in src/ (docs/DESIGN.md 2): each file compiled alone,
# caller -> callee from the objects' symbols.
check-layers: deps-check
	@tools/callgraph.sh
	@bad=$$(grep -Hn '#include "\.\./src/' preload/*.c preload/*.h | grep -v 'src/engine\.h"'); \
	if [ -n "$$bad" ]; then echo "check-layers: preload/ includes src/ headers other than engine.h:"; echo "$$bad"; exit 1; fi; \
	echo "check-layers: preload/ includes src/engine.h only"

# Only interposed and public symbols may be exported.
check-symbols: $(LIB)
	@exp=$$(nm -D --defined-only $(LIB) | awk '$$2 ~ /^[TWiV]$$/ {print $$3}' | sed 's/@.*//' | sort); \
	want=$$(sed -n 's/^ *\([A-Za-z_0-9; ]*\);$$/\1/p' preload/libmmfold.map | tr ';' '\n' | tr -d ' ' | grep . | sort); \
	if [ "$$exp" != "$$want" ]; then echo "check-symbols: exported symbols differ from preload/libmmfold.map:"; \
	  diff <(echo "$$want") <(echo "$$exp"); exit 1; fi; \
	echo "check-symbols: $$(echo "$$exp" | wc -l) exported symbols, as listed in preload/libmmfold.map"

# The HTML/SVG report rendered by headless Chromium (tests/tools/browser.sh):
# layout measured by the browser, a screenshot decoded and checked.
check-browser: deps-browser deps-check $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/browser SHOT=$(SHOT) tests/tools/browser.sh
deps-browser:
	$(call need,chromium)

check-clients: deps-clients $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/clients tests/clients/run.sh

# The corpus of runtimes: each one's workload without mmfold, in safe mode
# and in lazy mode, same output required; a runtime not installed fails.
check-corpus: deps-corpus $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/corpus CORPUS_STRICT=1 tests/corpus/run.sh

# The corpus tables of BENCHMARKS.md: 5 rounds, alternating no mmfold, the
# defaults, lazy mode, MMFOLD_THP=advise (the advice of every large
# mapping) and MMFOLD_THP=off; twice: cold (each run after a 3 s wait, by
# which the host has taken freed memory back where the VM reports free
# pages) and warm (2 GiB touched with huge pages and freed right before each
# run); $(BUILD)/bench_corpus/{cold,warm}/corpus-table.md.  CORPUS picks
# runtimes (default all).
bench-corpus: deps-corpus $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_corpus/cold CORPUS_STRICT=1 CORPUS_REPS=5 \
	  CORPUS_CONFIGS="none safe lazy advise thpoff" CORPUS_SETTLE_S=3 tests/corpus/run.sh $(or $(CORPUS),all)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_corpus/warm CORPUS_STRICT=1 CORPUS_REPS=5 \
	  CORPUS_CONFIGS="none safe lazy advise thpoff" CORPUS_PREWARM_MB=2048 tests/corpus/run.sh $(or $(CORPUS),all)

# A Java-style heap's first touch with and without mmfold, cold and warm
# (tools/bench_touch.sh; BENCHMARKS.md, "Cold and warm memory").
bench-touch: $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_touch tools/bench_touch.sh

# Each client CLIENT_REPEAT times (default 20) in CLIENT_MODE (default lazy),
# each run compared with one run without mmfold: counts identical,
# differing, crashed and hung runs (a hang is cut at max(60 s, 10 x the run
# without)).  CLIENTS picks clients (default: all of tests/clients/run.sh).
check-clients-repeat: deps-clients $(LIB)
	CLIENT_MODE=$(or $(CLIENT_MODE),lazy) CLIENT_REPEAT=$(or $(CLIENT_REPEAT),20) \
	  MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/clients-repeat \
	  tests/clients/run.sh $(or $(CLIENTS),all)

demo: deps-clients $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/demo tools/demo.sh

bench: deps-clients $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench tools/bench.sh

# Lazy mode and the batch API (tools/bench_lazy.sh; mlock needs root).
bench-lazy: $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_lazy tools/bench_lazy.sh

# MMFOLD_BARRIER=uffd against plain mprotect on Boehm-GC programs
# (tools/bench_barrier.sh; bdwgc's gctest too when BDWGC_BUILD has one).
bench-barrier: deps-clients $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_barrier tools/bench_barrier.sh

# Cost of MMFOLD_LIVE=1 (tools/bench_live.sh): callgrind instructions and
# alternating wall time on the Boehm-GC demo program and boehm_inc.
bench-live: deps-clients $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_live tools/bench_live.sh

# Instructions per call on the hot paths (tools/bench_instr.sh): skip,
# forward, toggle, W^X flip and the libc wrappers under callgrind, without
# mmfold, with MMFOLD_MODE=off and in safe mode; INSTR_LIMITS=1 fails when a
# path is above its limit.  About a minute.
bench-instr: deps-check $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_instr tools/bench_instr.sh

# Large-folio benchmarks (root: switches hugepages-64kB/enabled and restores it).
bench-thp: deps-clients $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_thp tools/bench_thp.sh

# Range shaping: the call patterns with and without MMFOLD_SHAPE (root:
# switches hugepages-64kB/enabled for the 64k rows and restores it).
bench-shape: $(LIB)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_shape tools/bench_shape.sh

# W^X flips: none / MMFOLD_WX=keep / relax / off alternating: LuaJIT, Ruby's
# YJIT (Debian's ruby 3.1 has it) and C programs.
bench-wx: deps-clients $(LIB)
	$(call need,ruby time)
	MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/bench_wx tools/bench_wx.sh

# Ruby's YJIT flips recognised, output unchanged, never rwx under keep
# (tests/wx/yjit.sh; about 15 s).  77 from the script: cannot run here.
check-wx-yjit: $(LIB)
	$(call need,ruby)
	@MMFOLD_LIB=$(abspath $(LIB)) BUILD=$(abspath $(BUILD))/wx tests/wx/yjit.sh; r=$$?; \
	if [ $$r = 77 ]; then echo "check-wx-yjit: skipped (see above)"; else exit $$r; fi

# Sanitizer and valgrind runs of the unit tests.
asan: deps-check
	$(MAKE) --no-print-directory BUILD=$(BUILD)/asan \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  $(BUILD)/asan/check_mmfold
	for suite in map map_fill lazy config verify; do \
	  CK_FORK=no CK_RUN_SUITE=$$suite $(BUILD)/asan/check_mmfold || exit 1; done
	for suite in $(ENGINE_SUITES); do \
	  CK_RUN_SUITE=$$suite $(BUILD)/asan/check_mmfold || exit 1; done

tsan: deps-check
	$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan CFLAGS="-O1 -g -fsanitize=thread -Wno-tsan" \
	  $(BUILD)/tsan/check_mmfold
	CK_FORK=no CK_RUN_SUITE=map CK_RUN_CASE=concurrency TSAN_OPTIONS=halt_on_error=1 \
	  $(BUILD)/tsan/check_mmfold
	CK_FORK=no CK_RUN_SUITE=map CK_RUN_CASE=model TSAN_OPTIONS=halt_on_error=1 \
	  $(BUILD)/tsan/check_mmfold
	CK_FORK=no CK_RUN_SUITE=lazy TSAN_OPTIONS=halt_on_error=1 $(BUILD)/tsan/check_mmfold
	CK_RUN_SUITE=stats TSAN_OPTIONS=halt_on_error=1 $(BUILD)/tsan/check_mmfold

# valgrind: the unit tests, and the library itself inside programs.
VG := valgrind -q --error-exitcode=1 --leak-check=full --suppressions=tests/valgrind.supp
valgrind: deps-check $(UNIT_BIN) $(LIB) $(PROGS)
	CK_FORK=no CK_RUN_SUITE=config $(VG) $(UNIT_BIN)
	CK_FORK=no CK_RUN_SUITE=map CK_RUN_CASE=scale $(VG) $(UNIT_BIN)
	CK_FORK=no CK_RUN_SUITE=map_fill $(VG) $(UNIT_BIN)
	for suite in $(ENGINE_SUITES); do \
	  CK_RUN_SUITE=$$suite CK_TIMEOUT_MULTIPLIER=10 $(VG) --trace-children=yes $(UNIT_BIN) || exit 1; done
	for s in "noop 200" heap "fork 5"; do \
	  LD_PRELOAD=$(abspath $(LIB)) MMFOLD_STATS=1 MMFOLD_STATS_FILE=/dev/null MMFOLD_VERIFY=1 \
	    $(VG) --trace-children=no $(BUILD)/progs/scenario $$s >/dev/null || exit 1; \
	done; echo "valgrind: library clean in scenario noop, heap, fork"
	for s in "noop 200" heap "fork 5"; do \
	  LD_PRELOAD=$(abspath $(LIB)) MMFOLD_PROFILE=10 MMFOLD_STATS=1 MMFOLD_STATS_FILE=/dev/null \
	    $(VG) --trace-children=no $(BUILD)/progs/scenario $$s >/dev/null || exit 1; \
	done; echo "valgrind: library clean with MMFOLD_PROFILE=10 in scenario noop, heap, fork"
	for s in "noop 200" "fork 5"; do \
	  LD_PRELOAD=$(abspath $(LIB)) MMFOLD_LIVE=1 MMFOLD_STATS_INTERVAL=1 MMFOLD_STATS=1 \
	    MMFOLD_STATS_FILE=/dev/null $(VG) --trace-children=no $(BUILD)/progs/scenario $$s >/dev/null || exit 1; \
	done; echo "valgrind: library clean with MMFOLD_LIVE=1 MMFOLD_STATS_INTERVAL=1 in scenario noop, fork"
	@# (not the programs that probe PROT_NONE pages: memcheck reports every
	@# such access as invalid, also one a SIGSEGV handler then makes legal)
	for s in "lazy loop 16 5" "batch count"; do \
	  LD_PRELOAD=$(abspath $(LIB)) MMFOLD_MODE=lazy MMFOLD_STATS=1 MMFOLD_STATS_FILE=/dev/null \
	    $(VG) --trace-children=no $(BUILD)/progs/$$s >/dev/null 2>$(BUILD)/vg-lazy.log || \
	    { cat $(BUILD)/vg-lazy.log; exit 1; }; \
	done; echo "valgrind: library clean in lazy mode (lazy loop, batch count)"
	for wx in keep relax; do \
	  LD_PRELOAD=$(abspath $(LIB)) MMFOLD_WX=$$wx MMFOLD_STATS=1 MMFOLD_STATS_FILE=/dev/null \
	    $(VG) --smc-check=all --trace-children=no $(BUILD)/progs/yjitflip 2 400 >/dev/null || exit 1; \
	done; echo "valgrind: library clean with W^X windows kept and relaxed (yjitflip)"

# ---- benchmark programs (mmfold bench runs them; installed in LIBEXECDIR) --
BENCH_BINS  := noop_mprotect toggle threads_noop
BENCH_PROGS := $(addprefix $(BUILD)/libexec/mmfold/,$(BENCH_BINS))

bench-bin: $(BENCH_PROGS)

$(BUILD)/libexec/mmfold/%: tools/bench/%.c tools/bench/common.h | deps-build
	@mkdir -p $(BUILD)/libexec/mmfold
	$(CC) -std=gnu11 $(WARN) -O2 -g -o $@ $< -pthread

# ---- install -------------------------------------------------------------
# Generated on every install (they hold PREFIX and the directories, which
# may differ from one make invocation to the next).
.PHONY: $(BUILD)/mmfold.pc $(BUILD)/install/mmfold
$(BUILD)/mmfold.pc: mmfold.pc.in
	@mkdir -p $(BUILD)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCDIR@|$(INCDIR)|g' \
	    -e 's|@VERSION@|$(VERSION)|g' $< > $@

# The launcher with its version and directories filled in (tools/mmfold
# finds them in the source tree by itself).
$(BUILD)/install/mmfold: tools/mmfold
	@mkdir -p $(BUILD)/install
	sed -e 's|^INSTALL = None$$|INSTALL = {"version": "$(VERSION)", "bindir": "$(BINDIR)", "libdir": "$(LIBDIR)", "libexecdir": "$(LIBEXECDIR)"}|' \
	    $< > $@
	@grep -q '^INSTALL = {' $@ || { echo "install: tools/mmfold has no 'INSTALL = None' line"; exit 1; }

install: $(LIB) $(BUILD)/mmfold.pc $(BUILD)/install/mmfold $(BENCH_PROGS)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR) $(DESTDIR)$(BINDIR) \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(LIBEXECDIR)
	install -m 755 $(LIB) $(DESTDIR)$(LIBDIR)/libmmfold.so
	install -m 644 include/mmfold.h $(DESTDIR)$(INCDIR)/mmfold.h
	install -m 644 $(BUILD)/mmfold.pc $(DESTDIR)$(LIBDIR)/pkgconfig/mmfold.pc
	install -m 755 $(BUILD)/install/mmfold $(DESTDIR)$(BINDIR)/mmfold
	install -m 644 man/mmfold.1 $(DESTDIR)$(MANDIR)/man1/mmfold.1
	install -m 644 man/mmfold.7 $(DESTDIR)$(MANDIR)/man7/mmfold.7
	install -m 755 $(BENCH_PROGS) $(DESTDIR)$(LIBEXECDIR)/

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libmmfold.so $(DESTDIR)$(INCDIR)/mmfold.h \
	      $(DESTDIR)$(LIBDIR)/pkgconfig/mmfold.pc $(DESTDIR)$(BINDIR)/mmfold \
	      $(DESTDIR)$(MANDIR)/man1/mmfold.1 $(DESTDIR)$(MANDIR)/man7/mmfold.7 \
	      $(addprefix $(DESTDIR)$(LIBEXECDIR)/,$(BENCH_BINS))
	rmdir $(DESTDIR)$(LIBEXECDIR) 2>/dev/null || true

clean:
	rm -rf $(BUILD)

# ==== arm64 (aarch64): real arm64 kernels in a VM ==========================
# make check-arm64-system: cross-compiles $(BUILD)/arm64/libmmfold.so (the
# sources, flags and version script of $(LIB)), the Check runner and the
# test programs, and runs them on real arm64 kernels (Debian's 4 KiB and
# 16 KiB page kernels, 6.12 from bookworm-backports) booted in
# qemu-system-aarch64 (TCG) from an initramfs; also shows the 64 KiB folios
# the kernel gives with and without mmfold (tests/arm64/folios.c).
# tests/arm64/system.sh says how; it ends with "N passed, N failed".
# Packages: tests/arm64/deps.sh installs them as root, or prints the
# commands (ARM64_NO_DEPS=1: do not check).  Targets check-arm64-system,
# lib-arm64, deps-arm64; variables ARM64_CC and ARM64_VM_* (see
# tests/arm64/system.sh).
ARM64_BUILD      := $(BUILD)/arm64
ARM64_CC         ?= aarch64-linux-gnu-gcc
ARM64_LIB        := $(ARM64_BUILD)/libmmfold.so
ARM64_UNIT_BIN   := $(ARM64_BUILD)/check_mmfold
ARM64_PROGS      := $(patsubst tests/progs/%.c,$(ARM64_BUILD)/progs/%,$(PROG_SRC)) \
		    $(ARM64_BUILD)/progs/libnextcount.so
ARM64_PKG_CONFIG := PKG_CONFIG_PATH= PKG_CONFIG_SYSROOT_DIR= \
		    PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig $(PKG_CONFIG)
ARM64_CHECK_CFLAGS = $(shell $(ARM64_PKG_CONFIG) --cflags check 2>/dev/null)
ARM64_CHECK_LIBS   = $(shell $(ARM64_PKG_CONFIG) --libs check 2>/dev/null)
ARM64_UNWIND_CFLAGS = $(shell $(ARM64_PKG_CONFIG) --cflags libunwind 2>/dev/null)

.PHONY: check-arm64-system lib-arm64 deps-arm64

deps-arm64: deps-build
	@$(if $(ARM64_NO_DEPS),true,tests/arm64/deps.sh)

lib-arm64: $(ARM64_LIB)

$(ARM64_BUILD)/libmmfold-bypass.so: $(ENGINE_SRC) $(PRELOAD_SRC) $(HEADERS) preload/libmmfold.map | deps-arm64
	@mkdir -p $(ARM64_BUILD)
	$(ARM64_CC) $(BASEFLAGS) $(CFLAGS) -DMMF_FORCE_BYPASS=3 $(ARM64_UNWIND_CFLAGS) $(LIBFLAGS) -o $@ \
	  $(ENGINE_SRC) $(PRELOAD_SRC) $(LIBS)

$(ARM64_LIB): $(ENGINE_SRC) $(PRELOAD_SRC) $(HEADERS) preload/libmmfold.map | deps-arm64
	@mkdir -p $(ARM64_BUILD)
	$(ARM64_CC) $(BASEFLAGS) $(CFLAGS) $(ARM64_UNWIND_CFLAGS) $(LIBFLAGS) -o $@ $(ENGINE_SRC) $(PRELOAD_SRC) $(LIBS)

$(ARM64_UNIT_BIN): $(CHECK_SRC) $(ENGINE_SRC) $(HEADERS) $(CHECK_HDRS) | deps-arm64
	@mkdir -p $(ARM64_BUILD)
	$(ARM64_CC) -std=gnu11 -D_GNU_SOURCE -Isrc -Itests/unit $(WARN) $(CFLAGS) $(ARM64_CHECK_CFLAGS) -o $@ \
	  $(CHECK_SRC) $(ENGINE_SRC) $(ARM64_CHECK_LIBS) -pthread

$(ARM64_BUILD)/progs/%: tests/progs/%.c tests/progs/jitcode.h tests/preload/fault.h | deps-arm64
	@mkdir -p $(ARM64_BUILD)/progs
	$(ARM64_CC) -std=gnu11 $(WARN) -O2 -g -o $@ $< -pthread

$(ARM64_BUILD)/progs/libnextcount.so: tests/progs/nextcount.c | deps-arm64
	@mkdir -p $(ARM64_BUILD)/progs
	$(ARM64_CC) -std=gnu11 $(WARN) -O2 -g -shared -fPIC -o $@ $<

$(ARM64_BUILD)/progs/profile: tests/progs/profile.c | deps-arm64
	@mkdir -p $(ARM64_BUILD)/progs
	$(ARM64_CC) -std=gnu11 $(WARN) -O2 -g $(PROFILE_PROG_FLAGS) -o $@ $< -pthread

# (tests/arm64/system.sh cross-builds the tests/preload programs itself,
# through tests/preload/run.sh with BUILD_ONLY=1)
check-arm64-system: deps-arm64 $(ARM64_LIB) $(ARM64_BUILD)/libmmfold-bypass.so $(ARM64_UNIT_BIN) $(ARM64_PROGS)
	ARM64_CC=$(ARM64_CC) MMFOLD_LIB=$(abspath $(ARM64_LIB)) ARM64_BUILD=$(abspath $(ARM64_BUILD)) \
	  tests/arm64/system.sh
# ==== end of arm64 =========================================================
