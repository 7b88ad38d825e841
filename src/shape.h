/* Range shaping (docs/DESIGN.md 5): before a call that changes something is
 * forwarded, its range may be trimmed to the pages that change (one call
 * without an unchanged prefix and suffix, or one call per changing run) or
 * widened to large-folio boundaries over pages that already have the
 * target state.  Only over owned, unsealed, wholly known records, for
 * mprotect/pkey_mprotect(-1) and the flag-setting madvise advices.
 *
 * Why the result is the caller's: pages added or left out already have the
 * target state and are owned and unsealed, so the kernel would succeed on
 * them and change nothing (the same proof that justifies a skip).  If a
 * shaped call fails, the caller's own call is forwarded and its answer
 * returned, so the errno is the kernel's for the caller's arguments and the
 * state is what that call leaves (mprotect and flag advice are idempotent
 * and fail at the same first bad VMA). */
#ifndef MMF_SHAPE_H
#define MMF_SHAPE_H

#include <stdint.h>

#include "engine.h"
#include "folio.h"
#include "map.h"

#define MMF_SHAPE_PIECES 8 /* a split into more pieces is not considered */

enum { MMF_SHAPED_ASIS, MMF_SHAPED_TRIMMED, MMF_SHAPED_WIDENED };

/* The cost model, in nanoseconds (measured by tools/bench_shape.sh; the
 * values and the runs they come from are in README.md, "Range shaping"). */
struct mmf_shape_cost {
	uint32_t call_ns;   /* one more mprotect system call (a split's piece) */
	uint32_t vma_ns;    /* the kernel walking one VMA it does not change */
	uint32_t widen_ns;  /* what widening over a folio boundary saves */
	uint32_t fixed_ns;  /* the resolution: a predicted saving must exceed it */
};
extern const struct mmf_shape_cost mmf_shape_cost_default;

struct mmf_shape_plan {
	int kind; /* MMF_SHAPED_* */
	int n;    /* pieces to forward, in address order */
	uint64_t s[MMF_SHAPE_PIECES], e[MMF_SHAPE_PIECES];
};

/* Remembers the policy (MMF_SHAPE_*) and the folio sizes in use. */
void mmf_shape_init(int policy, const struct mmf_folio_sys *f);
int mmf_shape_policy(void);

/* The folio granule for memory with attributes a: the largest THP/mTHP size
 * the kernel uses there (64 KiB on arm64: contiguous PTEs), or, when
 * force is set and none is in use, 64 KiB; 0 for none. */
uint64_t mmf_shape_granule(const struct mmf_attr *a, int force);

/* Plans how to forward a call that asks for w on [s,e) (page aligned, and
 * mmf_map_check said MMF_CHANGE).  policy MMF_SHAPE_*; cost for auto.
 * Reads m with lookups: the caller holds the writer lock (or the map is
 * not changing).  Returns p->kind; ASIS means forward the caller's call. */
int mmf_shape_plan(const struct mmf_map *m, uint64_t s, uint64_t e, const struct mmf_want *w,
		   int policy, const struct mmf_shape_cost *cost, struct mmf_shape_plan *p);

/* Writer lock held.  Plans op's call on [s,e) and, when shaped, forwards the
 * pieces through fwd (forward() of the engine: stats per piece); on a
 * failure forwards op itself.  Returns 1 with *res set when it forwarded,
 * 0 when the caller should forward op as asked. */
int mmf_shape_forward(const struct mmf_map *m, const struct mmf_op *op, uint64_t s, uint64_t e,
		      const struct mmf_want *w, struct mmf_tstats *t,
		      long (*fwd)(const struct mmf_op *, struct mmf_tstats *, uint64_t), long *res);

#endif
