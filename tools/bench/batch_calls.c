/* The batch API against plain calls: 64 one-page calls per round, made
 * through mmfold_batch_begin/end when mmfold is loaded (and not in mode off)
 * or one by one without it.
 *
 *   batch_calls dontneed THREADS ROUNDS   64 MADV_DONTNEED on every other
 *                                         page of 128 touched pages
 *   batch_calls mprotect THREADS ROUNDS   64 adjacent pages RW -> R -> RW
 *
 * THREADS 2 keeps a second thread running in the process (so the kernel's
 * TLB flushes must reach another CPU).  Prints the median ns per round of
 * 64 calls (the touching of the pages between rounds is not timed). */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#define MMFOLD_WEAK
#include "../../include/mmfold.h"
#include "common.h"

#define PG ((unsigned long)getpagesize()) /* the system's page size */
#define N 64

static volatile int stop;
static volatile unsigned long spins;
static char *area;

static void *spinner(void *arg)
{
	(void)arg;
	while (!stop) {
		area[(spins++ % (2 * N)) * PG + 8] = 1; /* uses the same mm */
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int dontneed = !strcmp(argv[1], "dontneed");
	unsigned long threads = arg_ul(argc, argv, 2, 1), rounds = arg_ul(argc, argv, 3, 2000);
	area = mmap(NULL, 2 * N * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		die("mmap");
	memset(area, 1, 2 * N * PG);
	pthread_t t;
	if (threads > 1 && pthread_create(&t, NULL, spinner, NULL))
		die("pthread_create");
	int batch = mmfold_batch_begin != NULL;
	double *ns = malloc(rounds * sizeof *ns);
	for (unsigned long r = 0; r < rounds; r++) {
		if (dontneed)
			for (int i = 0; i < N; i++)
				area[2 * i * PG] = 1; /* populate again */
		double t0 = now_ns();
		if (batch)
			mmfold_batch_begin();
		if (dontneed) {
			for (int i = 0; i < N; i++)
				madvise(area + 2 * i * PG, PG, MADV_DONTNEED);
		} else {
			for (int i = 0; i < N; i++)
				mprotect(area + i * PG, PG, PROT_READ);
		}
		if (batch && mmfold_batch_end(NULL))
			die("mmfold_batch_end");
		if (!dontneed) {
			if (batch)
				mmfold_batch_begin();
			for (int i = 0; i < N; i++)
				mprotect(area + i * PG, PG, PROT_READ | PROT_WRITE);
			if (batch && mmfold_batch_end(NULL))
				die("mmfold_batch_end");
		}
		ns[r] = now_ns() - t0;
	}
	stop = 1;
	if (threads > 1)
		pthread_join(t, NULL);
	qsort(ns, rounds, sizeof *ns, cmp);
	printf("%.0f ns/round %s, %lu thread(s), 64 %s calls per round%s\n", ns[rounds / 2],
	       argv[1], threads, dontneed ? "madvise" : "mprotect (x2)",
	       batch ? " (batched)" : "");
	return 0;
}
