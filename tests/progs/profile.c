/* profile — call sites with known traffic, for the MMFOLD_PROFILE test
 * (tests/unit/check_preload.c, profile_sites).  Each site_* function calls
 * one intercepted function from one place; in safe mode mmfold sees:
 *   site_alpha    mprotect x1000 on one page: 501 real changes, 499 no-ops
 *   site_beta     madvise x300: 150 MADV_DONTNEED (always forwarded), then
 *                 150 MADV_DONTDUMP (the first sets the flag, 149 no-ops)
 *   site_gamma    mprotect x77, each a real change
 *   site_handler  the SIGSEGV handler of a write barrier: mprotect once per
 *                 page of a 64-page read-only region that site_writer
 *                 writes to: 64 real changes, all from a signal handler
 * Built with -g -fno-omit-frame-pointer -rdynamic so that dladdr names the
 * functions.  Prints "profile ok" on success. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG getpagesize() /* the system's page size */
#define NBARRIER 64
#define SITE __attribute__((noinline, used))

static char *barrier;
static volatile int faults;

static char *fresh(size_t pages)
{
	char *p = mmap(NULL, pages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

SITE int site_alpha(char *p)
{
	int bad = 0;
	for (int i = 0; i < 1000; i++) {
		int prot = i < 500 && (i & 1) ? PROT_READ | PROT_WRITE : PROT_READ;
		bad |= mprotect(p, PG, prot);
		__asm__ volatile("" ::: "memory");
	}
	return bad;
}

SITE int site_beta(char *p)
{
	int bad = 0;
	for (int i = 0; i < 300; i++) {
		bad |= madvise(p, 16 * PG, i < 150 ? MADV_DONTNEED : MADV_DONTDUMP);
		__asm__ volatile("" ::: "memory");
	}
	return bad;
}

SITE int site_gamma(char *p)
{
	int bad = 0;
	for (int i = 0; i < 77; i++) {
		bad |= mprotect(p, 2 * PG, i & 1 ? PROT_READ | PROT_WRITE : PROT_READ);
		__asm__ volatile("" ::: "memory");
	}
	return bad;
}

SITE void site_handler(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	char *a = (char *)((unsigned long)si->si_addr & ~(unsigned long)(PG - 1));
	if (a < barrier || a >= barrier + NBARRIER * PG) {
		signal(sig, SIG_DFL);
		return;
	}
	faults++;
	if (mprotect(a, PG, PROT_READ | PROT_WRITE) != 0)
		_exit(3);
	__asm__ volatile("" ::: "memory");
}

SITE void site_writer(void)
{
	for (int i = 0; i < NBARRIER; i++)
		((volatile char *)barrier)[i * PG] = (char)i;
}

int main(void)
{
	char *a = fresh(1), *b = fresh(16), *g = fresh(2);
	barrier = fresh(NBARRIER);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = site_handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	if (mprotect(barrier, NBARRIER * PG, PROT_READ) != 0)
		return 2;
	int bad = site_alpha(a) | site_beta(b) | site_gamma(g);
	site_writer();
	if (bad || faults != NBARRIER) {
		printf("profile failed: bad %d, faults %d\n", bad, faults);
		return 1;
	}
	printf("profile ok\n");
	return 0;
}
