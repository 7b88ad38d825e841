/* Call patterns that range shaping (MMFOLD_SHAPE) would trim, split or
 * widen, timed in a loop.  Run by tools/bench_shape.sh with and without
 * mmfold and with each MMFOLD_SHAPE policy; this program does not know
 * which.
 *
 * usage: shape PATTERN K MEM ITERS
 *   MEM     4k (MADV_NOHUGEPAGE), 64k (no advice: the script enables the
 *           64 KiB mTHP size), 2m (MADV_HUGEPAGE, chunks of 2 MiB)
 *   PATTERN (a chunk is 64 KiB, or 2 MiB with 2m; chunks are separate VMAs
 *           with the same protection, told apart by alternating
 *           MADV_DONTDUMP, as VMAs of a fragmented heap are)
 *     prefix  K chunks stay read-only, one more toggles; each iteration:
 *             mprotect(last, RW), mprotect(all K+1, RO): trim leaves out
 *             the K unchanged chunks
 *     split   a toggling chunk, K read-only ones, a toggling one:
 *             mprotect(first, RW), mprotect(last, RW), mprotect(all, RO):
 *             split makes two calls of the last
 *     widen   one chunk whose first page stays read-only; the rest toggles:
 *             mprotect(rest, RO) (widen adds the first page: a whole chunk),
 *             mprotect(rest, RW)
 *     asis    K chunks all toggle together (nothing to shape: what the
 *             decision costs)
 * Prints "<ns per iteration> ns/iter <pattern> K=<k> <mem>". */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "common.h"

static char *map_aligned(size_t len, size_t align)
{
	char *p = mmap(NULL, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	char *a = (char *)(((unsigned long)p + align - 1) & ~(align - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + len, (size_t)(p + align - a));
	return a;
}

static void mp(void *a, size_t l, int prot)
{
	if (mprotect(a, l, prot))
		die("mprotect");
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: shape prefix|split|widen|asis K 4k|64k|2m ITERS\n");
		return 2;
	}
	const char *pat = argv[1], *mem = argv[3];
	unsigned long k = strtoul(argv[2], NULL, 0), iters = strtoul(argv[4], NULL, 0);
	size_t C = strcmp(mem, "2m") ? 64u << 10 : 2u << 20, pg = (size_t)getpagesize();
	size_t n = k + (strcmp(pat, "split") ? 1 : 2);
	if (!strcmp(pat, "widen"))
		n = 1;
	size_t len = n * C;
	char *a = map_aligned(len, 2u << 20);
	if (!strcmp(mem, "4k"))
		madvise(a, len, MADV_NOHUGEPAGE);
	else if (!strcmp(mem, "2m"))
		madvise(a, len, MADV_HUGEPAGE);
	memset(a, 1, len);
	for (size_t i = 1; i < n; i += 2)
		madvise(a + i * C, C, MADV_DONTDUMP);
	if (!strcmp(pat, "prefix"))
		mp(a, len, PROT_READ);
	else if (!strcmp(pat, "split"))
		mp(a, len, PROT_READ);
	else if (!strcmp(pat, "widen"))
		mp(a, pg, PROT_READ);

	volatile char sink = 0;
	double t0 = now_ns();
	for (unsigned long i = 0; i < iters; i++) {
		if (!strcmp(pat, "prefix")) {
			mp(a + k * C, C, PROT_READ | PROT_WRITE);
			a[k * C] = 2;
			mp(a, len, PROT_READ);
		} else if (!strcmp(pat, "split")) {
			mp(a, C, PROT_READ | PROT_WRITE);
			mp(a + (k + 1) * C, C, PROT_READ | PROT_WRITE);
			a[0] = 2;
			mp(a, len, PROT_READ);
		} else if (!strcmp(pat, "widen")) {
			mp(a + pg, C - pg, PROT_READ);
			sink += a[pg];
			mp(a + pg, C - pg, PROT_READ | PROT_WRITE);
			a[pg] = 2;
		} else {
			mp(a, len, PROT_READ);
			sink += a[0];
			mp(a, len, PROT_READ | PROT_WRITE);
			a[0] = 2;
		}
	}
	double dt = now_ns() - t0;
	printf("%.1f ns/iter %s K=%lu %s\n", dt / (double)iters, pat, k, mem);
	return 0;
}
