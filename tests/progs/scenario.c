/* Small programs with known memory-protection traffic, for tests that
 * count what mmfold did (tests/unit/check_preload.c).
 *   scenario noop N      N redundant mprotects on a fresh mapping, plus two
 *                        real changes and redundant mlock/munlock/madvise
 *                        (a repeated mlock is forwarded; a repeated
 *                        mlock2(MLOCK_ONFAULT) is the one skipped, where
 *                        RLIMIT_MEMLOCK is unlimited)
 *   scenario heap        redundant mprotect on memory mmfold did not map
 *   scenario fork K      3 redundant calls, fork, K in the child
 *   scenario raw         an invisible (inline) mprotect, then the call that
 *                        mmfold would wrongly skip: MMFOLD_VERIFY catches it
 *   scenario quick_exit  calls, then _exit: no report is expected */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG ((size_t)getpagesize()) /* the system's page size */

static char *fresh(size_t pages)
{
	char *p = mmap(NULL, pages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	memset(p, 7, pages * PG);
	return p;
}

static void must(int r, const char *what)
{
	if (r != 0) {
		perror(what);
		exit(3);
	}
}

static long raw_mprotect(void *a, size_t l, int prot)
{
	long ret;
#if defined(__x86_64__)
	__asm__ volatile("syscall" : "=a"(ret) : "a"(SYS_mprotect), "D"(a), "S"(l), "d"(prot)
			 : "rcx", "r11", "memory");
#else
	register long x8 __asm__("x8") = SYS_mprotect;
	register long x0 __asm__("x0") = (long)a;
	register long x1 __asm__("x1") = (long)l;
	register long x2 __asm__("x2") = prot;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	ret = x0;
#endif
	return ret;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "noop";
	long n = argc > 2 ? atol(argv[2]) : 1000;
	if (!strcmp(what, "noop")) {
		char *p = fresh(16);
		for (long i = 0; i < n; i++)
			must(mprotect(p, 16 * PG, PROT_READ | PROT_WRITE), "mprotect");
		must(mprotect(p, PG, PROT_READ), "mprotect ro");
		must(mprotect(p, PG, PROT_READ | PROT_WRITE), "mprotect rw");
		must(mlock(p, 2 * PG), "mlock");
		must(mlock(p, 2 * PG), "mlock again"); /* forwarded: it faults pages in */
		must(munlock(p, 2 * PG), "munlock");
		must(munlock(p, 2 * PG), "munlock again");
		/* valgrind knows no mlock2 (glibc then says EINVAL): the
		 * counts are checked without it */
		if (mlock2(p, 2 * PG, MLOCK_ONFAULT) == 0) {
			must(mlock2(p, 2 * PG, MLOCK_ONFAULT), "mlock2 onfault again");
			must(munlock(p, 2 * PG), "munlock onfault");
		} else if (errno != EINVAL && errno != ENOSYS) {
			must(-1, "mlock2 onfault");
		}
		must(madvise(p, 16 * PG, MADV_DONTDUMP), "madvise");
		must(madvise(p, 16 * PG, MADV_DONTDUMP), "madvise again");
		p[0] = 1;
		printf("noop ok\n");
	} else if (!strcmp(what, "heap")) {
		void *h;
		must(posix_memalign(&h, PG, 4 * PG), "posix_memalign");
		must(mprotect(h, PG, PROT_READ | PROT_WRITE), "mprotect heap");
		must(mprotect(h, PG, PROT_READ | PROT_WRITE), "mprotect heap again");
		printf("heap ok\n");
	} else if (!strcmp(what, "fork")) {
		char *p = fresh(4);
		for (int i = 0; i < 3; i++)
			must(mprotect(p, PG, PROT_READ | PROT_WRITE), "mprotect");
		fflush(stdout);
		pid_t c = fork();
		if (c == 0) {
			for (long i = 0; i < n; i++)
				must(mprotect(p, PG, PROT_READ | PROT_WRITE), "child mprotect");
			exit(0);
		}
		int st;
		waitpid(c, &st, 0);
		printf("fork ok %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	} else if (!strcmp(what, "raw")) {
		char *p = fresh(1);
		if (raw_mprotect(p, PG, PROT_READ) != 0)
			return 4;
		/* mmfold's map still says read-write: this call must reach the
		 * kernel, or the write below faults. */
		must(mprotect(p, PG, PROT_READ | PROT_WRITE), "mprotect");
		p[0] = 2;
		printf("raw ok\n");
	} else if (!strcmp(what, "quick_exit")) {
		char *p = fresh(1);
		must(mprotect(p, PG, PROT_READ | PROT_WRITE), "mprotect");
		_exit(0);
	} else {
		fprintf(stderr, "unknown scenario %s\n", what);
		return 2;
	}
	return 0;
}
