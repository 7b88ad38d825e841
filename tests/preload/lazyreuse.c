/* lazyreuse: a spurious fault in lazy mode from a page reused at the same
 * address.
 *
 *   lazyreuse [iterations (20000)] [runs (6)]
 *
 * Each run, in a child process: one thread maps a page with MAP_FIXED at
 * the same address (PROT_NONE), makes it RW with mprotect and writes it,
 * over and over; another thread keeps calling an mprotect that fails with
 * EINVAL (unaligned) on a range whose pages, rounded out, include that page.
 * In lazy mode the RW waits until the write faults, and the failing call
 * makes it first (lazy mode makes what waits on a call's range before the
 * call) and then forgets the range's record: the faulting thread finds no
 * waiting promotion and no record it trusts.  The fault handler once
 * counted such faults per page across unrelated writes, and the third one
 * went to the program (a SIGSEGV after an mprotect that returned 0).
 * The second half of the runs installs an allow-all seccomp filter first,
 * under which mmfold makes no system call of its own (so it cannot ask the
 * kernel for the page's protection).  Prints how many runs saw a write
 * fail: 0 with and without mmfold. */
#include "common.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static char *area;
static volatile int done;

static void *pest(void *arg)
{
	(void)arg;
	while (!done)
		if (mprotect(area + 1, PG, PROT_READ) != -1 || errno != EINVAL)
			_exit(4);
	return NULL;
}

static int run_once(long n, int filtered)
{
	if (filtered) {
		struct sock_filter f[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
		struct sock_fprog prog = {1, f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0))
			return 3;
	}
	area = mmap(NULL, 4 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return 3;
	pthread_t t;
	if (pthread_create(&t, NULL, pest, NULL) != 0)
		return 3;
	char *q = area + PG;
	for (long i = 0; i < n; i++) {
		if (mmap(q, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != q ||
		    mprotect(q, PG, PROT_READ | PROT_WRITE) != 0)
			return 3;
		q[0] = 1; /* no handler: a fault ends the child */
	}
	done = 1;
	pthread_join(t, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	int runs = argc > 2 ? atoi(argv[2]) : 6;
	watchdog(240);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int filtered = 0; filtered < 2; filtered++) {
		int failed = 0;
		for (int r = 0; r < runs; r++) {
			pid_t p = fork();
			if (p < 0)
				return 3;
			if (p == 0)
				_exit(run_once(n, filtered));
			int st;
			if (waitpid(p, &st, 0) != p)
				return 3;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				failed++;
		}
		printf("%s: %d runs of %ld writes, %d failed\n",
		       filtered ? "under a seccomp filter" : "plain", runs, n, failed);
	}
	return 0;
}
