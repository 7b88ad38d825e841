/* W^X flips: the table of followed ranges and their windows, and the
 * helpers the policy (wx.c) uses on it.  See wx.h for the contract. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "wxint.h"

#include <string.h>
#include <sys/syscall.h>

#include "config.h"
#include "stats.h"
#include "sys.h"

struct mmf_wx_env env MMF_DATA_ALIGN;
int active;
/* WX_MAX entries, mapped when W^X tracking starts (about 15 KiB that the
 * library's writable segment does not carry: a conservative collector
 * scans that segment as roots). */
struct ent *tab;
int nused, nrelaxed; /* nrelaxed is read without the lock (a hint) */
int nregions;        /* entries of kind REGION */
int refused;         /* the kernel refused RWX once: never again */
unsigned victim;
uint64_t tick;

int is_err_r(long r) { return (unsigned long)r > -4096UL; }

void mmf_wx_init(const struct mmf_wx_env *e)
{
	env = *e;
	active = env.mode == MMF_WX_KEEP || env.mode == MMF_WX_RELAX;
	if (active && !tab) {
		void *m = mmf_sys_mmap(NULL, WX_MAX * sizeof(struct ent), PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mmf_sys_err((long)m))
			active = 0; /* no memory: W^X flips are left alone */
		else
			tab = m;
	}
}

int mmf_wx_tracks_readahead(void) { return active && env.mode == MMF_WX_KEEP; }


int is_mprotect(const struct mmf_op *op)
{
	return op->kind == MMF_K_MPROTECT;
}

/* A RW<->RX flip: mprotect (or pkey_mprotect with key -1) to exactly RW or RX. */
int flip_args(const struct mmf_op *op, uint64_t *s, uint64_t *e, int *prot)
{
	if (!is_mprotect(op) || ((op->flags & MMF_OPF_PKEY) && (int)op->a[3] != -1))
		return 0;
	int p = (int)op->a[2];
	if (p != RW && p != RX)
		return 0;
	*prot = p;
	return span((uint64_t)op->a[0], (uint64_t)op->a[1], s, e);
}

int proven(uint64_t s, uint64_t e, int what, uint8_t bit_or_prot, uint8_t val)
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

void set_bits(uint64_t s, uint64_t e, uint8_t set, uint8_t clear, uint8_t forget)
{
	struct mmf_upd u;
	memset(&u, 0, sizeof u);
	u.adv_set_mask = set;
	u.adv_clear_mask = clear;
	u.adv_forget = forget;
	mmf_map_update(env.map, s, e, &u);
}

int madv(uint64_t s, uint64_t e, int advice)
{
	return mmf_sys6(SYS_madvise, (long)s, (long)(e - s), advice, 0, 0, 0) == 0;
}

/* Keep: take mmfold's readahead advice off a window again (the window
 * merges back into its region once both have the same protection). */
void uncolour(struct win *w)
{
	if (w->colour != C_NONE && proven(w->s, w->e, MMF_Q_ADV, MMF_ADV_WX, 1) &&
	    madv(w->s, w->e, MADV_NORMAL))
		set_bits(w->s, w->e, 0, MMF_ADV_WX, 0);
	w->colour = C_NONE;
}

void drop(struct ent *x)
{
	if (x->state == ST_RELAXED)
		ST(nrelaxed, nrelaxed - 1);
	if (x->kind == REGION) {
		for (int i = 0; i < WIN_MAX; i++)
			uncolour(&x->w[i]);
		nregions--;
	}
	x->state = ST_FREE;
	nused--;
}

/* ---- lookups ------------------------------------------------------------ */

struct ent *find_exact(uint64_t s, uint64_t e)
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

/* The smallest region (not ST_DONE) that holds [s,e) without being
 * exactly it. */
struct ent *region_of(uint64_t s, uint64_t e)
{
	struct ent *best = NULL;
	for (int i = 0; nregions && i < WX_MAX; i++) {
		struct ent *x = &tab[i];
		if (x->kind == REGION && x->state != ST_FREE && x->state != ST_DONE && x->s <= s &&
		    e <= x->e && (x->s != s || x->e != e) && (!best || x->e - x->s < best->e - best->s))
			best = x;
	}
	return best;
}

struct win *win_find(struct ent *x, uint64_t s, uint64_t e)
{
	for (int i = 0; i < WIN_MAX; i++)
		if (x->w[i].s == s && x->w[i].e == e && s != e)
			return &x->w[i];
	return NULL;
}

/* A slot for a new window [s,e) of x: windows it overlaps are given up
 * first; then a free slot, else the least recently used one that relax
 * may forget (one the program does not see RW).  NULL when there is none. */
struct win *win_add(struct ent *x, uint64_t s, uint64_t e)
{
	struct win *v = NULL;
	for (int i = 0; i < WIN_MAX; i++) {
		struct win *w = &x->w[i];
		if (w->s != w->e && w->s < e && s < w->e && !w->rw) {
			uncolour(w);
			w->s = w->e = 0;
		}
	}
	for (int i = 0; i < WIN_MAX; i++) {
		struct win *w = &x->w[i];
		if (w->s == w->e) {
			v = w;
			break;
		}
		if (!w->rw && (!v || w->used < v->used))
			v = w;
	}
	if (!v)
		return NULL;
	uncolour(v);
	memset(v, 0, sizeof *v);
	v->s = s;
	v->e = e;
	return v;
}
