/* The shadow map's readers (see map.h for the contract): no lock, every
 * load atomic, validated with the map's sequence counter.  The writers are
 * in map.c. */
#include "mapint.h"

/* ---- readers ------------------------------------------------------------ */

/* A reader retries while a writer is busy: up to READ_SPINS pauses in all
 * (tens of microseconds; a writer's section is far shorter) before it
 * gives up and the caller forwards. */
#define READ_SPINS 20000

/* Reader-side search: first record with end > addr, all loads atomic and
 * every index clamped, because a writer may be moving things under us. */
static inline __attribute__((always_inline)) int
rfind(const struct mmf_map *m, uint64_t addr, const struct mmf_block **bo, uint32_t *bi,
      uint32_t *io)
{
	struct mmf_block **top = m->top;
	uint32_t nb = LD(m->nblocks);
	if (nb > MMF_TOP_CAP)
		return 0;
	uint32_t lo = 0, hi = nb;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		const struct mmf_block *b = LD(top[mid]);
		if (!b)
			return 0;
		uint32_t n = LD(b->n);
		if (n == 0 || n > MMF_BLOCK_CAP)
			return 0;
		if (LD(b->s[n - 1].end) > addr)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo >= nb)
		return -1; /* past the last record */
	const struct mmf_block *b = LD(top[lo]);
	if (!b)
		return 0;
	uint32_t n = LD(b->n);
	if (n == 0 || n > MMF_BLOCK_CAP)
		return 0;
	uint32_t l = 0, h = n;
	while (l < h) {
		uint32_t mid = (l + h) / 2;
		if (LD(b->s[mid].end) > addr)
			h = mid;
		else
			l = mid + 1;
	}
	if (l >= n)
		return 0;
	*bo = b;
	*bi = lo;
	*io = l;
	return 1;
}

static int judge(struct mmf_attr a, const struct mmf_want *w)
{
	int ok;
	switch (w->what) {
	case MMF_Q_PROT:
		ok = mmf_prot_known(a.prot) && a.prot == w->prot;
		break;
	case MMF_Q_PROT_PKEY:
		ok = mmf_prot_known(a.prot) && a.prot == w->prot && a.pkey >= 0 &&
		     a.pkey == w->pkey;
		break;
	case MMF_Q_LOCK:
		ok = a.lock != MMF_UNKNOWN && a.lock == w->lock;
		break;
	case MMF_Q_ADV:
		ok = (a.adv_known & w->adv_bit) &&
		     (((a.adv_set & w->adv_bit) != 0) == (w->adv_val != 0));
		break;
	default:
		ok = 0;
	}
	if (!ok || a.sealed == 1)
		return MMF_CHANGE;
	if (!a.owned || a.sealed == MMF_UNKNOWN)
		return MMF_NOOP_UNPROVEN;
	return MMF_NOOP_PROVEN;
}

int mmf_map_judge(const struct mmf_attr *a, const struct mmf_want *w) { return judge(*a, w); }

static int check_once(const struct mmf_map *m, uint64_t start, uint64_t end,
		      const struct mmf_want *w, struct mmf_hint *h)
{
	const struct mmf_block *b;
	uint32_t bi, i;
	int r = rfind(m, start, &b, &bi, &i);
	if (r <= 0)
		return r < 0 ? MMF_CHANGE : MMF_BUSY;
	int verdict = MMF_NOOP_PROVEN;
	uint64_t cur = start;
	for (;;) {
		uint64_t s = LD(b->s[i].start), e = LD(b->s[i].end);
		if (s > cur || e <= cur)
			return MMF_CHANGE; /* a hole (or a torn read: seq decides) */
		if (h && s == start && e == end) {
			h->b = b;
			h->i = i;
			h->start = start;
			h->end = end;
		}
		if (h && cur == start && end <= e) {
			h->r.attr = &b->s[i].attr;
			h->r.start = s;
			h->r.end = e;
			h->r.b = b;
			h->r.i = i;
		}
		int v = judge(unpack(LD(b->s[i].attr)), w);
		if (v > verdict)
			verdict = v;
		if (verdict == MMF_CHANGE || e >= end)
			return verdict;
		cur = e;
		if (++i >= LD(b->n) || i >= MMF_BLOCK_CAP) {
			uint32_t nb = LD(m->nblocks);
			if (++bi >= nb || bi >= MMF_TOP_CAP)
				return MMF_CHANGE;
			b = LD(m->top[bi]);
			if (!b)
				return MMF_BUSY;
			i = 0;
			if (LD(b->n) == 0)
				return MMF_BUSY;
		}
	}
}

/* Waits for an even sequence number; 0 when the spin budget ran out. */
static int read_begin(const struct mmf_map *m, uint32_t *seq, long *budget)
{
	for (;;) {
		uint32_t s1 = __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE);
		if (!(s1 & 1)) {
			*seq = s1;
			return 1;
		}
		if (--*budget <= 0)
			return 0;
		cpu_relax();
	}
}

static int read_end(const struct mmf_map *m, uint32_t seq)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return LD(m->seq) == seq;
}

int mmf_map_check_hint(const struct mmf_map *m, uint64_t start, uint64_t end,
		       const struct mmf_want *w, struct mmf_hint *h)
{
	if (h) {
		h->b = NULL;
		h->r.attr = NULL;
	}
	if (start >= end)
		return MMF_CHANGE;
	long budget = READ_SPINS;
	uint32_t seq;
	while (read_begin(m, &seq, &budget)) {
		int v = LD(m->full) ? MMF_CHANGE : check_once(m, start, end, w, h);
		if (read_end(m, seq) && v != MMF_BUSY) {
			if (h)
				h->seq = h->r.seq = seq;
			return v;
		}
		if (h) {
			h->b = NULL;
			h->r.attr = NULL;
		}
		if (--budget <= 0)
			break;
	}
	return MMF_BUSY;
}

/* One try, no wait: a writer busy or anything torn gives 0 at once (the
 * caller takes the general path, which waits). */
int mmf_map_find(const struct mmf_map *m, uint64_t start, uint64_t end, uint64_t mask,
		 uint64_t want, const struct mmf_slotref *near, struct mmf_slotref *out,
		 uint64_t *word)
{
	uint32_t seq = __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE);
	if ((seq & 1) || LD(m->full))
		return 0;
	const struct mmf_block *b = NULL;
	uint32_t bi, i = 0;
	/* the two records after near's first (a heap walked in address
	 * order), while the map is as near was taken (its slot is where it
	 * was) and the range starts at or after near's end, before the
	 * second's: the first of them that ends above start is what rfind
	 * would find; the slots read are judged below like rfind's */
	if (near && near->seq == seq && near->b && near->i < MMF_BLOCK_CAP - 2) {
		const struct mmf_block *nb = near->b;
		uint32_t k = near->i + 1;
		if (k + 1 < LD(nb->n) && LD(nb->s[k - 1].end) <= start &&
		    LD(nb->s[k + 1].end) > start) {
			b = nb;
			i = LD(nb->s[k].end) > start ? k : k + 1;
		}
	}
	if (!b && rfind(m, start, &b, &bi, &i) <= 0)
		return 0;
	uint64_t s = LD(b->s[i].start), e = LD(b->s[i].end), w = LD(b->s[i].attr);
	if (s > start || e < end || (w & mask) != want || !read_end(m, seq))
		return 0;
	*out = (struct mmf_slotref){
		.start = s, .end = e, .attr = &b->s[i].attr, .b = b, .seq = seq, .i = i};
	*word = w;
	return 1;
}

int mmf_map_check(const struct mmf_map *m, uint64_t start, uint64_t end,
		  const struct mmf_want *w)
{
	return mmf_map_check_hint(m, start, end, w, NULL);
}


static int lookup(const struct mmf_map *m, uint64_t addr, struct mmf_rec *out, int next)
{
	long budget = 1L << 40; /* tests and debugging only: wait as long as it takes */
	uint32_t seq;
	while (read_begin(m, &seq, &budget)) {
		const struct mmf_block *b;
		uint32_t bi, i;
		struct mmf_rec r = {0, 0, {0, 0, 0, 0, 0, 0, 0}};
		int f = rfind(m, addr, &b, &bi, &i), found = 0;
		if (f > 0) {
			r.start = LD(b->s[i].start);
			r.end = LD(b->s[i].end);
			r.a = unpack(LD(b->s[i].attr));
			found = next || r.start <= addr;
		}
		if (read_end(m, seq) && f >= 0) {
			if (found)
				*out = r;
			return found;
		}
		if (read_end(m, seq) && f < 0)
			return 0;
	}
	return 0;
}

int mmf_map_lookup(const struct mmf_map *m, uint64_t addr, struct mmf_rec *out)
{
	return lookup(m, addr, out, 0);
}

int mmf_map_lookup_next(const struct mmf_map *m, uint64_t addr, struct mmf_rec *out)
{
	return lookup(m, addr, out, 1);
}
