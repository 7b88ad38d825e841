#include "thp.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "stats.h"
#include "sys.h"

#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif

static struct mmf_map *smap;
static size_t page;
static uint64_t pmd, max_none;
/* The block and max_ptes_none the rule at mmap sees: the kernel's
 * defaults for 4 KiB pages until mmf_thp_init() (and where it finds no
 * block to watch). */
static uint64_t rule_per = 512, rule_none = 511;

/* Watched mappings, as page numbers: a conservative collector that scans
 * every library's data as roots (libgc, Guile's collector, does) must not
 * find pointers into its heap here: it kept 25% more memory when it did.
 * The table is mapped at the first watch, outside the library's writable
 * segment, which such a collector scans too. */
static struct watch {
	uint64_t ps, pe; /* [ps,pe) in pages */
	uint32_t due;  /* forwarded calls left before the next look */
	uint32_t wait; /* the wait after a sparse look */
} *w;
static int nw;

void mmf_thp_count(struct mmf_thp_use *u, uint64_t n, uint64_t per_block, uint64_t max_ptes_none)
{
	if (!n)
		return;
	u->touched++;
	u->resident += n;
	if (n == per_block)
		u->full++;
	else if (per_block - n <= max_ptes_none) {
		u->fill += per_block - n;
		if (per_block - n > u->fill_max)
			u->fill_max = per_block - n;
	}
}

int mmf_thp_rule(int advise_all, int reservation, uint64_t per_block, uint64_t max_ptes_none)
{
	if (advise_all)
		return MMF_THP_NOW;
	if (!reservation)
		return MMF_THP_LATER;
	return per_block && max_ptes_none + 1 >= per_block ? MMF_THP_NOW : MMF_THP_LEAVE;
}

int mmf_thp_at_mmap(int advise_all, int reservation)
{
	return mmf_thp_rule(advise_all, reservation, rule_per, rule_none);
}

int mmf_thp_dense(const struct mmf_thp_use *u)
{
	return u->full > 0 && (u->fill - u->fill_max) * MMF_THP_SLACK <= u->resident;
}

void mmf_thp_init(struct mmf_map *m, size_t pg, uint64_t pmd_size, uint64_t max_ptes_none)
{
	smap = m;
	page = pg;
	pmd = pmd_size;
	/* khugepaged scales max_ptes_none down for folios below PMD size */
	uint64_t per = pmd_size / pg, pmd_pages = (2u << 20) / pg;
	max_none = per < pmd_pages ? max_ptes_none * per / pmd_pages : max_ptes_none;
	rule_per = per ? per : 512;
	rule_none = per ? max_none : 511;
	nw = 0;
}

int mmf_thp_watching(void) { return nw; }

int mmf_thp_watch(uint64_t s, uint64_t e)
{
	if (!pmd || e - s < pmd)
		return -1;
	if (!w) {
		void *m = mmf_sys_mmap(NULL, MMF_THP_WATCH * sizeof *w, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mmf_sys_err((long)m))
			return -1;
		w = m;
	}
	uint64_t ps = s / page, pe = e / page;
	for (int i = 0; i < nw;) /* an address used again: the old watch ends */
		if (w[i].ps < pe && ps < w[i].pe)
			w[i] = w[--nw];
		else
			i++;
	if (nw == MMF_THP_WATCH)
		return -1;
	w[nw++] = (struct watch){ps, pe, MMF_THP_WAIT, MMF_THP_WAIT};
	return 0;
}

/* Is [s,e) still one watched mapping as mmfold made it: owned, private
 * anonymous, accessible, never given huge-page advice either way, all of
 * it known?  Anything else (unmapped, remapped, advised by the program)
 * ends the watch. */
static int still_plain(uint64_t s, uint64_t e)
{
	struct mmf_rec r;
	for (uint64_t a = s; a < e; a = r.end) {
		if (!mmf_map_lookup(smap, a, &r) || r.start > a || !r.a.owned || r.a.sealed != 0)
			return 0;
		if (!mmf_prot_known(r.a.prot) || !(r.a.prot & (PROT_READ | PROT_WRITE)))
			return 0;
		if (!(r.a.adv_known & MMF_ADV_ANON) || !(r.a.adv_set & MMF_ADV_ANON))
			return 0;
		if ((r.a.adv_known & (MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE)) !=
			    (MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE) ||
		    (r.a.adv_set & (MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE)))
			return 0;
	}
	return 1;
}

/* Residency of the whole blocks of [s,e) (mincore, 16 MiB per call).
 * Returns 0, or -1 when mincore failed (a hole). */
static int measure(uint64_t s, uint64_t e, struct mmf_thp_use *u)
{
	unsigned char vec[4096];
	uint64_t per = pmd / page;
	uint64_t b = (s + pmd - 1) & ~(pmd - 1), end = e & ~(pmd - 1);
	memset(u, 0, sizeof *u);
	while (b < end) {
		uint64_t blocks = (end - b) / pmd, fit = sizeof vec / per;
		if (blocks > fit)
			blocks = fit;
		if (!blocks)
			return -1; /* a block bigger than the vector: not here */
		if (mmf_sys6(SYS_mincore, (long)b, (long)(blocks * pmd), (long)vec, 0, 0, 0) != 0)
			return -1;
		for (uint64_t i = 0; i < blocks; i++) {
			uint64_t n = 0;
			for (uint64_t j = 0; j < per; j++)
				n += vec[i * per + j] & 1;
			mmf_thp_count(u, n, per, max_none);
		}
		b += blocks * pmd;
	}
	return 0;
}

static int advise_only(uint64_t s, uint64_t e)
{
	if (mmf_sys6(SYS_madvise, (long)s, (long)(e - s), MADV_HUGEPAGE, 0, 0, 0) != 0)
		return 0;
	struct mmf_upd u;
	memset(&u, 0, sizeof u);
	u.adv_set_mask = MMF_ADV_HUGEPAGE | MMF_ADV_OURS;
	u.adv_clear_mask = MMF_ADV_NOHUGEPAGE;
	mmf_map_update(smap, s, e, &u);
	mmf_event(MMF_E_THP_ADVISED);
	mmf_event_add(MMF_E_THP_BYTES, e - s);
	return 1;
}

static void advise(uint64_t s, uint64_t e)
{
	if (advise_only(s, e))
		mmf_event(MMF_E_THP_DENSE);
}

enum {
	/* the VMA flags mmfold's records follow (the kernel merges two VMAs
	 * only when they are equal), and the private anonymous mark */
	JOIN_KNOWN = MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE | MMF_ADV_DONTFORK | MMF_ADV_DONTDUMP |
		     MMF_ADV_WIPEONFORK | MMF_ADV_WX | MMF_ADV_ANON,
	JOIN_SAME = MMF_ADV_DONTFORK | MMF_ADV_DONTDUMP | MMF_ADV_WIPEONFORK | MMF_ADV_WX,
};

int mmf_thp_join_fits(const struct mmf_attr *a)
{
	if (!a->owned || a->sealed != 0 || !mmf_prot_known(a->prot) || a->lock == MMF_UNKNOWN)
		return 0;
	if ((a->adv_known & JOIN_KNOWN) != JOIN_KNOWN || !(a->adv_set & MMF_ADV_ANON) ||
	    (a->adv_set & MMF_ADV_NOHUGEPAGE))
		return 0;
	/* huge-page advice only where it is mmfold's own */
	return !(a->adv_set & MMF_ADV_HUGEPAGE) ||
	       ((a->adv_known & MMF_ADV_OURS) && (a->adv_set & MMF_ADV_OURS));
}

int mmf_thp_join_alike(const struct mmf_attr *x, const struct mmf_attr *y)
{
	return x->prot == y->prot && x->lock == y->lock && x->pkey == y->pkey &&
	       (x->adv_set & JOIN_SAME) == (y->adv_set & JOIN_SAME);
}

/* The record that ends at s (side 0) or starts at e (side 1), alike a
 * but for mmfold's advice: 1 advised, 2 not advised; else 0. */
static int neighbour(uint64_t s, uint64_t e, int side, const struct mmf_attr *a)
{
	struct mmf_rec r;
	if (side ? !mmf_map_lookup(smap, e, &r) || r.start != e
		 : s < page || !mmf_map_lookup(smap, s - page, &r) || r.end != s)
		return 0;
	if (!mmf_thp_join_fits(&r.a) || !mmf_thp_join_alike(&r.a, a))
		return 0;
	return r.a.adv_set & MMF_ADV_HUGEPAGE ? 1 : 2;
}

int mmf_thp_join_next_to(uint64_t s, uint64_t e, const struct mmf_attr *a)
{
	if (!smap || !mmf_thp_join_fits(a) || (a->adv_set & MMF_ADV_HUGEPAGE))
		return 0;
	int l = neighbour(s, e, 0, a), r = neighbour(s, e, 1, a);
	/* between advised memory and memory like it without advice, which
	 * the kernel merges it with as it is: left so */
	return (l == 1 || r == 1) && l != 2 && r != 2;
}

int mmf_thp_join(uint64_t s, uint64_t e)
{
	struct mmf_rec r;
	struct mmf_attr first = {0};
	int ours = 0, plain = 0;
	if (!smap) /* no huge-page advice in this process (mmf_thp_init) */
		return 0;
	for (uint64_t a = s; a < e; a = r.end) {
		if (!mmf_map_lookup(smap, a, &r) || !mmf_thp_join_fits(&r.a))
			return 0;
		if (a == s)
			first = r.a;
		else if (!mmf_thp_join_alike(&first, &r.a))
			return 0;
		if (r.a.adv_set & MMF_ADV_HUGEPAGE)
			ours = 1;
		else
			plain = 1;
	}
	if (!ours || !plain)
		return 0;
	int done = 0;
	for (uint64_t a = s; a < e; a = r.end) {
		if (!mmf_map_lookup(smap, a, &r))
			break;
		if (r.a.adv_set & MMF_ADV_HUGEPAGE)
			continue;
		uint64_t re = r.end < e ? r.end : e;
		if (!advise_only(a, re))
			break;
		done = 1;
		r.end = re;
	}
	if (done)
		mmf_event(MMF_E_THP_JOINED);
	return done;
}

void mmf_thp_tick(int thp_off)
{
	if (!nw)
		return;
	if (thp_off) {
		nw = 0;
		return;
	}
	for (int i = 0; i < nw;) {
		struct watch *x = &w[i];
		if (--x->due) {
			i++;
			continue;
		}
		struct mmf_thp_use u;
		uint64_t s = x->ps * page, e = x->pe * page;
		int end = 1;
		mmf_event(MMF_E_THP_LOOKS);
		if (still_plain(s, e) && measure(s, e, &u) == 0) {
			if (mmf_thp_dense(&u))
				advise(s, e);
			else
				end = 0;
		}
		if (!end) {
			x->wait = x->wait < MMF_THP_WAIT_MAX ? x->wait * 2 : MMF_THP_WAIT_MAX;
			x->due = x->wait;
			i++;
			continue;
		}
		w[i] = w[--nw];
	}
}
