/* W^X flips' table of followed ranges and their windows (wxtab.c), shared
 * with the policy (wx.c).  Not for anything outside W^X. */
#ifndef MMF_WXINT_H
#define MMF_WXINT_H

#include <stdint.h>
#include <sys/mman.h>

#include "wx.h"

#ifndef MREMAP_FIXED
#define MREMAP_FIXED 2
#endif

#define RW (PROT_READ | PROT_WRITE)
#define RX (PROT_READ | PROT_EXEC)
#define RWX (PROT_READ | PROT_WRITE | PROT_EXEC)

/* Ranges followed at once.  JITs flip few areas (LuaJIT: up to 8 of 64
 * KiB by default); a candidate that stops flipping is replaced. */
#define WX_MAX 64

/* Windows followed per region, and how many of them keep's advice holds
 * in VMAs of their own at once. */
#define WIN_MAX 6
#define WIN_KEPT 2
/* RW requests remembered until an RX request covers them (a region). */
#define RING 8

enum { ST_FREE, ST_CAND, ST_KEPT, ST_RELAXED, ST_DONE };
/* Readahead advice that tells neighbours apart; C_UNK: not known. */
enum { C_NONE, C_RAND, C_SEQ, C_UNK };
/* The shape of a flip. */
enum {
	AREA,   /* the same range RW, then RX (LuaJIT, PHP) */
	REGION, /* a window inside the range RW, then the range RX (YJIT) */
};

/* A window: a range the program made RW inside a region. */
struct win {
	uint64_t s, e;
	uint64_t used;    /* tick of its last RW request (least recently used goes) */
	uint32_t hits;    /* RW requests of exactly this range */
	uint8_t colour;   /* keep: C_* mmfold applied (C_NONE: none) */
	uint8_t rw;       /* relax: the program's view is RW (else the region's) */
};

struct ent {
	uint64_t s, e;
	uint64_t used;    /* tick of its last flip request (a full table ends
			   the keep of the least recently used) */
	uint32_t flips;
	uint8_t state;
	uint8_t kind;     /* AREA or REGION */
	uint8_t last;     /* the protection the program last asked for (REGION: RX) */
	uint8_t colour;   /* AREA, ST_KEPT: C_* mmfold applied */
	uint8_t open;     /* REGION: a window was made RW since the last RX */
	struct win w[WIN_MAX]; /* REGION; s == e: a free slot */
};

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

extern struct mmf_wx_env env;
extern int active;
extern struct ent *tab;
extern int nused, nrelaxed;
extern int nregions;
extern int refused;
extern unsigned victim;
extern uint64_t tick;

int is_err_r(long r);
int is_mprotect(const struct mmf_op *op);
int flip_args(const struct mmf_op *op, uint64_t *s, uint64_t *e, int *prot);
int proven(uint64_t s, uint64_t e, int what, uint8_t bit_or_prot, uint8_t val);
void set_bits(uint64_t s, uint64_t e, uint8_t set, uint8_t clear, uint8_t forget);
int madv(uint64_t s, uint64_t e, int advice);
void uncolour(struct win *w);
void drop(struct ent *x);
struct ent *find_exact(uint64_t s, uint64_t e);
struct ent *region_of(uint64_t s, uint64_t e);
struct win *win_find(struct ent *x, uint64_t s, uint64_t e);
struct win *win_add(struct ent *x, uint64_t s, uint64_t e);

/* [a, a+len) rounded up to pages; 0 when the kernel would reject it. */
static inline int span(uint64_t a, uint64_t len, uint64_t *s, uint64_t *e)
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

#endif
