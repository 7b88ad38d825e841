/* Signal chaining, the engine's side (src/sigchain.c): the API lazy mode
 * uses, linked directly.  A claim imports the handler in force, faults the
 * fault function claims never reach the program's handler, the others
 * reach it with the same siginfo and ucontext.  (Each test runs in its own
 * forked process, so claims do not leak between tests.)  The same chaining
 * under LD_PRELOAD: tests/behaviour/check_sigchain.c. */
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

#include "sigchain.h"
#include "suites.h"

/* ---- engine ---------------------------------------------------------------- */

static char *volatile lazy_page, *volatile other_page;
#define PGSZ ((unsigned long)getpagesize()) /* the system's page size */
#define POKE(p, i, v) (((volatile char *)(p))[i] = (v))
#define PEEK(p, i) (((volatile char *)(p))[i])
static volatile int fn_calls, fn_claimed, prog_calls;
static void *volatile fn_si, *volatile fn_uc, *volatile prog_si, *volatile prog_uc;

/* Claims faults on lazy_page, as lazy mode will: makes it writable. */
static int lazy_fn(int sig, siginfo_t *si, void *uc)
{
	fn_calls++;
	fn_si = si;
	fn_uc = uc;
	char *a = si->si_addr, *lp = lazy_page;
	if (sig == SIGSEGV && a >= lp && a < lp + PGSZ) {
		mprotect(lazy_page, PGSZ, PROT_READ | PROT_WRITE);
		fn_claimed++;
		return 1;
	}
	return 0;
}

static void prog_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	prog_calls++;
	prog_si = si;
	prog_uc = uc;
	mprotect((char *)((unsigned long)si->si_addr & ~(PGSZ - 1)), PGSZ, PROT_READ | PROT_WRITE);
}

static void before_handler(int sig) { (void)sig; }

START_TEST(claim_imports_and_chains)
{
	lazy_page = mmap(NULL, PGSZ, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	other_page = mmap(NULL, PGSZ, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(lazy_page, MAP_FAILED);
	/* installed before the claim: imported as the program's */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = before_handler;
	sigaddset(&sa.sa_mask, SIGUSR1);
	ck_assert_int_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	ck_assert_int_eq(mmf_sigchain_claimed(), 0);
	ck_assert_int_eq(mmf_sigchain_owns(SIGSEGV), 0);
	ck_assert_int_eq(mmf_sigchain_claim(lazy_fn), 0);
	ck_assert_int_eq(mmf_sigchain_claim(lazy_fn), 0); /* idempotent */
	ck_assert_int_eq(mmf_sigchain_owns(SIGSEGV), 1);
	ck_assert_int_eq(mmf_sigchain_owns(SIGBUS), 1);
	ck_assert_int_eq(mmf_sigchain_owns(SIGUSR1), 0);
	struct mmf_ksa k;
	ck_assert_int_eq(mmf_sigchain_act(SIGSEGV, NULL, &k), 0);
	ck_assert_ptr_eq((void *)k.handler, (void *)before_handler);
	ck_assert_uint_eq(k.mask, 1ULL << (SIGUSR1 - 1));
	/* the kernel's action is mmfold's */
	struct sigaction now;
	sigaction(SIGSEGV, NULL, &now);
	ck_assert_ptr_ne((void *)now.sa_handler, (void *)before_handler);
	ck_assert(now.sa_flags & SA_ONSTACK);

	/* the program's handler, recorded */
	struct mmf_ksa mine = {.handler = (unsigned long)prog_handler, .flags = SA_SIGINFO, .mask = 0};
	ck_assert_int_eq(mmf_sigchain_act(SIGSEGV, &mine, &k), 0);
	ck_assert_ptr_eq((void *)k.handler, (void *)before_handler);

	/* mmfold's fault: the program never sees it */
	POKE(lazy_page, 8, 1);
	ck_assert_int_eq(PEEK(lazy_page, 8), 1);
	ck_assert_int_eq(fn_claimed, 1);
	ck_assert_int_eq(prog_calls, 0);
	/* the program's fault: same siginfo and context pointers */
	POKE(other_page, 8, 2);
	ck_assert_int_eq(PEEK(other_page, 8), 2);
	ck_assert_int_eq(fn_calls, 2);
	ck_assert_int_eq(prog_calls, 1);
	ck_assert_ptr_eq(prog_si, fn_si);
	ck_assert_ptr_eq(prog_uc, fn_uc);
}
END_TEST

/* A claimed fault with SIG_DFL recorded still kills by SIGSEGV. */
START_TEST(unclaimed_fault_kills)
{
	pid_t pid = fork();
	if (pid == 0) {
		lazy_page = mmap(NULL, PGSZ, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		other_page = mmap(NULL, PGSZ, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		signal(SIGSEGV, SIG_DFL);
		if (mmf_sigchain_claim(lazy_fn) != 0)
			_exit(3);
		POKE(lazy_page, 0, 1); /* claimed: survives */
		if (fn_claimed != 1)
			_exit(4);
		POKE(other_page, 0, 1); /* not claimed: dies */
		_exit(5);
	}
	int st;
	waitpid(pid, &st, 0);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "status %#x", st);
}
END_TEST

/* A record replaced while it is read stays whole (the handler's view). */
START_TEST(records_never_torn)
{
	ck_assert_int_eq(mmf_sigchain_claim(lazy_fn), 0);
	for (unsigned long i = 1; i < 20000; i++) {
		struct mmf_ksa a = {.handler = i * 16, .flags = SA_SIGINFO, .restorer = i, .mask = i}, o;
		ck_assert_int_eq(mmf_sigchain_act(SIGBUS, &a, &o), 0);
		uint64_t kept = ~((1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1)));
		if (i > 1)
			ck_assert(o.handler == (i - 1) * 16 && o.restorer == i - 1 &&
				  o.mask == ((i - 1) & kept));
	}
	struct mmf_ksa bad = {.handler = 16, .flags = 0xffffffffUL, .mask = ~0ULL}, o;
	mmf_sigchain_act(SIGBUS, &bad, NULL);
	mmf_sigchain_act(SIGBUS, NULL, &o);
	/* the kernel's rules: unknown flags cleared, SIGKILL/SIGSTOP never blocked */
	ck_assert_uint_eq(o.flags & 0x400, 0);
	ck_assert_uint_eq(o.mask & ((1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1))), 0);
	ck_assert_int_eq(mmf_sigchain_act(SIGUSR1, NULL, &o), -22);
}
END_TEST


Suite *sigchain_suite(void)
{
	Suite *s = suite_create("sigchain");
	TCase *e = tcase_create("engine");
	tcase_add_test(e, claim_imports_and_chains);
	tcase_add_test(e, unclaimed_fault_kills);
	tcase_add_test(e, records_never_torn);
	suite_add_tcase(s, e);
	return s;
}
