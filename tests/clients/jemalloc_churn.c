/* Real-client test: malloc/free churn for jemalloc (LD_PRELOADed).
 *
 * Several threads each run a deterministic pseudo-random mix of malloc,
 * realloc and free over many size classes (tiny .. several MiB, so jemalloc
 * uses small bins, large extents and huge mappings), fill and verify the
 * memory, and fold what they read into a checksum.  jemalloc obtains memory
 * with mmap, gives it back with munmap and purges dirty pages with madvise
 * (MADV_DONTNEED / MADV_FREE).  Output is deterministic; the number of
 * system calls is not (purging is time-based).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 4
#define SLOTS 4096
#define OPS 250000

struct worker {
	int id;
	uint64_t sum;
	int failed;
};

static uint64_t next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static size_t pick_size(uint64_t r)
{
	unsigned cls = (unsigned)(r % 10000);
	if (cls < 7000)
		return 1 + (size_t)((r >> 12) % 256);          /* tiny/small */
	if (cls < 9500)
		return 256 + (size_t)((r >> 12) % 16128);      /* small..16 KiB */
	if (cls < 9990)
		return 16384 + (size_t)((r >> 12) % 1032192);  /* large, < 1 MiB */
	return ((size_t)1 << 20) + (size_t)((r >> 12) % (3u << 20)); /* huge */
}

/* Write the tag at every 512th byte, the middle and the last byte. */
static void fill(unsigned char *p, size_t n, unsigned char tag)
{
	for (size_t i = 0; i < n; i += 512)
		p[i] = tag;
	p[n / 2] = tag;
	p[n - 1] = tag;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
	unsigned char **ptr = calloc(SLOTS, sizeof *ptr);
	size_t *len = calloc(SLOTS, sizeof *len);
	uint64_t sum = 0;
	if (!ptr || !len) {
		w->failed = 1;
		return NULL;
	}
	for (long op = 0; op < OPS; op++) {
		uint64_t r = next(&s);
		unsigned slot = (unsigned)(r % SLOTS);
		r = next(&s);
		if (ptr[slot]) {
			unsigned char tag = (unsigned char)(len[slot] * 31u + slot);
			if (ptr[slot][0] != tag || ptr[slot][len[slot] / 2] != tag ||
			    ptr[slot][len[slot] - 1] != tag)
				w->failed = 1;
			sum = sum * 1099511628211ull + ptr[slot][len[slot] / 2] + len[slot];
			if ((r & 7) == 0) {
				/* realloc to a new size */
				size_t n = pick_size(next(&s));
				unsigned char *q = realloc(ptr[slot], n);
				if (!q) {
					w->failed = 1;
					continue;
				}
				ptr[slot] = q;
				len[slot] = n;
				fill(q, n, (unsigned char)(n * 31u + slot));
			} else {
				free(ptr[slot]);
				ptr[slot] = NULL;
			}
		} else {
			size_t n = pick_size(r);
			unsigned char *p = (r & 3) == 0 ? calloc(1, n) : malloc(n);
			if (!p) {
				w->failed = 1;
				continue;
			}
			if ((r & 3) == 0 && (p[n / 2] != 0 || p[n - 1] != 0))
				w->failed = 1;
			ptr[slot] = p;
			len[slot] = n;
			fill(p, n, (unsigned char)(n * 31u + slot));
		}
	}
	for (unsigned i = 0; i < SLOTS; i++)
		free(ptr[i]);
	free(ptr);
	free(len);
	w->sum = sum;
	return NULL;
}

int main(void)
{
	pthread_t th[NTHREADS];
	struct worker w[NTHREADS];
	memset(w, 0, sizeof w);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < NTHREADS; i++) {
			w[i].id = i + round * NTHREADS;
			if (pthread_create(&th[i], NULL, run, &w[i]) != 0) {
				fprintf(stderr, "pthread_create failed\n");
				return 1;
			}
		}
		for (int i = 0; i < NTHREADS; i++)
			pthread_join(th[i], NULL);
		for (int i = 0; i < NTHREADS; i++)
			printf("round %d thread %d: checksum %016llx %s\n", round, i,
			       (unsigned long long)w[i].sum, w[i].failed ? "CORRUPT" : "ok");
	}
	return 0;
}
