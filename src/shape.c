/* Range shaping: see shape.h for the contract and README.md ("Range
 * shaping") for the cost model and the measurements behind it. */
#include "shape.h"

#include <errno.h>
#include <string.h>

#include "sys.h"

#define KIB64 (64u << 10)

/* Measured on the 2-vCPU x86_64 KVM guest, Linux 6.18, with 4 KiB pages,
 * 64 KiB mTHP and PMD THP (tools/bench_shape.sh; figures in README.md
 * "Range shaping"): the kernel walks a VMA it leaves unchanged in 55-70 ns
 * (what trimming it saves, net of mmfold's own walk); one more mprotect
 * call (a split's piece) costs 0.8-2.2 us; widening saves nothing, because
 * pages that already have the target state are a VMA of their own that the
 * kernel neither splits nor touches, and it merges the changed range with
 * it either way (the VMA layout is the same, tests/progs/shape.c checks
 * it).  Savings below 1.5 us were not resolved by the benchmark on this
 * noisy machine (trimming 8 VMAs measured from 0.99x to 1.43x), so the
 * model does not act on them.  arm64 contpte was not measured: widening
 * gets no credit there either until it is. */
const struct mmf_shape_cost mmf_shape_cost_default = {
	.call_ns = 2200,
	.vma_ns = 55,
	.widen_ns = 0,
	.fixed_ns = 1500,
};

static int policy = MMF_SHAPE_OFF;
static struct mmf_folio_sys sys_folio;

void mmf_shape_init(int pol, const struct mmf_folio_sys *f)
{
	policy = pol;
	sys_folio = *f;
}

int mmf_shape_policy(void) { return policy; }

uint64_t mmf_shape_granule(const struct mmf_attr *a, int force)
{
	uint64_t g = 0;
#if defined(__aarch64__)
	(void)a;
	/* 64 KiB folios: 16 contiguous PTEs with 4 KiB pages, an order-2
	 * mTHP folio with 16 KiB pages; none with 64 KiB pages (g must
	 * exceed the page) */
	g = KIB64;
#else
	int advised = (a->adv_known & MMF_ADV_HUGEPAGE) && (a->adv_set & MMF_ADV_HUGEPAGE);
	int nohuge = (a->adv_known & MMF_ADV_NOHUGEPAGE) && (a->adv_set & MMF_ADV_NOHUGEPAGE);
	for (int i = 0; i < sys_folio.nsizes && !nohuge; i++)
		if (sys_folio.state[i] == MMF_THP_ALWAYS ||
		    (sys_folio.state[i] == MMF_THP_MADVISE && advised))
			g = sys_folio.size[i];
	if (!g && force)
		g = KIB64;
#endif
	return g > mmf_page_size() ? g : 0;
}

/* Is every page of [a,b) in an owned, unsealed record that already
 * satisfies w?  *nrec gets the records seen. */
static int proven(const struct mmf_map *m, uint64_t a, uint64_t b, const struct mmf_want *w,
		  int *nrec)
{
	struct mmf_rec r;
	*nrec = 0;
	while (a < b) {
		if (!mmf_map_lookup(m, a, &r) || mmf_map_judge(&r.a, w) != MMF_NOOP_PROVEN)
			return 0;
		++*nrec;
		a = r.end;
	}
	return 1;
}

int mmf_shape_plan(const struct mmf_map *m, uint64_t s, uint64_t e, const struct mmf_want *w,
		   int pol, const struct mmf_shape_cost *cost, struct mmf_shape_plan *p)
{
	struct mmf_rec r, first, last;
	p->kind = MMF_SHAPED_ASIS;
	p->n = 0;
	if (pol == MMF_SHAPE_OFF || !mmf_map_lookup(m, s, &r))
		return p->kind;
	/* The common case, one record: nothing to trim; widening is all that
	 * could apply, and auto gives it no credit where it saves nothing. */
	if (pol == MMF_SHAPE_TRIM && r.end >= e)
		return p->kind;
	if (pol == MMF_SHAPE_AUTO && r.end >= e && cost->widen_ns == 0)
		return p->kind;

	/* Walk the records: runs of changing records, and the counts of
	 * records already at the target before, between and after them. */
	uint64_t rs[MMF_SHAPE_PIECES], re[MMF_SHAPE_PIECES];
	int nruns = 0, overflow = 0, idle = 0, lead = 0, mid = 0;
	uint64_t cur = s;
	for (;;) {
		if (r.start > cur || !r.a.owned || r.a.sealed != 0)
			return p->kind; /* a hole, or a record that proves nothing */
		uint64_t b = r.end < e ? r.end : e;
		if (mmf_map_judge(&r.a, w) == MMF_NOOP_PROVEN) {
			idle++;
		} else {
			if (!nruns)
				first = r;
			last = r;
			if (nruns && !idle) {
				re[nruns - 1] = b;
			} else if (nruns == MMF_SHAPE_PIECES) {
				overflow = 1;
				re[nruns - 1] = b;
			} else {
				if (nruns)
					mid += idle;
				else
					lead = idle;
				rs[nruns] = cur;
				re[nruns++] = b;
			}
			idle = 0;
		}
		cur = b;
		if (cur >= e)
			break;
		if (!mmf_map_lookup(m, cur, &r))
			return p->kind;
	}
	if (!nruns)
		return p->kind; /* the map changed under a caller without the lock */
	int trail = idle;

	/* Candidates and what each saves by the model (ns). */
	long save_trim = 0, save_split = 0, save_widen = 0; /* 0: not a candidate */
	uint64_t ws = s, we = e;
	if (lead + trail > 0)
		save_trim = (long)cost->vma_ns * (lead + trail) - (long)cost->fixed_ns;
	if (nruns > 1 && !overflow)
		save_split = (long)cost->vma_ns * (lead + trail + mid) -
			     (long)cost->call_ns * (nruns - 1) - (long)cost->fixed_ns;
	if (pol != MMF_SHAPE_TRIM && !lead && !trail) {
		int force = pol == MMF_SHAPE_WIDEN, added = 0, n, sides = 0;
		uint64_t g = mmf_shape_granule(&first.a, force);
		if (g && (s & (g - 1)) && proven(m, s & ~(g - 1), s, w, &n)) {
			ws = s & ~(g - 1);
			added += n;
			sides++;
		}
		g = mmf_shape_granule(&last.a, force);
		if (g && (e & (g - 1)) && e + g > e && proven(m, e, (e + g - 1) & ~(g - 1), w, &n)) {
			we = (e + g - 1) & ~(g - 1);
			added += n;
			sides++;
		}
		if (sides)
			save_widen = (long)cost->widen_ns * sides - (long)cost->vma_ns * added -
				     (long)cost->fixed_ns;
	}

	int pick = MMF_SHAPED_ASIS, split = 0;
	if (pol == MMF_SHAPE_TRIM) {
		split = nruns > 1 && !overflow;
		pick = split || lead + trail > 0 ? MMF_SHAPED_TRIMMED : MMF_SHAPED_ASIS;
	} else if (pol == MMF_SHAPE_WIDEN) {
		pick = ws != s || we != e ? MMF_SHAPED_WIDENED : MMF_SHAPED_ASIS;
	} else {
		long best = 0;
		if (save_trim > best) {
			best = save_trim;
			pick = MMF_SHAPED_TRIMMED;
		}
		if (save_split > best) {
			best = save_split;
			pick = MMF_SHAPED_TRIMMED;
			split = 1;
		}
		if (save_widen > best) {
			best = save_widen;
			pick = MMF_SHAPED_WIDENED;
			split = 0;
		}
	}
	if (pick == MMF_SHAPED_WIDENED) {
		p->n = 1;
		p->s[0] = ws;
		p->e[0] = we;
	} else if (pick == MMF_SHAPED_TRIMMED && split) {
		p->n = nruns;
		memcpy(p->s, rs, sizeof rs[0] * (size_t)nruns);
		memcpy(p->e, re, sizeof re[0] * (size_t)nruns);
	} else if (pick == MMF_SHAPED_TRIMMED) {
		p->n = 1;
		p->s[0] = rs[0];
		p->e[0] = re[nruns - 1];
	}
	p->kind = pick;
	return pick;
}

int mmf_shape_forward(const struct mmf_map *m, const struct mmf_op *op, uint64_t s, uint64_t e,
		      const struct mmf_want *w, struct mmf_tstats *t,
		      long (*fwd)(const struct mmf_op *, struct mmf_tstats *, uint64_t), long *res)
{
	struct mmf_shape_plan p;
	if (policy == MMF_SHAPE_OFF ||
	    mmf_shape_plan(m, s, e, w, policy, &mmf_shape_cost_default, &p) == MMF_SHAPED_ASIS)
		return 0;
	long r = 0;
	uint64_t bytes = 0;
	int err0 = errno; /* a refused piece must not show in it */
	for (int i = 0; i < p.n; i++) {
		struct mmf_op o = *op;
		o.a[0] = (long)p.s[i];
		o.a[1] = (long)(p.e[i] - p.s[i]);
		bytes += p.e[i] - p.s[i];
		r = fwd(&o, t, p.e[i] - p.s[i]);
		if (mmf_sys_err(r))
			break;
	}
	if (mmf_sys_err(r)) {
		/* the piece's error is not the program's (fwd counted it): the
		 * call as asked decides what the program sees */
		mmf_stat_add(t, op->kind, MMF_S_ERRORS, (uint64_t)-1);
		mmf_event(MMF_E_SHAPE_FALLBACK);
		errno = err0;
		*res = fwd(op, t, e - s);
		return 1;
	}
	mmf_event_add(MMF_E_SHAPED_PIECES, (uint64_t)p.n);
	if (p.kind == MMF_SHAPED_WIDENED) {
		mmf_event(MMF_E_SHAPED_WIDENED);
		mmf_event_add(MMF_E_SHAPED_WIDENED_BYTES, bytes - (e - s));
	} else {
		mmf_event(MMF_E_SHAPED_TRIMMED);
		mmf_event_add(MMF_E_SHAPED_TRIMMED_BYTES, (e - s) - bytes);
	}
	*res = r;
	return 1;
}
