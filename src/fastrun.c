/* The engine's side of the fast paths (fast.h): the gate, and an mprotect
 * that changes exactly the record of the thread's hint. */
#include "core.h"

#include "fast.h"
#include "profile.h"
#include "shape.h"
#include "thp.h"
#include "wx.h"

/* An mprotect that changes exactly the record of this thread's hint
 * (fast.h: the gate open, so no section, batch or lazy mode on this
 * thread; the record owned, unsealed, of known protection): what decide()
 * does for it (the skip question answered, no shaping for one record),
 * without asking again.  The record is judged again under the lock
 * (another thread may have changed it since); when it no longer qualifies,
 * decide() takes the call.  W^X: mmf_wx_before acts only on executable
 * records, mmf_wx_after only on requests for RW or RX (the detector's
 * bookkeeping, for RW requests on records that are not executable, is
 * mmf_wx_rw_done). */
long mmf_run_change(struct mmf_op *op, uint64_t v0, uint32_t g)
{
	struct mmf_fast_rec fr;
	uint64_t asked = (uint64_t)op->a[1];
	int prot = (int)op->a[2];
	/* one copy of the hint; a handler that ran since it was read may have
	 * changed it (the copy fails) */
	if (!mmf_fast_copy(g, &fr) || !mmf_fast_changes(&fr, (uint64_t)op->a[0], asked, prot, v0))
		return mmf_run(op);
	struct mmf_tstats *t = mmf_fast_tls.t;
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_CALLS, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_ASKED, asked);
	struct mmf_hint h = {fr.b, fr.i, fr.seq, fr.start, fr.end, fr.attr, fr.start, fr.end};
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
	int in_place = r == 0 && mmf_map_set_prot_hint(&map, &h, (uint8_t)prot, safe_state.mlock_seen);
	if (!in_place)
		record(op, r, &h);
	if (exec)
		mmf_wx_after(op, r);
	else if (r == 0 && prot == (PROT_READ | PROT_WRITE))
		mmf_wx_rw_done(fr.start, fr.end); /* what mmf_wx_after does for it */
	mmf_thp_tick(PLD(folio_policy.thp_disabled));
	wleave_quick();
	if (in_place) /* the slot holds the record still, at the same sequence */
		mmf_fast_restore(g, fr.end);
	return r;
}
