/* jumpout: a signal handler that siglongjmps out of a call while mmfold
 * forwards it.
 *
 *   jumpout [rounds (20)]
 *
 * Each round: a worker thread repeats a few calls on one page; the main
 * thread sends it SIGUSR1 until its handler has jumped out of one of those
 * calls (a signal is delivered as the kernel call returns, so the jump
 * often leaves mmfold's writer section between the kernel's change and the
 * record's).  The worker then makes no more calls; the main thread makes
 * the call that a record left stale by the abandoned section would let
 * mmfold skip, and checks what the kernel did: without mmfold the page
 * always shows what the main thread's last call asked.  Prints the rounds
 * whose page differed (none, on a library that keeps its promise), so the
 * output is the same with and without mmfold.
 *
 * Round r runs course r % 7:
 *   0 mprotect of one page, toggled (mmfold's forward path, fastrun.c);
 *   1 the same alternating with a page of another mapping, so that every
 *     call takes mmfold's general course (decide.c);
 *   2 mprotect of two pages that differ (a call across two records);
 *   3 mmap(MAP_FIXED) of the page, RW then PROT_NONE over it, and munmap;
 *   4 madvise(MADV_DONTFORK) and madvise(MADV_DOFORK);
 *   5 mlock and munlock;
 *   6 mremap of the page to a page of another mapping, and back.
 * Each round runs in a child process.  The section the handler leaves
 * keeps the writer lock: later calls that need it wait MMFOLD_LOCK_WAIT
 * once, then go without the map (README, MMFOLD_LOCK_WAIT); so the main
 * thread's first call is the one that shows a stale record.  In modes whose
 * sections block asynchronous signals (lazy mode) the jump never lands
 * inside one. */
#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>

static char *page, *other;
static int course; /* round % 7, see above */
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

static void map_fixed(char *p, int prot)
{
	if (mmap(p, PG, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p)
		fail("mmap");
}

/* One pass of the worker's calls. */
static void calls_once(void)
{
	switch (course) {
	case 0:
	case 1:
		mprotect(page, PG, PROT_READ | PROT_WRITE);
		if (course)
			mprotect(other, PG, PROT_READ | PROT_WRITE);
		mprotect(page, PG, PROT_NONE);
		if (course)
			mprotect(other, PG, PROT_NONE);
		break;
	case 2: /* page's second page stays PROT_READ between the calls on both */
		mprotect(page + PG, PG, PROT_READ);
		mprotect(page, 2 * PG, PROT_READ | PROT_WRITE);
		mprotect(page + PG, PG, PROT_READ);
		mprotect(page, 2 * PG, PROT_NONE);
		break;
	case 3:
		map_fixed(page, PROT_READ | PROT_WRITE);
		map_fixed(page, PROT_NONE);
		munmap(page, PG);
		break;
	case 4:
		madvise(page, PG, MADV_DONTFORK);
		madvise(page, PG, MADV_DOFORK);
		break;
	case 5:
		mlock(page, PG);
		munlock(page, PG);
		break;
	case 6:
		mremap(page, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, other);
		mremap(other, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, page);
		break;
	}
}

static void *worker(void *arg)
{
	(void)arg;
	if (sigsetjmp(jb, 1) == 0) {
		armed = 1;
		for (;;) {
			calls_once();
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

static int mapped(char *p)
{
	unsigned char v;
	return mincore(p, PG, &v) == 0;
}

/* Does the kernel show VmFlags flag (two letters) for p's mapping?
 * (page_states lists them separated by commas) */
static int vmflag(char *p, const char *flag)
{
	struct pstate st;
	if (page_states((uintptr_t)p, 1, &st) != 0)
		fail("smaps");
	for (const char *f = st.flags; *f; f++)
		if ((f == st.flags || f[-1] == ',') && !strncmp(f, flag, 2) &&
		    (f[2] == ',' || !f[2]))
			return 1;
	return 0;
}

/* The page toggled twice (courses 0, 1), probed after each call. */
static int toggles(char *p)
{
	int bad = 0;
	for (int i = 0; i < 2; i++) {
		bad |= mprotect(p, PG, PROT_NONE) != 0;
		bad |= allows(p) != 0;
		bad |= mprotect(p, PG, PROT_READ | PROT_WRITE) != 0;
		bad |= allows(p) != 3;
	}
	return bad;
}

/* p is not mapped: an mprotect to prot, what a stale record of it says,
 * fails with ENOMEM; then p is mapped again, RW. */
static int gone(char *p, int prot)
{
	errno = 0;
	int bad = mprotect(p, PG, prot) != -1 || errno != ENOMEM;
	map_fixed(p, PROT_READ | PROT_WRITE);
	return bad | (allows(p) != 3);
}

/* After the jump: the call a stale record would skip first, then what the
 * kernel shows; 1 when it is not what the calls asked. */
static int check(void)
{
	int bad = 0;
	switch (course) {
	case 0:
	case 1:
		bad |= toggles(page);
		if (course)
			bad |= toggles(other);
		break;
	case 2: /* both pages' records may be stale: the second is R in both */
		bad |= mprotect(page + PG, PG, PROT_READ) != 0;
		bad |= allows(page + PG) != 1;
		bad |= toggles(page);
		bad |= toggles(page + PG);
		break;
	case 3:
		if (!mapped(page)) { /* a stale record of an unmapped page */
			bad |= gone(page, PROT_NONE);
		} else { /* of a page RW, PROT_NONE now, or the reverse */
			int was = allows(page);
			bad |= mprotect(page, PG, was ? PROT_NONE : PROT_READ | PROT_WRITE) != 0;
			bad |= allows(page) != (was ? 0 : 3);
		}
		bad |= toggles(page);
		break;
	case 4: /* the advice a stale record says is there already */
		if (vmflag(page, "dc")) {
			bad |= madvise(page, PG, MADV_DOFORK) != 0;
			bad |= vmflag(page, "dc");
		} else {
			bad |= madvise(page, PG, MADV_DONTFORK) != 0;
			bad |= !vmflag(page, "dc");
		}
		bad |= madvise(page, PG, MADV_DOFORK) != 0;
		bad |= vmflag(page, "dc");
		break;
	case 5: /* (an mlock is never skipped: only a stale munlock shows) */
		bad |= munlock(page, PG) != 0;
		bad |= vmflag(page, "lo");
		break;
	case 6: /* the page at one of its two places */
		for (int k = 0; k < 2; k++) {
			char *p = k ? other : page;
			if (!mapped(p))
				bad |= gone(p, PROT_READ | PROT_WRITE);
			bad |= toggles(p);
		}
		break;
	}
	return bad;
}

static int round_once(void)
{
	page = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	other = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || other == MAP_FAILED)
		fail("mmap");
	if (course != 2)
		munmap(page + PG, PG); /* one page, and no neighbour to merge with */
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
	/* the worker stays parked: a cancelled thread would unwind into
	 * the section it left */
	return check();
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
			course = r % 7;
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
