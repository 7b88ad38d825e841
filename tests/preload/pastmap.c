/* pastmap — what a call that bypasses the map changes besides the range
 * it names.  Run under the forced-bypass build (make's libmmfold-bypass.so:
 * one writer section in three, at random, bypasses the map), where each
 * round below is a chance for the call in question to go past the map
 * and for the next call to be a skip question asked right after a holder
 * made what the bypass listed unknown.
 *
 * Part 1, lock state: mlockall(MCL_FUTURE) changes how every later mapping
 * starts (locked), and mmfold records new mappings with that state; a
 * bypassing mlockall must leave it unknown, or a munlock of a new mapping
 * looks redundant and is skipped while the kernel holds the pages locked.
 * Each round: mlockall(MCL_FUTURE [| MCL_ONFAULT]), four new mappings each
 * followed by a munlock of its first half, every page's smaps flags; then
 * munlockall, mlock/mprotect/munlock twice of each mapping (mlock_seen).
 *
 * Part 2, a failed move: mremap(MREMAP_FIXED) of two pages from a one-page
 * mapping fails with EFAULT, and on kernels such as 6.12 has unmapped its
 * destination first; a bypassing one must make the destination unknown,
 * or a madvise there that looks redundant is skipped (0) where the kernel
 * says ENOMEM.  Each round: madvise(dst, DONTDUMP), the failed move, a
 * forwarded call elsewhere, madvise(dst, DONTDUMP) again.
 *
 * The output must be identical with and without the library under test. */
#include "common.h"

#define NMAP 4
#define MAPPG 4

#define ARENA 48 /* pages */

/* n read-write pages at a (MAP_FIXED): exits when the kernel refuses */
static char *fixed(char *a, size_t n)
{
	void *p = mmap(a, n * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p != a)
		_exit(3);
	return a;
}

static void show(struct obuf *o, const char *tag, char *const *p)
{
	struct pstate st[MAPPG];
	for (int j = 0; j < NMAP; j++) {
		if (page_states((uintptr_t)p[j], MAPPG, st) != 0) {
			ob_printf(o, "%s map %d: cannot read smaps\n", tag, j);
			continue;
		}
		for (int i = 0; i < MAPPG; i++)
			ob_printf(o, "%s map %d page %d: %s %s\n", tag, j, i, st[i].perm, st[i].flags);
	}
}

int main(void)
{
	static struct obuf o;
	/* every mapping at a fixed place of a reserved arena, apart from the
	 * others: the VMAs (and smaps' "ac") do not depend on where mmap
	 * places things (mmfold aligns new anonymous mappings) */
	char *arena = (char *)reserve_arena(ARENA);
	if (!arena)
		return 2;
	char *scratch = fixed(arena, 1);
	for (int round = 0; round < 16; round++) {
		/* round extra forwarded calls: alternate protections */
		for (int k = 0; k < round; k++)
			mprotect(scratch, PG, (k & 1) ? PROT_READ | PROT_WRITE : PROT_READ);
		int fl = MCL_FUTURE | ((round & 4) ? MCL_ONFAULT : 0);
		int r = mlockall(fl);
		ob_printf(&o, "round %d: mlockall(%#x) = %d %s\n", round, fl, r, r ? ename(errno) : "");
		char *p[NMAP];
		/* each mapping's munlock right after its mmap: the skip
		 * question asked on the record the mmap has just made */
		for (int j = 0; j < NMAP; j++) {
			p[j] = fixed(arena + (2 + j * (MAPPG + 1)) * PG, MAPPG);
			r = munlock(p[j], 2 * PG);
			ob_printf(&o, "round %d: munlock(map %d, 2 pages) = %d %s\n", round, j, r,
				  r ? ename(errno) : "");
		}
		show(&o, "after munlock", p);
		r = munlockall();
		ob_printf(&o, "round %d: munlockall() = %d %s\n", round, r, r ? ename(errno) : "");
		/* locked and unlocked again page by page: twice the same
		 * munlock, the second one redundant */
		for (int j = 0; j < NMAP; j++) {
			if (round & 1)
				mprotect(scratch, PG, (j & 1) ? PROT_READ : PROT_READ | PROT_WRITE);
			int a = mlock(p[j] + PG, PG);
			int b = mprotect(p[j], MAPPG * PG, PROT_READ);
			int c = munlock(p[j], 2 * PG);
			int d = munlock(p[j], 2 * PG);
			ob_printf(&o, "round %d: map %d: mlock %d mprotect %d munlock %d %d\n", round, j, a,
				  b, c, d);
		}
		show(&o, "after relock", p);
		for (int j = 0; j < NMAP; j++)
			munmap(p[j], MAPPG * PG);
	}
	/* part 2 */
	/* src: a one-page mapping; a two-page move from it fails (EFAULT)
	 * after the mapping was found (the kernel looks for it first) */
	char *src = fixed(arena + 30 * PG, 1);
	for (int round = 0; round < 16; round++) {
		char *dst = fixed(arena + 40 * PG, 2);
		int a = madvise(dst, 2 * PG, MADV_DONTDUMP);
		void *m = mremap(src, 2 * PG, 2 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
		int em = errno;
		mprotect(scratch, PG, (round & 1) ? PROT_READ : PROT_READ | PROT_WRITE);
		errno = 0;
		int b = madvise(dst, 2 * PG, MADV_DONTDUMP);
		ob_printf(&o, "move round %d: madvise %d, mremap %s %s, madvise again %d %s\n", round, a,
			  m == MAP_FAILED ? "failed" : "moved", m == MAP_FAILED ? ename(em) : "",
			  b, b ? ename(errno) : "");
		munmap(dst, 2 * PG);
	}
	ob_flush(&o, 1, "");
	return 0;
}
