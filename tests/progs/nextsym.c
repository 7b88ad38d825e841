/* nextsym — what a second preloaded library (libnextcount.so, after
 * mmfold in LD_PRELOAD) sees of the program's mprotect and madvise calls.
 * Prints "mprotect A B C madvise D E": the library's mprotect count after
 * a demotion (A), after the promotion back (B), after a write to the page
 * (C); its madvise count after MADV_DONTFORK (D) and after a fork (E).
 * Safe mode makes each call when asked: 1 2 2, 1 1.  Lazy mode defers the
 * promotion to the write and the advice to the fork, and makes them through
 * the next definition too: 1 1 2, 0 1.  Exit 2: no libnextcount.so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	unsigned long (*count)(int) = (unsigned long (*)(int))dlsym(RTLD_DEFAULT, "nextcount");
	if (!count) {
		fprintf(stderr, "nextsym: libnextcount.so is not preloaded\n");
		return 2;
	}
	long pg = sysconf(_SC_PAGESIZE);
	char *g = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g == MAP_FAILED)
		return 1;
	char *p = g + pg;
	p[0] = 1;
	unsigned long m0 = count(0), a0 = count(1);
	if (mprotect(p, pg, PROT_READ) != 0)
		return 1;
	unsigned long m1 = count(0) - m0;
	if (mprotect(p, pg, PROT_READ | PROT_WRITE) != 0)
		return 1;
	unsigned long m2 = count(0) - m0;
	p[0] = 2; /* lazy mode: the fault makes the deferred promotion */
	unsigned long m3 = count(0) - m0;
	if (madvise(p, pg, MADV_DONTFORK) != 0)
		return 1;
	unsigned long a1 = count(1) - a0;
	pid_t c = fork();
	if (c == 0)
		_exit(0);
	int st;
	waitpid(c, &st, 0);
	unsigned long a2 = count(1) - a0;
	printf("mprotect %lu %lu %lu madvise %lu %lu\n", m1, m2, m3, a1, a2);
	return p[0] == 2 ? 0 : 1;
}
