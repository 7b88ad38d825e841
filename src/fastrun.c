/* The engine's side of the fast paths (fast.h): the gate, and an mprotect
 * that changes exactly the record of the thread's hint. */
#include "core.h"

#include "fast.h"
#include "profile.h"
#include "shape.h"
#include "thp.h"
#include "wx.h"

/* An mprotect inside the record of this thread's hint (fast.h: the gate
 * open, so no section, batch or lazy mode on this thread; the record
 * owned, unsealed, of known protection): what decide() does for it (the
 * skip question answered, no shaping for a range inside one record: auto
 * leaves it as asked), without asking again.  The record is judged again
 * under the lock (another thread may have changed it since); when it no
 * longer qualifies, decide() takes the call.  The map is updated in the
 * record's block (mmf_map_reprot: in place, or split off, or merged with
 * its neighbours), else by record().  W^X: mmf_wx_before acts only on
 * executable records, mmf_wx_after only on requests for RW or RX (the
 * detector's bookkeeping, for RW requests on records that are not
 * executable, is mmf_wx_rw_done). */
long mmf_run_change(struct mmf_op *op, uint64_t v0, uint32_t g)
{
	struct mmf_slotref fr, nr;
	uint64_t a = (uint64_t)op->a[0], asked = (uint64_t)op->a[1];
	int prot = (int)op->a[2];
	/* one copy of the hint; a handler that ran since it was read may have
	 * changed it (the copy fails) */
	if (!mmf_fast_copy(g, &fr) || !mmf_fast_changes(&fr, prot, v0))
		return mmf_run(op);
	struct mmf_tstats *t = mmf_fast_tls.t;
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_CALLS, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_ASKED, asked);
	if (!wenter_try()) /* empties the hint */
		return mmf_bypass(op, t, asked);
	uint64_t v = PLD(*fr.attr);
	if (map.seq != fr.seq || (v & mmf_fast_cmask) != mmf_fast_cwant) {
		wleave();
		return decide(op, t, asked);
	}
	int exec = (prot | mmf_fast_prot(v)) & PROT_EXEC;
	if (exec)
		mmf_wx_before(op);
	long r = forward(op, t, asked);
	uint64_t e = (a + asked + mmf_fast_pgmask) & ~mmf_fast_pgmask;
	int d = r == 0 ? mmf_map_reprot(&map, &fr, a, e, (uint8_t)prot, safe_state.mlock_seen, &nr) : 0;
	if (!d) {
		struct mmf_hint h = {.b = a == fr.start && e == fr.end ? fr.b : NULL, .i = fr.i,
				     .seq = fr.seq, .start = a, .end = e, .r = fr};
		record(op, r, &h);
	}
	if (exec)
		mmf_wx_after(op, r);
	else if (r == 0 && prot == (PROT_READ | PROT_WRITE))
		mmf_wx_rw_done(a, e); /* what mmf_wx_after does for it */
	mmf_thp_tick(PLD(folio_policy.thp_disabled));
	wleave_quick();
	if (d == MMF_REPROT_IN_PLACE)
		mmf_fast_restore(g, fr.end); /* the slot holds the record still */
	else if (d == MMF_REPROT_MOVED && __atomic_load_n(&map.seq, __ATOMIC_RELAXED) == nr.seq)
		mmf_fast_learn(&nr); /* the record that holds the range now */
	return r;
}
