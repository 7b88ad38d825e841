/* The shadow map (see map.h for the contract): its memory, writer lock
 * and writers.  The readers are in mapread.c. */
#include "mapint.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#include "sys.h"

/* ---- memory ------------------------------------------------------------ */

int mmf_map_init(struct mmf_map *m)
{
	memset(m, 0, sizeof *m);
	void *p = mmf_sys_mmap(NULL, MMF_TOP_CAP * sizeof(struct mmf_block *),
			       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mmf_sys_err((long)p))
		return (int)(long)p;
	m->top = p;
	return 0;
}

/* A freed block first, else the next untouched one of the slab: a slab's
 * pages become resident only as blocks are used (a small program's map
 * takes a few pages, not the whole 256 KiB). */
static struct mmf_block *block_alloc(struct mmf_map *m)
{
	struct mmf_block *b = m->free_blocks;
	if (b) {
		m->free_blocks = b->next_free;
	} else {
		if (!m->slab_left) {
			char *p = mmf_sys_mmap(NULL, SLAB_BLOCKS * 4096, PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (mmf_sys_err((long)p))
				return NULL;
			m->slab = p;
			m->slab_left = SLAB_BLOCKS;
		}
		b = (struct mmf_block *)m->slab;
		m->slab += 4096;
		m->slab_left--;
	}
	ST(b->n, 0);
	return b;
}

/* Blocks are never unmapped: a reader may still be looking at this one. */
static void block_free(struct mmf_map *m, struct mmf_block *b)
{
	b->next_free = m->free_blocks;
	m->free_blocks = b;
}

static void wbegin(struct mmf_map *m);
static void wend(struct mmf_map *m);

void mmf_map_clear(struct mmf_map *m)
{
	wbegin(m); /* slots are reused: hints taken before must fail */
	for (uint32_t i = 0; i < m->nblocks; i++) {
		block_free(m, m->top[i]);
		ST(m->top[i], NULL);
	}
	ST(m->nblocks, 0);
	m->nrecs = 0;
	m->full = 0;
	wend(m);
}

/* ---- writer lock ------------------------------------------------------- */

int mmf_map_trywlock(struct mmf_map *m)
{
	uint32_t z = 0;
	return __atomic_compare_exchange_n(&m->lock, &z, 1, 0, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

void mmf_map_wlock(struct mmf_map *m)
{
	uint32_t c = 0;
	if (__atomic_compare_exchange_n(&m->lock, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	for (int spin = 0; spin < 100; spin++) {
		c = 0;
		if (__atomic_compare_exchange_n(&m->lock, &c, 1, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return;
		cpu_relax();
	}
	if (c != 2)
		c = __atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		mmf_sys_futex_wait(&m->lock, 2);
		c = __atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE);
	}
}

int mmf_map_wlock_until(struct mmf_map *m, uint64_t deadline_ns)
{
	uint32_t c = 0;
	for (int spin = 0; spin < 100; spin++) {
		c = 0;
		if (__atomic_compare_exchange_n(&m->lock, &c, 1, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return 1;
		cpu_relax();
	}
	if (c != 2)
		c = __atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		if (mmf_sys_futex_wait_until(&m->lock, 2, deadline_ns) == -ETIMEDOUT) {
			/* a last try: the lock word says 2 for the waiters that stay */
			c = __atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE);
			return c == 0;
		}
		c = __atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE);
	}
	return 1;
}

void mmf_map_wunlock(struct mmf_map *m)
{
	if (__atomic_exchange_n(&m->lock, 0, __ATOMIC_RELEASE) == 2)
		mmf_map_wake(m);
}

void mmf_map_wake(struct mmf_map *m) { mmf_sys_futex_wake(&m->lock, 1); }

/* Writers bracket every change with these so readers retry. */
static void wbegin(struct mmf_map *m)
{
	ST(m->seq, m->seq + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void wend(struct mmf_map *m)
{
	__atomic_store_n(&m->seq, m->seq + 1, __ATOMIC_RELEASE);
}

/* ---- positions (writer side) ------------------------------------------ */

struct pos {
	uint32_t b, i;
};

static struct slot *at(struct mmf_map *m, struct pos p) { return &m->top[p.b]->s[p.i]; }

static int valid(const struct mmf_map *m, struct pos p)
{
	return p.b < m->nblocks && p.i < m->top[p.b]->n;
}

static struct pos next_pos(const struct mmf_map *m, struct pos p)
{
	if (p.i + 1 < m->top[p.b]->n)
		return (struct pos){p.b, p.i + 1};
	return (struct pos){p.b + 1, 0};
}

static int prev_pos(const struct mmf_map *m, struct pos p, struct pos *out)
{
	if (p.i > 0) {
		*out = (struct pos){p.b, p.i - 1};
		return 1;
	}
	if (p.b == 0)
		return 0;
	*out = (struct pos){p.b - 1, m->top[p.b - 1]->n - 1};
	return 1;
}

/* First record with end > addr (writer view; may return an invalid pos at
 * the end). */
static struct pos wfind(const struct mmf_map *m, uint64_t addr)
{
	uint32_t lo = 0, hi = m->nblocks;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		const struct mmf_block *b = m->top[mid];
		if (b->s[b->n - 1].end > addr)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo == m->nblocks)
		return (struct pos){lo, 0};
	const struct mmf_block *b = m->top[lo];
	uint32_t l = 0, h = b->n;
	while (l < h) {
		uint32_t mid = (l + h) / 2;
		if (b->s[mid].end > addr)
			h = mid;
		else
			l = mid + 1;
	}
	return (struct pos){lo, l};
}

static void top_insert(struct mmf_map *m, uint32_t idx, struct mmf_block *b)
{
	for (uint32_t k = m->nblocks; k > idx; k--)
		ST(m->top[k], m->top[k - 1]);
	ST(m->top[idx], b);
	ST(m->nblocks, m->nblocks + 1);
}

static void top_remove(struct mmf_map *m, uint32_t idx)
{
	for (uint32_t k = idx; k + 1 < m->nblocks; k++)
		ST(m->top[k], m->top[k + 1]);
	ST(m->top[m->nblocks - 1], NULL);
	ST(m->nblocks, m->nblocks - 1);
}

static void slot_copy(struct slot *d, const struct slot *s)
{
	ST(d->start, LD(s->start));
	ST(d->end, LD(s->end));
	ST(d->attr, LD(s->attr));
}

static void slot_set(struct slot *d, uint64_t start, uint64_t end, uint64_t attr)
{
	ST(d->start, start);
	ST(d->end, end);
	ST(d->attr, attr);
}

/* Insert a record before position p.  Returns the position it landed at, or
 * an invalid position (b == UINT32_MAX) when memory ran out. */
static struct pos insert_at(struct mmf_map *m, struct pos p, uint64_t start, uint64_t end,
			    uint64_t attr)
{
	if (m->nblocks == 0) {
		struct mmf_block *b = block_alloc(m);
		if (!b)
			goto full;
		top_insert(m, 0, b);
		p = (struct pos){0, 0};
	} else if (p.b == m->nblocks) {
		/* append at the very end: into the last block */
		p.b = m->nblocks - 1;
		p.i = m->top[p.b]->n;
	}
	struct mmf_block *b = m->top[p.b];
	if (b->n == MMF_BLOCK_CAP) {
		if (m->nblocks == MMF_TOP_CAP)
			goto full;
		struct mmf_block *nb = block_alloc(m);
		if (!nb)
			goto full;
		uint32_t half = MMF_BLOCK_CAP / 2;
		for (uint32_t k = half; k < MMF_BLOCK_CAP; k++)
			slot_copy(&nb->s[k - half], &b->s[k]);
		ST(nb->n, MMF_BLOCK_CAP - half);
		top_insert(m, p.b + 1, nb);
		ST(b->n, half);
		if (p.i > half) {
			p.b++;
			p.i -= half;
			b = nb;
		}
	}
	for (uint32_t k = b->n; k > p.i; k--)
		slot_copy(&b->s[k], &b->s[k - 1]);
	slot_set(&b->s[p.i], start, end, attr);
	ST(b->n, b->n + 1);
	m->nrecs++;
	return p;
full:
	ST(m->full, 1);
	return (struct pos){UINT32_MAX, 0};
}

/* Delete the record at p; blocks that empty are released, small neighbours
 * merged.  Returns the position of the record that followed it. */
static struct pos delete_at(struct mmf_map *m, struct pos p)
{
	struct mmf_block *b = m->top[p.b];
	for (uint32_t k = p.i; k + 1 < b->n; k++)
		slot_copy(&b->s[k], &b->s[k + 1]);
	ST(b->n, b->n - 1);
	m->nrecs--;
	if (b->n == 0) {
		top_remove(m, p.b);
		block_free(m, b);
		return (struct pos){p.b, 0};
	}
	if (b->n < MMF_BLOCK_CAP / 4 && p.b + 1 < m->nblocks) {
		struct mmf_block *nb = m->top[p.b + 1];
		if (b->n + nb->n <= MMF_BLOCK_CAP * 3 / 4) {
			for (uint32_t k = 0; k < nb->n; k++)
				slot_copy(&b->s[b->n + k], &nb->s[k]);
			ST(b->n, b->n + nb->n);
			top_remove(m, p.b + 1);
			block_free(m, nb);
		}
	}
	if (p.i >= b->n)
		return (struct pos){p.b + 1, 0};
	return p;
}

/* Make addr a record boundary, p being wfind(m, addr): split the record
 * at p when it strictly contains addr.  Returns the position of the first
 * record with end > addr afterwards (the right part); *left, when not
 * NULL, receives the left part's (p when nothing was split off). */
static struct pos split_pos(struct mmf_map *m, struct pos p, uint64_t addr, struct pos *left)
{
	if (left)
		*left = p;
	if (!valid(m, p))
		return p;
	struct slot *s = at(m, p);
	if (s->start >= addr)
		return p;
	uint64_t start = s->start, attr = s->attr;
	ST(s->start, addr);
	struct pos l = insert_at(m, p, start, addr, attr);
	if (l.b == UINT32_MAX) /* no room: the left part dropped (only loses knowledge) */
		return p;
	if (left)
		*left = l;
	return next_pos(m, l);
}

static void split_at(struct mmf_map *m, uint64_t addr) { (void)split_pos(m, wfind(m, addr), addr, NULL); }

/* [start,end) made whole records, p being wfind(m, start): returns the
 * position of the first record with end > start afterwards.  The record
 * holding end is found by walking from p (the range's records are walked
 * anyway); when it is not p's, a split there may have moved p's record to
 * another block, and start is looked up again. */
static struct pos split_range(struct mmf_map *m, struct pos p, uint64_t start, uint64_t end)
{
	struct pos q = p, l;
	while (valid(m, q) && at(m, q)->end <= end)
		q = next_pos(m, q);
	int same = q.b == p.b && q.i == p.i;
	(void)split_pos(m, q, end, &l);
	/* one record held both ends: its left part holds start (an insert
	 * may have moved it to another block) */
	p = same ? l : wfind(m, start);
	return split_pos(m, p, start, NULL);
}

/* Merge touching records with equal attributes from the record before p
 * (a position) up to the record after hi. */
static void coalesce_pos(struct mmf_map *m, struct pos p, uint64_t hi)
{
	struct pos q;
	if (prev_pos(m, p, &q))
		p = q;
	while (valid(m, p)) {
		struct slot *s = at(m, p);
		if (s->start > hi)
			break;
		struct pos n = next_pos(m, p);
		if (!valid(m, n))
			break;
		struct slot *t = at(m, n);
		if (t->start == s->end && t->attr == s->attr) {
			uint64_t end = t->end;
			delete_at(m, n);
			/* p may have moved if its block absorbed the next one; it
			 * has not: deletion only shifts records after n. */
			ST(at(m, p)->end, end);
			continue;
		}
		p = n;
	}
}

/* The same from the record before lo. */
static void coalesce(struct mmf_map *m, uint64_t lo, uint64_t hi) { coalesce_pos(m, wfind(m, lo), hi); }

/* ---- writers ------------------------------------------------------------ */

static void remove_range(struct mmf_map *m, uint64_t start, uint64_t end)
{
	split_at(m, start);
	split_at(m, end);
	struct pos p = wfind(m, start);
	while (valid(m, p) && at(m, p)->start < end)
		p = delete_at(m, p);
}

static void set_range(struct mmf_map *m, uint64_t start, uint64_t end, uint64_t attr)
{
	remove_range(m, start, end);
	insert_at(m, wfind(m, start), start, end, attr);
}

void mmf_map_set(struct mmf_map *m, uint64_t start, uint64_t end, const struct mmf_attr *a)
{
	if (start >= end)
		return;
	wbegin(m);
	set_range(m, start, end, pack(a));
	coalesce(m, start, end);
	wend(m);
}

void mmf_map_remove(struct mmf_map *m, uint64_t start, uint64_t end)
{
	if (start >= end)
		return;
	wbegin(m);
	remove_range(m, start, end);
	wend(m);
}

static struct mmf_attr apply_upd(struct mmf_attr a, const struct mmf_upd *u)
{
	if (u->fields == MMF_F_PROT && !(u->adv_set_mask | u->adv_clear_mask | u->adv_forget)) {
		a.prot = u->a.prot; /* the common case: an mprotect */
		return a;
	}
	if (u->fields & MMF_F_PROT)
		a.prot = u->a.prot;
	if (u->fields & MMF_F_LOCK)
		a.lock = u->a.lock;
	if ((u->fields & MMF_F_LOCK_HELD) && a.lock != MMF_LOCK_NONE)
		a.lock = MMF_UNKNOWN;
	if (u->fields & MMF_F_OWNED)
		a.owned = u->a.owned;
	if (u->fields & MMF_F_SEALED)
		a.sealed = u->a.sealed;
	if (u->fields & MMF_F_PKEY)
		a.pkey = u->a.pkey;
	a.adv_known |= u->adv_set_mask | u->adv_clear_mask;
	a.adv_set |= u->adv_set_mask;
	a.adv_set &= (uint8_t)~u->adv_clear_mask;
	a.adv_known &= (uint8_t)~u->adv_forget;
	a.adv_set &= a.adv_known;
	return a;
}

/* u applied to the attribute word v.  An mprotect's update (the
 * protection alone) replaces the protection's byte in the word. */
static uint64_t upd_word(uint64_t v, const struct mmf_upd *u)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (u->fields == MMF_F_PROT && !(u->adv_set_mask | u->adv_clear_mask | u->adv_forget)) {
		_Static_assert(offsetof(struct mmf_attr, prot) == 0, "prot is the word's low byte");
		return (v & ~(uint64_t)0xff) | u->a.prot;
	}
#endif
	struct mmf_attr a = apply_upd(unpack(v), u);
	return pack(&a);
}

/* Returns 1 when some part of [start,end) has no record.  p: wfind(m,
 * start). */
static int update_range(struct mmf_map *m, struct pos p, uint64_t start, uint64_t end,
			const struct mmf_upd *u, int forget)
{
	p = split_range(m, p, start, end);
	struct pos first = p;
	struct mmf_attr unk = unknown_attr();
	uint64_t cur = start;
	int holes = 0;
	while (valid(m, p)) {
		struct slot *s = at(m, p);
		if (s->start >= end)
			break;
		if (s->start > cur)
			holes = 1;
		cur = s->end;
		ST(s->attr, forget ? pack(&unk) : upd_word(s->attr, u));
		p = next_pos(m, p);
	}
	coalesce_pos(m, first, end);
	return holes || cur < end;
}

int mmf_map_update(struct mmf_map *m, uint64_t start, uint64_t end, const struct mmf_upd *u)
{
	if (start >= end)
		return 0;
	/* Fast path: the range is exactly one record and stays distinct from
	 * its neighbours (a page flipping between two protections).  One
	 * atomic store of the attribute word: readers see the old or the new
	 * value, both whole, so the sequence counter need not move. */
	struct pos p = wfind(m, start);
	if (valid(m, p)) {
		struct slot *sl = at(m, p);
		if (sl->start == start && sl->end == end) {
			uint64_t nv = upd_word(sl->attr, u);
			if (nv == sl->attr)
				return 0;
			struct pos q, n = next_pos(m, p);
			int merge = (prev_pos(m, p, &q) && at(m, q)->end == start && at(m, q)->attr == nv) ||
				    (valid(m, n) && at(m, n)->start == end && at(m, n)->attr == nv);
			if (!merge) {
				ST(sl->attr, nv);
				return 0;
			}
		}
	}
	wbegin(m);
	int holes = update_range(m, p, start, end, u, 0);
	wend(m);
	return holes;
}

void mmf_map_fill(struct mmf_map *m, uint64_t start, uint64_t end, const struct mmf_attr *a)
{
	if (start >= end)
		return;
	uint64_t v = pack(a), cur = start;
	wbegin(m);
	while (cur < end) {
		struct pos p = wfind(m, cur);
		if (!valid(m, p) || at(m, p)->start >= end) {
			insert_at(m, p, cur, end, v);
			break;
		}
		if (at(m, p)->start > cur) {
			uint64_t hole_end = at(m, p)->start;
			if (insert_at(m, p, cur, hole_end, v).b == UINT32_MAX)
				break;
			cur = hole_end;
			continue;
		}
		cur = at(m, p)->end;
	}
	coalesce(m, start, end);
	wend(m);
}

void mmf_map_forget(struct mmf_map *m, uint64_t start, uint64_t end)
{
	if (start >= end)
		return;
	wbegin(m);
	(void)update_range(m, wfind(m, start), start, end, NULL, 1);
	wend(m);
}

void mmf_map_unlock_joined(struct mmf_map *m, uint64_t start, uint64_t end)
{
	struct mmf_rec r;
	struct mmf_upd u;
	uint64_t lo = start, hi = end;
	if (start >= end)
		return;
	while (lo && mmf_map_lookup(m, lo - 1, &r) && r.a.lock != MMF_LOCK_NONE && r.start < lo)
		lo = r.start;
	while (mmf_map_lookup(m, hi, &r) && r.a.lock != MMF_LOCK_NONE && r.end > hi)
		hi = r.end;
	memset(&u, 0, sizeof u);
	u.fields = MMF_F_LOCK;
	u.a.lock = MMF_UNKNOWN;
	(void)mmf_map_update(m, lo, hi, &u);
}

#define MOVE_MAX 256

void mmf_map_move(struct mmf_map *m, uint64_t old, uint64_t oldlen, uint64_t new_,
		  uint64_t newlen, int keep_old)
{
	struct slot buf[MOVE_MAX];
	int nbuf = 0, overflow = 0, have_tail = 0;
	uint64_t tail_attr = 0;
	uint64_t n = oldlen < newlen ? oldlen : newlen;

	wbegin(m);
	for (struct pos p = wfind(m, old); valid(m, p); p = next_pos(m, p)) {
		struct slot *s = at(m, p);
		if (s->start >= old + n)
			break;
		if (nbuf == MOVE_MAX) {
			overflow = 1;
			break;
		}
		uint64_t a = s->start < old ? old : s->start;
		uint64_t b = s->end > old + n ? old + n : s->end;
		slot_set(&buf[nbuf++], a - old + new_, b - old + new_, s->attr);
	}
	if (newlen > oldlen && oldlen > 0) {
		struct pos p = wfind(m, old + oldlen - 1);
		if (valid(m, p) && at(m, p)->start <= old + oldlen - 1) {
			have_tail = 1;
			tail_attr = at(m, p)->attr;
		}
	}
	if (!keep_old)
		remove_range(m, old, old + oldlen);
	remove_range(m, new_, new_ + newlen);
	if (!overflow)
		for (int i = 0; i < nbuf; i++)
			insert_at(m, wfind(m, buf[i].start), buf[i].start, buf[i].end, buf[i].attr);
	if (have_tail && !overflow)
		insert_at(m, wfind(m, new_ + oldlen), new_ + oldlen, new_ + newlen, tail_attr);
	coalesce(m, new_, new_ + newlen);
	wend(m);
}

void mmf_map_fork_child(struct mmf_map *m)
{
	struct mmf_attr unk = unknown_attr();
	wbegin(m);
	struct pos p = {0, 0};
	while (valid(m, p)) {
		struct slot *s = at(m, p);
		struct mmf_attr a = unpack(s->attr);
		if ((a.adv_known & MMF_ADV_DONTFORK) && (a.adv_set & MMF_ADV_DONTFORK)) {
			p = delete_at(m, p);
			continue;
		}
		if (!(a.adv_known & MMF_ADV_DONTFORK))
			a = unk;
		a.lock = MMF_LOCK_NONE;
		ST(s->attr, pack(&a));
		p = next_pos(m, p);
	}
	coalesce(m, 0, UINT64_MAX);
	wend(m);
}

int mmf_map_update_hint(struct mmf_map *m, const struct mmf_hint *h, const struct mmf_upd *u)
{
	/* The sequence only moves when records move; a record's attribute
	 * word alone changes in place.  So an unchanged sequence means h->b
	 * and h->i still name the same slot. */
	if (!h->b || m->seq != h->seq)
		return 0;
	struct mmf_block *b = (struct mmf_block *)h->b;
	uint32_t i = h->i;
	if (i == 0 || i + 1 >= b->n)
		return 0; /* neighbours in other blocks: let the general path merge */
	struct slot *sl = &b->s[i];
	if (sl->start != h->start || sl->end != h->end)
		return 0;
	uint64_t nv = upd_word(sl->attr, u);
	if (nv == sl->attr)
		return 1;
	if ((b->s[i - 1].end == h->start && b->s[i - 1].attr == nv) ||
	    (b->s[i + 1].start == h->end && b->s[i + 1].attr == nv))
		return 0;
	ST(sl->attr, nv);
	return 1;
}

/* mmf_map_reprot's second half, where records move: the record r names
 * becomes [rs,s), [s,e) at nv and [e,re) (the parts that are not empty),
 * and [s,e) takes in a neighbour that now equals it. */
static __attribute__((noinline)) int reshape(struct mmf_map *m, const struct mmf_slotref *r,
					     uint64_t s, uint64_t e, uint64_t v, uint64_t nv,
					     struct mmf_slotref *out)
{
	struct mmf_block *b = (struct mmf_block *)r->b;
	uint32_t i = r->i, n = b->n, first = i, last = i;
	uint64_t rs = r->start, re = r->end, lo = s, hi = e;
	if (s == rs && i > 0 && b->s[i - 1].attr == nv && b->s[i - 1].end == s) {
		lo = b->s[i - 1].start;
		first = i - 1;
	}
	if (e == re && i + 1 < n && b->s[i + 1].attr == nv && b->s[i + 1].start == e) {
		hi = b->s[i + 1].end;
		last = i + 1;
	}
	uint32_t nnew = 1 + (lo > rs) + (hi < re), nold = last - first + 1;
	uint32_t nn = n + nnew - nold;
	if (nn > MMF_BLOCK_CAP || (nn < n && nn < MMF_BLOCK_CAP / 4 && m->nblocks > 1))
		return 0;
	wbegin(m);
	for (uint32_t k = n; nn > n && k-- > last + 1;)
		slot_copy(&b->s[k + nn - n], &b->s[k]);
	uint32_t j = first;
	if (lo > rs)
		slot_set(&b->s[j++], rs, s, v);
	uint32_t mid = j;
	slot_set(&b->s[j++], lo, hi, nv);
	if (hi < re)
		slot_set(&b->s[j++], e, re, v);
	for (uint32_t k = last + 1; nn < n && k < n; k++)
		slot_copy(&b->s[j++], &b->s[k]);
	ST(b->n, nn);
	m->nrecs = m->nrecs + nn - n;
	wend(m);
	out->start = lo;
	out->end = hi;
	out->attr = &b->s[mid].attr;
	out->b = b;
	out->seq = m->seq;
	out->i = mid;
	return MMF_REPROT_MOVED;
}

/* The attribute word v after an mprotect to prot (the mlock state made
 * unknown when lock_unknown and it is not MMF_LOCK_NONE: MMF_F_LOCK_HELD). */
static inline uint64_t reprot_word(uint64_t v, uint8_t prot, int lock_unknown)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* whole-word arithmetic: byte stores into a register's parts would
	 * stall its next full read */
	_Static_assert(offsetof(struct mmf_attr, lock) == 1, "lock is the word's second byte");
	_Static_assert(MMF_LOCK_NONE == 0, "an unlocked range's lock byte is 0");
	uint64_t nv = (v & ~(uint64_t)0xff) | prot;
	if (lock_unknown && (nv & 0xff00))
		nv |= (uint64_t)MMF_UNKNOWN << 8;
	return nv;
#else
	union {
		uint64_t v;
		struct mmf_attr a;
	} w = {.v = v};
	w.a.prot = prot;
	if (lock_unknown && w.a.lock != MMF_LOCK_NONE)
		w.a.lock = MMF_UNKNOWN;
	return w.v;
#endif
}

int mmf_map_reprot(struct mmf_map *m, const struct mmf_slotref *r, uint64_t s, uint64_t e,
		   uint8_t prot, int lock_unknown, uint64_t v, struct mmf_slotref *out)
{
	/* an unchanged sequence: the slot holds the record r names (only the
	 * attribute word may have changed, in place) */
	if (!r->attr || m->seq != r->seq || s < r->start || e > r->end || s >= e)
		return 0;
	struct mmf_block *b = (struct mmf_block *)r->b;
	uint32_t i = r->i;
	uint64_t nv = reprot_word(v, prot, lock_unknown);
	if (nv == v) {
		ST(b->s[i].attr, nv); /* (mmf_map_prot_changing's mark off) */
		return MMF_REPROT_IN_PLACE;
	}
	/* the neighbours, to be merged with when they now equal the record,
	 * must be in this block (or be none: the map's first or last record) */
	int moved = s != r->start || e != r->end;
	if (s == r->start) {
		if (i > 0)
			moved |= b->s[i - 1].attr == nv && b->s[i - 1].end == s;
		else if (m->top[0] != b)
			return 0;
	}
	if (e == r->end) {
		if (i + 1 < b->n)
			moved |= b->s[i + 1].attr == nv && b->s[i + 1].start == e;
		else if (m->top[m->nblocks - 1] != b)
			return 0;
	}
	if (moved)
		return reshape(m, r, s, e, v, nv, out);
	/* one record, its word alone */
	ST(b->s[i].attr, nv);
	return MMF_REPROT_IN_PLACE;
}

int mmf_map_reprot_whole(struct mmf_map *m, const struct mmf_slotref *r, uint8_t prot,
			 int lock_unknown, uint64_t v)
{
	if (m->seq != r->seq)
		return 0;
	struct mmf_block *b = (struct mmf_block *)r->b;
	uint32_t i = r->i;
	uint64_t nv = reprot_word(v, prot, lock_unknown);
	if (i > 0 ? b->s[i - 1].attr == nv && b->s[i - 1].end == r->start : m->top[0] != b)
		return 0;
	if (i + 1 < b->n ? b->s[i + 1].attr == nv && b->s[i + 1].start == r->end
			 : m->top[m->nblocks - 1] != b)
		return 0;
	ST(b->s[i].attr, nv);
	return 1;
}

/* ---- debugging ---------------------------------------------------------- */

uint64_t mmf_map_count(const struct mmf_map *m) { return m->nrecs; }

int mmf_map_walk(const struct mmf_map *m, int (*fn)(const struct mmf_rec *, void *),
		 void *arg)
{
	for (uint32_t b = 0; b < m->nblocks; b++)
		for (uint32_t i = 0; i < m->top[b]->n; i++) {
			struct mmf_rec r = {m->top[b]->s[i].start, m->top[b]->s[i].end,
					    unpack(m->top[b]->s[i].attr)};
			int v = fn(&r, arg);
			if (v)
				return v;
		}
	return 0;
}

int mmf_map_validate(const struct mmf_map *m)
{
	uint64_t count = 0, prev_end = 0, prev_attr = 0;
	int first = 1;
	for (uint32_t b = 0; b < m->nblocks; b++) {
		const struct mmf_block *bl = m->top[b];
		if (!bl || bl->n == 0 || bl->n > MMF_BLOCK_CAP)
			return __LINE__;
		for (uint32_t i = 0; i < bl->n; i++) {
			const struct slot *s = &bl->s[i];
			if (s->start >= s->end)
				return __LINE__;
			if (!first && s->start < prev_end)
				return __LINE__;
			if (!first && s->start == prev_end && s->attr == prev_attr)
				return __LINE__;
			first = 0;
			prev_end = s->end;
			prev_attr = s->attr;
			count++;
		}
	}
	if (count != m->nrecs)
		return __LINE__;
	for (uint32_t b = m->nblocks; b < MMF_TOP_CAP && b < m->nblocks + 4; b++)
		if (m->top[b])
			return __LINE__;
	return 0;
}
