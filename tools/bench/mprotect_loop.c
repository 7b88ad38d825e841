/* mprotect_loop: the "seeds' loop": make anonymous memory, touch it, then
 * flip it read-only and back ROUNDS times, as a garbage collector's write
 * barrier or a JIT does.  The cost of each mprotect grows with the number
 * of page-table entries it rewrites, so it shows which folio sizes the
 * memory got: 4 KiB pages, 64 KiB mTHP folios or 2 MiB PMD THP.
 *
 *   mprotect_loop [-m MIB] [-r ROUNDS] [-p none|nohuge|huge] [-c MIB]
 *                 [-n N [-l KIB] [-h KIB] [-g none|rw]] [-a KIB] [-s SEED]
 *
 * Single mapping (default): one private anonymous read-write mapping of MIB
 * MiB (default 1024), with advice -p: none (default: whatever the kernel and
 * an LD_PRELOADed mmfold decide), nohuge (MADV_NOHUGEPAGE: 4 KiB pages
 * whatever the THP settings), huge (MADV_HUGEPAGE).  Every page is written,
 * then ROUNDS (default 40) times: mprotect(PROT_READ) and
 * mprotect(PROT_READ|PROT_WRITE) of the whole mapping.
 *
 * Many mappings (-n N): N mappings of random sizes in [l, h] KiB (default
 * [64, 128], 4 KiB steps), each followed by a small mapping of 4 or 12 KiB:
 * PROT_NONE guard pages by default (-g none: every medium mapping stays a
 * VMA of its own through the flips), or read-write and touched (-g rw: the
 * flips then split and merge VMAs too).  Advice -p applies to each medium
 * mapping.  Each round: every medium mapping to PROT_READ, then every one
 * back to PROT_READ|PROT_WRITE.
 *
 * -c MIB (single mapping): made the way HotSpot makes its heap: a PROT_NONE
 * reservation, committed read-write in MIB-sized MAP_FIXED mmaps before its
 * pages are written (an LD_PRELOADed mmfold advises such a reservation at
 * once under its default rule; a plain read-write mapping only once found
 * dense).
 *
 * -a KIB: align the medium (or the single) mapping(s) to KIB (over-map and
 * trim), a reference for what mmfold's alignment should reach.
 *
 * Prints one line of key=value fields: ns_per_call (the figure), calls,
 * loop_ms, touch_ms, minflt (during the touch), maps, bytes, aligned64k,
 * mthp64k (anon_fault_alloc delta at 64 KiB during the touch; system-wide),
 * thp_fault_alloc (PMD THP faults during the touch; system-wide), mthp (all
 * sizes), anonhuge_kb (this process's AnonHugePages after the touch). */
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

static void advise(char *p, size_t len, int adv)
{
	if (adv >= 0 && madvise(p, len, adv) != 0)
		die("madvise");
}

static void usage(void)
{
	fprintf(stderr, "usage: mprotect_loop [-m MIB] [-r ROUNDS] [-p none|nohuge|huge] [-c MIB] "
			"[-n N [-l KIB] [-h KIB] [-g none|rw]] [-a KIB] [-s SEED]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long mib = 1024, rounds = 40, n = 0, lo = 64, hi = 128, align_kb = 0, commit_mb = 0;
	int adv = -1, guard_rw = 0;
	const char *adv_name = "none";
	rng = 0x2545f4914f6cdd1dull;
	int opt;
	while ((opt = getopt(argc, argv, "m:r:p:n:l:h:g:a:s:c:")) != -1) {
		switch (opt) {
		case 'm': mib = strtoul(optarg, NULL, 0); break;
		case 'r': rounds = strtoul(optarg, NULL, 0); break;
		case 'p':
			adv_name = optarg;
			if (strcmp(optarg, "none") == 0)
				adv = -1;
			else if (strcmp(optarg, "nohuge") == 0)
				adv = MADV_NOHUGEPAGE;
			else if (strcmp(optarg, "huge") == 0)
				adv = MADV_HUGEPAGE;
			else
				usage();
			break;
		case 'n': n = strtoul(optarg, NULL, 0); break;
		case 'l': lo = strtoul(optarg, NULL, 0); break;
		case 'h': hi = strtoul(optarg, NULL, 0); break;
		case 'g': guard_rw = strcmp(optarg, "rw") == 0; break;
		case 'a': align_kb = strtoul(optarg, NULL, 0); break;
		case 's': rng = strtoull(optarg, NULL, 0) * 0x9e3779b97f4a7c15ull + 1; break;
		case 'c': commit_mb = strtoul(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if ((n > 0 && (lo < 4 || hi < lo)) || (commit_mb > 0 && n > 0))
		usage();
	const size_t pg = (size_t)getpagesize();
	const int rw = PROT_READ | PROT_WRITE;
	size_t count = n > 0 ? n : 1;
	char **base = calloc(count, sizeof *base);
	size_t *len = calloc(count, sizeof *len);
	if (!base || !len)
		die("calloc");

	struct thp_counters c0, c1;
	size_t bytes = 0;
	unsigned long aligned = 0;
	long f0 = self_minflt();
	thp_read(&c0);
	double t0 = now_ns();
	for (size_t i = 0; i < count; i++) {
		len[i] = n > 0 ? (lo + (size_t)(rnd() % ((hi - lo) / 4 + 1)) * 4) << 10 : (size_t)mib << 20;
		base[i] = map_aligned(len[i], align_kb << 10, commit_mb ? PROT_NONE : rw);
		if (!base[i])
			die("mmap");
		for (size_t o = 0, step = (size_t)commit_mb << 20; commit_mb && o < len[i]; o += step)
			if (mmap(base[i] + o, step < len[i] - o ? step : len[i] - o, rw,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
				die("mmap");
		advise(base[i], len[i], adv);
		for (size_t o = 0; o < len[i]; o += pg)
			base[i][o] = (char)(o / pg);
		bytes += len[i];
		aligned += ((uintptr_t)base[i] & 0xffff) == 0;
		if (n > 0) {
			size_t slen = (rnd() & 1) ? 3 * pg : pg;
			char *s = mmap(NULL, slen, guard_rw ? rw : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (s == MAP_FAILED)
				die("mmap");
			if (guard_rw)
				for (size_t o = 0; o < slen; o += pg)
					s[o] = 1;
		}
	}
	double t1 = now_ns();
	thp_read(&c1);
	long f1 = self_minflt();
	unsigned long huge_kb = self_anonhuge_kb();

	unsigned long calls = 0;
	double t2 = now_ns();
	for (unsigned long r = 0; r < rounds; r++) {
		for (size_t i = 0; i < count; i++)
			if (mprotect(base[i], len[i], PROT_READ) != 0)
				die("mprotect");
		for (size_t i = 0; i < count; i++)
			if (mprotect(base[i], len[i], rw) != 0)
				die("mprotect");
		calls += 2 * count;
	}
	double t3 = now_ns();
	unsigned long sum = 0;
	for (size_t i = 0; i < count; i++) {
		base[i][len[i] - 1] ^= 1; /* writable again */
		sum += (unsigned char)base[i][pg];
	}

	char all[512];
	thp_delta_str(&c0, &c1, all, sizeof all);
	printf("ns_per_call=%.1f calls=%lu loop_ms=%.2f touch_ms=%.2f minflt=%ld maps=%zu bytes=%zu advice=%s "
	       "aligned64k=%lu mthp64k=%lu thp_fault_alloc=%lu mthp=%s anonhuge_kb=%lu check=%lu\n",
	       calls ? (t3 - t2) / (double)calls : 0.0, calls, (t3 - t2) / 1e6, (t1 - t0) / 1e6, f1 - f0,
	       count, bytes, adv_name, aligned, thp_delta_at(&c0, &c1, 64),
	       c1.pmd_fault_alloc >= c0.pmd_fault_alloc ? c1.pmd_fault_alloc - c0.pmd_fault_alloc : 0, all,
	       huge_kb, sum);
	free(base);
	free(len);
	return 0;
}
