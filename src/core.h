/* What the engine's files share (base.c, wlock.c, question.c, record.c,
 * decide.c, lazy.c, lazymode.c, folio.c, life.c, engine.c): their state
 * and their functions, grouped by the file that defines them.  Not for
 * preload/ (engine.h is its face) nor for the lower modules.  See
 * docs/DESIGN.md for the layers and the lock rules. */
#ifndef MMF_CORE_H
#define MMF_CORE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "engine.h"
#include "folio.h"
#include "lazy.h"
#include "map.h"
#include "stats.h"
#include "sys.h"

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#define MADV_KEEPONFORK 19
#endif
#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#endif
#ifndef PR_SET_THP_DISABLE
#define PR_SET_THP_DISABLE 41
#define PR_GET_THP_DISABLE 42
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MAP_32BIT
#define MAP_32BIT 0 /* x86 only */
#endif
#define HUGETLBFS_MAGIC_ 0x958458f6
#define PROT_RWX (PROT_READ | PROT_WRITE | PROT_EXEC)

/* Loads and stores of what signal handlers on this thread also change. */
#define PLD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define PST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* ---- base.c: configuration, mode, page size ----------------------------- */
extern struct mmf_config cfg;
extern int mode;    /* MMF_MODE_* */
extern size_t page; /* the system's page size */
/* The clock's origin (early init), for mmf_ticks_to_ns. */
extern uint64_t t0_ticks, t0_ns;
uint64_t mono_ns(void);
/* Prints one configuration warning (at most 16). */
void config_warn(const char *line, void *arg);

/* ---- wlock.c: the shadow map and its writer section ---------------------- */
extern struct mmf_map map;
/* This thread's writer state (wlock.c says what each holds): fields of
 * the thread's fast-path block (fast.h), so that the forward path reaches
 * them and the hint from one base register. */
#define in_write (mmf_fast_tls.w_in)
#define pending (mmf_fast_tls.w_pending)
#define wmasked (mmf_fast_tls.w_masked) /* the section's asynchronous signals blocked */
/* Enters (leaves) a writer section: asynchronous signals blocked, the
 * map's writer lock held; leaving drains what re-entrant calls changed. */
void wenter(void);
void wleave(void);
/* The signal mask from before the section, put back (a forked child). */
void async_restore(void);

/* A re-entrant call changed [s,e) (s | 1: it replaced what lazy mode had
 * pending there; s | 2: the source of an mremap(MREMAP_DONTUNMAP), whose
 * VMA's other pages were unlocked too, mmf_map_unlock_joined): forgotten
 * before the lock is released. */
void pending_add(uint64_t s, uint64_t e);
/* Calls that bypass the map (wlock.c, where the rules are).  mmf_bypass_ok:
 * the configuration allows it; mmf_stale (fast.h): bypassing calls not yet
 * accounted for and a section's call in flight (nothing is skipped while
 * its low half is not 0, but apart from the flight: mmf_flight_lets);
 * mmf_stale_epoch: bypasses ever begun. */
extern uint32_t mmf_bypass_ok;
extern uint64_t mmf_lock_wait_ns;
extern uint64_t mmf_stale_epoch;
void flight_begin(uint64_t s, uint64_t e);
void flight_end(void);
int wenter_try(void);
void stale_drain(void);
void stale_add(uint64_t s, uint64_t e, int prot_only);
void stale_add_all(void);
void lock_state_changed(int future);
void stale_begin(void);
void stale_end(void);
void mmf_stale_fork_child(void);
int mmf_stale_init(void); /* its list's page; -1: no bypassing */
void mmf_bypass_allow(int ok);
void mmf_bypass_refuse(void);

/* The writer section of a call that changes nothing in the map (fastrun.c's
 * mmf_fast_hot), and the steps wenter_quick and wleave_quick add to what
 * bypasses changed (drained): a section that records nothing leaves that
 * to the next one that does (until then nothing is skipped).  x: this
 * thread's block. */
extern uint32_t mmf_lock_gen;
static inline __attribute__((always_inline)) int wenter_hot(struct mmf_fast_tls *x)
{
	if (x->w_in || !__atomic_load_n(&mmf_bypass_ok, __ATOMIC_RELAXED))
		return 0;
	x->w_in = 1; /* section_open */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	uint32_t z = 0;
	if (!__atomic_compare_exchange_n(&map.lock, &z, 1, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED)) {
		x->w_in = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		return 0;
	}
	mmf_lock_gen++; /* wenter's step: a plain add */
	return 1;
}

static inline __attribute__((always_inline)) void wleave_hot(struct mmf_fast_tls *x)
{
	if (PLD(x->w_pending.any)) {
		wleave();
		return;
	}
	x->w_in = 2;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__builtin_expect(__atomic_exchange_n(&map.lock, 0, __ATOMIC_RELEASE) == 2, 0))
		mmf_map_wake(&map); /* mmf_map_wunlock's steps */
	x->w_in = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (PLD(x->w_pending.any)) {
		wenter();
		wleave();
	}
}

/* wenter_try's course when it costs least (the forward paths of
 * fastrun.c): bypassing allowed, this thread in no section (a signal
 * handler that interrupted one is re-entering: the general path), the
 * lock free at the first try.  1 with the lock held (what bypasses
 * changed drained, as wenter_try does); 0 with nothing done: the caller
 * takes the general path.  The test build's random bypasses
 * (MMF_FORCE_BYPASS) are wenter_try's: other calls' bypasses meet these
 * sections there.  x: this thread's block. */
static inline __attribute__((always_inline)) int wenter_quick(struct mmf_fast_tls *x)
{
	if (!wenter_hot(x)) /* the lock, lock_gen moved */
		return 0;
	if (mmf_stale_now(__atomic_load_n(&mmf_stale, __ATOMIC_RELAXED)))
		stale_drain();
	return 1;
}

/* wleave when nothing is likely pending (the forward paths, inline there):
 * the same steps without the loop (wleave_hot's), what bypasses changed
 * drained first; anything a handler added goes through wleave. */
static inline void wleave_quick(void)
{
	struct mmf_fast_tls *x = mmf_fast_self();
	if (__atomic_load_n(&mmf_stale_word.h.now, __ATOMIC_RELAXED)) {
		wleave();
		return;
	}
	wleave_hot(x);
	if (x->w_masked)
		async_restore();
}

/* ---- question.c: the skip question and safe mode's state ----------------- */
/* Safe mode's state, one instance (safe_state): process facts that decide
 * whether a skip may be trusted and how a forwarded call is recorded.  Set
 * at init (life.c), changed by recording under the writer lock (mlock_seen,
 * future_lock) and by prctl/personality (mdwe, rie: stored atomically).
 * question(), record() and decide() bind the one instance at entry and
 * pass it to their helpers, as lazy mode does with its state: they keep
 * their signatures because the fast path calls them, and an extra
 * argument would cost an instruction per call (docs/DESIGN.md, section 3). */
struct mmf_safe_state {
	int mdwe;            /* PR_SET_MDWE in force: W+X requests are checked */
	int rie;             /* READ_IMPLIES_EXEC ever set (life.c): never skip mprotect */
	int mlock_seen;      /* some range was ever locked */
	uint8_t tracing;     /* MMFOLD_LOG=3: one line per call */
	uint8_t verify;      /* MMFOLD_VERIFY: skips checked against the kernel */
	uint8_t future_lock; /* mlockall(MCL_FUTURE) state (MMF_LOCK_*) */
	uint8_t memlock_capped; /* RLIMIT_MEMLOCK was found finite (mlock_permitted) */
	/* A seccomp filter may be in force (MMF_FILTERED) and, below it, the
	 * calls the kernel accepted since it was installed (question.c) */
	uint64_t filter_ok;
};
#define MMF_FILTERED (1ull << 63)
/* ... and the program installed one itself (prctl, syscall(SYS_seccomp)):
 * a sandbox locking itself down (life.c's filter_in_force) */
#define MMF_FILTER_SELF (1ull << 62)
/* Under a seccomp filter (question.c): may op be skipped, and the kernel
 * accepted op (1 when that allows skips of a protection the fast path
 * answers, which it must then be told: fast_gate). */
int mmf_filter_allows(const struct mmf_op *op);
int mmf_filter_accepted(const struct mmf_op *op);
void mmf_filter_installed(int self);
extern struct mmf_safe_state safe_state;
/* A seccomp filter may be in force: mmfold then makes none of the system
 * calls of its own that only keep its records exact (life.c's
 * filter_in_force). */
static inline int mmf_filtered(void)
{
	return (__atomic_load_n(&safe_state.filter_ok, __ATOMIC_RELAXED) & MMF_FILTERED) != 0;
}
int span(uint64_t addr, uint64_t len, uint64_t *s, uint64_t *e);
void touched(const struct mmf_op *op, uint64_t *s, uint64_t *e);
int mlock_permitted(int costly);
int question(const struct mmf_op *op, uint64_t *s, uint64_t *e, struct mmf_want *w);
void trace(const struct mmf_op *op, const char *what, long r);

/* ---- record.c: recording ------------------------------------------------- */
void record(const struct mmf_op *op, long r, struct mmf_hint *h);
void reentry_forget(const struct mmf_op *op, long r, int stale);

/* ---- decide.c: safe mode's decisions ------------------------------------- */
long forward(const struct mmf_op *op, struct mmf_tstats *t, uint64_t bytes);
/* Kernel time is measured for every call of the first 64 of a kind on a
 * thread, then for one call in 32, which stands for the 32: reading the
 * clock twice costs about 2% of a one-page mprotect on a virtual machine,
 * and a timed call about 44 instructions more than another (callgrind,
 * make bench-instr), 1.4 per call at this rate.  n: the kind's calls on
 * this thread, this one counted. */
#define MMF_TIME_ALL 64
#define MMF_TIME_EVERY 32
static inline int mmf_time_due(uint64_t n)
{
	return __builtin_expect(n % MMF_TIME_EVERY == 0, 0) || __builtin_expect(n <= MMF_TIME_ALL, 0);
}
static inline void mmf_time_add(struct mmf_tstats *t, int kind, uint64_t n, uint64_t dt)
{
	mmf_stat_add(t, kind, MMF_S_KERNEL_NS, n <= MMF_TIME_ALL ? dt : dt * MMF_TIME_EVERY);
}
long decide(struct mmf_op *op, struct mmf_tstats *t, uint64_t asked);
/* A call forwarded without the map (when wenter_try says so). */
long mmf_bypass(const struct mmf_op *op, struct mmf_tstats *t, uint64_t asked);

/* ---- lazy.c: lazy mode's state and tables -------------------------------- */
/* Lazy mode's state, one instance (lazy_state); the tables and the map
 * change only under the writer lock; the fields read without it are
 * loaded atomically. */
struct mmf_lazy_state {
	int on; /* lazy mode, tables ready, the fault handler is ours */
	/* The program dropped pages of locked memory (MADV_DONTNEED_LOCKED,
	 * engine.c): an mlock is never cancelled against a waiting munlock
	 * again, since the kernel's mlock faults such pages back in. */
	int lock_dropped;
	struct mmf_lazy prot;   /* deferred promotions (want: the protection) */
	struct mmf_lazy unlock; /* deferred munlocks */
	/* MADV_DONTFORK (want 1) / MADV_DOFORK (want 0): VMA flags that matter
	 * only at fork, made before it in one process_madvise per advice. */
	struct mmf_lazy fork;
	int blockers; /* threads blocking SIGSEGV/SIGBUS (mmf_lazy_mask) */
	/* Some promotion was deferred once (the fault handler has nothing to
	 * do before that); promotions made so far (lazy_fault's comment). */
	int ever;
	uint64_t made;
	/* A deferred promotion was refused when it was made: nothing more is
	 * deferred (see lazy_refused). */
	int broken;
	/* Of 1024, the share of recent deferred promotions that were touched
	 * (lazy_may_defer); sample counts the eager ones. */
	uint32_t touched, sample;
	uint32_t touched_max; /* MMFOLD_LAZY_TOUCHED percent of 1024 */
	/* vm.overcommit_memory and vm.max_map_count, read when lazy mode starts. */
	int overcommit;
	uint64_t max_maps;
};
extern struct mmf_lazy_state lazy_state;
extern __thread int lz_mask __attribute__((tls_model("initial-exec")));
void lazy_drop(uint64_t s, uint64_t e);

/* ---- lazymode.c: lazy mode's policy -------------------------------------- */
int lazy_run(struct mmf_op *op, struct mmf_tstats *t, long *res);
void lazy_before(const struct mmf_op *op);
int lazy_blocked(void);
void lazy_start(void);

/* ---- folio.c: large folios' policy and mapping alignment ------------------ */
/* Large folios: the system's settings and the policy in force. */
struct mmf_folio_policy {
	struct mmf_folio_sys sys;
	int thp_active;     /* advise MADV_HUGEPAGE on large anonymous mappings */
	int thp_disabled;   /* prctl(PR_SET_THP_DISABLE) in force */
	int align_active;
	uint64_t low_water; /* lowest address an mmap returned: next guesses go below */
	uint64_t faults0[MMF_FOLIO_SIZES]; /* anon_fault_alloc at start-up */
};
extern struct mmf_folio_policy folio_policy;
uint64_t align_plan(struct mmf_folio_policy *fp, const struct mmf_op *op);
long mmap_aligned(struct mmf_folio_policy *fp, const struct mmf_op *op, struct mmf_tstats *t,
		  uint64_t A);
int mremap_aligned(struct mmf_folio_policy *fp, const struct mmf_op *op, struct mmf_tstats *t,
		   long *res);

/* ---- decide.c (continued) ------------------------------------------------ */
long run_brk(struct mmf_op *op, struct mmf_tstats *t);

/* ---- base.c (set by life.c's start-up) ----------------------------------- */
extern int init_state; /* 0 none, 1 running, 2 done, 3 failed (forward all) */

/* ---- life.c: the fast paths' gate (fast.h) ------------------------------- */
/* Opens or closes the fast paths for what is in force now: at start-up
 * and whenever something they depend on changes. */
void fast_gate(void);

#endif
