/* jumpout: a signal handler that siglongjmps out of an mprotect while
 * mmfold forwards it.
 *
 *   jumpout [rounds (20)]
 *
 * Each round: a worker thread toggles one page between PROT_NONE and RW;
 * the main thread sends it SIGUSR1 until its handler has jumped out of
 * one of those calls (a signal is delivered as the kernel call returns,
 * so the jump often leaves mmfold's writer section between the kernel's
 * change and the record's).  The worker then makes no more calls; the
 * main thread sets the page to PROT_NONE and to RW, twice, and probes it
 * after each call.  Without mmfold the page always allows what the main
 * thread's last call asked; a record the abandoned section left stale
 * would let mmfold skip one of those calls.  Prints the rounds whose page
 * differed (none, on a library that keeps its promise), so the output is
 * the same with and without mmfold.
 *
 * Odd rounds toggle a second page (a page inside another mapping) after
 * each call on the first, so that every call finds this thread's hint on
 * the other record and takes mmfold's general course (decide.c) instead
 * of the forward path (fastrun.c).  Each round runs in a child process.  The section the handler leaves
 * keeps the writer lock: later calls that
 * need it wait MMFOLD_LOCK_WAIT once, then go without the map (README,
 * MMFOLD_LOCK_WAIT).  In modes whose sections block asynchronous signals
 * (lazy mode) the jump never lands inside one. */
#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>

static char *page, *other;
static int general; /* the worker alternates two pages (see main) */
static sigjmp_buf jb;
static volatile sig_atomic_t armed, jumped;
static volatile long calls;

static void fail(const char *what)
{
	perror(what);
	exit(3);
}

static void on_usr1(int sig)
{
	(void)sig;
	if (armed) {
		armed = 0;
		jumped = 1;
		siglongjmp(jb, 1);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	if (sigsetjmp(jb, 1) == 0) {
		armed = 1;
		for (;;) {
			mprotect(page, PG, PROT_READ | PROT_WRITE);
			if (general)
				mprotect(other, PG, PROT_READ | PROT_WRITE);
			mprotect(page, PG, PROT_NONE);
			if (general)
				mprotect(other, PG, PROT_NONE);
			calls++;
		}
	}
	for (;;)
		pause(); /* makes no more calls */
	return NULL;
}

/* 0 none, 1 read, 3 read and write */
static int allows(char *p)
{
	char c;
	if (fg_read(p, &c))
		return 0;
	return fg_rewrite(p) ? 1 : 3;
}

static int round_once(void)
{
	page = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	other = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || other == MAP_FAILED)
		fail("mmap");
	other += 32 * PG;
	calls = 0;
	jumped = 0;
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		fail("pthread_create");
	while (calls < 100)
		sched_yield();
	while (!jumped) {
		pthread_kill(t, SIGUSR1);
		usleep(10);
	}
	int bad = 0;
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 1 + general; k++) {
			char *p = k ? other : page;
			bad |= mprotect(p, PG, PROT_NONE) != 0;
			bad |= allows(p) != 0;
			bad |= mprotect(p, PG, PROT_READ | PROT_WRITE) != 0;
			bad |= allows(p) != 3;
		}
	/* the worker stays parked: a cancelled thread would unwind into
	 * the section it left */
	return bad;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20;
	watchdog(120);
	setvbuf(stdout, NULL, _IOLBF, 0);
	fg_install();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	/* each round in a child of its own: an abandoned section keeps the
	 * writer lock, and every later section of that process would bypass
	 * the map (no section left to abandon) */
	int differed = 0;
	for (int r = 0; r < rounds; r++) {
		pid_t p = fork();
		if (p < 0)
			fail("fork");
		if (p == 0) {
			general = r & 1;
			_exit(round_once());
		}
		int st;
		if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st)) {
			printf("round %d: the page did not allow what the last call asked\n", r);
			differed++;
		}
	}
	printf("%d rounds, %d differed\n", rounds, differed);
	return 0;
}
