/* W^X flips: see wx.h for the contract and the lock rule. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "wxint.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "config.h"
#include "stats.h"
#include "sys.h"

static struct { uint64_t s, e; } ring[RING] MMF_DATA_ALIGN; /* s == e: empty */
static unsigned ring_next;

/* ---- lock-free look (relax) -------------------------------------------- */

int mmf_wx_pre(const struct mmf_op *op)
{
	uint64_t s, e;
	int prot;
	if (!active || env.mode != MMF_WX_RELAX || !LD(nrelaxed) || !is_mprotect(op))
		return MMF_WX_NONE;
	if (!span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e) ||
	    !proven(s, e, MMF_Q_ADV, MMF_ADV_WX, 1))
		return MMF_WX_NONE;
	return flip_args(op, &s, &e, &prot) ? MMF_WX_TRY_SKIP : MMF_WX_FORWARD;
}

/* A flip inside relaxed region x: RW of a window, or RX of a part that
 * leaves no window half RW.  1 when answered. */
static int skip_in_region(struct ent *x, uint64_t s, uint64_t e, int prot)
{
	if (prot == RW) {
		if (x->last == RW)
			return 1; /* all of it is RW to the program already */
		struct win *w = win_find(x, s, e);
		if (!w && !(w = win_add(x, s, e)))
			return 0; /* more windows than followed: end it */
		w->rw = 1;
		w->used = ++tick;
		x->open = 1;
		return 1;
	}
	if (x->last != RX)
		return 0;
	for (int i = 0; i < WIN_MAX; i++) {
		struct win *w = &x->w[i];
		if (w->rw && w->s < e && s < w->e && (w->s < s || e < w->e))
			return 0;
	}
	for (int i = 0; i < WIN_MAX; i++)
		if (x->w[i].rw && s <= x->w[i].s && x->w[i].e <= e)
			x->w[i].rw = 0;
	return 1;
}

int mmf_wx_skip(const struct mmf_op *op)
{
	uint64_t s, e;
	int prot;
	if (!flip_args(op, &s, &e, &prot))
		return 0;
	struct ent *x = find_exact(s, e);
	int inside = 0;
	if (!x || x->state != ST_RELAXED) {
		x = region_of(s, e);
		inside = 1;
	}
	/* re-checked under the lock: the map must still say RWX and relaxed */
	if (!x || x->state != ST_RELAXED || !proven(s, e, MMF_Q_ADV, MMF_ADV_WX, 1) ||
	    !proven(s, e, MMF_Q_PROT, RWX, 0))
		return 0;
	if (inside) {
		if (!skip_in_region(x, s, e, prot))
			return 0;
	} else {
		x->last = (uint8_t)prot;
		if (x->kind == REGION) {
			for (int i = 0; i < WIN_MAX; i++)
				x->w[i].rw = 0;
			if (prot == RX && x->open)
				mmf_event(MMF_E_WX_WIN_FLIPS);
			x->open = 0;
		}
	}
	mmf_event(MMF_E_WX_SKIPPED);
	return 1;
}

/* ---- ending what mmfold did --------------------------------------------- */

/* Relax: gives a relaxed range the protections the program last asked
 * for (a region: its own, then its windows').  0 on success. */
static long restore(struct ent *x)
{
	long r = mmf_sys6(SYS_mprotect, (long)x->s, (long)(x->e - x->s), x->last, 0, 0, 0);
	for (int i = 0; r == 0 && x->kind == REGION && i < WIN_MAX; i++)
		if (x->w[i].rw)
			r = mmf_sys6(SYS_mprotect, (long)x->w[i].s, (long)(x->w[i].e - x->w[i].s), RW,
				     0, 0, 0);
	return r;
}

/* Relax: give the range back what the program last asked for.  Only when
 * the map still proves it RWX and relaxed (a re-entrant call may have
 * changed it behind the map's back: then leave the kernel alone). */
static void end_relax(struct ent *x)
{
	if (proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_WX, 1) && proven(x->s, x->e, MMF_Q_PROT, RWX, 0)) {
		if (restore(x) == 0) {
			struct mmf_upd u;
			memset(&u, 0, sizeof u);
			u.fields = MMF_F_PROT;
			u.a.prot = x->last;
			u.adv_clear_mask = MMF_ADV_WX;
			mmf_map_update(env.map, x->s, x->e, &u);
			u.a.prot = RW;
			for (int i = 0; x->kind == REGION && i < WIN_MAX; i++)
				if (x->w[i].rw)
					mmf_map_update(env.map, x->w[i].s, x->w[i].e, &u);
		} else {
			mmf_map_forget(env.map, x->s, x->e);
		}
	}
	mmf_event(MMF_E_WX_ENDED);
	drop(x);
}

/* Keep: take mmfold's readahead advice off again (before an mremap, which
 * fails with EFAULT across VMAs that would have been one). */
static void end_keep(struct ent *x)
{
	if (x->kind == AREA && x->colour != C_NONE && proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_WX, 1)) {
		if (madv(x->s, x->e, MADV_NORMAL))
			set_bits(x->s, x->e, 0, MMF_ADV_WX, 0);
	}
	drop(x); /* a region's windows too */
}

/* The ranges op may change, for ending and forgetting; returns how many. */
static int touched(const struct mmf_op *op, uint64_t s[2], uint64_t e[2])
{
	int n = 0;
	uint64_t pg = env.page;
	switch (op->kind) {
	case MMF_K_MPROTECT:
	case MMF_K_MUNMAP:
	case MMF_K_MSEAL:
		n = span((uint64_t)op->a[0], (uint64_t)op->a[1], &s[0], &e[0]);
		break;
	case MMF_K_MMAP:
		if (op->a[3] & MAP_FIXED)
			n = span((uint64_t)op->a[0], (uint64_t)op->a[1], &s[0], &e[0]);
		break;
	case MMF_K_MREMAP:
		n = span((uint64_t)op->a[0], (uint64_t)op->a[1] ? (uint64_t)op->a[1] : pg, &s[0], &e[0]);
		if ((op->a[3] & MREMAP_FIXED) &&
		    span((uint64_t)op->a[4], (uint64_t)op->a[2] ? (uint64_t)op->a[2] : pg, &s[n], &e[n]))
			n++;
		break;
	}
	return n;
}

/* The run of records without a hole around [*s, *e) (at most 64 each
 * way): what may be one VMA with it where mmfold kept no area apart. */
static void widen_to_run(uint64_t *s, uint64_t *e)
{
	struct mmf_rec r;
	for (int i = 0; i < 64 && *s > 0 && mmf_map_lookup(env.map, *s - 1, &r); i++)
		*s = r.start;
	for (int i = 0; i < 64 && mmf_map_lookup(env.map, *e, &r); i++)
		*e = r.end;
}

void mmf_wx_before(const struct mmf_op *op)
{
	uint64_t s[2], e[2];
	/* only relaxed entries end here, and kept ones before an mremap:
	 * without either, no need to walk the table */
	if (!active || !nused || (!nrelaxed && op->kind != MMF_K_MREMAP))
		return;
	int n = touched(op, s, e);
	/* A move with MREMAP_DONTUNMAP unlocks all of the VMA it leaves, so
	 * a kept area that would be one VMA with its source (records alike
	 * and without a hole between) is given back to its neighbours first
	 * (taken a little wide: any such run of records). */
	if (op->kind == MMF_K_MREMAP && (op->a[3] & MREMAP_DONTUNMAP) && n > 0)
		widen_to_run(&s[0], &e[0]);
	for (int i = 0; i < WX_MAX; i++) {
		struct ent *x = &tab[i];
		if (x->state != ST_RELAXED && !(x->state == ST_KEPT && op->kind == MMF_K_MREMAP))
			continue;
		for (int j = 0; j < n; j++)
			if (x->s < e[j] && s[j] < x->e) {
				/* an munmap of all of it needs no protection back
				 * (mmf_wx_after puts it back if the munmap fails) */
				if (op->kind == MMF_K_MUNMAP && s[j] <= x->s && x->e <= e[j])
					break;
				if (x->state == ST_RELAXED)
					end_relax(x);
				else
					end_keep(x);
				break;
			}
	}
}

/* ---- acting on flipping ranges ------------------------------------------ */

/* The readahead advice of the VMA holding addr, as far as mmfold knows. */
static int colour_at(uint64_t addr)
{
	for (int i = 0; i < WX_MAX; i++) {
		struct ent *x = &tab[i];
		if (x->state != ST_KEPT || addr < x->s || x->e <= addr)
			continue;
		if (x->kind == AREA)
			return x->colour;
		for (int j = 0; j < WIN_MAX; j++)
			if (x->w[j].colour != C_NONE && x->w[j].s <= addr && addr < x->w[j].e)
				return x->w[j].colour;
	}
	struct mmf_rec r;
	if (!mmf_map_lookup(env.map, addr, &r))
		return C_NONE; /* a hole: nothing to merge with */
	if ((r.a.adv_known & MMF_ADV_WX) && !(r.a.adv_set & MMF_ADV_WX))
		return C_NONE; /* nobody's readahead advice */
	return C_UNK;
}

/* Readahead advice for [s,e) that differs from both neighbours' (C_NONE:
 * none does). */
static int pick_colour(uint64_t s, uint64_t e)
{
	int l = colour_at(s - env.page), r = colour_at(e);
	return (l != C_RAND && r != C_RAND) ? C_RAND : (l != C_SEQ && r != C_SEQ) ? C_SEQ : C_NONE;
}

static int colour_adv(int c) { return c == C_RAND ? MADV_RANDOM : MADV_SEQUENTIAL; }

/* Does some folio size the THP policy serves only with MADV_HUGEPAGE fit
 * an aligned block inside [s,e)? */
static int thp_fits(uint64_t s, uint64_t e)
{
	const struct mmf_folio_sys *f = env.folio;
	if (!env.thp || !f || (env.thp_disabled && LD(*env.thp_disabled)))
		return 0;
	for (int i = 0; i < f->nsizes; i++) {
		uint64_t z = f->size[i];
		if (f->state[i] == MMF_THP_MADVISE && ((s + z - 1) & ~(z - 1)) + z <= e)
			return 1;
	}
	return 0;
}

static void keep(struct ent *x)
{
	if (x->kind == REGION) {
		/* its windows get their own VMA as they come (window_rw), each
		 * only where nobody else gave readahead advice (keep_window) */
		x->state = ST_KEPT;
		return;
	}
	if (!proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_WX, 0)) {
		x->state = ST_DONE; /* the program's own readahead advice: hands off */
		mmf_event(MMF_E_WX_PROGRAM);
		return;
	}
	int c = pick_colour(x->s, x->e);
	if (c != C_NONE && !madv(x->s, x->e, colour_adv(c))) {
		x->state = ST_DONE;
		return;
	}
	set_bits(x->s, x->e, MMF_ADV_WX, 0, 0);
	x->state = ST_KEPT;
	x->colour = (uint8_t)c;
	mmf_event(MMF_E_WX_KEPT);
	if (thp_fits(x->s, x->e) && proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_HUGEPAGE, 0) &&
	    proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_NOHUGEPAGE, 0) &&
	    madv(x->s, x->e, MADV_HUGEPAGE)) {
		set_bits(x->s, x->e, MMF_ADV_HUGEPAGE | MMF_ADV_OURS, MMF_ADV_NOHUGEPAGE, 0);
		mmf_event(MMF_E_WX_THP);
	}
}

/* Keep, a window w of region x made RW again: give it a VMA of its own
 * (readahead advice unlike its neighbours'), so that neither this flip's
 * RX of the region nor the next RW of the window splits or merges the
 * region's VMA.  At most WIN_KEPT windows per region hold advice: the
 * least recently used one gives it back. */
static void keep_window(struct ent *x, struct win *w)
{
	if (!proven(w->s, w->e, MMF_Q_ADV, MMF_ADV_WX, 0))
		return;
	int c = pick_colour(w->s, w->e);
	if (c == C_NONE || !madv(w->s, w->e, colour_adv(c)))
		return;
	set_bits(w->s, w->e, MMF_ADV_WX, 0, 0);
	w->colour = (uint8_t)c;
	mmf_event(MMF_E_WX_WIN_KEPT);
	int n = 0;
	struct win *old = NULL;
	for (int i = 0; i < WIN_MAX; i++) {
		struct win *v = &x->w[i];
		if (v->colour == C_NONE)
			continue;
		n++;
		if (v != w && (!old || v->used < old->used))
			old = v;
	}
	if (n > WIN_KEPT && old)
		uncolour(old);
}

static void relax(struct ent *x)
{
	if ((env.mdwe && LD(*env.mdwe)) || refused) {
		x->state = ST_DONE;
		return;
	}
	long r = mmf_sys6(SYS_mprotect, (long)x->s, (long)(x->e - x->s), RWX, 0, 0, 0);
	if (r != 0) {
		/* MDWE, SELinux execmem, ...: forward the flips from now on.
		 * Put back what the program asked for, in case the kernel
		 * changed part of the range before it refused. */
		refused = 1;
		mmf_event(MMF_E_WX_REFUSED);
		if (mmf_sys6(SYS_mprotect, (long)x->s, (long)(x->e - x->s), x->last, 0, 0, 0) != 0)
			mmf_map_forget(env.map, x->s, x->e);
		x->state = ST_DONE;
		return;
	}
	struct mmf_upd u;
	memset(&u, 0, sizeof u);
	u.fields = MMF_F_PROT;
	u.a.prot = RWX;
	u.adv_set_mask = MMF_ADV_WX;
	mmf_map_update(env.map, x->s, x->e, &u);
	for (int i = 0; i < WIN_MAX; i++)
		x->w[i].rw = 0; /* relaxed right after an RX of all of it */
	x->state = ST_RELAXED;
	ST(nrelaxed, nrelaxed + 1);
	mmf_event(MMF_E_WX_RELAXED);
}

static struct ent *alloc_ent(void)
{
	for (int i = 0; i < WX_MAX; i++)
		if (tab[i].state == ST_FREE)
			return &tab[i];
	/* full: replace a candidate or a range given up on, round robin */
	for (int k = 0; k < WX_MAX; k++) {
		struct ent *x = &tab[victim++ % WX_MAX];
		if (x->state == ST_CAND || x->state == ST_DONE) {
			drop(x);
			return x;
		}
	}
	/* all kept or relaxed: the kept range that flipped least recently
	 * gives its advice back (a JIT flips its newest code, and a program
	 * that moves its window page by page would otherwise keep the
	 * first 64 pages apart for ever) */
	struct ent *old = NULL;
	for (int i = 0; i < WX_MAX; i++)
		if (tab[i].state == ST_KEPT && (!old || tab[i].used < old->used))
			old = &tab[i];
	if (old)
		end_keep(old);
	return old;
}

/* Counts a flip of x (its RW/RX sequence went one step further) and acts
 * once it is flipping. */
static void flipped(struct ent *x)
{
	if (x->kind == REGION)
		mmf_event(MMF_E_WX_WIN_FLIPS);
	if (x->state != ST_CAND || ++x->flips < MMF_WX_DETECT)
		return;
	if (x->kind == REGION)
		mmf_event(MMF_E_WX_REGIONS);
	if (env.mode == MMF_WX_RELAX)
		relax(x);
	else
		keep(x);
}

/* An RW request on [s,e) that is no area's: a window of a region, or
 * remembered until an RX request covers it. */
static void window_rw(uint64_t s, uint64_t e)
{
	struct ent *x = region_of(s, e);
	if (!x) {
		ring[ring_next % RING].s = s;
		ring[ring_next % RING].e = e;
		ring_next++;
		return;
	}
	if (x->state == ST_RELAXED || !proven(s, e, MMF_Q_PROT, RW, 0))
		return;
	x->open = 1;
	x->used = ++tick;
	struct win *w = win_find(x, s, e);
	if (!w && !(w = win_add(x, s, e)))
		return;
	w->hits++;
	w->used = ++tick;
	if (x->state == ST_KEPT && w->colour == C_NONE && w->hits >= 2)
		keep_window(x, w);
}

/* Moves the remembered RW requests inside [s,e) (and not all of it) into
 * the windows of x; returns how many. */
static int ring_take(struct ent *x, uint64_t s, uint64_t e)
{
	int n = 0;
	for (int i = 0; i < RING; i++)
		if (ring[i].s != ring[i].e && s <= ring[i].s && ring[i].e <= e &&
		    (ring[i].s != s || ring[i].e != e)) {
			if (n < WIN_MAX) {
				x->w[n].s = ring[i].s;
				x->w[n].e = ring[i].e;
				x->w[n].hits = 1;
				x->w[n].used = ++tick;
				n++;
			}
			ring[i].s = ring[i].e = 0;
		}
	return n;
}

static void count_flip(uint64_t s, uint64_t e, int prot)
{
	struct ent *x = find_exact(s, e);
	if (x)
		x->used = ++tick;
	if (!x && prot == RW) {
		window_rw(s, e);
		return;
	}
	if (x && x->kind == REGION) {
		if (prot == RX && x->open) {
			x->open = 0;
			flipped(x);
		}
		return;
	}
	/* Following starts at an RX request: programs that only toggle RW
	 * and read-only (GC write barriers) cost a lookup, nothing more.
	 * Owned, unsealed, wholly known, and now prot: the record is the truth. */
	if (!proven(s, e, MMF_Q_PROT, (uint8_t)prot, 0))
		return;
	int fresh = !x;
	if (fresh) {
		x = alloc_ent();
		if (!x)
			return;
		memset(x, 0, sizeof *x);
		x->s = s;
		x->e = e;
		x->used = ++tick;
		x->state = ST_CAND;
		x->last = (uint8_t)prot;
		nused++;
	}
	if (x->state != ST_CAND)
		return;
	/* RX of a range that holds windows made RW since: a region (also
	 * when its first RX request found no window) */
	if (prot == RX && x->flips == 0 && x->last == RX && ring_take(x, s, e)) {
		x->kind = REGION;
		nregions++;
		flipped(x);
		return;
	}
	if (fresh || x->last == prot)
		return;
	x->last = (uint8_t)prot;
	flipped(x);
}

/* The program gave readahead advice on [s,e): hands off every range it
 * touches, now and later (a region gives its other windows' advice back). */
static void program_advice(uint64_t s, uint64_t e)
{
	for (int i = 0; nused && i < WX_MAX; i++) {
		struct ent *x = &tab[i];
		if ((x->state != ST_KEPT && x->state != ST_CAND) || x->e <= s || e <= x->s)
			continue;
		if (x->state == ST_KEPT)
			mmf_event(MMF_E_WX_PROGRAM);
		for (int j = 0; x->kind == REGION && j < WIN_MAX; j++) {
			struct win *w = &x->w[j];
			if (w->s < e && s < w->e)
				w->colour = C_NONE; /* the program's advice is in force there */
			else
				uncolour(w);
		}
		x->state = ST_DONE;
	}
}

void mmf_wx_rw_done(uint64_t s, uint64_t e)
{
	if (!active)
		return;
	if (!nused) { /* count_flip's course when nothing is followed: remember it */
		ring[ring_next % RING].s = s;
		ring[ring_next % RING].e = e;
		ring_next++;
		return;
	}
	count_flip(s, e, RW);
}

void mmf_wx_after(const struct mmf_op *op, long r)
{
	uint64_t s[2], e[2];
	int prot;
	if (!active)
		return;
	if (is_mprotect(op)) {
		if (r == 0 && flip_args(op, &s[0], &e[0], &prot))
			count_flip(s[0], e[0], prot);
		return;
	}
	if (op->kind == MMF_K_MADVISE) {
		int adv = (int)op->a[2];
		if ((adv != MADV_NORMAL && adv != MADV_RANDOM && adv != MADV_SEQUENTIAL) ||
		    !span((uint64_t)op->a[0], (uint64_t)op->a[1], &s[0], &e[0]))
			return;
		/* The program's own readahead advice wins, now and later:
		 * the range's readahead state becomes unknown to mmfold. */
		set_bits(s[0], e[0], 0, 0, MMF_ADV_WX);
		program_advice(s[0], e[0]);
		return;
	}
	if (!nused)
		return;
	int n = touched(op, s, e);
	if (op->kind == MMF_K_MUNMAP && r != 0) {
		/* Still mapped and still RWX: what the program asked for last. */
		for (int i = 0; i < WX_MAX; i++)
			if (n && tab[i].state == ST_RELAXED && s[0] <= tab[i].s && tab[i].e <= e[0]) {
				restore(&tab[i]);
				/* the map says RWX: forget it rather than trust it */
				mmf_map_forget(env.map, tab[i].s, tab[i].e);
				mmf_event(MMF_E_WX_ENDED);
				drop(&tab[i]);
			}
		return;
	}
	if (is_err_r(r))
		return;
	if (op->kind == MMF_K_MREMAP && !is_err_r(r) && n < 2 &&
	    span((uint64_t)r, (uint64_t)op->a[2], &s[n], &e[n]))
		n++;
	for (int i = 0; i < WX_MAX; i++)
		for (int j = 0; j < n; j++)
			if (tab[i].state != ST_FREE && tab[i].s < e[j] && s[j] < tab[i].e) {
				if (tab[i].state == ST_RELAXED)
					mmf_event(MMF_E_WX_ENDED);
				drop(&tab[i]);
				break;
			}
}
