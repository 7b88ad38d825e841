/* Signal chaining under LD_PRELOAD (preload/signal.c over src/sigchain.c):
 * tests/preload/sigchain.c (and libsigctor.so, whose constructor installs
 * a SIGSEGV handler before mmfold's ran), one test per case, run without
 * the library and with it under MMFOLD_SIGCHAIN=on (modes safe and off)
 * and without the variable: stdout and the way the process ended must be
 * identical, and the reference must say what the kernel does (so a test
 * fails if the program itself is wrong).  Then the write barrier and the
 * whole program through tests/preload/run.sh.  The engine's side, linked
 * directly: tests/unit/check_sigchain.c. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "behaviour.h"
#include "suites.h"

static const char *lib, *build;
static char bdir[400], tmpdir[300];

/* Builds the programs once per test case (in the runner process). */
static void build_progs(void)
{
	lib = getenv("MMFOLD_LIB");
	build = getenv("MMFOLD_BUILD");
	if (!lib || !build)
		return;
	snprintf(bdir, sizeof bdir, "%s/sigchain", build);
	if (getenv("TESTS_PREBUILT")) {
		/* built elsewhere (a cross build run in a VM without a compiler) */
		char path[600];
		snprintf(path, sizeof path, "%s/sigchain", bdir);
		if (access(path, X_OK) != 0)
			bdir[0] = 0;
		return;
	}
	char cmd[2000];
	snprintf(cmd, sizeof cmd,
		 "mkdir -p %s && cd tests/preload && "
		 "gcc -O2 -g -Wall -Wextra -Werror -pthread -shared -fPIC -o %s/libsigctor.so sigctor.c && "
		 "gcc -O2 -g -Wall -Wextra -Werror -pthread -o %s/sigchain sigchain.c -L%s -lsigctor "
		 "-Wl,-rpath,'$ORIGIN'",
		 bdir, bdir, bdir, bdir);
	if (system(cmd) != 0)
		bdir[0] = 0;
}

static void setup(void)
{
	ck_assert_msg(lib && build, "MMFOLD_LIB and MMFOLD_BUILD must be set (make check does)");
	ck_assert_msg(bdir[0], "could not build tests/preload/sigchain.c");
	bh_tmpdir(tmpdir, sizeof tmpdir, "sigchain");
}

static void teardown(void) { bh_rmdir(tmpdir); }

struct result {
	int status;
	char out[16384], err[4096];
};

/* Runs "sigchain what" with LD_PRELOAD=lib (unless preload is 0) and the
 * "K=V" settings in extra, in an environment without MMFOLD_* variables. */
static void run(struct result *res, int preload, const char *const *extra, const char *what)
{
	char out[400], err[400], path[500];
	snprintf(out, sizeof out, "%s/out", tmpdir);
	snprintf(err, sizeof err, "%s/err", tmpdir);
	snprintf(path, sizeof path, "%s/sigchain", bdir);
	char *argv[] = {path, (char *)what, NULL};
	res->status = bh_wait(bh_spawn(lib, preload, extra, argv, out, err));
	bh_slurp(out, res->out, sizeof res->out);
	bh_slurp(err, res->err, sizeof res->err);
}

/* The reference run must contain every string of want; every run with the
 * library must print exactly what it printed. */
static void differential(const char *what, const char *const *want)
{
	static struct result ref, r;
	run(&ref, 0, NULL, what);
	ck_assert_msg(ref.status == 0, "%s without mmfold exited %d:\n%s%s", what, ref.status, ref.out,
		      ref.err);
	for (; want && *want; want++)
		ck_assert_msg(strstr(ref.out, *want), "%s without mmfold: no \"%s\" in:\n%s", what, *want,
			      ref.out);
	ck_assert_msg(!strstr(ref.out, "wrong"), "%s:\n%s", what, ref.out);
	static const char *const on_safe[] = {"MMFOLD_SIGCHAIN=on", NULL};
	static const char *const on_off[] = {"MMFOLD_SIGCHAIN=on", "MMFOLD_MODE=off", NULL};
	static const char *const plain[] = {NULL};
	const char *const *const cfgs[] = {on_safe, on_off, plain};
	static const char *const names[] = {"MMFOLD_SIGCHAIN=on", "MMFOLD_SIGCHAIN=on MMFOLD_MODE=off",
					    "without MMFOLD_SIGCHAIN"};
	for (int c = 0; c < 3; c++) {
		run(&r, 1, cfgs[c], what);
		ck_assert_msg(r.status == ref.status && !strcmp(r.out, ref.out),
			      "%s with %s: exit %d, without mmfold %d; output:\n%s\n--- without mmfold:\n%s",
			      what, names[c], r.status, ref.status, r.out, ref.out);
		ck_assert_msg(!strcmp(r.err, ref.err), "%s with %s: stderr\n%s", what, names[c], r.err);
	}
}

#define DIFF(name, ...)                                                        \
	START_TEST(pre_##name)                                                 \
	{                                                                      \
		static const char *const want[] = {__VA_ARGS__, NULL};         \
		differential(#name, want);                                     \
	}                                                                      \
	END_TEST

DIFF(ctor, "caught SIGSEGV before the constructor: 0", "handler sigctor_handler",
     "sigctor_handler calls 1, value 1", "ctor: exit 0")
DIFF(query, "previous: handler sigctor_handler", "in place previous: handler h_a",
     "signal h_plain -> h_a", "signal SIG_DFL -> SIG_IGN", "signal SIG_ERR -> SIG_ERR errno 22",
     "sigset SIG_DFL -> SIG_HOLD", "rt_sigaction bad act: -1 errno 14", "query: exit 0")
DIFF(resethand, "first fault handled: 1", "after first fault: handler SIG_DFL",
     "resethand: signal 11")
DIFF(mask, "inside: SEGV 1 USR1 1 USR2 0 TERM 1", "inside, SA_NODEFER: SEGV 0 USR1 1",
     "after: SEGV 0 USR1 0 USR2 0 TERM 1", "mask: exit 0")
DIFF(siginfo, "ACCERR: signo 11 code 2 (SEGV_ACCERR 2) addr offset 123 uc set",
     "MAPERR: signo 11 code 1 (SEGV_MAPERR 1) addr offset 77", "plain handler: sig 11",
     "siginfo: exit 0")
DIFF(skip, "skipped 1000 stores, result 7000, memory 0", "skip: exit 0")
DIFF(altstack, "on the alternate stack 1", "altstack: exit 0")
DIFF(nohandler, "nohandler: signal 11")
DIFF(ignfault, "ignfault: signal 11")
DIFF(sigbus, "SIGBUS: signo 7 code 2 (BUS_ADRERR 2) addr offset PG+9 value 3", "sigbus: exit 0")
DIFF(busdfl, "busdfl: signal 7")
DIFF(kill, "survived", "kill with handler: signo 11 code 0 (SI_USER 0) from self 1",
     "code -6 (SI_TKILL -6)", "after unblock: signo 11", "kill: exit 0")
DIFF(killdfl, "killdfl: signal 11")
DIFF(threads, "threads: 12000 faults handled, 12000 expected, re-installs done", "threads: exit 0")
DIFF(fork, "child: hits 1", "parent: child exit 0")

/* The one view in which chaining shows: the kernel still catches SIGSEGV
 * after the program set SIG_DFL.  Proves the runs above were chained. */
START_TEST(pre_procview)
{
	static struct result r;
	run(&r, 0, NULL, "procview");
	ck_assert_msg(strstr(r.out, "kernel catches SIGSEGV: no"), "%s", r.out);
	const char *on[] = {"MMFOLD_SIGCHAIN=on", "MMFOLD_LOG=2", NULL};
	run(&r, 1, on, "procview");
	ck_assert_msg(strstr(r.out, "kernel catches SIGSEGV: yes"), "%s", r.out);
	ck_assert_msg(strstr(r.err, "MMFOLD_SIGCHAIN=on: SIGSEGV and SIGBUS chained"), "%s", r.err);
	const char *autov[] = {"MMFOLD_SIGCHAIN=auto", NULL};
	run(&r, 1, autov, "procview");
	ck_assert_msg(strstr(r.out, "kernel catches SIGSEGV: no"), "%s", r.out);
}
END_TEST

static void run_script(const char *name)
{
	static struct result r;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	char out[400];
	snprintf(out, sizeof out, "%s/script", tmpdir);
	if (pid == 0) {
		char b[500], l[600];
		snprintf(b, sizeof b, "BUILD=%s/tests", build);
		snprintf(l, sizeof l, "MMFOLD_LIB=%s", lib);
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(o, 1);
		dup2(o, 2);
		execl("/usr/bin/env", "env", "-u", "LD_PRELOAD", b, l, "tests/preload/run.sh", name,
		      (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	bh_slurp(out, r.out, sizeof r.out);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tests/preload/run.sh %s:\n%s", name, r.out);
}

START_TEST(script_barrier_sigchain) { run_script("barrier-sigchain"); }
END_TEST
START_TEST(script_sigchain_all) { run_script("sigchain"); }
END_TEST

Suite *sigchain_preload_suite(void)
{
	Suite *s = suite_create("sigchain_preload");
	TCase *p = tcase_create("preload");
	tcase_add_unchecked_fixture(p, build_progs, NULL);
	tcase_add_checked_fixture(p, setup, teardown);
	tcase_set_timeout(p, 120);
	tcase_add_test(p, pre_ctor);
	tcase_add_test(p, pre_query);
	tcase_add_test(p, pre_resethand);
	tcase_add_test(p, pre_mask);
	tcase_add_test(p, pre_siginfo);
	tcase_add_test(p, pre_skip);
	tcase_add_test(p, pre_altstack);
	tcase_add_test(p, pre_nohandler);
	tcase_add_test(p, pre_ignfault);
	tcase_add_test(p, pre_sigbus);
	tcase_add_test(p, pre_busdfl);
	tcase_add_test(p, pre_kill);
	tcase_add_test(p, pre_killdfl);
	tcase_add_test(p, pre_threads);
	tcase_add_test(p, pre_fork);
	tcase_add_test(p, pre_procview);
	tcase_add_test(p, script_barrier_sigchain);
	tcase_add_test(p, script_sigchain_all);
	suite_add_tcase(s, p);
	return s;
}
