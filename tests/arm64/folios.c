/* folios: which anonymous memory the kernel backs with large folios, read
 * from the kernel itself (make check-arm64-system runs it inside an arm64
 * VM, as root, with and without mmfold; tests/arm64/vm-init compares).
 *
 *   folios [-n N] [-l KIB] [-h KIB] [-f KIB] [-t ROUNDS] [-H] [-s SEED]
 *
 * Maps N private anonymous read-write regions of random lengths in [l, h]
 * KiB (default 512 regions, 64 to 256 KiB, whole pages of the system's
 * size), each followed by a one-page PROT_NONE guard (as allocators and JIT
 * heaps leave them), and writes every page once.  -H: madvise
 * (MADV_HUGEPAGE) each region, as a program would itself.  Then, for every
 * F KiB block (default 64) of virtual memory wholly inside a region and
 * aligned to F, reads /proc/self/pagemap (the physical frame of each page:
 * root only) and /proc/kpageflags (the frame's compound-page and THP flags):
 *
 *   folio   the block is one whole F KiB folio: every page present, the
 *           frames consecutive from a frame aligned to F, the first the
 *           head of a compound page, the others its tails, all THP.  On
 *           arm64 such a block is also where the kernel sets the contiguous
 *           bit in all the block's PTEs when F is the contiguous-PTE block
 *           (64 KiB with 4 KiB pages: CONFIG_ARM64_CONTPTE folds a block
 *           when its PTEs map one aligned, physically contiguous run with
 *           the same attributes); that bit itself is not visible to user
 *           space, so "contpte" counts the blocks that meet those
 *           conditions and says which block size they were checked for.
 *
 * Then ROUNDS times (default 8) mprotect(PROT_READ) and back to
 * PROT_READ|PROT_WRITE over every region, writes every page again, and
 * checks the blocks once more: the same frames (no split, no copy), the
 * same folios.  The kernel's own counters are read around both phases:
 * hugepages-<F>kB/stats/{anon_fault_alloc,anon_fault_fallback,split,
 * split_deferred,split_failed} (system-wide; the VM runs nothing else) and
 * this process's minor faults and VMA count.
 *
 * Prints key=value lines: "place", "fault", "toggle" ("calls": the system
 * calls the program made in that phase: mmap, guard mmap, madvise with -H;
 * mprotect); exit 0 when it could
 * read what it needs, 2 on a usage or set-up error, 3 when pagemap or
 * kpageflags cannot be read (not root, or no CONFIG_PROC_PAGE_MONITOR). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define KPF_ANON 12
#define KPF_COMPOUND_HEAD 15
#define KPF_COMPOUND_TAIL 16
#define KPF_THP 22
#define PM_PRESENT (1ull << 63)
#define PM_PFN_MASK ((1ull << 55) - 1)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static long pg;
static int pagemap_fd, kpf_fd;

static void die(const char *what)
{
	fprintf(stderr, "folios: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* A counter of hugepages-<kb>kB/stats; -1 when the kernel has no such file. */
static long stat_of(unsigned kb, const char *name)
{
	char path[160];
	snprintf(path, sizeof path, "/sys/kernel/mm/transparent_hugepage/hugepages-%ukB/stats/%s", kb,
		 name);
	FILE *f = fopen(path, "r");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static const char *const stat_names[] = {"anon_fault_alloc", "anon_fault_fallback", "split",
					 "split_deferred", "split_failed"};
#define NSTATS (sizeof stat_names / sizeof stat_names[0])

static void stats(unsigned kb, long out[NSTATS])
{
	for (size_t i = 0; i < NSTATS; i++)
		out[i] = stat_of(kb, stat_names[i]);
}

static void print_stats(const long a[NSTATS], const long b[NSTATS])
{
	for (size_t i = 0; i < NSTATS; i++) {
		if (a[i] < 0 || b[i] < 0)
			printf(" %s=na", stat_names[i]);
		else
			printf(" %s=%ld", stat_names[i], b[i] - a[i]);
	}
}

static long minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static long vmas(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	long n = 0;
	int c;
	if (!f)
		return -1;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static int read_u64(int fd, uint64_t index, uint64_t *out, size_t n)
{
	size_t want = n * sizeof *out;
	ssize_t r = pread(fd, out, want, (off_t)(index * sizeof *out));
	return r == (ssize_t)want ? 0 : -1;
}

/* Is [p, p + fsz) one whole folio of fsz bytes?  Its first frame in *pfn0
 * (0 when a page is not present). */
static int is_folio(const char *p, size_t fsz, uint64_t *pfn0)
{
	size_t n = fsz / (size_t)pg;
	uint64_t pm[512], fl[512];
	if (n > 512)
		return 0;
	if (read_u64(pagemap_fd, (uintptr_t)p / (uintptr_t)pg, pm, n) != 0)
		exit(3);
	*pfn0 = 0;
	for (size_t i = 0; i < n; i++)
		if (!(pm[i] & PM_PRESENT) || (pm[i] & PM_PFN_MASK) == 0)
			return 0;
	uint64_t first = pm[0] & PM_PFN_MASK;
	*pfn0 = first;
	if (first % n)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((pm[i] & PM_PFN_MASK) != first + i)
			return 0;
	if (read_u64(kpf_fd, first, fl, n) != 0)
		exit(3);
	for (size_t i = 0; i < n; i++) {
		uint64_t want = (1ull << KPF_THP) | (1ull << KPF_ANON) |
				(1ull << (i ? KPF_COMPOUND_TAIL : KPF_COMPOUND_HEAD));
		if ((fl[i] & want) != want)
			return 0;
	}
	/* not the first part of a larger folio: the next frame is a head or
	 * not compound (only when the next frame exists) */
	uint64_t next;
	if (read_u64(kpf_fd, first + n, &next, 1) == 0 && (next & (1ull << KPF_COMPOUND_TAIL)) &&
	    !(next & (1ull << KPF_COMPOUND_HEAD)))
		return 0;
	return 1;
}

struct region {
	char *p;
	size_t len;
};

/* Counts over every aligned fsz block wholly inside a region: blocks,
 * folios; pfns[] gets each block's first frame (0: not a folio). */
static void scan(struct region *r, long n, size_t fsz, long *blocks, long *folios, uint64_t *pfns,
		 long nb_max)
{
	long b = 0, f = 0;
	for (long i = 0; i < n; i++) {
		uintptr_t lo = ((uintptr_t)r[i].p + fsz - 1) & ~(uintptr_t)(fsz - 1);
		uintptr_t hi = ((uintptr_t)r[i].p + r[i].len) & ~(uintptr_t)(fsz - 1);
		for (uintptr_t a = lo; a < hi; a += fsz) {
			uint64_t pfn = 0;
			int ok = is_folio((char *)a, fsz, &pfn);
			if (b < nb_max)
				pfns[b] = ok ? pfn : 0;
			b++;
			f += ok;
		}
	}
	*blocks = b;
	*folios = f;
}

/* The contiguous-PTE block of arm64 for this page size (CONT_PTES pages). */
static size_t contpte_size(void)
{
	switch (pg) {
	case 4096: return 16 * 4096;
	case 16384: return 128 * 16384;
	case 65536: return 32 * 65536;
	default: return 0;
	}
}

int main(int argc, char **argv)
{
	long n = 512, lo = 64, hi = 256, fkb = 64, rounds = 8;
	int huge = 0, opt;
	while ((opt = getopt(argc, argv, "n:l:h:f:t:s:H")) != -1) {
		switch (opt) {
		case 'n': n = atol(optarg); break;
		case 'l': lo = atol(optarg); break;
		case 'h': hi = atol(optarg); break;
		case 'f': fkb = atol(optarg); break;
		case 't': rounds = atol(optarg); break;
		case 's': rng = strtoull(optarg, NULL, 0) * 0x9e3779b97f4a7c15ull + 1; break;
		case 'H': huge = 1; break;
		default:
			fprintf(stderr, "usage: folios [-n N] [-l KIB] [-h KIB] [-f KIB] [-t ROUNDS] [-H] [-s SEED]\n");
			return 2;
		}
	}
	pg = sysconf(_SC_PAGESIZE);
	size_t fsz = (size_t)fkb << 10;
	if (n < 1 || lo < 1 || hi < lo || fsz < (size_t)pg || (fsz & (fsz - 1))) {
		fprintf(stderr, "folios: bad arguments (page size %ld)\n", pg);
		return 2;
	}
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY);
	kpf_fd = open("/proc/kpageflags", O_RDONLY);
	if (pagemap_fd < 0 || kpf_fd < 0) {
		fprintf(stderr, "folios: cannot open %s: %s\n", pagemap_fd < 0 ? "/proc/self/pagemap" : "/proc/kpageflags",
			strerror(errno));
		return 3;
	}
	struct region *r = calloc((size_t)n, sizeof *r);
	long nb_max = 0;
	for (long i = 0; i < n; i++) {
		size_t kib = (size_t)lo + (size_t)(rnd() % (uint64_t)(hi - lo + 1));
		r[i].len = ((kib << 10) + (size_t)pg - 1) & ~((size_t)pg - 1);
		nb_max += (long)(r[i].len / fsz);
	}
	uint64_t *pfn_a = calloc((size_t)nb_max + 1, sizeof *pfn_a);
	uint64_t *pfn_b = calloc((size_t)nb_max + 1, sizeof *pfn_b);
	if (!r || !pfn_a || !pfn_b)
		die("calloc");

	long s0[NSTATS], s1[NSTATS], s2[NSTATS];
	stats((unsigned)fkb, s0);
	long f0 = minflt();
	long aligned = 0, possible = 0;
	size_t bytes = 0;
	for (long i = 0; i < n; i++) {
		r[i].p = mmap(NULL, r[i].len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r[i].p == MAP_FAILED)
			die("mmap");
		if (huge && madvise(r[i].p, r[i].len, MADV_HUGEPAGE) != 0)
			die("madvise");
		for (size_t o = 0; o < r[i].len; o += (size_t)pg)
			r[i].p[o] = (char)(i + 1);
		if (mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
			die("mmap guard");
		aligned += ((uintptr_t)r[i].p & (fsz - 1)) == 0;
		possible += (long)(r[i].len / fsz);
		bytes += r[i].len;
	}
	long f1 = minflt();
	stats((unsigned)fkb, s1);
	long blocks, folios;
	scan(r, n, fsz, &blocks, &folios, pfn_a, nb_max);
	size_t cont = contpte_size();
	long contpte = cont == fsz ? folios : -1;
	printf("place page=%ld folio_kb=%ld regions=%ld bytes=%zu aligned=%ld possible=%ld blocks=%ld calls=%ld\n",
	       pg, fkb, n, bytes, aligned, possible, blocks, n * (2 + huge));
	printf("fault folios=%ld contpte_kb=%zu contpte=", folios, cont >> 10);
	if (contpte < 0)
		printf("na");
	else
		printf("%ld", contpte);
	printf(" minflt=%ld vmas=%ld", f1 - f0, vmas());
	print_stats(s0, s1);
	printf("\n");

	long v0 = vmas();
	for (long k = 0; k < rounds; k++)
		for (long i = 0; i < n; i++)
			if (mprotect(r[i].p, r[i].len, PROT_READ) != 0 ||
			    mprotect(r[i].p, r[i].len, PROT_READ | PROT_WRITE) != 0)
				die("mprotect");
	long f2 = minflt();
	for (long i = 0; i < n; i++)
		for (size_t o = 0; o < r[i].len; o += (size_t)pg)
			r[i].p[o]++;
	long f3 = minflt();
	stats((unsigned)fkb, s2);
	long blocks2, folios2;
	scan(r, n, fsz, &blocks2, &folios2, pfn_b, nb_max);
	long same = 0;
	for (long b = 0; b < blocks && b < nb_max; b++)
		same += pfn_a[b] && pfn_a[b] == pfn_b[b];
	printf("toggle rounds=%ld calls=%ld folios=%ld same_frames=%ld write_minflt=%ld vmas_before=%ld vmas=%ld",
	       rounds, rounds * n * 2, folios2, same, f3 - f2, v0, vmas());
	print_stats(s1, s2);
	printf("\n");
	return 0;
}
