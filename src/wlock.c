/* The writer section: the shadow map the engine keeps, its writer lock,
 * the list of ranges changed behind the holder's back, and calls that
 * bypass the map.  See docs/DESIGN.md, section 4.
 *
 * Lock order: the map's writer lock is the only lock and a leaf.  A thread
 * holds it from just before it forwards a call that changes the map until
 * the record is updated, so the map changes in the kernel's order.  A call
 * that re-enters on a thread that holds it (a signal handler, or another
 * interposer below us calling back) is forwarded and its range forgotten
 * before the lock is released. */
#include "core.h"

#include <signal.h>
#include <sys/syscall.h>

#include "fast.h"

struct mmf_map map;
int mmf_forking; /* life.c's fork steps; see there */
uint32_t mmf_lock_gen; /* moves at every acquisition (under the lock; core.h) */
#define lock_gen mmf_lock_gen
static uint32_t stuck_gen; /* lock_gen + 1 of a holder a waiter gave up on */

/* This thread's writer state (in_write: 0 none, 1 holds the map lock, 2
 * releasing), and the ranges changed behind the holder's back by
 * re-entrant calls (pending), are fields of this thread's mmf_fast_tls
 * (fast.h; core.h names them).  Signal handlers on this thread read and
 * change them, so every access is volatile or atomic: the compiler must
 * neither cache them in registers nor reuse an earlier load (GCC for
 * aarch64 did, and a handler's entry was then taken twice).  Only this
 * thread and its handlers touch pending; entries are added by handlers
 * (which run to completion) and taken off with a compare-and-swap of n. */

/* Where calls may not bypass the map (below: lazy mode, batches, the
 * barrier, ...), a writer section runs with asynchronous signals blocked,
 * for two reasons.  A collector that stops the world with signals (Boehm GC, Mono)
 * parks each mutator in a handler until it restarts them, and calls
 * mprotect/munmap itself meanwhile: a mutator parked inside a section
 * would hold the lock the collector's call waits for, for ever
 * (tests/preload/stopworld.c hung in every mode before).  And in lazy
 * mode a handler that ran inside a section could touch a page whose
 * promotion waits: its fault cannot be served then (the section may be
 * rewriting the very tables that say what waits, and this thread holds the
 * lock), and passing it on would hand the program a fault the kernel would
 * not have raised.  Synchronous signals stay open (blocking them would
 * make the kernel kill the process on a fault); none is raised inside a
 * section, whose code touches only mmfold's own memory.  The mask the
 * thread had is put back when the section ends (or in a forked child).
 * Cost: two rt_sigprocmask calls per section (a call that changes the
 * map); a skipped call takes no section.  Where calls may bypass the map
 * the section leaves signals open: no thread waits long for the lock. */
static __thread uint64_t wmask_old __attribute__((tls_model("initial-exec")));

#define SIGBIT(s) (1ull << ((s) - 1))
#define SYNC_SIGNALS \
	(SIGBIT(SIGSEGV) | SIGBIT(SIGBUS) | SIGBIT(SIGILL) | SIGBIT(SIGFPE) | SIGBIT(SIGTRAP) | \
	 SIGBIT(SIGSYS))

static void async_block(void)
{
	if (wmasked)
		return;
	uint64_t set = ~SYNC_SIGNALS;
	if (mmf_sys6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&set, (long)&wmask_old, 8, 0, 0) == 0)
		wmasked = 1;
}

void async_restore(void)
{
	if (!wmasked)
		return;
	wmasked = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	mmf_sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&wmask_old, 0, 8, 0, 0);
}

/* in_write is set before the lock is taken: a signal handler that runs in
 * between must not wait for a lock its own thread is about to hold.  It
 * also closes this thread's hint to its handlers (fast.h): inside the
 * section the kernel may have done what the record does not say yet, so a
 * handler's call there takes the general path, as a re-entrant one.  The
 * hint itself stays: a record the section moves moves the map's sequence,
 * which the hint is checked against. */
static inline void section_open(void)
{
	in_write = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void wenter(void)
{
	if (!__atomic_load_n(&mmf_bypass_ok, __ATOMIC_RELAXED))
		async_block();
	section_open();
	mmf_map_wlock(&map);
	lock_gen++;
}

/* ---- calls that bypass the map ------------------------------------------
 *
 * Safe mode without lazy mode, batches, the barrier, W^X relax or forced
 * widening (mmf_bypass_ok) keeps no state that only the writer lock
 * protects besides the map itself.  There a writer section runs with
 * signals open (two rt_sigprocmask calls saved per forwarded call) and a
 * thread never waits for the lock for long: a holder that a signal
 * handler parks (a collector stopping the world) or that a handler's
 * longjmp left would otherwise stop every other thread's calls.  A thread
 * that does not get the lock within MMFOLD_LOCK_WAIT forwards its call
 * without the map ("bypasses" it), and so does, at once, every thread
 * that finds that same holder still in place.  What a bypassing call
 * changed is made unknown in the map before anything trusts the map
 * again:
 *
 * - mmf_stale counts bypassing calls begun and not yet accounted for.  It
 *   goes up before the call reaches the kernel; while it is not 0 no
 *   reader skips anything (fast.h and decide() read it before and after
 *   they read the map) and no section shapes a call.
 * - After its kernel call the bypassing thread lists the ranges it
 *   touched in stale_slot (when the list is full, stale_over: every
 *   protection, or everything, made unknown), then counts itself in
 *   stale_done.
 * - Every holder, before it releases the lock, makes the listed ranges
 *   unknown (an mprotect's protection only: the range stays owned, every
 *   other attribute is untouched by mprotect; anything else forgotten,
 *   and for the source of an mremap(MREMAP_DONTUNMAP) the lock state of
 *   the locked records joined to it too: mmf_map_unlock_joined) and takes
 *   what stale_done counted off both counts.
 * - stale_epoch counts bypasses ever begun: a section that shaped a call
 *   (trimmed it to the pages the map says change) forwards the caller's
 *   call as asked as well when the count moved meanwhile, so that the
 *   result is one the calls' order could give.
 *
 * Re-entrant calls (a signal handler inside a section on this thread) take
 * the same course there: the section they interrupted may never end (a
 * handler that longjmps out of it), so the thread's own list (pending)
 * would never be drained. */
uint32_t mmf_bypass_ok;
uint64_t mmf_lock_wait_ns = 1000000;
union mmf_stale_word mmf_stale_word;
uint64_t mmf_stale_epoch;
static uint64_t stale_done;
static uint32_t stale_over;

enum { SLOT_FREE, SLOT_FILLING, SLOT_DONE };
/* One page, mapped at start-up (the library's writable segment stays
 * small: check-footprint). */
struct stale_slot {
	uint32_t state, prot_only; /* 1: mprotect; 2: an mremap(MREMAP_DONTUNMAP) source */
	uint64_t s, e;
};
#define STALE_SLOTS ((int)(4096 / sizeof(struct stale_slot)))
static struct stale_slot *stale_slot;

int mmf_stale_init(void)
{
	void *p = mmf_sys_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mmf_sys_err((long)p))
		return -1;
	stale_slot = p;
	return 0;
}

void stale_add(uint64_t s, uint64_t e, int prot_only)
{
	if (s >= e)
		return;
	for (int i = 0; i < STALE_SLOTS; i++) {
		struct stale_slot *sl = &stale_slot[i];
		uint32_t f = SLOT_FREE;
		if (__atomic_load_n(&sl->state, __ATOMIC_RELAXED) != SLOT_FREE ||
		    !__atomic_compare_exchange_n(&sl->state, &f, SLOT_FILLING, 0, __ATOMIC_ACQUIRE,
						 __ATOMIC_RELAXED))
			continue;
		sl->s = s;
		sl->e = e;
		sl->prot_only = (uint32_t)prot_only;
		__atomic_store_n(&sl->state, SLOT_DONE, __ATOMIC_RELEASE);
		return;
	}
	/* the list is full: every protection unknown (1), or everything (2) */
	__atomic_fetch_or(&stale_over, prot_only == 1 ? 1u : 2u, __ATOMIC_RELEASE);
}

void stale_add_all(void) { __atomic_fetch_or(&stale_over, 2u, __ATOMIC_RELEASE); }

/* A call outside the section (bypassing, or a handler's) locked memory
 * (4), or changed mlockall's future state (8): what record() would have
 * noted in the safe state, noted by the next holder (stale_over's bits). */
void lock_state_changed(int future)
{
	__atomic_fetch_or(&stale_over, future ? 12u : 4u, __ATOMIC_RELEASE);
}

static void lock_state_apply(uint32_t over)
{
	if (over & 4)
		safe_state.mlock_seen = 1;
	if (over & 8)
		safe_state.future_lock = MMF_UNKNOWN;
}

/* What an mprotect that bypassed the map may have changed in [s,e): the
 * protection (and the key, and the lock state once anything was locked);
 * the records stay owned, the other attributes are untouched by it. */
static void prot_unknown(uint64_t s, uint64_t e)
{
	struct mmf_upd u = {.fields = MMF_F_PROT | MMF_F_PKEY |
				      (safe_state.mlock_seen ? MMF_F_LOCK_HELD : 0)};
	u.a.prot = MMF_UNKNOWN;
	u.a.pkey = -1;
	(void)mmf_map_update(&map, s, e, &u);
}

/* ---- calls in flight ------------------------------------------------------
 *
 * A section that leaves signals open (bypassing allowed) may never end: a
 * signal handler that siglongjmps out of it, or asynchronous cancellation,
 * between the kernel's change and the record's.  The lock stays with it
 * (other threads bypass, above), but readers would trust what the map
 * says of the call's range.  decide()'s general course therefore counts
 * its call in mmf_stale (bit 31, MMF_FLIGHT_BIT) from before the kernel
 * call until the map holds what it did, with the range it may change
 * (mmf_reach) published in mmf_flight; an mprotect inside one record marks
 * the record instead (mmf_map_prot_changing).  Each flight also adds one
 * to mmf_stale's high half, so that a reader that reads the same word
 * before and after the map knows that the flight it saw is still the one
 * in flight.  Readers skip a call whose range lies apart from the flight's
 * (mmf_flight_lets), nothing else while it is counted.  A section left
 * half-way keeps its bit and its range: nothing there is skipped again. */
struct mmf_flight mmf_flight MMF_DATA_ALIGN;

/* Writer lock held (so one flight at a time, and mmf_stale's high half
 * moves nowhere else): the range first, then the count, which numbers
 * the flight. */
void flight_begin(uint64_t s, uint64_t e)
{
	uint32_t id = (uint32_t)(__atomic_load_n(&mmf_stale, __ATOMIC_RELAXED) >> 32) + 1;
	/* release: a reader that reads one of these and then fences
	 * (acquire) sees the previous flight's end too, so its second read of
	 * mmf_stale cannot give the word it read before them */
	__atomic_store_n(&mmf_flight.s, s, __ATOMIC_RELEASE);
	__atomic_store_n(&mmf_flight.e, e, __ATOMIC_RELEASE);
	__atomic_store_n(&mmf_flight.id, id, __ATOMIC_RELEASE);
	__atomic_add_fetch(&mmf_stale, (1ull << 32) | MMF_FLIGHT_BIT, __ATOMIC_SEQ_CST);
}

void flight_end(void) { __atomic_sub_fetch(&mmf_stale, MMF_FLIGHT_BIT, __ATOMIC_SEQ_CST); }

/* A bypassing call begins (before its kernel call) and ends (after its
 * ranges are listed): decide.c's mmf_bypass. */
void stale_begin(void)
{
	__atomic_add_fetch(&mmf_stale, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&mmf_stale_epoch, 1, __ATOMIC_SEQ_CST);
}

void stale_end(void) { __atomic_add_fetch(&stale_done, 1, __ATOMIC_RELEASE); }

/* Writer lock held: what bypassing calls that ended changed is made
 * unknown, and they are accounted for. */
void stale_drain(void)
{
	if (!mmf_stale_now(__atomic_load_n(&mmf_stale, __ATOMIC_ACQUIRE)))
		return;
	uint64_t d = __atomic_load_n(&stale_done, __ATOMIC_ACQUIRE);
	uint32_t over = __atomic_exchange_n(&stale_over, 0, __ATOMIC_ACQ_REL);
	lock_state_apply(over);
	if (over & 2)
		mmf_map_forget(&map, 0, UINT64_MAX & ~(uint64_t)(page - 1));
	else if (over)
		prot_unknown(0, UINT64_MAX & ~(uint64_t)(page - 1));
	for (int i = 0; i < STALE_SLOTS; i++) {
		struct stale_slot *sl = &stale_slot[i];
		if (__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != SLOT_DONE)
			continue;
		uint64_t s = sl->s, e = sl->e;
		int prot_only = (int)sl->prot_only;
		__atomic_store_n(&sl->state, SLOT_FREE, __ATOMIC_RELEASE);
		if (prot_only == 1) {
			prot_unknown(s, e);
		} else {
			mmf_map_forget(&map, s, e);
			if (prot_only == 2) /* an mremap(MREMAP_DONTUNMAP) source */
				mmf_map_unlock_joined(&map, s, e);
		}
	}
	if (d) {
		__atomic_sub_fetch(&stale_done, d, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&mmf_stale, d, __ATOMIC_SEQ_CST);
	}
}

/* The lock just taken where bypassing is allowed: what bypasses changed
 * before this section, made unknown before it records anything, so that
 * its record stands.  1. */
static inline int section_taken(void)
{
	__atomic_store_n(&lock_gen, lock_gen + 1, __ATOMIC_RELAXED);
	if (mmf_stale_now(__atomic_load_n(&mmf_stale, __ATOMIC_RELAXED)))
		stale_drain();
	return 1;
}

/* A writer section where bypassing is allowed: 1 when entered, 0 when
 * the caller must bypass the map (mmf_bypass). */
int wenter_try(void)
{
	if (!__atomic_load_n(&mmf_bypass_ok, __ATOMIC_RELAXED)) {
		wenter();
		return 1;
	}
	section_open();
#ifdef MMF_FORCE_BYPASS
	/* A test build (make's libmmfold-bypass.so): one section in
	 * MMF_FORCE_BYPASS, at random, bypasses as if the lock were held for
	 * long; the sequence differs from run to run and thread to thread. */
	static __thread uint64_t force_x;
	if (!force_x)
		force_x = (mono_ns() ^ (uint64_t)(uintptr_t)&force_x) | 1;
	force_x ^= force_x << 13;
	force_x ^= force_x >> 7;
	force_x ^= force_x << 17;
	if (force_x % MMF_FORCE_BYPASS == 0) {
		in_write = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		return 0;
	}
#endif
	if (!mmf_map_trywlock(&map)) {
		/* the holder a waiter gave up on is still there: do not wait */
		uint32_t g = __atomic_load_n(&lock_gen, __ATOMIC_RELAXED);
		if (__atomic_load_n(&stuck_gen, __ATOMIC_RELAXED) == g + 1 ||
		    !mmf_map_wlock_until(&map, mono_ns() + mmf_lock_wait_ns)) {
			__atomic_store_n(&stuck_gen, g + 1, __ATOMIC_RELAXED);
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			in_write = 0;
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			return 0;
		}
	}
	return section_taken();
}

/* What the configuration allows (life.c); a batch, once begun, refuses
 * bypassing for good (its queues are applied under the lock). */
static uint32_t bypass_refused;

void mmf_bypass_allow(int ok)
{
	__atomic_store_n(&mmf_bypass_ok,
			 ok && stale_slot && !__atomic_load_n(&bypass_refused, __ATOMIC_RELAXED),
			 __ATOMIC_SEQ_CST);
}

void mmf_bypass_refuse(void)
{
	if (__atomic_load_n(&bypass_refused, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&bypass_refused, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&mmf_bypass_ok, 0, __ATOMIC_SEQ_CST);
}

/* A forked child: no bypassing call of the parent goes on in it. */
void mmf_stale_fork_child(void)
{
	mmf_stale = 0;
	mmf_flight.id = 0;
	stale_done = 0;
	stale_over = 0;
	stuck_gen = 0;
	for (int i = 0; stale_slot && i < STALE_SLOTS; i++)
		stale_slot[i].state = SLOT_FREE;
}

static void drain(void)
{
	for (;;) {
		if (PLD(pending.all)) {
			PST(pending.all, 0);
			PST(pending.n, 0);
			mmf_map_forget(&map, 0, UINT64_MAX & ~(uint64_t)(page - 1));
			continue;
		}
		int n = PLD(pending.n);
		if (n <= 0)
			break;
		uint64_t s = PLD(pending.s[n - 1]), e = PLD(pending.e[n - 1]);
		/* a handler that added an entry since the load makes this fail */
		if (!__atomic_compare_exchange_n(&pending.n, &n, n - 1, 0, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
			continue;
		if (s & 1) /* the call replaced what lazy mode had pending there */
			lazy_drop(s & ~3ull, e);
		mmf_map_forget(&map, s & ~3ull, e);
		if (s & 2) /* an mremap(MREMAP_DONTUNMAP) source */
			mmf_map_unlock_joined(&map, s & ~3ull, e);
	}
	/* after the list: a handler notes the lock state before it adds its
	 * range, so one the loop drained has noted it by now */
	if (__atomic_load_n(&stale_over, __ATOMIC_RELAXED) & 12)
		lock_state_apply(__atomic_fetch_and(&stale_over, ~12u, __ATOMIC_ACQ_REL));
}

void wleave(void)
{
	for (;;) {
		drain();
		stale_drain();
		in_write = 2;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		mmf_map_wunlock(&map);
		in_write = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (!PLD(pending.n) && !PLD(pending.all)) {
			async_restore();
			return;
		}
		wenter();
	}
}

/* Runs in a signal handler (or a nested call) while this thread holds or is
 * taking the map lock: the outer call drains the list before it unlocks. */
void pending_add(uint64_t s, uint64_t e)
{
	if (s >= e)
		return;
	int n = PLD(pending.n);
	if (n >= PENDING_MAX) {
		PST(pending.all, 1);
		return;
	}
	PST(pending.s[n], s);
	PST(pending.e[n], e);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	PST(pending.n, n + 1);
}

/* The writer section for the modules below the engine (barrier.c). */
void mmf_writer_enter(void) { wenter(); }
void mmf_writer_leave(void) { wleave(); }
int mmf_writer_held(void) { return in_write != 0; }
