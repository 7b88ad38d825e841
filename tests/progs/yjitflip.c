/* A JIT's writable window in miniature, shaped like Ruby 3.1's YJIT
 * (tests/unit/check_wx.c, tools/bench_wx.sh).
 *
 *   yjitflip MIB ITERS [probe] [end] [advice] [rx=page] [hold=MS] [pause=MS]
 *
 * Maps 2*MIB MiB read+exec near its own code, makes it RW, fills it with
 * int3 and makes it RX again, as YJIT does at start-up; its halves are the inline and the
 * outlined code block.  ITERS times: writes a function into each block at
 * its write position, making each page the write reaches RW first
 * (once per page until the next RX, as YJIT's cb_mark_position_writeable
 * does), every 8th time also patches an older page of the inline block,
 * then makes each whole block RX (cb_mark_all_executable) and calls the
 * functions.  Prints "flips N sum S", the VMAs over the blocks ("vma"
 * lines, offsets in KiB), and probes (read, write, execute of the first
 * byte, caught by a SIGSEGV handler, and a checksum of the page).
 *   probe:   every 64th iteration also probes the window while it is RW
 *            and after the RX ("probe it" lines).
 *   end:     instead of the probes after the loop, calls that end a
 *            relaxation, each followed by probes ("end" lines): mprotect of
 *            an outlined page to PROT_READ (the outlined block is flipped
 *            no more), then, each after 12 more iterations of the inline
 *            block: mprotect of a page to PROT_READ; 7 windows RW at once;
 *            an RX that cuts a two-page window in half; mmap(MAP_FIXED)
 *            over a page; munmap of 64 KiB; an RX across the hole.
 *   advice:  halfway, the program gives the page of its last inline
 *            function MADV_SEQUENTIAL itself, and prints the readahead
 *            VmFlags of that page at the end ("ra" line).
 *   rx=page: make only the pages written RX instead of the whole block
 *            (what trimming the call would do; for the benchmark).
 *   hold=MS: sleep MS milliseconds before exiting (for a sampler).
 *   pause=MS: sleep MS milliseconds after the loop, before the rest (for a
 *            sampler: under relax the blocks are still rwx then).
 * WXFLIP_BASE_FILE=path: the blocks' start and end address are written
 * there (hex) before the first flip.
 * Output is the same with and without mmfold except the "vma" lines. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "jitcode.h"

/* the system's page size (4 KiB on x86-64; 16 KiB or 64 KiB on some arm64 kernels) */
#define PG ((unsigned long)sysconf(_SC_PAGESIZE))
#define RW (PROT_READ | PROT_WRITE)
#define RX (PROT_READ | PROT_EXEC)

struct block {
	char *base;
	size_t size, pos;
	long open;             /* the page made RW since the last RX, or -1 */
	long lo, hi;           /* rx=page: pages written since the last RX */
};

static struct block cb, ocb;
static char *mem;
static size_t blk;
static int rx_page;
static unsigned long sum;

static void must(int r, const char *what)
{
	if (r != 0) {
		perror(what);
		exit(2);
	}
}

/* The page holding p of block b writable (once until the next RX). */
static void writable(struct block *b, size_t pos)
{
	long pg = (long)(pos / PG);
	if (pg == b->open)
		return;
	b->open = pg;
	must(mprotect(b->base + pg * PG, PG, RW), "mprotect RW");
	if (b->lo < 0 || pg < b->lo)
		b->lo = pg;
	if (pg > b->hi)
		b->hi = pg;
}

static void executable(struct block *b)
{
	b->open = -1;
	if (rx_page && b->lo >= 0)
		must(mprotect(b->base + b->lo * PG, (size_t)(b->hi - b->lo + 1) * PG, RX), "mprotect RX");
	else if (!rx_page)
		must(mprotect(b->base, b->size, RX), "mprotect RX");
	b->lo = b->hi = -1;
}

/* Writes a function returning v at b's write position (len bytes rounded
 * up to 16 in all, the rest int3), making the pages it reaches writable; returns it. */
static char *emit(struct block *b, uint32_t v, size_t len)
{
	len = (len + 15) & ~(size_t)15; /* instructions aligned (arm64 needs 4) */
	if (b->pos + len > b->size)
		b->pos = 0;
	size_t at = b->pos;
	writable(b, at);
	writable(b, at + len - 1);
	unsigned char *p = (unsigned char *)b->base + at;
	memset(p, 0xcc, len);
	jit_emit(p, v);
	b->pos += len;
	return (char *)p;
}

/* "r", "w", "x" or "-" for each access to f, a function emit() wrote
 * (the write puts back the byte read), and a checksum of its page. */
static void probe(const char *label, char *f)
{
	char res[4];
	long got = jit_access((volatile unsigned char *)f, 1, res);
	unsigned long h = 0;
	volatile unsigned char *pg = (volatile unsigned char *)((uintptr_t)f & ~(PG - 1));
	if (res[0] == 'r')
		for (unsigned k = 0; k < PG; k++)
			h = h * 31 + pg[k];
	printf("probe %s %c%c%c %ld %lx\n", label, res[0], res[1], res[2], (long)got, h);
}

static void vmas(void) { jit_vmas((uintptr_t)mem, (uintptr_t)mem + 2 * blk); }

static char *last_cb, *first_cb, *last_ocb;
static int cb_only; /* end_ops: the outlined block is done with */
static long advice_at = -1;
static char *advised;

/* One compilation: code into both blocks (and a patch every 8th), then
 * both blocks RX, then the new code runs. */
static void compile(long it, int probing)
{
	size_t len = 40 + (size_t)(it * 37 % 160);
	char *f = emit(&cb, (uint32_t)(it & 0x7fff), len);
	char *g = cb_only ? last_ocb : emit(&ocb, (uint32_t)((it * 7) & 0x7fff), 24 + (size_t)(it % 3) * 16);
	if (!first_cb)
		first_cb = f;
	if (it % 8 == 7 && last_cb) {
		/* patch an older function: its page RW (YJIT rewrites branches) */
		size_t at = (size_t)(last_cb - cb.base) / 2 & ~(size_t)63;
		writable(&cb, at);
		writable(&cb, at + 7);
		jit_emit((unsigned char *)cb.base + at, (uint32_t)(it & 0xffff));
	}
	if (it == advice_at && last_cb) {
		advised = (char *)((uintptr_t)last_cb & ~(PG - 1));
		must(madvise(advised, PG, MADV_SEQUENTIAL), "madvise");
	}
	if (probing && it % 64 == 0)
		probe("it rw", f);
	executable(&cb);
	if (!cb_only)
		executable(&ocb);
	if (probing && it % 64 == 0)
		probe("it rx", f);
	sum = sum * 31 + (unsigned long)jit_call(f) + (unsigned long)jit_call(g);
	last_cb = f;
	last_ocb = g;
}

static void iterate(long from, long n, int probing)
{
	for (long it = from; it < from + n; it++)
		compile(it, probing);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	if (ms > 0)
		nanosleep(&ts, NULL);
}

static void probes(void)
{
	probe("first", first_cb);
	probe("last", last_cb);
	probe("outlined", last_ocb);
}

/* Calls that end a relaxation (or meet keep's advice), each after more
 * iterations of the inline block, each followed by probes of what it
 * ended.  The outlined block is ended first and flipped no more. */
static void end_ops(long it)
{
	char name[32];
	char *opage = (char *)((uintptr_t)last_ocb & ~(PG - 1));
	printf("end mprotect outlined R %d\n", mprotect(opage, PG, PROT_READ));
	probe("outlined", last_ocb);
	printf("end mprotect outlined RX %d\n", mprotect(opage, PG, RX));
	probe("outlined", last_ocb);
	cb_only = 1;
	iterate(it, 12, 0);
	it += 12;
	/* a page of the inline block read-only: not a flip */
	char *page = (char *)((uintptr_t)last_cb & ~(PG - 1));
	printf("end mprotect R %d\n", mprotect(page, PG, PROT_READ));
	probe("R", last_cb);
	printf("end mprotect RX %d\n", mprotect(page, PG, RX));
	probes();

	/* seven windows RW at once, then the block RX */
	iterate(it, 12, 0);
	it += 12;
	char *w[7];
	for (int k = 0; k < 7; k++) {
		w[k] = emit(&cb, (uint32_t)(1000 + k), 4096 + 64);
		cb.open = -1; /* every emit its own RW request */
	}
	for (int k = 0; k < 7; k++) {
		snprintf(name, sizeof name, "win%d", k);
		probe(name, w[k]);
	}
	executable(&cb);
	for (int k = 0; k < 7; k++) {
		snprintf(name, sizeof name, "win%d", k);
		probe(name, w[k]);
	}

	/* RX of a range that ends inside a two-page window */
	iterate(it, 12, 0);
	it += 12;
	size_t at = (cb.pos + PG - 1) & ~(PG - 1);
	if (at + 3 * PG > cb.size)
		at = 0;
	printf("end mprotect 2 pages RW %d\n", mprotect(cb.base + at, 2 * PG, RW));
	char *f = cb.base + at + PG - 32;
	jit_emit((unsigned char *)f, 0x11111111u);
	printf("end mprotect RX half %d\n", mprotect(cb.base, at + PG, RX));
	probe("half0", f);
	probe("half1", cb.base + at + PG); /* int3 filler: a call traps */
	executable(&cb);

	/* mmap(MAP_FIXED) over a page, then munmap of 64 KiB */
	iterate(it, 12, 0);
	it += 12;
	char *q = mmap(cb.base + cb.size - 8 * PG, PG, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	printf("end mmap fixed %s\n", q == MAP_FAILED ? "failed" : "ok");
	probes();
	iterate(it, 12, 0); /* cannot fail: RX over the new page too */
	it += 12;
	printf("end munmap %d\n", munmap(cb.base + cb.size - 32 * PG, 16 * PG));
	probes();
	printf("end mprotect RX across hole %d\n", mprotect(cb.base, cb.size, RX) == 0 ? 0 : -1);
	probes();
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: yjitflip MIB ITERS [probe] [end] [advice] [rx=page] [hold=MS] [pause=MS]\n");
		return 2;
	}
	blk = (size_t)atol(argv[1]) << 20;
	long iters = atol(argv[2]);
	int probing = 0, end = 0, hold = 0, pause = 0;
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "probe"))
			probing = 1;
		else if (!strcmp(argv[i], "end"))
			end = 1;
		else if (!strcmp(argv[i], "advice"))
			advice_at = iters / 2;
		else if (!strcmp(argv[i], "rx=page"))
			rx_page = 1;
		else if (!strncmp(argv[i], "hold=", 5))
			hold = atoi(argv[i] + 5);
		else if (!strncmp(argv[i], "pause=", 6))
			pause = atoi(argv[i] + 6);
	}
	if (blk < (1 << 20) || iters < 1)
		return 2;
	/* As Ruby: no transparent huge pages (it turns them off at start for
	 * copy-on-write after fork; so does this, or mmfold's THP advice
	 * would make the blocks differ from YJIT's). */
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	/* As YJIT: near the program's code (MAP_FIXED_NOREPLACE at a hint,
	 * trying further up), and anywhere if that fails. */
	uintptr_t hint = ((uintptr_t)&main + (1UL << 30)) & ~((1UL << 21) - 1);
	mem = MAP_FAILED;
	for (int k = 0; k < 16 && mem == MAP_FAILED; k++)
		mem = mmap((void *)(hint + (uintptr_t)k * 2 * blk), 2 * blk, RX,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (mem == MAP_FAILED)
		mem = mmap(NULL, 2 * blk, RX, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 2;
	must(mprotect(mem, 2 * blk, RW), "mprotect");
	memset(mem, 0xcc, 2 * blk);
	must(mprotect(mem, 2 * blk, RX), "mprotect");
	cb = (struct block){mem, blk, 0, -1, -1, -1};
	ocb = (struct block){mem + blk, blk, 0, -1, -1, -1};
	jit_base_file((uintptr_t)mem, (uintptr_t)mem + 2 * blk);
	jit_catch_faults();

	iterate(0, iters, probing);
	printf("flips %ld sum %lu\n", iters, sum);
	sleep_ms(pause);
	vmas();
	if (end)
		end_ops(iters);
	else
		probes();
	vmas();
	if (advised)
		printf("ra %s\n", jit_ra_flags((uintptr_t)advised));
	fflush(stdout);
	sleep_ms(hold);
	return 0;
}
