/* W^X flips: see wx.h for the contract and the lock rule. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "wx.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "config.h"
#include "stats.h"
#include "sys.h"

#ifndef MREMAP_FIXED
#define MREMAP_FIXED 2
#endif

#define RW (PROT_READ | PROT_WRITE)
#define RX (PROT_READ | PROT_EXEC)
#define RWX (PROT_READ | PROT_WRITE | PROT_EXEC)

/* Ranges followed at once.  JITs flip few areas (LuaJIT: up to 8 of 64
 * KiB by default); a candidate that stops flipping is replaced. */
#define WX_MAX 64

enum { ST_FREE, ST_CAND, ST_KEPT, ST_RELAXED, ST_DONE };
/* Readahead advice that tells neighbours apart; C_UNK: not known. */
enum { C_NONE, C_RAND, C_SEQ, C_UNK };

struct ent {
	uint64_t s, e;
	uint32_t flips;
	uint8_t state;
	uint8_t last;     /* the protection the program last asked for */
	uint8_t colour;   /* ST_KEPT: C_* mmfold applied */
};

static struct mmf_wx_env env;
static int active;
static struct ent tab[WX_MAX];
static int nused, nrelaxed; /* nrelaxed is read without the lock (a hint) */
static int refused;         /* the kernel refused RWX once: never again */
static unsigned victim;

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

static int is_err_r(long r) { return (unsigned long)r > -4096UL; }

void mmf_wx_init(const struct mmf_wx_env *e)
{
	env = *e;
	active = env.mode == MMF_WX_KEEP || env.mode == MMF_WX_RELAX;
}

int mmf_wx_tracks_readahead(void) { return active && env.mode == MMF_WX_KEEP; }

/* [a, a+len) rounded up to pages; 0 when the kernel would reject it. */
static int span(uint64_t a, uint64_t len, uint64_t *s, uint64_t *e)
{
	uint64_t pg = env.page;
	if ((a & (pg - 1)) || len == 0)
		return 0;
	uint64_t l = (len + pg - 1) & ~(pg - 1);
	if (l < len || a + l <= a)
		return 0;
	*s = a;
	*e = a + l;
	return 1;
}

static int is_mprotect(const struct mmf_op *op)
{
	return op->kind == MMF_K_MPROTECT || op->kind == MMF_K_PKEY_MPROTECT;
}

/* A RW<->RX flip: mprotect (or pkey_mprotect with key -1) to exactly RW or RX. */
static int flip_args(const struct mmf_op *op, uint64_t *s, uint64_t *e, int *prot)
{
	if (!is_mprotect(op) || ((op->flags & MMF_OPF_PKEY) && (int)op->a[3] != -1))
		return 0;
	int p = (int)op->a[2];
	if (p != RW && p != RX)
		return 0;
	*prot = p;
	return span((uint64_t)op->a[0], (uint64_t)op->a[1], s, e);
}

static int proven(uint64_t s, uint64_t e, int what, uint8_t bit_or_prot, uint8_t val)
{
	struct mmf_want w;
	memset(&w, 0, sizeof w);
	w.what = what;
	if (what == MMF_Q_PROT)
		w.prot = bit_or_prot;
	w.adv_bit = bit_or_prot;
	w.adv_val = val;
	return mmf_map_check(env.map, s, e, &w) == MMF_NOOP_PROVEN;
}

static void set_bits(uint64_t s, uint64_t e, uint8_t set, uint8_t clear, uint8_t forget)
{
	struct mmf_upd u;
	memset(&u, 0, sizeof u);
	u.adv_set_mask = set;
	u.adv_clear_mask = clear;
	u.adv_forget = forget;
	mmf_map_update(env.map, s, e, &u);
}

static void drop(struct ent *x)
{
	if (x->state == ST_RELAXED)
		ST(nrelaxed, nrelaxed - 1);
	x->state = ST_FREE;
	nused--;
}

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

static struct ent *find_exact(uint64_t s, uint64_t e)
{
	static int hit; /* flips come in pairs on the same range */
	if (!nused)
		return NULL;
	if (tab[hit].state != ST_FREE && tab[hit].s == s && tab[hit].e == e)
		return &tab[hit];
	for (int i = 0; i < WX_MAX; i++)
		if (tab[i].state != ST_FREE && tab[i].s == s && tab[i].e == e) {
			hit = i;
			return &tab[i];
		}
	return NULL;
}

int mmf_wx_skip(const struct mmf_op *op)
{
	uint64_t s, e;
	int prot;
	if (!flip_args(op, &s, &e, &prot))
		return 0;
	struct ent *x = find_exact(s, e);
	/* re-checked under the lock: the map must still say RWX and relaxed */
	if (!x || x->state != ST_RELAXED || !proven(s, e, MMF_Q_ADV, MMF_ADV_WX, 1) ||
	    !proven(s, e, MMF_Q_PROT, RWX, 0))
		return 0;
	x->last = (uint8_t)prot;
	mmf_event(MMF_E_WX_SKIPPED);
	return 1;
}

/* ---- ending what mmfold did --------------------------------------------- */

/* Relax: give the range back the protection the program last asked for.
 * Only when the map still proves it RWX and relaxed (a re-entrant call may
 * have changed it behind the map's back: then leave the kernel alone). */
static void end_relax(struct ent *x)
{
	if (proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_WX, 1) && proven(x->s, x->e, MMF_Q_PROT, RWX, 0)) {
		long r = mmf_sys6(SYS_mprotect, (long)x->s, (long)(x->e - x->s), x->last, 0, 0, 0);
		if (r == 0) {
			struct mmf_upd u;
			memset(&u, 0, sizeof u);
			u.fields = MMF_F_PROT;
			u.a.prot = x->last;
			u.adv_clear_mask = MMF_ADV_WX;
			mmf_map_update(env.map, x->s, x->e, &u);
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
	if (x->colour != C_NONE && proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_WX, 1)) {
		if (mmf_sys6(SYS_madvise, (long)x->s, (long)(x->e - x->s), MADV_NORMAL, 0, 0, 0) == 0)
			set_bits(x->s, x->e, 0, MMF_ADV_WX, 0);
	}
	drop(x);
}

/* The ranges op may change, for ending and forgetting; returns how many. */
static int touched(const struct mmf_op *op, uint64_t s[2], uint64_t e[2])
{
	int n = 0;
	uint64_t pg = env.page;
	switch (op->kind) {
	case MMF_K_MPROTECT:
	case MMF_K_PKEY_MPROTECT:
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

void mmf_wx_before(const struct mmf_op *op)
{
	uint64_t s[2], e[2];
	if (!active || !nused)
		return;
	int n = touched(op, s, e);
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
	for (int i = 0; i < WX_MAX; i++)
		if (tab[i].state == ST_KEPT && tab[i].s <= addr && addr < tab[i].e)
			return tab[i].colour;
	struct mmf_rec r;
	if (!mmf_map_lookup(env.map, addr, &r))
		return C_NONE; /* a hole: nothing to merge with */
	if ((r.a.adv_known & MMF_ADV_WX) && !(r.a.adv_set & MMF_ADV_WX))
		return C_NONE; /* nobody's readahead advice */
	return C_UNK;
}

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
	if (!proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_WX, 0)) {
		x->state = ST_DONE; /* the program's own readahead advice: hands off */
		mmf_event(MMF_E_WX_PROGRAM);
		return;
	}
	int l = colour_at(x->s - env.page), r = colour_at(x->e);
	int c = (l != C_RAND && r != C_RAND) ? C_RAND : (l != C_SEQ && r != C_SEQ) ? C_SEQ : C_NONE;
	if (c != C_NONE &&
	    mmf_sys6(SYS_madvise, (long)x->s, (long)(x->e - x->s),
		     c == C_RAND ? MADV_RANDOM : MADV_SEQUENTIAL, 0, 0, 0) != 0) {
		x->state = ST_DONE;
		return;
	}
	set_bits(x->s, x->e, MMF_ADV_WX, 0, 0);
	x->state = ST_KEPT;
	x->colour = (uint8_t)c;
	mmf_event(MMF_E_WX_KEPT);
	if (thp_fits(x->s, x->e) && proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_HUGEPAGE, 0) &&
	    proven(x->s, x->e, MMF_Q_ADV, MMF_ADV_NOHUGEPAGE, 0) &&
	    mmf_sys6(SYS_madvise, (long)x->s, (long)(x->e - x->s), MADV_HUGEPAGE, 0, 0, 0) == 0) {
		set_bits(x->s, x->e, MMF_ADV_HUGEPAGE | MMF_ADV_OURS, MMF_ADV_NOHUGEPAGE, 0);
		mmf_event(MMF_E_WX_THP);
	}
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
	return NULL;
}

static void count_flip(uint64_t s, uint64_t e, int prot)
{
	struct ent *x = find_exact(s, e);
	/* Following starts at an RX request: programs that only toggle RW
	 * and read-only (GC write barriers) cost a lookup, nothing more. */
	if (!x && prot != RX)
		return;
	/* owned, unsealed, wholly known, and now prot: the record is the truth */
	if (!proven(s, e, MMF_Q_PROT, (uint8_t)prot, 0))
		return;
	if (!x) {
		x = alloc_ent();
		if (!x)
			return;
		memset(x, 0, sizeof *x);
		x->s = s;
		x->e = e;
		x->state = ST_CAND;
		x->last = (uint8_t)prot;
		nused++;
		return;
	}
	if (x->state != ST_CAND || x->last == prot)
		return;
	x->last = (uint8_t)prot;
	if (++x->flips < MMF_WX_DETECT)
		return;
	if (env.mode == MMF_WX_RELAX)
		relax(x);
	else
		keep(x);
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
		for (int i = 0; nused && i < WX_MAX; i++)
			if ((tab[i].state == ST_KEPT || tab[i].state == ST_CAND) &&
			    tab[i].s < e[0] && s[0] < tab[i].e) {
				if (tab[i].state == ST_KEPT)
					mmf_event(MMF_E_WX_PROGRAM);
				tab[i].state = ST_DONE; /* hands off from now on */
			}
		return;
	}
	if (!nused)
		return;
	int n = touched(op, s, e);
	if (op->kind == MMF_K_MUNMAP && r != 0) {
		/* Still mapped and still RWX: what the program asked for last. */
		for (int i = 0; i < WX_MAX; i++)
			if (n && tab[i].state == ST_RELAXED && s[0] <= tab[i].s && tab[i].e <= e[0]) {
				if (mmf_sys6(SYS_mprotect, (long)tab[i].s, (long)(tab[i].e - tab[i].s),
					     tab[i].last, 0, 0, 0) != 0)
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
