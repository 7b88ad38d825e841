/* Range shaping, observed from the program (tests/unit/check_preload.c,
 * suite "shape").  Runs calls that MMFOLD_SHAPE=trim|widen|auto would
 * shape, on 64 KiB-aligned mappings, and prints after each step: the call's
 * return value and errno, then every page of the mapping (readable?
 * writable? a checksum of its contents, probed with a SIGSEGV-catching
 * read and write-back) and the VMA layout inside the mapping (offsets,
 * permissions, the dd flag) from /proc/self/smaps.  The output must be
 * the same byte for byte without mmfold, with MMFOLD_MODE=off and with
 * every shaping policy: shaping may not change a page beyond the request,
 * an error, or even where the kernel splits VMAs.
 *
 * Steps (K = 64 KiB, the fallback widening granule; p = 4 KiB page):
 *   prefix   [0,K) RO, then [0,2K) RO        trim leaves out [0,K)
 *   suffix   [K,2K) NONE, then [0,2K) NONE   trim leaves out [K,2K)
 *   middle   [K,2K) RO, then [0,3K) RO       trim splits: [0,K), [2K,3K)
 *   lowpart  [0,p) RO, then [p,K) RO         widen adds [0,p)
 *   highpart [K-p,K) NONE, then [0,K-p) NONE widen adds [K-p,K)
 *   both     [K,K+p) and [2K-p,2K) RO, then [K+p,2K-p) RO: widen adds
 *            both ends
 *   eacces   a read-only shared file page inside: RW fails with EACCES,
 *            the shaped call too, and the caller's call is forwarded
 *   hole     a range that runs into a hole: ENOMEM, never shaped
 *   sealed   a sealed page at target next to a partial range: never
 *            widened into (the kernel would say EPERM)
 *   advice   MADV_DONTDUMP with a prefix already set
 * Exit 0 unless the test itself could not run. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../preload/fault.h"

#define P ((unsigned long)getpagesize()) /* the system's page size */
#define K (64ul << 10)
#define LEN (4 * K)

static char *base;
static char *slurp(const char *path)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDONLY);
	size_t n = 0;
	ssize_t r;
	while (fd >= 0 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)r;
	if (fd >= 0)
		close(fd);
	buf[n] = 0;
	return buf;
}

/* VMAs overlapping [base, base+LEN): offsets, permissions, dd. */
static void layout(void)
{
	char *s = slurp("/proc/self/smaps");
	uintptr_t lo0 = (uintptr_t)base, hi0 = lo0 + LEN;
	int in = 0;
	printf("  vmas:");
	for (char *line = s; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		unsigned long lo, hi;
		char perm[8];
		if (sscanf(line, "%lx-%lx %7s ", &lo, &hi, perm) == 3 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = lo < hi0 && hi > lo0;
			if (in)
				printf(" [%lx-%lx %s", (lo < lo0 ? 0 : lo - lo0) / P,
				       (hi > hi0 ? LEN : hi - lo0) / P, perm);
		} else if (in && !strncmp(line, "VmFlags:", 8)) {
			printf("%s]", strstr(line, " dd") ? " dd" : "");
			in = 0;
		}
		line = next;
	}
	printf("\n");
}

static void show(const char *step, long r, int err)
{
	/* per page: w writable (and readable), r read-only, - neither; then
	 * a checksum of every readable page's contents */
	unsigned all = 0;
	printf("%s: r=%ld errno=%d\n  pages: ", step, r, r ? err : 0);
	for (size_t i = 0; i < LEN / P; i++) {
		uint32_t sum = 0;
		int rd = fg_sum(base + i * P, P, &sum) == 0;
		int wr = rd && fg_rewrite(base + i * P) == 0;
		putchar(wr ? 'w' : rd ? 'r' : '-');
		all = all * 131 + (rd ? sum : 7);
	}
	printf(" sum %08x\n", all);
	layout();
}

static void fresh(void)
{
	if (base)
		munmap(base, LEN);
	char *p = mmap(NULL, LEN + K, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		exit(2);
	char *a = (char *)(((uintptr_t)p + K - 1) & ~(K - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + LEN, (size_t)(p + K - a));
	/* MAP_FIXED over itself: an mmap through the interposer, so the
	 * range is owned by mmfold as a program's own mapping would be */
	base = mmap(a, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (base != a)
		exit(2);
	for (size_t i = 0; i < LEN; i += 64)
		base[i] = (char)(i / P * 7 + i / 64);
}

/* Maps one page of a file opened read-only, MAP_SHARED, at [P, 2P). */
static void file_page(void)
{
	char path[] = "/tmp/mmfold-shape-XXXXXX", fdpath[64];
	int fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, (off_t)P) != 0)
		exit(2);
	unlink(path);
	snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
	int rfd = open(fdpath, O_RDONLY);
	if (rfd < 0 || mmap(base + P, P, PROT_READ, MAP_SHARED | MAP_FIXED, rfd, 0) != base + P)
		exit(2);
	close(rfd);
	close(fd);
}

#define MP(off, len, prot) (r = mprotect(base + (off), (len), (prot)), e = errno)

int main(void)
{
	long r;
	int e;
	fg_install();
	const int RO = PROT_READ, RW = PROT_READ | PROT_WRITE, NO = PROT_NONE;

	fresh();
	MP(0, K, RO);
	MP(0, 2 * K, RO);
	show("prefix", r, e);

	fresh();
	MP(K, K, NO);
	MP(0, 2 * K, NO);
	show("suffix", r, e);

	fresh();
	MP(K, K, RO);
	MP(0, 3 * K, RO);
	show("middle", r, e);
	MP(0, 4 * K, RW);
	show("middle back", r, e);

	fresh();
	MP(0, P, RO);
	MP(P, K - P, RO);
	show("lowpart", r, e);

	fresh();
	MP(K - P, P, NO);
	MP(0, K - P, NO);
	show("highpart", r, e);

	fresh();
	MP(K, P, RO);
	MP(2 * K - P, P, RO);
	MP(K + P, K - 2 * P, RO);
	show("both", r, e);
	MP(K + P, 2 * P, RW);
	show("both partial back", r, e);

	/* A read-only shared file page at [P, 2P): RW there fails. */
	fresh();
	file_page();
	MP(0, K, RW);
	show("eacces trim", r, e);
	fresh();
	file_page();
	MP(P, P, RW); /* [0,P) and [2P,K) are RW: widen makes it [0,K) */
	show("eacces widen", r, e);

	/* A hole at [2K, 3K). */
	fresh();
	munmap(base + 2 * K, K);
	MP(0, P, RO);
	MP(P, 3 * K - P, RO);
	show("hole", r, e);
	mmap(base + 2 * K, K, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);

	/* A sealed read-only page next to the range. */
	fresh();
	MP(0, P, RO);
	long sr = syscall(462 /* mseal */, base, P, 0);
	MP(P, K - P, RO);
	show(sr == 0 ? "sealed" : "sealed (mseal unavailable)", r, e);
	MP(0, K, RW);
	show("sealed write", r, e);
	base = NULL; /* a sealed page cannot be unmapped */

	fresh();
	r = madvise(base, K, MADV_DONTDUMP);
	r = madvise(base, 2 * K, MADV_DONTDUMP);
	e = errno;
	show("advice prefix", r, e);
	r = madvise(base + K, K, MADV_DODUMP);
	r = madvise(base + P, K - P, MADV_DODUMP);
	e = errno;
	show("advice widen", r, e);
	return 0;
}
