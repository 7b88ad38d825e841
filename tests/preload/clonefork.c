/* Children made without fork()'s handlers, while other threads change
 * protections.  clone() without CLONE_VM (Chromium's zygote), _Fork(),
 * syscall(SYS_clone) and syscall(SYS_fork) copy the calling thread at any
 * moment: another thread may be inside mmfold's writer section then.  Each
 * child changes and probes protections of its own copy (a page made
 * read-only must fault on write, made writable again must not; a page the
 * parent made read-only before must fault: with MMFOLD_BARRIER=uffd it is
 * write-protected by userfaultfd in the parent, which the child does not
 * inherit) and exits with a code that says what it found.  The parent
 * waits at most CHILD_WAIT_S for each child and kills one that does not
 * finish (before the fix: 48 of 50 clone() children hung in safe mode).
 * A clone(CLONE_FILES) child shares the descriptor table: the parent must
 * still close every descriptor it opens after (with MMFOLD_BARRIER=uffd a
 * child that closed mmfold's descriptors would have freed their numbers).
 * The first clone(CLONE_VFORK) child also checks that the parent's other
 * threads go on changing protections while it lives (the calling thread
 * sleeps until the child exits).  fork() runs as the control.
 *
 *   clonefork [ROUNDS]   (default 30 children per way)
 *
 * Output (identical with and without mmfold): per way, the children made,
 * those that exited 0, those that hung, those that found a wrong state. */
#include "common.h"
#include "fault.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>

#define TOGGLERS 3 /* more threads than the machine's two cores */
#define CHILD_WAIT_S 20

static char *area;      /* TOGGLERS + 4 pages */
static volatile int stop;
/* toggles made, in memory a child shares (MAP_SHARED) */
static volatile unsigned long *toggles;

static void *toggler(void *p)
{
	char *pg = area + (uintptr_t)p * PG;
	while (!stop) {
		mprotect(pg, PG, PROT_READ);
		mprotect(pg, PG, PROT_READ | PROT_WRITE);
		__atomic_add_fetch(toggles, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* A clone(CLONE_VFORK) child leaves its parent's thread asleep until it
 * exits: the parent's other threads must go on changing protections
 * meanwhile (none of them may wait for that thread).  Exit 12 when they
 * made no toggle in 300 ms. */
static int others_progress(void)
{
	unsigned long t0 = __atomic_load_n(toggles, __ATOMIC_RELAXED);
	struct timespec d = {0, 300 * 1000000L};
	nanosleep(&d, NULL);
	return __atomic_load_n(toggles, __ATOMIC_RELAXED) != t0 ? 0 : 12;
}

/* The child's work: no stdio, no malloc (a clone may copy libc's locks
 * held).  Returns the exit code: 0, or the first check that failed. */
static int child_checks(void)
{
	char *own = area + TOGGLERS * PG;        /* read-write in the parent */
	char *ro = area + (TOGGLERS + 1) * PG;   /* read-only in the parent */
	if (mprotect(own, PG, PROT_READ) != 0)
		return 2;
	if (fg_rewrite(own) != 'a')
		return 3;
	if (mprotect(own, PG, PROT_READ | PROT_WRITE) != 0)
		return 4;
	if (fg_rewrite(own) != 0)
		return 5;
	if (fg_rewrite(ro) != 'a')
		return 6;
	if (mprotect(ro, PG, PROT_READ) != 0) /* changes nothing */
		return 7;
	if (fg_rewrite(ro) != 'a')
		return 8;
	if (mprotect(ro, PG, PROT_READ | PROT_WRITE) != 0 || fg_rewrite(ro) != 0)
		return 9;
	/* the togglers' pages: whatever the moment of the copy, a page made
	 * read-only here is read-only */
	for (int i = 0; i < TOGGLERS; i++) {
		char *pg = area + i * PG;
		if (mprotect(pg, PG, PROT_READ) != 0 || fg_rewrite(pg) != 'a')
			return 10;
		if (mprotect(pg, PG, PROT_READ | PROT_WRITE) != 0 || fg_rewrite(pg) != 0)
			return 11;
	}
	return 0;
}

/* A child sharing the descriptor table that stays alive for a second. */
static int sleeping_child(void *arg)
{
	(void)arg;
	int r = child_checks();
	struct timespec d = {1, 0};
	nanosleep(&d, NULL);
	_exit(r);
}

static int clone_child(void *arg)
{
	int r = child_checks();
	if (!r && arg)
		r = others_progress();
	_exit(r);
}

enum way { W_FORK, W_CLONE, W_CLONE_VFORK, W_CLONE_FILES, W_FORK_, W_SYS_CLONE, W_SYS_FORK, W_N };
static const char *const names[W_N] = {"fork",  "clone",         "clone-vfork", "clone-files",
					"_Fork", "syscall-clone", "syscall-fork"};

static char cstack[1 << 16] __attribute__((aligned(16)));

static pid_t make(enum way w, int first)
{
	pid_t p = -1;
	switch (w) {
	case W_FORK: p = fork(); break;
	case W_CLONE: return clone(clone_child, cstack + sizeof cstack, SIGCHLD, NULL);
	case W_CLONE_VFORK: /* the first child also watches the other threads */
		return clone(clone_child, cstack + sizeof cstack, CLONE_VFORK | SIGCHLD,
			     first ? (void *)1 : NULL);
	case W_CLONE_FILES: /* the descriptor table shared with this process */
		return clone(clone_child, cstack + sizeof cstack, CLONE_FILES | SIGCHLD, NULL);
	case W_FORK_: p = _Fork(); break;
	case W_SYS_CLONE: p = (pid_t)syscall(SYS_clone, SIGCHLD, 0L, 0L, 0L, 0L); break;
	case W_SYS_FORK:
#ifdef SYS_fork
		p = (pid_t)syscall(SYS_fork);
#endif
		break;
	default: break;
	}
	if (p == 0)
		_exit(child_checks());
	return p;
}

/* 0 exited 0, 1 hung (killed), 2 exited otherwise. */
static int reap(pid_t p)
{
	int st;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pid_t r = waitpid(p, &st, WNOHANG);
		if (r == p)
			break;
		if (r < 0)
			return 2;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= CHILD_WAIT_S) {
			kill(p, SIGKILL);
			waitpid(p, &st, 0);
			return 1;
		}
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	fprintf(stderr, "child exit %d signal %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
		WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return 2;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 30;
	fg_install();
	area = mmap(NULL, (TOGGLERS + 4) * PG, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return 1;
	memset(area, 1, (TOGGLERS + 4) * PG);
	toggles = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (toggles == MAP_FAILED)
		return 1;
	if (mprotect(area + (TOGGLERS + 1) * PG, PG, PROT_READ) != 0)
		return 1;
	pthread_t th[TOGGLERS];
	for (uintptr_t i = 0; i < TOGGLERS; i++)
		pthread_create(&th[i], NULL, toggler, (void *)i);
	for (int w = 0; w < W_N; w++) {
#ifndef SYS_fork
		if (w == W_SYS_FORK)
			continue;
#endif
		int ok = 0, hung = 0, wrong = 0, made = 0;
		for (int i = 0; i < rounds; i++) {
			pid_t p = make((enum way)w, i == 0);
			if (p < 0) {
				printf("%s: failed: %s\n", names[w], ename(errno));
				break;
			}
			made++;
			int r = reap(p);
			ok += r == 0;
			hung += r == 1;
			wrong += r == 2;
			if (hung) /* one is enough: each costs CHILD_WAIT_S */
				break;
		}
		printf("%s: %d children, %d exited 0, %d hung, %d found a wrong state\n", names[w],
		       made, ok, hung, wrong);
		fflush(stdout);
	}
	stop = 1;
	for (int i = 0; i < TOGGLERS; i++)
		pthread_join(th[i], NULL);
	/* the parent's own view is intact */
	char *ro = area + (TOGGLERS + 1) * PG;
	printf("parent: read-only page %s\n", fg_rewrite(ro) == 'a' ? "faults" : "WRITABLE");
	char *own = area + TOGGLERS * PG;
	int made = mprotect(own, PG, PROT_READ) == 0 && fg_rewrite(own) == 'a';
	printf("parent: a page made read-only now %s\n", made ? "faults" : "DOES NOT FAULT");
	/* and while a child that shares the descriptor table lives */
	pid_t sc = clone(sleeping_child, cstack + sizeof cstack, CLONE_FILES | SIGCHLD, NULL);
	struct timespec d = {0, 200 * 1000000L};
	nanosleep(&d, NULL); /* the child has made its own calls by now */
	char *pg2 = area + (TOGGLERS + 2) * PG;
	made = mprotect(pg2, PG, PROT_READ) == 0 && fg_rewrite(pg2) == 'a';
	printf("parent: a page made read-only while a clone-files child lives %s\n",
	       made ? "faults" : "DOES NOT FAULT");
	printf("parent: that child %s\n", sc > 0 && reap(sc) == 0 ? "exited 0" : "failed");
	/* descriptors the program opens now are its own to close (a child
	 * sharing the table that closed mmfold's would have let their numbers
	 * be reused, and the close guard would refuse the program's) */
	int opened = 0, closed = 0;
	for (int i = 0; i < 16; i++) {
		int fd = open("/dev/null", O_RDONLY);
		opened += fd >= 0;
		closed += fd >= 0 && close(fd) == 0;
	}
	printf("parent: %d of %d descriptors opened were closed\n", closed, opened);
	return 0;
}
