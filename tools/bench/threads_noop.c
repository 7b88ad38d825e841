/* threads_noop: T threads, each doing no-op mprotect calls on its own
 * 64 KiB mapping (different ranges, nothing shared but the process).
 * In the kernel every mprotect takes the process's mmap lock for writing,
 * so threads serialise; mmfold answers proven no-ops from its shadow map
 * with lock-free reads, so they should scale.  Runs for a fixed time and
 * prints the aggregate calls per second.
 *
 * With "spin" as third argument the threads run a short compute loop instead
 * of mprotect: that measures how well this machine runs T threads at all
 * (a VM's vCPUs may be shared or busy), the ceiling for any scaling figure.
 * With "churn" one more thread, not counted, maps a page with MAP_FIXED
 * and unmaps it again, in a mapping of its own, the whole time: calls
 * that change mmfold's map while the others' no-ops are answered.
 * Args: [threads (1)] [milliseconds (500)] [mprotect|spin|churn] */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LEN (64 * 1024)

static atomic_int go, stop;
static int spin, churn;
static pthread_barrier_t ready;

struct arg {
	char *p;
	unsigned long calls;
	char pad[64];
};

static void *run(void *v)
{
	struct arg *a = v;
	unsigned long n = 0;
	pthread_barrier_wait(&ready);
	while (!atomic_load_explicit(&go, memory_order_acquire))
		;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (spin) {
			/* Roughly as long as a skipped call: a few dozen ns. */
			for (int i = 0; i < 256; i++) {
				volatile unsigned x = (unsigned)i;
				for (int k = 0; k < 20; k++)
					x = x * 2654435761u + 1;
			}
		} else {
			for (int i = 0; i < 256; i++)
				if (mprotect(a->p, LEN, PROT_READ | PROT_WRITE) != 0)
					die("mprotect");
		}
		n += 256;
	}
	a->calls = n;
	return NULL;
}

/* churn: a page mapped and unmapped again, until stop */
static void *churner(void *v)
{
	char *p = v;
	unsigned long n = 0;
	pthread_barrier_wait(&ready);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (mmap(p, (size_t)getpagesize(), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p ||
		    munmap(p, (size_t)getpagesize()) != 0)
			die("churn");
		n++;
	}
	return (void *)n;
}

int main(int argc, char **argv)
{
	unsigned long nt = arg_ul(argc, argv, 1, 1);
	unsigned long ms = arg_ul(argc, argv, 2, 500);
	spin = argc > 3 && strcmp(argv[3], "spin") == 0;
	churn = argc > 3 && strcmp(argv[3], "churn") == 0;
	if (nt < 1 || nt > 64)
		return 2;
	pthread_t th[64], ct;
	static struct arg a[64];
	if (pthread_barrier_init(&ready, NULL, (unsigned)nt + 1 + (unsigned)churn) != 0)
		return 1;
	if (churn) {
		char *c = mmap(NULL, 16 * (size_t)getpagesize(), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (c == MAP_FAILED || pthread_create(&ct, NULL, churner, c + 8 * getpagesize()) != 0)
			die("churn");
	}
	for (unsigned long i = 0; i < nt; i++) {
		/* A PROT_NONE gap after each range keeps them separate mappings. */
		char *g = mmap(NULL, LEN + (size_t)getpagesize(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (g == MAP_FAILED)
			die("mmap");
		a[i].p = mmap(g, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			      -1, 0);
		if (a[i].p == MAP_FAILED)
			die("mmap");
		for (size_t o = 0; o < LEN; o += (size_t)getpagesize())
			a[i].p[o] = 1;
		a[i].calls = 0;
		if (pthread_create(&th[i], NULL, run, &a[i]) != 0)
			die("pthread_create");
	}
	pthread_barrier_wait(&ready);
	double t0 = now_ns();
	atomic_store_explicit(&go, 1, memory_order_release);
	struct timespec d = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	nanosleep(&d, NULL);
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	unsigned long total = 0;
	for (unsigned long i = 0; i < nt; i++) {
		pthread_join(th[i], NULL);
		total += a[i].calls;
	}
	double t1 = now_ns();
	void *churned = NULL;
	if (churn)
		pthread_join(ct, &churned);
	if (spin)
		printf("%.0f loops/s compute loop (no system calls), %lu thread(s), %lu ms\n",
		       (double)total * 1e9 / (t1 - t0), nt, ms);
	else if (churn)
		printf("%.0f calls/s no-op mprotect, %lu thread(s) on separate 64 KiB ranges, %lu ms, "
		       "while another mapped and unmapped a page %lu times\n",
		       (double)total * 1e9 / (t1 - t0), nt, ms, (unsigned long)(uintptr_t)churned);
	else
		printf("%.0f calls/s no-op mprotect, %lu thread(s) on separate 64 KiB ranges, %lu ms\n",
		       (double)total * 1e9 / (t1 - t0), nt, ms);
	return 0;
}
