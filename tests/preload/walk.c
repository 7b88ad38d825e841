/* walk SEED [STEPS] — differential random walk over a reserved arena.
 *
 * The arena (256 pages) is split by one-page guards (MAP_SHARED anonymous
 * PROT_NONE: a shmem VMA never merges with private anonymous memory, so
 * regions cannot influence each other's VMA layout) into five regions of
 * 50 pages.  Threads 0-3 each own region 0-3; region 4 is shared and owned
 * by thread (round % 4) for one round.  Rounds end on a barrier.  Each
 * region has its own random stream and its own output buffer, so the text
 * is the same whatever the interleaving of the threads.
 *
 * About a fifth of the steps repeat a recent call (mostly redundant: what
 * mmfold skips); some calls are made invalid in ways the kernel rejects
 * before touching anything, so regions stay independent.
 *
 * At the checkpoints every page of the arena is probed (see probe_pages),
 * then each page's protection, madvise flags and lock state are re-applied
 * one page at a time ("sweep": redundant calls whose answers are printed).
 * At the middle checkpoint the process forks; the child walks all regions
 * single-threaded (own stream, lines prefixed "child: ") after sweeping
 * with the parent's pre-fork state (DONTFORK pages must be gone), tries
 * mlockall(MCL_FUTURE|MCL_ONFAULT), and exits; the parent waits for it.
 * After the threads finish the parent does a last single-threaded phase
 * under mlockall(MCL_CURRENT|MCL_FUTURE|MCL_ONFAULT) and munlockall().
 *
 * The output must be identical with and without the library under test. */
#include "common.h"

#include <pthread.h>
#include <sys/wait.h>

#define NPAGES 256
#define NREG 5
#define REGPG 50
#define NTHR 4
#define ROUND 10 /* steps per thread per round */
#define HIST 8
#define N(a) (sizeof(a) / sizeof((a)[0]))

enum {
	K_MMAP, K_MUNMAP, K_MREMAP, K_MPROTECT, K_PKEY_MPROTECT, K_MADVISE,
	K_MLOCK, K_MLOCK2, K_MUNLOCK, K_MSEAL,
};

struct call {
	int kind, sys; /* sys: made through syscall() */
	uintptr_t addr;
	size_t len;
	long a, b;       /* prot/flags, advice, mlock2 flags, mremap flags */
	uintptr_t addr2; /* mremap new address */
	size_t len2;     /* mremap new length */
};

struct region {
	char tag[8];
	size_t first; /* arena page index */
	uint64_t rng;
	unsigned nstep;
	struct obuf out;
	struct call hist[HIST];
	int nhist, hpos;
	signed char prot_hint[NPAGES]; /* last prot we set, -1 unknown */
};

static uintptr_t base;
static struct region reg[NREG];
static pthread_barrier_t bar;
static unsigned nrounds;
static uint64_t seed;

static void aoff(char *b, size_t n, uintptr_t a)
{
	if (a >= base && a < base + NPAGES * PG) {
		uintptr_t o = a - base;
		if (o % PG)
			snprintf(b, n, "p%lu+%#lx", o / PG, o % PG);
		else
			snprintf(b, n, "p%lu", o / PG);
	} else {
		snprintf(b, n, "out(%#lx)", a & (PG - 1)); /* never absolute */
	}
}

static const char *adv_name(long a)
{
	switch (a) {
	case MADV_NORMAL: return "NORMAL";
	case MADV_DONTNEED: return "DONTNEED";
	case MADV_HUGEPAGE: return "HUGEPAGE";
	case MADV_NOHUGEPAGE: return "NOHUGEPAGE";
	case MADV_DONTFORK: return "DONTFORK";
	case MADV_DOFORK: return "DOFORK";
	case MADV_DONTDUMP: return "DONTDUMP";
	case MADV_DODUMP: return "DODUMP";
	case MADV_WIPEONFORK: return "WIPEONFORK";
	case MADV_KEEPONFORK: return "KEEPONFORK";
	case MADV_POPULATE_READ: return "POPULATE_READ";
	case MADV_POPULATE_WRITE: return "POPULATE_WRITE";
	case MADV_GUARD_INSTALL: return "GUARD_INSTALL";
	case MADV_GUARD_REMOVE: return "GUARD_REMOVE";
	case MADV_DONTNEED_LOCKED: return "DONTNEED_LOCKED";
	default: return "unknown";
	}
}

static void hint_set(struct region *r, uintptr_t a, size_t len, int prot)
{
	if (a % PG || a < base)
		return;
	for (uintptr_t p = a; p < a + len && p < base + NPAGES * PG; p += PG)
		r->prot_hint[(p - base) / PG] = (signed char)prot;
}

/* Perform one call and print it with its result. */
static void do_call(struct region *r, const struct call *c, int rep)
{
	char as[40], as2[40];
	long ret = 0;
	void *pr = NULL;
	const char *sys = c->sys ? "SYS_" : "";
	aoff(as, sizeof as, c->addr);
	/* A successful call must leave errno alone: start from a marker. */
	const int marker = 4000 + (int)(r->nstep % 97);
	errno = marker;
	switch (c->kind) {
	case K_MMAP:
		if (c->sys)
			pr = (void *)syscall(SYS_mmap, c->addr, c->len, (int)c->a,
					     (int)c->b, -1, 0L);
		else
			pr = mmap((void *)c->addr, c->len, (int)c->a, (int)c->b, -1, 0);
		break;
	case K_MUNMAP:
		ret = c->sys ? syscall(SYS_munmap, c->addr, c->len)
			     : munmap((void *)c->addr, c->len);
		break;
	case K_MREMAP:
		if (c->sys)
			pr = (void *)syscall(SYS_mremap, c->addr, c->len, c->len2,
					     (int)c->a, c->addr2);
		else
			pr = mremap((void *)c->addr, c->len, c->len2, (int)c->a,
				    (void *)c->addr2);
		break;
	case K_MPROTECT:
		ret = c->sys ? syscall(SYS_mprotect, c->addr, c->len, (int)c->a)
			     : mprotect((void *)c->addr, c->len, (int)c->a);
		break;
	case K_PKEY_MPROTECT:
		ret = c->sys ? syscall(SYS_pkey_mprotect, c->addr, c->len,
				       (int)c->a, -1)
			     : pkey_mprotect((void *)c->addr, c->len, (int)c->a, -1);
		break;
	case K_MADVISE:
		ret = c->sys ? syscall(SYS_madvise, c->addr, c->len, (int)c->a)
			     : madvise((void *)c->addr, c->len, (int)c->a);
		break;
	case K_MLOCK:
		ret = c->sys ? syscall(SYS_mlock, c->addr, c->len)
			     : mlock((void *)c->addr, c->len);
		break;
	case K_MLOCK2:
		ret = c->sys ? syscall(SYS_mlock2, c->addr, c->len, (unsigned)c->a)
			     : mlock2((void *)c->addr, c->len, (unsigned)c->a);
		break;
	case K_MUNLOCK:
		ret = c->sys ? syscall(SYS_munlock, c->addr, c->len)
			     : munlock((void *)c->addr, c->len);
		break;
	case K_MSEAL:
		ret = syscall(SYS_mseal, c->addr, c->len, 0UL);
		sys = "SYS_";
		break;
	}
	int e = errno;
	struct obuf *o = &r->out;
	ob_printf(o, "%s s%04u%s ", r->tag, r->nstep, rep ? " rep" : "");
	switch (c->kind) {
	case K_MMAP:
		ob_printf(o, "%smmap(%s,%#zx,%s,%s%s%s%s)", sys, as, c->len,
			  prot_name((int)c->a),
			  (c->b & MAP_SHARED) ? "SHARED" : "PRIVATE",
			  (c->b & MAP_FIXED_NOREPLACE) ? "|NOREPLACE" : "|FIXED",
			  (c->b & MAP_NORESERVE) ? "|NORESERVE" : "",
			  (c->b & MAP_POPULATE) ? "|POPULATE" : "");
		break;
	case K_MUNMAP:
		ob_printf(o, "%smunmap(%s,%#zx)", sys, as, c->len);
		break;
	case K_MREMAP:
		aoff(as2, sizeof as2, c->addr2);
		ob_printf(o, "%smremap(%s,%#zx,%#zx,%ld,%s)", sys, as, c->len,
			  c->len2, c->a, (c->a & MREMAP_FIXED) ? as2 : "-");
		break;
	case K_MPROTECT:
		ob_printf(o, "%smprotect(%s,%#zx,%s)", sys, as, c->len,
			  prot_name((int)c->a));
		break;
	case K_PKEY_MPROTECT:
		ob_printf(o, "%spkey_mprotect(%s,%#zx,%s,-1)", sys, as, c->len,
			  prot_name((int)c->a));
		break;
	case K_MADVISE:
		ob_printf(o, "%smadvise(%s,%#zx,%s/%ld)", sys, as, c->len,
			  adv_name(c->a), c->a);
		break;
	case K_MLOCK:
		ob_printf(o, "%smlock(%s,%#zx)", sys, as, c->len);
		break;
	case K_MLOCK2:
		ob_printf(o, "%smlock2(%s,%#zx,%ld)", sys, as, c->len, c->a);
		break;
	case K_MUNLOCK:
		ob_printf(o, "%smunlock(%s,%#zx)", sys, as, c->len);
		break;
	case K_MSEAL:
		ob_printf(o, "%smseal(%s,%#zx,0)", sys, as, c->len);
		break;
	}
	int ok = (c->kind == K_MMAP || c->kind == K_MREMAP) ? pr != MAP_FAILED
							    : ret == 0;
	if (c->kind == K_MMAP || c->kind == K_MREMAP) {
		if (pr == MAP_FAILED) {
			ob_printf(o, " = FAILED %s", ename(e));
		} else {
			aoff(as2, sizeof as2, (uintptr_t)pr);
			ob_printf(o, " = %s", as2);
		}
	} else {
		ob_printf(o, " = %ld %s", ret, ret ? ename(e) : "");
	}
	if (ok && e != marker)
		ob_printf(o, " errno changed to %d", e);
	ob_printf(o, "\n");
	if (ok && (c->kind == K_MMAP || c->kind == K_MPROTECT ||
		   c->kind == K_PKEY_MPROTECT))
		hint_set(r, c->addr, c->len, (int)c->a);
	if (ok && c->kind == K_MUNMAP)
		hint_set(r, c->addr, c->len, -1);
	if (ok && c->kind == K_MREMAP) {
		hint_set(r, c->addr, c->len, -1);
		hint_set(r, (uintptr_t)pr, c->len2, -1);
	}
}

static const int prots[] = {
	PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE, PROT_READ | PROT_EXEC,
	PROT_READ | PROT_WRITE | PROT_EXEC, PROT_WRITE, PROT_EXEC,
	PROT_READ | PROT_SEM, PROT_READ | PROT_WRITE,
};
static const long advs[] = {
	MADV_HUGEPAGE, MADV_NOHUGEPAGE, MADV_DONTFORK, MADV_DOFORK,
	MADV_DONTDUMP, MADV_DODUMP, MADV_DONTNEED, MADV_WIPEONFORK,
	MADV_KEEPONFORK, MADV_HUGEPAGE, MADV_DONTDUMP, MADV_WIPEONFORK,
	MADV_DONTNEED, MADV_NORMAL, MADV_POPULATE_READ, MADV_POPULATE_WRITE,
	MADV_GUARD_INSTALL, MADV_GUARD_REMOVE, MADV_DONTNEED_LOCKED,
};

/* Pick a page range: mostly small, sometimes the whole region, and in the
 * single-threaded phases (wide) sometimes anywhere in the arena. */
static void pick_range(struct region *r, int wide, size_t *pg, size_t *np)
{
	size_t lo = r->first, n = REGPG;
	if (wide && rnd(&r->rng, 5) == 0) {
		lo = 0;
		n = NPAGES;
	}
	size_t o = rnd(&r->rng, n), len;
	uint64_t k = rnd(&r->rng, 10);
	if (k < 7)
		len = 1 + rnd(&r->rng, 4);
	else if (k < 9)
		len = 5 + rnd(&r->rng, 12);
	else
		len = n - o;
	if (len > n - o)
		len = n - o;
	*pg = lo + o;
	*np = len;
}

/* Occasionally make the call invalid in a way the kernel rejects before
 * touching anything (so region isolation holds). */
static void maybe_invalid(struct region *r, struct call *c)
{
	uint64_t k = rnd(&r->rng, 100);
	if (k >= 8)
		return;
	switch (k) {
	case 0:
	case 1: {
		/* mlock rounds an unaligned start down: keep the end where
		 * it was so the call stays inside the region. */
		size_t off = 1 + rnd(&r->rng, PG - 1);
		c->addr += off;
		c->len = c->len > off ? c->len - off : 1;
		break;
	}
	case 2:
		if (c->kind != K_MREMAP)
			c->len = 0;
		break;
	case 3:
		if (c->kind == K_MREMAP)
			c->len2 = SIZE_MAX;
		else
			c->len = SIZE_MAX;
		break;
	case 4:
		if (c->kind != K_MREMAP && c->kind != K_MSEAL)
			c->len = (size_t)0 - c->addr; /* addr + len wraps to 0 */
		break;
	case 5:
		/* unaligned length, rounded up to the same pages */
		if (c->len >= PG)
			c->len -= 1 + rnd(&r->rng, PG - 1);
		break;
	case 6:
		if (c->kind == K_MPROTECT || c->kind == K_PKEY_MPROTECT) {
			static const long bad[] = { 0x10, PROT_GROWSDOWN,
						    PROT_GROWSUP, 0x40 };
			c->a |= bad[rnd(&r->rng, N(bad))];
		} else if (c->kind == K_MADVISE) {
			c->a = 77 + (long)rnd(&r->rng, 3);
		} else if (c->kind == K_MLOCK2) {
			c->a = 2 + (long)rnd(&r->rng, 6);
		}
		break;
	case 7:
		if (c->kind == K_MREMAP)
			c->a |= 0x40; /* unknown flag */
		break;
	}
}

static void write_data(struct region *r, int wide)
{
	size_t pg, np;
	pick_range(r, wide, &pg, &np);
	struct obuf *o = &r->out;
	ob_printf(o, "%s s%04u write(p%zu,%zu) =", r->tag, r->nstep, pg, np);
	for (size_t i = 0; i < np; i++) {
		char data[48];
		size_t n = 1 + rnd(&r->rng, sizeof data);
		size_t off = rnd(&r->rng, PG - n + 1);
		for (size_t j = 0; j < n; j++)
			data[j] = (char)rnd64(&r->rng);
		int res = fg_write((volatile char *)(base + (pg + i) * PG + off),
				   data, n);
		ob_printf(o, "%c", res ? res : 'w');
	}
	ob_printf(o, "\n");
}

/* One random step on region r. */
static void step(struct region *r, int wide)
{
	struct call c;
	memset(&c, 0, sizeof c);
	r->nstep++;
	uint64_t k = rnd(&r->rng, 100);
	if (k < 22 && r->nhist) {
		/* Repeat a recent call: the redundant calls mmfold may skip. */
		c = r->hist[rnd(&r->rng, (uint64_t)r->nhist)];
		do_call(r, &c, 1);
		return;
	}
	if (k < 32) {
		write_data(r, wide);
		return;
	}
	size_t pg, np;
	pick_range(r, wide, &pg, &np);
	c.addr = base + pg * PG;
	c.len = np * PG;
	c.sys = rnd(&r->rng, 4) == 0;
	if (k < 44) {
		c.kind = K_MMAP;
		c.a = prots[rnd(&r->rng, N(prots))];
		c.b = rnd(&r->rng, 5) == 0 ? MAP_SHARED : MAP_PRIVATE;
		c.b |= MAP_ANONYMOUS;
		c.b |= rnd(&r->rng, 8) == 0 ? MAP_FIXED_NOREPLACE : MAP_FIXED;
		if (rnd(&r->rng, 4) == 0)
			c.b |= MAP_NORESERVE;
		if (rnd(&r->rng, 6) == 0)
			c.b |= MAP_POPULATE;
	} else if (k < 47) {
		c.kind = K_MUNMAP;
	} else if (k < 54) {
		c.kind = K_MREMAP;
		uint64_t m = rnd(&r->rng, 3);
		if (m == 0) { /* shrink */
			c.len2 = c.len > PG ? PG * (1 + rnd(&r->rng, np - 1)) : PG;
		} else if (m == 1) { /* grow in place (never moves) */
			c.len2 = c.len + PG * (1 + rnd(&r->rng, 4));
		} else { /* move to another spot of the same region */
			size_t np2 = rnd(&r->rng, 3) ? np : 1 + rnd(&r->rng, 6);
			size_t lo = wide ? 0 : r->first, n = wide ? NPAGES : REGPG;
			if (np2 > n)
				np2 = n;
			c.len2 = np2 * PG;
			c.addr2 = base + (lo + rnd(&r->rng, n - np2 + 1)) * PG;
			c.a = MREMAP_MAYMOVE | MREMAP_FIXED;
			if (rnd(&r->rng, 5) == 0) {
				c.a |= MREMAP_DONTUNMAP;
				c.len2 = c.len;
				if (c.addr2 + c.len2 > base + (lo + n) * PG)
					c.addr2 = base + (lo + n) * PG - c.len2;
			}
		}
		/* Growing past a region runs into its guard (ENOMEM); never
		 * let it grow past the arena. */
		if (c.addr2 == 0 && c.addr + c.len2 > base + NPAGES * PG)
			c.len2 = base + NPAGES * PG - c.addr;
	} else if (k < 67) {
		c.kind = K_MPROTECT;
		int h = r->prot_hint[pg];
		c.a = (h >= 0 && rnd(&r->rng, 2)) ? h : prots[rnd(&r->rng, N(prots))];
	} else if (k < 72) {
		c.kind = K_PKEY_MPROTECT;
		int h = r->prot_hint[pg];
		c.a = (h >= 0 && rnd(&r->rng, 2)) ? h : prots[rnd(&r->rng, N(prots))];
	} else if (k < 84) {
		c.kind = K_MADVISE;
		c.a = advs[rnd(&r->rng, N(advs))];
	} else if (k < 89) {
		c.kind = K_MLOCK;
	} else if (k < 93) {
		c.kind = K_MLOCK2;
		c.a = rnd(&r->rng, 3) ? MLOCK_ONFAULT : 0;
	} else if (k < 99) {
		c.kind = K_MUNLOCK;
	} else {
		c.kind = K_MSEAL;
		c.len = PG * (1 + rnd(&r->rng, 2));
		if (!wide && c.addr + c.len > base + (r->first + REGPG) * PG)
			c.len = PG;
	}
	maybe_invalid(r, &c);
	do_call(r, &c, 0);
	r->hist[r->hpos] = c;
	r->hpos = (r->hpos + 1) % HIST;
	if (r->nhist < HIST)
		r->nhist++;
}

static void reseed(uint64_t stream)
{
	for (int i = 0; i < NREG; i++) {
		reg[i].rng = seed * 0x100000001b3ULL + stream * 1000 + (uint64_t)i;
		rnd64(&reg[i].rng);
		reg[i].nhist = reg[i].hpos = 0;
		reg[i].nstep = 0;
	}
}

static void flush_regions(const char *prefix)
{
	for (int i = 0; i < NREG; i++)
		ob_flush(&reg[i].out, 1, prefix);
}

static char err_char(int e)
{
	switch (e) {
	case ENOMEM: return 'M';
	case EPERM: return 'P';
	case EINVAL: return 'I';
	case EACCES: return 'A';
	default: return '?';
	}
}

/* Re-apply, page by page, the protection and the madvise flags each page
 * had (per st): all redundant while st is current, which is what mmfold
 * skips.  In the child, st is the parent's state before fork(), so pages
 * that were MADV_DONTFORK must now fail with ENOMEM. */
static void sweep(struct obuf *o, const char *name, const struct pstate *st)
{
	static const struct { const char *f; int adv; } fl[] = {
		{ "hg", MADV_HUGEPAGE }, { "nh", MADV_NOHUGEPAGE },
		{ "dd", MADV_DONTDUMP }, { "dc", MADV_DONTFORK },
		{ "wf", MADV_WIPEONFORK },
	};
	char mp[NPAGES + 1], ma[NPAGES + 1], ml[NPAGES + 1];
	for (size_t i = 0; i < NPAGES; i++) {
		void *p = (void *)(base + i * PG);
		mp[i] = ma[i] = ml[i] = ' ';
		if (st[i].perm[0] == '.')
			continue;
		int prot = (st[i].perm[0] == 'r' ? PROT_READ : 0) |
			   (st[i].perm[1] == 'w' ? PROT_WRITE : 0) |
			   (st[i].perm[2] == 'x' ? PROT_EXEC : 0);
		errno = 0;
		long rc = i % 3 == 0 ? syscall(SYS_mprotect, p, PG, prot)
			: i % 3 == 1 ? mprotect(p, PG, prot)
				     : pkey_mprotect(p, PG, prot, -1);
		mp[i] = rc ? err_char(errno) : '0';
		ma[i] = '-';
		for (size_t k = 0; k < N(fl); k++) {
			char f[8];
			snprintf(f, sizeof f, ",%s,", fl[k].f);
			char flags[sizeof st[i].flags + 2];
			snprintf(flags, sizeof flags, ",%s,", st[i].flags);
			if (!strstr(flags, f))
				continue;
			errno = 0;
			rc = k % 2 ? syscall(SYS_madvise, p, PG, fl[k].adv)
				   : madvise(p, PG, fl[k].adv);
			if (ma[i] == '-' || ma[i] == '0')
				ma[i] = rc ? err_char(errno) : '0';
		}
		char flags[sizeof st[i].flags + 2];
		snprintf(flags, sizeof flags, ",%s,", st[i].flags);
		errno = 0;
		if (strstr(flags, ",lf,"))
			rc = mlock2(p, PG, MLOCK_ONFAULT);
		else if (strstr(flags, ",lo,"))
			rc = i % 2 ? syscall(SYS_mlock, p, PG) : mlock(p, PG);
		else
			rc = i % 2 ? syscall(SYS_munlock, p, PG) : munlock(p, PG);
		ml[i] = rc ? err_char(errno) : '0';
	}
	mp[NPAGES] = ma[NPAGES] = ml[NPAGES] = 0;
	ob_printf(o, "%s sweep mprotect [%s]\n", name, mp);
	ob_printf(o, "%s sweep madvise  [%s]\n", name, ma);
	ob_printf(o, "%s sweep mlock    [%s]\n", name, ml);
}

static struct pstate cp_state[NPAGES]; /* at the last checkpoint */

static void checkpoint(const char *name, const char *prefix)
{
	struct obuf o = { 0 };
	flush_regions(prefix);
	ob_printf(&o, "== %s\n", name);
	probe_pages(&o, name, base, NPAGES, cp_state);
	sweep(&o, name, cp_state);
	ob_flush(&o, 1, prefix);
	free(o.p);
}

/* Single-threaded walk over all regions (child, and the parent's end). */
static void solo_walk(unsigned steps, const char *prefix, int lockall_flags)
{
	struct region *ctl = &reg[0];
	for (unsigned i = 0; i < steps; i++) {
		if (lockall_flags && i == steps / 3) {
			errno = 0;
			int rc = mlockall(lockall_flags);
			ob_printf(&ctl->out, "mlockall(%#x) = %d %s\n", lockall_flags,
				  rc, rc ? ename(errno) : "");
		}
		if (lockall_flags && i == 2 * steps / 3) {
			errno = 0;
			int rc = munlockall();
			ob_printf(&ctl->out, "munlockall() = %d %s\n", rc,
				  rc ? ename(errno) : "");
		}
		step(&reg[rnd(&ctl->rng, NREG)], 1);
		flush_regions(prefix); /* keep the global order of steps */
	}
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (unsigned rd = 0; rd < nrounds; rd++) {
		int owner = (int)(rd % NTHR) == t;
		for (int i = 0; i < ROUND; i++) {
			step(&reg[t], 0);
			if (owner && i % 2 == 0)
				step(&reg[NREG - 1], 0);
		}
		pthread_barrier_wait(&bar); /* round done */
		pthread_barrier_wait(&bar); /* checkpoint done */
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: walk SEED [STEPS]\n");
		return 2;
	}
	seed = strtoull(argv[1], NULL, 0);
	unsigned steps = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 300;
	nrounds = (steps + ROUND - 1) / ROUND;
	watchdog(60);
	fg_install();

	base = reserve_arena(NPAGES);
	if (!base) {
		printf("cannot reserve arena\n");
		return 1;
	}
	for (size_t g = 0; g < NPAGES; g += REGPG + 1)
		if (mmap((void *)(base + g * PG), PG, PROT_NONE,
			 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
			printf("cannot map guard\n");
			return 1;
		}
	for (int i = 0; i < NREG; i++) {
		snprintf(reg[i].tag, sizeof reg[i].tag, "r%d", i);
		reg[i].first = 1 + (size_t)i * (REGPG + 1);
		memset(reg[i].prot_hint, PROT_NONE, sizeof reg[i].prot_hint);
	}
	reseed(1);
	char hdr[96];
	int hl = snprintf(hdr, sizeof hdr, "walk seed=%llu steps=%u\n",
			  (unsigned long long)seed, steps);
	wr_all(1, hdr, (size_t)hl);
	checkpoint("start", "");

	pthread_barrier_init(&bar, NULL, NTHR + 1);
	pthread_t th[NTHR];
	for (int t = 0; t < NTHR; t++)
		if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t)) {
			printf("pthread_create failed\n");
			return 1;
		}
	for (unsigned rd = 0; rd < nrounds; rd++) {
		pthread_barrier_wait(&bar);
		if (rd == nrounds / 3) {
			checkpoint("third", "");
		} else if (rd == nrounds / 2) {
			checkpoint("before-fork", "");
			pid_t pid = fork();
			if (pid == 0) {
				watchdog(30);
				reseed(2);
				struct obuf o = { 0 };
				sweep(&o, "child-prefork", cp_state);
				ob_flush(&o, 1, "child: ");
				checkpoint("child-start", "child: ");
				solo_walk(steps / 2, "child: ",
					  MCL_FUTURE | MCL_ONFAULT);
				checkpoint("child-end", "child: ");
				exit(0);
			}
			int st = 0;
			waitpid(pid, &st, 0);
			char m[64];
			int ml = snprintf(m, sizeof m, "child status %#x\n", st);
			wr_all(1, m, (size_t)ml);
			checkpoint("after-fork", "");
		} else if (rd == 2 * nrounds / 3) {
			checkpoint("two-thirds", "");
		}
		pthread_barrier_wait(&bar);
	}
	for (int t = 0; t < NTHR; t++)
		pthread_join(th[t], NULL);
	checkpoint("threads-done", "");

	reseed(3);
	solo_walk(steps / 4, "", MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT);
	checkpoint("end", "");
	wr_all(1, "walk done\n", 10);
	return 0;
}
