/* Lazy mode's policy: which calls wait, how what waits is made (at a
 * first touch, a flush point or a call that reaches it) and the fault
 * handler that makes it.  The tables are in lazy.c.  See docs/DESIGN.md. */
#include "core.h"

#include "barrier.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include "fmt.h"
#include "sigchain.h"

/* ---- lazy mode ---------------------------------------------------------- *
 *
 * Promotions (mprotect calls that only add permissions) on private anonymous
 * memory mmfold mapped are written in the prot table instead of being made; a later
 * call that asks for the protection in force cancels them; the first touch
 * faults and lazy_fault (first in line for SIGSEGV, sigchain.c) makes the
 * call for the folio-sized granule touched, or for the whole range once
 * touches are dense.  munlock of locked memory waits in the unlock table, and an
 * mlock of the same range cancels it.  Every other call that reaches a
 * pending range, fork, exit, mmfold_flush() and the buffer-taking wrappers
 * (preload/io.c) apply what is pending there first.  Both tables change
 * only under the map's writer lock. */

#define LAZY_CAP 16384
#define LAZY_GRANULE (64u << 10)
#ifndef LAZY_DENSE
#define LAZY_DENSE 4 /* faults in one range before the whole range is made */
#endif


/* Writer lock held.  Makes the waiting fork advice in [s,e): per advice, the
 * ranges in process_madvise calls of up to 64, each range alone where that
 * is refused. */
static void lazy_apply_fork(struct mmf_lazy_state *z, uint64_t s, uint64_t e)
{
	struct mmf_pend b[64];
	struct {
		void *base;
		size_t len;
	} iov[64];
	struct mmf_tstats *t = mmf_stats_self();
	uint32_t c;
	while ((c = mmf_lazy_collect(&z->fork, s, e, b, 64))) {
		for (int want = 0; want < 2; want++) {
			int adv = want ? MADV_DONTFORK : MADV_DOFORK, n = 0;
			uint64_t total = 0;
			for (uint32_t i = 0; i < c; i++)
				if (b[i].want == want) {
					iov[n].base = (void *)b[i].s;
					iov[n].len = b[i].e - b[i].s;
					total += iov[n++].len;
				}
			if (!n)
				continue;
			long r = -ENOSYS;
			if (n > 1) {
				r = mmf_next_process_madvise(-10000 /* PIDFD_SELF_THREAD */,
							     (const struct iovec *)iov, (size_t)n, adv);
				mmf_stat_add(t, MMF_K_MADVISE, MMF_S_FORWARDED, 1);
				mmf_stat_add(t, MMF_K_MADVISE, MMF_S_BYTES_KERNEL, total);
			}
			for (int i = 0; i < n; i++) {
				uint64_t rs = (uint64_t)iov[i].base, re = rs + iov[i].len;
				long ri = r == (long)total ? 0
					  : mmf_next_madvise(rs, re - rs, adv);
				if (r != (long)total) {
					mmf_stat_add(t, MMF_K_MADVISE, MMF_S_FORWARDED, 1);
					mmf_stat_add(t, MMF_K_MADVISE, MMF_S_BYTES_KERNEL, re - rs);
				}
				struct mmf_upd u;
				memset(&u, 0, sizeof u);
				if (ri != 0)
					u.adv_forget = MMF_ADV_DONTFORK;
				else if (want)
					u.adv_set_mask = MMF_ADV_DONTFORK;
				else
					u.adv_clear_mask = MMF_ADV_DONTFORK;
				mmf_map_update(&map, rs, re, &u);
			}
			mmf_event_add(MMF_E_LAZY_APPLIED, (uint64_t)n);
		}
		for (uint32_t i = 0; i < c; i++)
			mmf_lazy_set(&z->fork, b[i].s, b[i].e, -1);
	}
}

/* The access a SIGSEGV wanted (PROT_* bits), 0 when the context does not
 * say. */
static int fault_access(void *uc)
{
#if defined(__x86_64__)
	/* page-fault error code: bit 1 write, bit 4 instruction fetch */
	unsigned long err = (unsigned long)((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR];
	return (err & 16) ? PROT_EXEC : (err & 2) ? PROT_WRITE : PROT_READ;
#elif defined(__aarch64__)
	/* the ESR record in the signal frame: data abort WnR bit 6 */
	const unsigned char *p = ((ucontext_t *)uc)->uc_mcontext.__reserved;
	for (unsigned off = 0; off + 8 <= 4096;) {
		uint32_t magic, size;
		__builtin_memcpy(&magic, p + off, 4);
		__builtin_memcpy(&size, p + off + 4, 4);
		if (!magic || size < 8)
			break;
		if (magic == 0x45535201 && size >= 16) {
			uint64_t esr;
			__builtin_memcpy(&esr, p + off + 8, 8);
			unsigned ec = (unsigned)(esr >> 26) & 0x3f;
			if (ec == 0x20 || ec == 0x21)
				return PROT_EXEC;
			return (esr & (1u << 6)) ? PROT_WRITE : PROT_READ;
		}
		off += size;
	}
	return 0;
#else
	(void)uc;
	return 0;
#endif
}

/* Writer lock held.  A deferred promotion the kernel refused when it was
 * finally made (ENOMEM: a split at vm.max_map_count, or commit accounting
 * under vm.overcommit_memory=2): the program was told 0 long ago and
 * nothing can tell it now.  lazy_run avoids the known causes before it
 * defers; when one happens anyway the range is forgotten (its record is
 * not trusted), the event is counted (lazy_refused), one line is logged
 * at MMFOLD_LOG=1, and from then on nothing more is deferred: the
 * process runs as in safe mode, where the next refusal reaches the call
 * that caused it.  A fault on the page then reaches the program, as it
 * would have had the call failed. */
static void lazy_refused(struct mmf_lazy_state *z, uint64_t s, uint64_t e, int want, long err)
{
	mmf_map_forget(&map, s, e);
	mmf_event(MMF_E_LAZY_REFUSED);
	if (__atomic_exchange_n(&z->broken, 1, __ATOMIC_RELAXED))
		return;
	char buf[200];
	MMF_BUF(b, buf);
	mmf_puts(&b, "mmfold: lazy mode: a deferred mprotect(");
	mmf_putx(&b, s);
	mmf_puts(&b, ", ");
	mmf_putu(&b, e - s);
	mmf_puts(&b, ", ");
	mmf_putu(&b, (uint64_t)want);
	mmf_puts(&b, ") failed when made (errno ");
	mmf_puti(&b, -err);
	mmf_puts(&b, "); nothing more is deferred");
	mmf_log(1, buf);
}

/* Writer lock held.  Makes one deferred promotion of [s,e) to want and
 * records what the kernel answered.  Returns the system call's result. */
static long lazy_make(struct mmf_lazy_state *z, uint64_t s, uint64_t e, int want,
		      struct mmf_tstats *t)
{
	long r = mmf_next_mprotect(s, e - s, want);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_FORWARDED, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_KERNEL, e - s);
	if (r == 0) {
		struct mmf_upd u;
		memset(&u, 0, sizeof u);
		u.fields = MMF_F_PROT;
		u.a.prot = (uint8_t)want;
		if (safe_state.mlock_seen)
			u.fields |= MMF_F_LOCK_HELD;
		mmf_map_update(&map, s, e, &u);
		__atomic_store_n(&z->made, z->made + 1, __ATOMIC_RELAXED);
	} else {
		mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_ERRORS, 1);
		lazy_refused(z, s, e, want, r);
	}
	mmf_lazy_set(&z->prot, s, e, -1);
	mmf_event(MMF_E_LAZY_APPLIED);
	return r;
}

/* Writer lock held.  [s,e) (one waiting entry, part of it maybe refused
 * already) made in one call.  Returns the system call's result. */
static long lazy_apply_whole(struct mmf_lazy_state *z, uint64_t s, uint64_t e, int want)
{
	return lazy_make(z, s, e, want, mmf_stats_self());
}

/* Writer lock held.  Makes the pending promotions and munlocks in [s,e).
 * Returns how many promotions the kernel refused. */
static int lazy_apply(struct mmf_lazy_state *z, uint64_t s, uint64_t e)
{
	struct mmf_pend b[32];
	struct mmf_tstats *t = mmf_stats_self();
	uint32_t c;
	int refused = 0;
	while ((c = mmf_lazy_collect(&z->prot, s, e, b, 32)))
		for (uint32_t i = 0; i < c; i++)
			refused += lazy_make(z, b[i].s, b[i].e, b[i].want, t) != 0;
	if (mmf_lazy_count(&z->fork))
		lazy_apply_fork(z, s, e);
	while ((c = mmf_lazy_collect(&z->unlock, s, e, b, 32))) {
		for (uint32_t i = 0; i < c; i++) {
			long r = mmf_next_munlock(b[i].s, b[i].e - b[i].s);
			mmf_stat_add(t, MMF_K_MUNLOCK, MMF_S_FORWARDED, 1);
			mmf_stat_add(t, MMF_K_MUNLOCK, MMF_S_BYTES_KERNEL, b[i].e - b[i].s);
			struct mmf_upd u;
			memset(&u, 0, sizeof u);
			u.fields = MMF_F_LOCK;
			u.a.lock = r == 0 ? MMF_LOCK_NONE : MMF_UNKNOWN;
			mmf_map_update(&map, b[i].s, b[i].e, &u);
			mmf_lazy_set(&z->unlock, b[i].s, b[i].e, -1);
			mmf_event(MMF_E_LAZY_APPLIED);
		}
	}
	return refused;
}

/* Anything pending where op reaches is made first (no lock held). */
void lazy_before(const struct mmf_op *op)
{
	struct mmf_lazy_state *z = &lazy_state;
	if (!mmf_lazy_count(&z->prot) && !mmf_lazy_count(&z->unlock) && !mmf_lazy_count(&z->fork))
		return;
	uint64_t s, e;
	mmf_reach(op, &s, &e);
	/* a mapping that will be locked counts against RLIMIT_MEMLOCK, as
	 * the waiting munlocks' ranges still do: those are made first */
	if (op->kind == MMF_K_MMAP && mmf_lazy_count(&z->unlock) &&
	    ((op->a[3] & MAP_LOCKED) || PLD(safe_state.future_lock) != MMF_LOCK_NONE)) {
		s = 0;
		e = UINT64_MAX;
	}
	if (s >= e || (!mmf_lazy_overlaps(&z->prot, s, e) && !mmf_lazy_overlaps(&z->unlock, s, e) &&
		       !mmf_lazy_overlaps(&z->fork, s, e)))
		return;
	wenter();
	lazy_apply(z, s, e);
	wleave();
}

/* Writer lock held.  1 when every page of [s,e) is recorded, owned,
 * private anonymous, unsealed, with a known protection and the default key;
 * then *promo says whether prot includes each record's protection, *same
 * whether it equals all, *locked whether all are mlocked as lock says. */
static int lazy_known(uint64_t s, uint64_t e, int prot, int lock, int *promo, int *same,
		      int *locked)
{
	*promo = *same = *locked = 1;
	struct mmf_rec r;
	for (uint64_t a = s; a < e; a = r.end) {
		if (!mmf_map_lookup(&map, a, &r) || !r.a.owned || !mmf_prot_known(r.a.prot) ||
		    r.a.sealed != 0 || r.a.pkey != 0 || !(r.a.adv_known & r.a.adv_set & MMF_ADV_ANON))
			return 0;
		if ((r.a.prot | prot) != prot)
			*promo = 0;
		if (r.a.prot != prot)
			*same = 0;
		if (r.a.lock != lock)
			*locked = 0;
	}
	return 1;
}

/* How many bytes of [s,e) tab holds (writer lock held). */
static uint64_t lazy_covered(struct mmf_lazy *tab, uint64_t s, uint64_t e)
{
	struct mmf_pend b[32];
	uint64_t n = 0, at = s;
	uint32_t c;
	while (at < e && (c = mmf_lazy_collect(tab, at, e, b, 32))) {
		for (uint32_t i = 0; i < c; i++)
			n += b[i].e - b[i].s;
		at = b[c - 1].e;
	}
	return n;
}

/* Whether waiting pays (writer lock held for all three).  A promotion
 * that waits and is then touched costs a fault on top of the system call
 * it was to save (a collector that unprotects a block and writes into it
 * at once: Boehm GC makes tens of thousands of those); one that is
 * cancelled or never touched costs nothing.  z->touched estimates, out of
 * 1024, the share of recent deferred promotions that ended in a first
 * touch (a moving average over the last ~16 outcomes).  Above
 * z->touched_max (MMFOLD_LAZY_TOUCHED, 75% by default; 100 never),
 * promotions are made at once (as in safe mode) except
 * one in 16, which still waits so that the estimate follows the program
 * when its habits change. */
static void lazy_outcome(struct mmf_lazy_state *z, int touched)
{
	z->touched = z->touched - z->touched / 16 + (touched ? 1024 / 16 : 0);
}


/* Writer lock held.  1 when a promotion of [s,e) to prot may wait: it must
 * not be refused when it is finally made (lazy_refused).  The kernel
 * refuses one for two reasons: commit accounting, when write permission is
 * added under strict overcommit (mode 2); and a VMA split past
 * vm.max_map_count.  Each waiting range can cost two more VMAs when a
 * granule in its middle is made, so the records mmfold knows plus two per
 * waiting range must stay well below the limit. */

static int lazy_may_defer(struct mmf_lazy_state *z, uint64_t s, uint64_t e, int prot)
{
	(void)s;
	(void)e;
	if (__atomic_load_n(&z->broken, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&mmf_forking, __ATOMIC_SEQ_CST))
		return 0;
	/* again under the lock: a thread that has just come to block SIGSEGV
	 * counted itself before it took the lock to make what waits */
	if (__atomic_load_n(&z->blockers, __ATOMIC_SEQ_CST))
		return 0;
	if (z->touched > z->touched_max && (++z->sample & 15)) {
		mmf_event(MMF_E_LAZY_EAGER);
		return 0;
	}
	if (z->overcommit == 2 && (prot & PROT_WRITE))
		return 0;
	uint64_t maps = mmf_map_count(&map) + 2 * ((uint64_t)mmf_lazy_count(&z->prot) + 1);
	return maps + 1024 < z->max_maps;
}

/* The lazy decisions for mprotect, munlock and mlock.  1 when the call was
 * answered (*res), 0 when the normal path goes on. */
int lazy_run(struct mmf_op *op, struct mmf_tstats *t, long *res)
{
	struct mmf_lazy_state *z = &lazy_state;
	uint64_t s, e;
	struct mmf_want w;
	int k = op->kind;
	int forkadv = k == MMF_K_MADVISE &&
		      ((int)op->a[2] == MADV_DONTFORK || (int)op->a[2] == MADV_DOFORK);
	if (!(k == MMF_K_MPROTECT || k == MMF_K_MUNLOCK || k == MMF_K_MLOCK || forkadv) ||
	    !question(op, &s, &e, &w))
		return 0;
	/* under a seccomp filter, the first call of its kind is made now
	 * (question.c): what lazy mode cancels is answered without it */
	if (!mmf_filter_allows(op))
		return 0;
	if (k == MMF_K_MPROTECT && (op->flags || (w.prot & PROT_EXEC)))
		return 0; /* keys; code: a deferred PROT_EXEC would fault on every
			     fetch into the chain, and JITs run what they flip */
	if (k == MMF_K_MLOCK && !mmf_lazy_count(&z->unlock))
		return 0;
	if (k == MMF_K_MPROTECT && mmf_sigchain_in_handler())
		return 0; /* asked by the program's fault handler: made at once */
	/* nothing pending here and nothing to defer: the normal path, which
	 * skips without a lock */
	int v = mmf_map_check(&map, s, e, &w);
	if (v == MMF_NOOP_PROVEN && !mmf_lazy_overlaps(&z->prot, s, e) &&
	    !mmf_lazy_overlaps(&z->unlock, s, e) && !mmf_lazy_overlaps(&z->fork, s, e))
		return 0;
	int promo, same, locked, handled = 0;
	wenter();
	if (k == MMF_K_MPROTECT) {
		/* not on locked memory (or memory whose lock is not known):
		 * the kernel makes a locked range resident when it becomes
		 * accessible, and breaks its copy-on-write pages when it
		 * becomes writable */
		if (lazy_known(s, e, w.prot, MMF_LOCK_NONE, &promo, &same, &locked) && promo &&
		    (locked || same)) {
			int had = mmf_lazy_overlaps(&z->prot, s, e);
			if (same) {
				mmf_lazy_set(&z->prot, s, e, -1);
				mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
				if (had) {
					mmf_event(MMF_E_LAZY_CANCELLED);
					lazy_outcome(z, 0);
				}
				handled = 1;
			} else if (lazy_may_defer(z, s, e, w.prot) &&
				   mmf_lazy_set(&z->prot, s, e, w.prot) == 0) {
				if (!z->ever)
					__atomic_store_n(&z->ever, 1, __ATOMIC_RELEASE);
				mmf_stat_add(t, k, MMF_S_DEFERRED, 1);
				handled = 1;
			}
		}
	} else if (forkadv) {
		/* The flag in force (the map) and what waits: a call asking
		 * for the flag in force cancels, another one waits. */
		int had = mmf_lazy_overlaps(&z->fork, s, e);
		v = mmf_map_check(&map, s, e, &w); /* again, under the lock */
		if (lazy_known(s, e, PROT_NONE, MMF_LOCK_NONE, &promo, &same, &locked)) {
			if (v == MMF_NOOP_PROVEN) {
				mmf_lazy_set(&z->fork, s, e, -1);
				mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
				if (had)
					mmf_event(MMF_E_LAZY_CANCELLED);
				handled = 1;
			} else if (v == MMF_CHANGE && !__atomic_load_n(&mmf_forking, __ATOMIC_SEQ_CST) &&
				   mmf_lazy_set(&z->fork, s, e, w.adv_val) == 0) {
				mmf_stat_add(t, k, MMF_S_DEFERRED, 1);
				handled = 1;
			}
		}
	} else if (k == MMF_K_MUNLOCK) {
		if (lazy_known(s, e, PROT_NONE, MMF_LOCK_ON, &promo, &same, &locked) && locked &&
		    mmf_lazy_set(&z->unlock, s, e, 0) == 0) {
			mmf_stat_add(t, k, MMF_S_DEFERRED, 1);
			handled = 1;
		}
	} else if (w.lock == MMF_LOCK_ON && lazy_covered(&z->unlock, s, e) == e - s &&
		   lazy_known(s, e, PROT_NONE, MMF_LOCK_ON, &promo, &same, &locked) && locked &&
		   !__atomic_load_n(&z->lock_dropped, __ATOMIC_RELAXED) && mlock_permitted(1)) {
		/* mlock of a range whose munlock waits: both vanish (its
		 * pages stayed locked, so all are there: lock_dropped) */
		mmf_lazy_set(&z->unlock, s, e, -1);
		mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
		mmf_event(MMF_E_LAZY_CANCELLED);
		handled = 1;
	}
	if (!handled) {
		/* Made now: what waits here first (and every waiting munlock
		 * before an mlock, whose limit they count against). */
		if (k == MMF_K_MLOCK)
			lazy_apply(z, 0, UINT64_MAX);
		else
			lazy_apply(z, s, e);
	}
	wleave();
	if (handled) {
		if (safe_state.tracing)
			trace(op, "deferred", 0);
		*res = 0;
	}
	return handled;
}

/* ---- the fault path ------------------------------------------------------
 *
 * What the state is and who changes it:
 * - the prot table (what waits) and the shadow map change only under the writer
 *   lock, and a promotion is made (the system call) under that lock too,
 *   before its entry leaves the table and its record takes the new
 *   protection.  So while a thread holds the lock, for an owned, known
 *   record: what the kernel has in force = the record, and what the
 *   program asked for = the table's want where an entry covers the page,
 *   else the record.
 * - made counts promotions made (under the lock).  It only grows.
 * - Asynchronous signals are blocked inside writer sections (async_block),
 *   so this handler never runs on a thread that holds the lock, except for
 *   a synchronous fault in mmfold's own code, which is not the program's.
 *
 * The rule (README, lazy mode): a fault may reach the program only when,
 * with everything that waits made, the kernel would fault too.  The fault
 * was raised at some time t0 before this handler took the lock; between
 * t0 and now another thread may have made the page's promotion (mlock and
 * fork make all that waits, a call on an overlapping range makes what is
 * there), cancelled it, split its entry, unmapped the page or mapped new
 * memory there.  So nothing is decided before the lock is taken (no
 * lock-free early exit other than "nothing was ever deferred"), and then:
 * 1. An entry covers the page: if its protection allows the access, the
 *    granule is made and the access retried; if not, the kernel would
 *    fault with it made: the fault goes to the program.
 * 2. No entry, the record is owned and known: it is the kernel's state
 *    now.  The access allowed: retried (a promotion was made since t0).
 *    Not allowed: nothing waits and the kernel faults: the program's.
 * 3. No entry and no trustworthy record (or the record allows the access
 *    but the kernel faulted: a record made stale behind mmfold's back):
 *    the kernel is asked for the page's protection now (PROCMAP_QUERY;
 *    the lock held, no call through mmfold changes it meanwhile).  It does
 *    not allow the access: nothing waits and the kernel faults: the
 *    program's.  It allows it: the fault raced with a change, retried.
 *    A kernel that cannot say (before 6.11, or under a seccomp filter):
 *    retried once; a second fault of the same access on this thread with
 *    no promotion made in between (made unchanged) is the kernel's own
 *    and goes to the program.  If promotions keep being made in between,
 *    the third fault goes on too: a retried access that faults again
 *    after its page was made accessible means the page was made
 *    inaccessible again, by a call that left nothing waiting there, and
 *    at that moment the kernel would have faulted.  "The same access":
 *    the same page and kind of access, with no call through mmfold made
 *    on this thread in between (the memo of an earlier access there
 *    counted towards a later one, and a third, unrelated fault at a
 *    page a loop kept reusing went to the program:
 *    tests/preload/lazyreuse.c).
 * "Allowed" follows the architecture: on x86-64 and arm64 a page with
 * PROT_WRITE or PROT_EXEC can be read.  Retrying errs on the safe side: a
 * wrong "allowed" costs one more fault (3 above), a wrong "not allowed"
 * would be a signal the program should not see. */

static __thread struct {
	uint64_t page, made, calls;
	int need, tries;
} lz_memo __attribute__((tls_model("initial-exec")));

/* Calls through mmfold made on this thread (its counters). */
static uint64_t thread_calls(void)
{
	const struct mmf_tstats *t = mmf_fast_tls.t;
	uint64_t n = 0;
	for (int k = 0; t && k < MMF_K_COUNT; k++)
		n += t->v[k][MMF_S_CALLS];
	return n;
}

static int access_allowed(int prot, int need)
{
	if (!need) /* the context did not say: anything but PROT_NONE may do */
		return prot != PROT_NONE;
	if (need & PROT_EXEC)
		return (prot & PROT_EXEC) != 0;
	if (need & PROT_WRITE)
		return (prot & PROT_WRITE) != 0;
	return (prot & PROT_RWX) != 0;
}

/* Writer lock held: case 3 above. */
static int lazy_retry_once(struct mmf_lazy_state *z, uint64_t a, int need)
{
	int kp = mmf_filtered() ? -1 : mmf_vma_prot(a);
	if (kp == -2 || (kp >= 0 && !access_allowed(kp, need))) {
		lz_memo.page = 0;
		return 0; /* the kernel faults there now, and nothing waits */
	}
	uint64_t made = __atomic_load_n(&z->made, __ATOMIC_RELAXED), calls = thread_calls();
	if (lz_memo.page == a && lz_memo.need == need && lz_memo.calls == calls) {
		/* allowed by the kernel: retried, but not for ever (a fault
		 * the protection does not explain) */
		int give_up = kp >= 0 ? lz_memo.made == made && ++lz_memo.tries > 64
				      : lz_memo.made == made || ++lz_memo.tries > 2;
		if (give_up) {
			lz_memo.page = 0;
			return 0;
		}
		if (kp < 0 || lz_memo.made != made)
			lz_memo.made = made;
		return 1;
	}
	lz_memo.page = a;
	lz_memo.need = need;
	lz_memo.made = made;
	lz_memo.calls = calls;
	lz_memo.tries = 1;
	return 1;
}

/* SIGSEGV on a page whose promotion may wait: make it and retry the
 * access, or say the fault is the program's (0). */
static int lazy_fault(int sig, siginfo_t *si, void *uc)
{
	struct mmf_lazy_state *z = &lazy_state;
	/* MAPERR: nothing was mapped there at the fault, whatever waits */
	if (sig != SIGSEGV || si->si_code != SEGV_ACCERR ||
	    !__atomic_load_n(&z->ever, __ATOMIC_ACQUIRE) || in_write)
		return 0;
	uint64_t a = (uint64_t)si->si_addr & ~(uint64_t)(page - 1);
	int need = fault_access(uc), retry;
	wenter();
	struct mmf_pend *q = mmf_lazy_at(&z->prot, a);
	struct mmf_rec r;
	if (q) {
		if (!access_allowed(q->want, need)) {
			retry = 0; /* made, the page would still fault */
		} else {
			uint64_t gs = q->s, ge = q->e, g = LAZY_GRANULE, qs = q->s, qe = q->e;
			int want = q->want;
			/* huge-page backed: a granule that does not split a PMD */
			if (mmf_map_lookup(&map, a, &r) &&
			    (r.a.adv_known & r.a.adv_set & MMF_ADV_HUGEPAGE))
				g = 2u << 20;
			/* readers may load the entry: one atomic store */
			uint8_t touches = (uint8_t)(q->touches + 1);
			__atomic_store_n(&q->touches, touches, __ATOMIC_RELAXED);
			if (touches == 1)
				lazy_outcome(z, 1);
			if (touches < LAZY_DENSE && ge - gs > 4 * g) {
				gs = a & ~(g - 1);
				ge = gs + g;
				if (gs < q->s)
					gs = q->s;
				if (ge > q->e)
					ge = q->e;
			} else if (touches >= LAZY_DENSE) {
				mmf_event(MMF_E_LAZY_DENSE);
			}
			retry = lazy_apply(z, gs, ge) == 0;
			if (!retry && (gs != qs || ge != qe))
				/* the granule was refused (a split at the map-count
				 * limit): the whole range, as the program asked */
				retry = lazy_apply_whole(z, qs, qe, want) == 0;
			mmf_event(MMF_E_LAZY_FAULTS);
		}
	} else if (mmf_map_lookup(&map, a, &r) && r.a.owned && mmf_prot_known(r.a.prot) &&
		   !access_allowed(r.a.prot, need)) {
		retry = 0; /* case 2: the kernel's state, and nothing waits */
	} else {
		retry = lazy_retry_once(z, a, need);
		if (retry)
			mmf_event(MMF_E_LAZY_RETRIED);
	}
	wleave();
	return retry;
}

/* A small decimal number from a /proc file, or dflt. */
static long read_proc_long(const char *path, long dflt)
{
	char buf[32];
	long fd = mmf_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return dflt;
	long n = mmf_sys_read((int)fd, buf, sizeof buf - 1);
	mmf_sys_close((int)fd);
	if (n <= 0 || buf[0] < '0' || buf[0] > '9')
		return dflt;
	long v = 0;
	for (long i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
		v = v * 10 + (buf[i] - '0');
	return v;
}

void lazy_start(void)
{
	struct mmf_lazy_state *z = &lazy_state;
	if (mode != MMF_MODE_LAZY)
		return;
	z->touched_max = (uint32_t)(cfg.v[MMF_OPT_LAZY_TOUCHED] * 1024 / 100);
	z->overcommit = (int)read_proc_long("/proc/sys/vm/overcommit_memory", 0);
	z->max_maps = (uint64_t)read_proc_long("/proc/sys/vm/max_map_count", 65530);
	if (mmf_lazy_init(&z->prot, LAZY_CAP) || mmf_lazy_init(&z->unlock, LAZY_CAP) ||
	    mmf_lazy_init(&z->fork, LAZY_CAP) ||
	    mmf_sigchain_claim(lazy_fault) != 0) {
		mmf_log(1, "mmfold: lazy mode: cannot install the fault handler; calls are made "
			   "as in safe mode");
		return;
	}
	__atomic_store_n(&z->on, 1, __ATOMIC_RELEASE);
}

/* Everything pending, made now (fork, exit, mmfold_flush). */
void mmf_lazy_flush_all(void)
{
	struct mmf_lazy_state *z = &lazy_state;
	if (!__atomic_load_n(&z->on, __ATOMIC_ACQUIRE) || in_write ||
	    (!mmf_lazy_count(&z->prot) && !mmf_lazy_count(&z->unlock) && !mmf_lazy_count(&z->fork)))
		return;
	wenter();
	lazy_apply(z, 0, UINT64_MAX);
	wleave();
}

__thread int mmf_lazy_hold __attribute__((tls_model("initial-exec")));


void mmf_lazy_mask(int blocks)
{
	struct mmf_lazy_state *z = &lazy_state;
	int was = lz_mask;
	lz_mask = blocks ? 2 : 1;
	if (blocks && was != 2) {
		__atomic_add_fetch(&z->blockers, 1, __ATOMIC_SEQ_CST);
		/* Under the lock even when nothing seems to wait: a thread that
		 * read the count as 0 in lazy_may_defer may be about to defer;
		 * once this section has run, anything it deferred is made and
		 * every later deferral sees the count. */
		if (__atomic_load_n(&z->on, __ATOMIC_ACQUIRE) && !in_write) {
			wenter();
			lazy_apply(z, 0, UINT64_MAX);
			wleave();
		}
	} else if (!blocks && was == 2) {
		__atomic_sub_fetch(&z->blockers, 1, __ATOMIC_SEQ_CST);
	}
}


/* This thread's mask, asked of the kernel once (its first call). */
static void lazy_mask_probe(void)
{
	uint64_t cur = 0;
	long r = mmf_sys6(SYS_rt_sigprocmask, SIG_BLOCK, 0, (long)&cur, 8, 0, 0);
	uint64_t fault = (1ull << (SIGSEGV - 1)) | (1ull << (SIGBUS - 1));
	mmf_lazy_mask(r == 0 && (cur & fault));
}

/* No promotion may wait now (a thread blocks fault signals). */
int lazy_blocked(void)
{
	struct mmf_lazy_state *z = &lazy_state;
	if (__builtin_expect(!lz_mask, 0))
		lazy_mask_probe();
	return __atomic_load_n(&z->blockers, __ATOMIC_SEQ_CST) != 0;
}

int mmf_lazy_active(void)
{
	struct mmf_lazy_state *z = &lazy_state;
	return __atomic_load_n(&z->on, __ATOMIC_RELAXED);
}

/* A buffer the kernel is about to read or write (preload/io.c). */
void mmf_lazy_buffer(uint64_t p, size_t n)
{
	struct mmf_lazy_state *z = &lazy_state;
	if (!n || !__atomic_load_n(&z->on, __ATOMIC_RELAXED) || !mmf_lazy_count(&z->prot))
		return;
	uint64_t s = p & ~(uint64_t)(page - 1), e = (p + n + page - 1) & ~(uint64_t)(page - 1);
	if (e <= s || p + n < p || !mmf_lazy_overlaps(&z->prot, s, e) || in_write)
		return;
	wenter();
	lazy_apply(z, s, e);
	wleave();
	mmf_event(MMF_E_LAZY_BUFFERS);
}
