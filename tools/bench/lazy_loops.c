/* The loops lazy mode is for, timed without the setup (one line each:
 * "<ms> ms <what>").
 *
 *   lazy_loops flip MIB N       map and touch MIB MiB, then N times
 *                               mprotect(R) and mprotect(RW), no access
 *   lazy_loops fliptouch MIB N  the same, one byte per 64 KiB written after
 *                               each mprotect(RW)
 *   lazy_loops mlock MIB N      mlock then munlock MIB MiB, N times
 *   lazy_loops promote THREADS  one page read-only -> read-write, 20000
 *                               times (then back, untimed), with THREADS-1
 *                               other threads running in the process: the
 *                               cost of a promotion, TLB flush included */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"

#define PG ((unsigned long)getpagesize()) /* the system's page size */

static char *touched(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	for (size_t i = 0; i < len; i += PG)
		p[i] = 1;
	return p;
}

static volatile int stop;
static char *spin_page;
static void *spinner(void *arg)
{
	(void)arg;
	unsigned long n = 0;
	while (!stop)
		n += spin_page[(n & 7) * 64];
	return (void *)n;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	const char *what = argv[1];
	unsigned long a = arg_ul(argc, argv, 2, 1), n = arg_ul(argc, argv, 3, 40);
	if (!strcmp(what, "flip") || !strcmp(what, "fliptouch")) {
		size_t len = a << 20;
		char *p = touched(len);
		int touch = what[4] == 't';
		double t0 = now_ns();
		for (unsigned long i = 0; i < n; i++) {
			if (mprotect(p, len, PROT_READ) || mprotect(p, len, PROT_READ | PROT_WRITE))
				die("mprotect");
			if (touch)
				for (size_t o = 0; o < len; o += 64 << 10)
					p[o] = (char)i;
		}
		printf("%.3f ms %s %lu MiB x %lu\n", (now_ns() - t0) / 1e6, what, a, n);
	} else if (!strcmp(what, "mlock")) {
		size_t len = a << 20;
		char *p = touched(len);
		double t0 = now_ns();
		for (unsigned long i = 0; i < n; i++)
			if (mlock(p, len) || munlock(p, len))
				die("mlock");
		printf("%.3f ms mlock/munlock %lu MiB x %lu\n", (now_ns() - t0) / 1e6, a, n);
	} else if (!strcmp(what, "promote")) {
		char *p = touched(PG);
		spin_page = touched(PG);
		pthread_t t[8];
		for (unsigned long i = 1; i < a && i < 8; i++)
			pthread_create(&t[i], NULL, spinner, NULL);
		double sum = 0;
		for (int i = 0; i < 20000; i++) {
			mprotect(p, PG, PROT_READ);
			double t0 = now_ns();
			mprotect(p, PG, PROT_READ | PROT_WRITE);
			p[0] = 1; /* the promotion is in force when this returns */
			sum += now_ns() - t0;
		}
		stop = 1;
		for (unsigned long i = 1; i < a && i < 8; i++)
			pthread_join(t[i], NULL);
		printf("%.3f ms promote R->RW + write, %lu thread(s), 20000 times (%.0f ns each)\n",
		       sum / 1e6, a, sum / 20000);
	}
	return 0;
}
