/* Safe mode's decisions: skip a call the shadow map proves redundant, or
 * forward it in a writer section and record it; range shaping, W^X and
 * mapping alignment are asked on the way.  See docs/DESIGN.md. */
#include "core.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "barrier.h"
#include "batch.h"
#include "fast.h"
#include "fmt.h"
#include "shape.h"
#include "thp.h"
#include "wx.h"


long forward(const struct mmf_op *op, struct mmf_tstats *t, uint64_t bytes)
{
	uint64_t n = t->v[op->kind][MMF_S_CALLS];
	long r;
	if (mmf_time_due(n)) {
		uint64_t t0 = mmf_ticks();
		r = op->fwd(op);
		mmf_time_add(t, op->kind, n, mmf_ticks() - t0);
	} else {
		r = op->fwd(op);
	}
	mmf_stat_add(t, op->kind, MMF_S_FORWARDED, 1);
	mmf_stat_add(t, op->kind, MMF_S_BYTES_KERNEL, bytes);
	if ((unsigned long)r > -4096UL)
		mmf_stat_add(t, op->kind, MMF_S_ERRORS, 1);
	return r;
}


/* A call forwarded without the map (wlock.c, "calls that bypass the
 * map"): counted in mmf_stale before it reaches the kernel, its ranges
 * listed after. */
long mmf_bypass(const struct mmf_op *op, struct mmf_tstats *t, uint64_t asked)
{
	stale_begin();
	if (!in_write)
		mmf_event(MMF_E_BYPASSED);
	long r = forward(op, t, asked);
	reentry_forget(op, r, 1);
	stale_end();
	return r;
}

/* A call made on behalf of a batch: decided and recorded like any other,
 * without being counted as a call again. */
long mmf_apply(struct mmf_op *op)
{
	struct mmf_tstats *t = mmf_stats_self();
	if (in_write) {
		if (__atomic_load_n(&mmf_bypass_ok, __ATOMIC_RELAXED))
			return mmf_bypass(op, t, (uint64_t)op->a[1]);
		long r = forward(op, t, (uint64_t)op->a[1]);
		reentry_forget(op, r, 0);
		return r;
	}
	return decide(op, t, (uint64_t)op->a[1]);
}

long mmf_forward_counted(const struct mmf_op *op, uint64_t bytes)
{
	return forward(op, mmf_stats_self(), bytes);
}

/* A MAP_FIXED mapping over memory mmfold never saw mapped (a stretch
 * without records that the kernel has mapped: glibc's malloc chunks, a
 * library ld.so loaded): glibc or ld.so may unmap it with calls mmfold
 * does not see (free(), dlclose()), so the new mapping is not owned.
 * Records, owned or not, are memory whose mapping mmfold saw (or that the
 * program changed through it: README, "Limits").  Writer lock held. */
static int kernel_maps_any(uint64_t s, uint64_t e)
{
	/* under a seccomp filter, no call of mmfold's own (life.c's
	 * filter_in_force): taken as mapped */
	return mmf_filtered() || mmf_kernel_maps_any(s, e);
}

/* The part of mremap's source the kernel requires to be one VMA, for
 * mmf_thp_join (writer lock held): of a shrinking move, the part it keeps
 * (older kernels, 6.1 among them, unmap the rest before they fail). */
static int thp_join_range(const struct mmf_op *op)
{
	uint64_t s, e, len = (uint64_t)op->a[1];
	if ((uint64_t)op->a[2] && (uint64_t)op->a[2] < len)
		len = (uint64_t)op->a[2];
	if (((uint64_t)op->a[0] & (page - 1)) || !span((uint64_t)op->a[0], len, &s, &e))
		return 0;
	return mmf_thp_join(s, e);
}

static int fixed_over_foreign(const struct mmf_op *op)
{
	uint64_t s, e;
	if ((op->a[3] & (MAP_FIXED | MAP_FIXED_NOREPLACE)) != MAP_FIXED ||
	    !span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e))
		return 0;
	struct mmf_rec r;
	for (uint64_t a = s; a < e;) {
		if (!mmf_map_lookup_next(&map, a, &r) || r.start >= e)
			return kernel_maps_any(a, e);
		if (r.start > a && kernel_maps_any(a, r.start))
			return 1;
		a = r.end;
	}
	return 0;
}

long decide(struct mmf_op *op, struct mmf_tstats *t, uint64_t asked)
{
	const struct mmf_safe_state *ss = &safe_state;
	int k = op->kind;
	if (lazy_state.on)
		lazy_before(op);
	mmf_barrier_before(op);
	if (k == MMF_K_BRK)
		return run_brk(op, t);

	uint64_t s, e;
	struct mmf_want w;
	struct mmf_hint hint = {.b = NULL, .r = {.attr = NULL}};
	/* W^X (wx.c): a flip of a range relaxed to RWX is answered here;
	 * any other mprotect on it is forwarded without the skip question. */
	int wx = k == MMF_K_MPROTECT && mode >= MMF_MODE_SAFE ? mmf_wx_pre(op) : MMF_WX_NONE;
	if (wx == MMF_WX_TRY_SKIP && mmf_filter_allows(op)) {
		wenter();
		int skip = mmf_wx_skip(op);
		wleave();
		if (skip) {
			mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
			if (ss->tracing)
				trace(op, "skipped (relaxed)", 0);
			return 0;
		}
	}
	int shape = 0; /* a change on known memory: range shaping may apply */
	if (wx == MMF_WX_NONE && question(op, &s, &e, &w)) {
		/* a call bypassing the map may have changed what it says, or
		 * a section's call in flight whose range meets [s,e); one
		 * that began or ended while the map was read (mmf_stale moved)
		 * makes the read worthless, not the call a change: read again
		 * (another thread's calls in flight come and go every few
		 * microseconds, and a call taken as a change waits for the
		 * lock they hold) */
		int v;
		for (int tries = 0;; tries++) {
			uint64_t stale = __atomic_load_n(&mmf_stale, __ATOMIC_ACQUIRE);
			int lets = !mmf_stale_now(stale) || mmf_flight_lets(stale, s, e - s);
			v = mmf_map_check_hint(&map, s, e, &w, &hint);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (v >= MMF_CHANGE)
				break;
			int same = __atomic_load_n(&mmf_stale, __ATOMIC_RELAXED) == stale;
			if (lets && same)
				break;
			if (same || tries == 3) {
				v = MMF_CHANGE;
				break;
			}
		}
		shape = v == MMF_CHANGE && mode >= MMF_MODE_SAFE && w.what != MMF_Q_LOCK;
		/* The range is one record: nothing inside it is already at the
		 * target, and the model gives widening no credit, so auto would
		 * forward it as asked; spare the planner's lookups. */
		if (shape && hint.b && mmf_shape_policy() == MMF_SHAPE_AUTO &&
		    mmf_shape_cost_default.widen_ns == 0)
			shape = 0;
		/* An mlock (not MLOCK_ONFAULT) faults every page of the range in,
		 * each time: one already locked may have lost pages since
		 * (MADV_DONTNEED_LOCKED, a truncated or hole-punched file, a
		 * copy-on-write page shared with a child), and the call brings
		 * them back, or fails (ENOMEM past a file's end).  Its flags
		 * are known, its effect is not: never skipped. */
		if (v == MMF_NOOP_PROVEN && op->kind == MMF_K_MLOCK &&
		    (w.lock == MMF_LOCK_ON || !mlock_permitted(0)))
			v = MMF_NOOP_UNPROVEN;
		/* a seccomp filter may refuse it: not before the kernel took
		 * one like it (question.c) */
		if (v == MMF_NOOP_PROVEN && !mmf_filter_allows(op))
			v = MMF_NOOP_UNPROVEN;
		if (v == MMF_NOOP_PROVEN && ss->verify) {
			mmf_event(MMF_E_VERIFY_CHECKS);
			if (mmf_verify(s, e, &w) == 0) {
				mmf_event(MMF_E_VERIFY_MISMATCH);
				char buf[200];
				MMF_BUF(b, buf);
				mmf_puts(&b, "mmfold: verify: the kernel disagrees with a skip of ");
				mmf_puts(&b, mmf_kind_name(k));
				mmf_puts(&b, " at ");
				mmf_putx(&b, s);
				mmf_puts(&b, "-");
				mmf_putx(&b, e);
				mmf_log(0, buf);
				if (ss->verify >= 2)
					mmf_sys6(SYS_kill, mmf_sys_getpid(), 6 /* SIGABRT */, 0, 0, 0, 0);
				v = MMF_CHANGE;
			}
		}
		if (v == MMF_NOOP_PROVEN) {
			mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
			if (mode >= MMF_MODE_SAFE) {
				if (ss->tracing)
					trace(op, "skipped", 0);
				if (hint.r.attr && !mmf_batch_depth)
					mmf_fast_learn(&hint.r);
				return 0;
			}
		} else if (v == MMF_NOOP_UNPROVEN) {
			mmf_stat_add(t, k, MMF_S_UNPROVEN, 1);
		} else if (v == MMF_BUSY) {
			mmf_event(MMF_E_BUSY);
		}
	} else if (k == MMF_K_MADVISE &&
		   !(((int)op->a[2] == MADV_NORMAL || (int)op->a[2] == MADV_RANDOM ||
		      (int)op->a[2] == MADV_SEQUENTIAL) && mmf_wx_tracks_readahead())) {
		/* Advice that changes no tracked flag: no record, no lock
		 * (readahead advice is tracked while wx.c keeps areas apart). */
		switch ((int)op->a[2]) {
		case MADV_DONTNEED: case MADV_FREE: case MADV_WILLNEED: case MADV_COLD:
		case MADV_PAGEOUT: case MADV_NORMAL: case MADV_RANDOM: case MADV_SEQUENTIAL:
		case MADV_REMOVE: case 22: case 23: case 24: case 25: case 102: case 103:
			return forward(op, t, asked);
		}
	}

	uint64_t align = (k == MMF_K_MMAP && mode >= MMF_MODE_SAFE) ? align_plan(&folio_policy, op) : 0;
	if (!wenter_try())
		return mmf_bypass(op, t, asked);
	long r;
	if (mode >= MMF_MODE_SAFE)
		mmf_wx_before(op);
	if (k == MMF_K_MMAP && mode >= MMF_MODE_SAFE && fixed_over_foreign(op))
		op->flags |= MMF_OPF_FOREIGN;
	/* shaping trusts the map: not while a bypassing call may have changed
	 * it; one that begins meanwhile (the epoch moves) gets the caller's
	 * call forwarded as asked after the shaped one */
	uint64_t epoch = __atomic_load_n(&mmf_stale_epoch, __ATOMIC_SEQ_CST);
	if (shape && mmf_stale_now(__atomic_load_n(&mmf_stale, __ATOMIC_SEQ_CST)))
		shape = 0;
	/* an mprotect inside one record mmfold owns: its protection unknown
	 * while the kernel changes it, so that a section left half-way
	 * leaves no record a skip trusts (mmf_map_prot_changing; record()
	 * gets the word from before the call) */
	if (k == MMF_K_MPROTECT && mode >= MMF_MODE_SAFE && !shape && !op->flags && hint.r.attr &&
	    !((int)op->a[2] & ~PROT_RWX) && __atomic_load_n(&map.seq, __ATOMIC_RELAXED) == hint.r.seq) {
		union {
			uint64_t v;
			struct mmf_attr a;
		} w0 = {.v = __atomic_load_n(hint.r.attr, __ATOMIC_RELAXED)};
		if (w0.a.owned == 1) {
			hint.v0 = w0.v;
			mmf_map_prot_changing(&map, &hint.r, w0.v);
		}
	}
	/* any other call that may change what the map says: counted in
	 * flight until the map holds what it did, where a signal handler
	 * could leave the section half-way (wlock.c, "calls in flight") */
	int flight = 0;
	if (mode >= MMF_MODE_SAFE && !hint.v0 && !wmasked) {
		uint64_t fs, fe;
		mmf_reach(op, &fs, &fe);
		if (fs < fe) {
			flight_begin(fs, fe);
			flight = 1;
		}
	}
	int err0 = errno; /* what a call mmfold makes again must leave */
	if (align)
		r = mmap_aligned(&folio_policy, op, t, align);
	else if (shape && mmf_shape_forward(&map, op, s, e, &w, t, forward, &r)) {
		if (__atomic_load_n(&mmf_stale_epoch, __ATOMIC_SEQ_CST) != epoch)
			r = forward(op, t, asked);
	}
	else if (!(k == MMF_K_MREMAP && mode >= MMF_MODE_SAFE && mremap_aligned(&folio_policy, op, t, &r)))
		r = forward(op, t, asked);
	/* an mremap across VMAs that mmfold's huge-page advice kept apart
	 * (README.md, "Large folios"): once more, the VMAs merged */
	if (k == MMF_K_MREMAP && r == -EFAULT && mode >= MMF_MODE_SAFE && op->a[1] &&
	    !(PLD(ss->filter_ok) & MMF_FILTER_SELF) && thp_join_range(op)) {
		/* the program made one call: counted once, as an aligned
		 * mapping's tries are (folio.c), its first try taken back */
		mmf_stat_add(t, k, MMF_S_FORWARDED, (uint64_t)-1);
		mmf_stat_add(t, k, MMF_S_BYTES_KERNEL, -asked);
		mmf_stat_add(t, k, MMF_S_ERRORS, (uint64_t)-1);
		errno = err0; /* the next definition set it for the first try */
		r = forward(op, t, asked);
	}
	record(op, r, &hint);
	if (mode >= MMF_MODE_SAFE)
		mmf_wx_after(op, r);
	mmf_thp_tick(PLD(folio_policy.thp_disabled));
	if (flight)
		flight_end();
	wleave();
	if (r == 0 && __builtin_expect(PLD(ss->filter_ok) != 0, 0) && mmf_filter_accepted(op))
		__atomic_fetch_or(&mmf_fast.f.off, MMF_FAST_REFRESH, __ATOMIC_RELEASE);
	/* the record that holds the range, updated in place or split off or
	 * merged in its block (record() moved the hint to the new sequence),
	 * and no writer since: the next call on it may take the fast path */
	if (hint.r.attr && !mmf_batch_depth && __atomic_load_n(&map.seq, __ATOMIC_RELAXED) == hint.r.seq)
		mmf_fast_learn(&hint.r);
	if (ss->tracing)
		trace(op, "forwarded", r);
	return r;
}

/* brk/sbrk: the heap may shrink over ranges the map knows. */
long run_brk(struct mmf_op *op, struct mmf_tstats *t)
{
	if (!wenter_try())
		return mmf_bypass(op, t, 0);
	uint64_t before = (uint64_t)mmf_sys6(SYS_brk, 0, 0, 0, 0, 0, 0);
	long r = forward(op, t, 0);
	uint64_t after = (uint64_t)mmf_sys6(SYS_brk, 0, 0, 0, 0, 0, 0);
	if (after < before) {
		uint64_t s = (after + page - 1) & ~(uint64_t)(page - 1);
		uint64_t e = (before + page - 1) & ~(uint64_t)(page - 1);
		if (s < e)
			mmf_map_remove(&map, s, e);
	}
	wleave();
	return r;
}
