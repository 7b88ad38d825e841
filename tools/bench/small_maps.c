/* small_maps: many medium anonymous mappings interleaved with small ones,
 * the pattern in which the kernel places mappings at addresses that are not
 * multiples of a 64 KiB (mTHP) folio, so an mTHP fault can only use the
 * 64 KiB-aligned blocks wholly inside each mapping.  mmfold's alignment
 * (MMFOLD_ALIGN=auto) should start each medium mapping on a folio boundary.
 *
 *   small_maps [-n N] [-l KIB] [-h KIB] [-s SEED] [-a KIB] [-g rw|none] [-H]
 *
 * N (default 2000) times: mmap a private anonymous read-write mapping of a
 * random size in [l, h] KiB (default [64, 1024], in 4 KiB steps), write
 * every page of it, then mmap a small one of 4 or 12 KiB (random) and, with
 * -g rw (default), write every page of it too (-g none: PROT_NONE, as guard
 * pages).  Each mapping is touched right after it is made, as an allocator
 * would.  Nothing is unmapped before exit.  -a KIB aligns the medium
 * mappings itself (over-map and trim): a reference for what mmfold's
 * alignment should reach without mmfold.  -H: madvise(MADV_HUGEPAGE) each
 * medium mapping (for mTHP sizes set to "inherit" under a top-level
 * "madvise" setting).
 *
 * Prints one line of key=value fields: maps, bytes (medium mappings),
 * aligned64k (how many medium mappings start on a 64 KiB boundary),
 * best64k (the number of 64 KiB folios that would fit if every medium
 * mapping were aligned), touch_ms, minflt (this process, during the touch
 * phase), mthp64k (anon_fault_alloc delta at 64 KiB), fb64k (its
 * anon_fault_fallback delta), mthp (all sizes), anonhuge_kb. */
#include "thp_common.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t rng;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static char *map_aligned(size_t len, size_t align, int prot)
{
	if (align <= (size_t)getpagesize()) {
		char *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	size_t big = len + align - (size_t)getpagesize();
	char *p = mmap(NULL, big, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uintptr_t a = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
	size_t head = a - (uintptr_t)p, tail = big - head - len;
	if (head && munmap(p, head) != 0)
		die("munmap");
	if (tail && munmap((char *)a + len, tail) != 0)
		die("munmap");
	return (char *)a;
}

int main(int argc, char **argv)
{
	unsigned long n = 2000, lo = 64, hi = 1024, align_kb = 0;
	int guard_rw = 1, huge = 0;
	rng = 0x9e3779b97f4a7c15ull;
	int opt;
	while ((opt = getopt(argc, argv, "n:l:h:s:a:g:H")) != -1) {
		switch (opt) {
		case 'n': n = strtoul(optarg, NULL, 0); break;
		case 'l': lo = strtoul(optarg, NULL, 0); break;
		case 'h': hi = strtoul(optarg, NULL, 0); break;
		case 's': rng = strtoull(optarg, NULL, 0) * 0x9e3779b97f4a7c15ull + 1; break;
		case 'a': align_kb = strtoul(optarg, NULL, 0); break;
		case 'g': guard_rw = strcmp(optarg, "none") != 0; break;
		case 'H': huge = 1; break;
		default:
			fprintf(stderr, "usage: small_maps [-n N] [-l KIB] [-h KIB] [-s SEED] [-a KIB] [-g rw|none] [-H]\n");
			return 2;
		}
	}
	if (lo < 4 || hi < lo) {
		fprintf(stderr, "small_maps: need 4 <= l <= h\n");
		return 2;
	}
	const size_t pg = (size_t)getpagesize();
	unsigned long aligned = 0, best = 0;
	size_t bytes = 0;

	struct thp_counters c0, c1;
	long f0 = self_minflt();
	thp_read(&c0);
	double t0 = now_ns();
	for (unsigned long i = 0; i < n; i++) {
		size_t len = (lo + (size_t)(rnd() % ((hi - lo) / 4 + 1)) * 4) << 10;
		char *p = map_aligned(len, align_kb << 10, PROT_READ | PROT_WRITE);
		if (!p)
			die("mmap");
		if (huge && madvise(p, len, MADV_HUGEPAGE) != 0)
			die("madvise");
		for (size_t o = 0; o < len; o += pg)
			p[o] = (char)(o / pg);
		bytes += len;
		aligned += ((uintptr_t)p & 0xffff) == 0;
		best += len >> 16;

		size_t slen = (rnd() & 1) ? 3 * pg : pg;
		char *s = mmap(NULL, slen, guard_rw ? PROT_READ | PROT_WRITE : PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (s == MAP_FAILED)
			die("mmap");
		if (guard_rw)
			for (size_t o = 0; o < slen; o += pg)
				s[o] = 1;
	}
	double t1 = now_ns();
	thp_read(&c1);
	long f1 = self_minflt();

	char all[512];
	thp_delta_str(&c0, &c1, all, sizeof all);
	printf("maps=%lu bytes=%zu aligned64k=%lu best64k=%lu touch_ms=%.2f minflt=%ld mthp64k=%lu fb64k=%lu mthp=%s anonhuge_kb=%lu\n",
	       n, bytes, aligned, best, (t1 - t0) / 1e6, f1 - f0, thp_delta_at(&c0, &c1, 64),
	       thp_fallback_delta_at(&c0, &c1, 64), all, self_anonhuge_kb());
	return 0;
}
