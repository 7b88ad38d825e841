/* The dispatcher: runs an intercepted call through the policies in turn
 * (re-entry, batches, lazy mode, safe mode's decisions).  See engine.h and
 * docs/DESIGN.md. */
#include "core.h"

#include "barrier.h"
#include "batch.h"
#include "fast.h"
#include "profile.h"

/* ---- the entry point ---------------------------------------------------- */

long mmf_run(struct mmf_op *op)
{
	/* Which argument is the length, per kind (-1: none). */
	static const signed char len_arg[MMF_K_COUNT] = {
#define X(id, name, len) len,
		MMF_KINDS(X)
#undef X
	};
	struct mmf_tstats *t = mmf_fast_tls.t;
	/* The gate open (initialised, safe mode, nothing that sees every
	 * call, no queue), this thread not in a section nor in a batch: the
	 * checks below would all pass. */
	if (__builtin_expect(!__atomic_load_n(&mmf_fast.all, __ATOMIC_RELAXED), 1) && t &&
	    !in_write && !mmf_batch_depth) {
		int k = op->kind;
		uint64_t asked = len_arg[k] < 0 ? 0 : (uint64_t)op->a[len_arg[k]];
		if (asked > (1ull << 47))
			asked = 0;
		mmf_stat_add(t, k, MMF_S_CALLS, 1);
		mmf_stat_add(t, k, MMF_S_BYTES_ASKED, asked);
		return decide(op, t, asked);
	}
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2) {
		mmf_early_init();
		if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
			return op->fwd(op); /* another thread is initialising */
	}
	if (__atomic_load_n(&mmf_fast.f.off, __ATOMIC_RELAXED) & MMF_FAST_REFRESH)
		fast_gate(); /* a protection a seccomp filter let through (decide.c) */
	if (__builtin_expect(mmf_prof_on, 0) && !(op->flags & MMF_OPF_PROFILED))
		return mmf_profile_run(op, mmf_run); /* runs op through here again */
	t = mmf_stats_self();
	int k = op->kind;
	mmf_stat_add(t, k, MMF_S_CALLS, 1);
	uint64_t asked = len_arg[k] < 0 ? 0 : (uint64_t)op->a[len_arg[k]];
	if (asked > (1ull << 47))
		asked = 0; /* a bad length (the call fails): not a size */
	mmf_stat_add(t, k, MMF_S_BYTES_ASKED, asked);
	if (k == MMF_K_MADVISE && (int)op->a[2] == 24 /* MADV_DONTNEED_LOCKED */)
		__atomic_store_n(&lazy_state.lock_dropped, 1, __ATOMIC_RELAXED);

	if (mode == MMF_MODE_OFF)
		return forward(op, t, asked);

	if (in_write) {
		/* Re-entered while this thread holds the map. */
		mmf_event(MMF_E_REENTRY);
		mmf_barrier_reentry(op);
		if (__atomic_load_n(&mmf_bypass_ok, __ATOMIC_RELAXED))
			return mmf_bypass(op, t, asked);
		long r = forward(op, t, asked);
		reentry_forget(op, r, 0);
		return r;
	}

	if ((__atomic_load_n(&mmf_batch_live, __ATOMIC_RELAXED) || mmf_batch_depth) &&
	    mode >= MMF_MODE_SAFE) {
		long r;
		if (mmf_batch_intercept(op, &r))
			return r;
	}
	/* under READ_IMPLIES_EXEC an mprotect(PROT_READ) also makes the
	 * pages executable: the kernel's call, not a write-protection */
	if (mmf_barrier_on && !__atomic_load_n(&safe_state.rie, __ATOMIC_RELAXED)) {
		long r;
		int batch = mmf_batch_depth || __atomic_load_n(&mmf_batch_live, __ATOMIC_RELAXED);
		if (mmf_barrier_run(op, batch, &r))
			return r;
	}
	if (lazy_state.on && !mmf_lazy_hold && !lazy_blocked()) {
		long r;
		if (lazy_run(op, t, &r))
			return r;
	}
	return decide(op, t, asked);
}
