/* The writer section: the shadow map the engine keeps, its writer lock and
 * the list of ranges changed behind the holder's back.  See docs/DESIGN.md.
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

/* This thread's writer state: 0 none, 1 holds the map lock, 2 releasing.
 * Signal handlers on this thread read and change it and the pending list
 * below, so every access is volatile or atomic: the compiler must neither
 * cache them in registers nor reuse an earlier load (GCC for aarch64 did,
 * and a handler's entry was then taken twice). */
__thread volatile int in_write __attribute__((tls_model("initial-exec")));
/* Ranges changed behind the holder's back (by re-entrant calls).  Only this
 * thread and its signal handlers touch it; entries are added by handlers
 * (which run to completion) and taken off with a compare-and-swap of n. */
__thread struct mmf_pending pending __attribute__((tls_model("initial-exec")));

/* A writer section runs with asynchronous signals blocked, for two
 * reasons.  A collector that stops the world with signals (Boehm GC, Mono)
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
 * map); a skipped call takes no section. */
static __thread volatile int wmasked __attribute__((tls_model("initial-exec")));
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
 * between must not wait for a lock its own thread is about to hold. */
void wenter(void)
{
	mmf_fast_forget(); /* a handler that runs inside must not skip from it */
	async_block();
	in_write = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	mmf_map_wlock(&map);
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
			return;
		uint64_t s = PLD(pending.s[n - 1]), e = PLD(pending.e[n - 1]);
		/* a handler that added an entry since the load makes this fail */
		if (!__atomic_compare_exchange_n(&pending.n, &n, n - 1, 0, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
			continue;
		if (s & 1) /* the call replaced what lazy mode had pending there */
			lazy_drop(s & ~1ull, e);
		mmf_map_forget(&map, s & ~1ull, e);
	}
}

void wleave(void)
{
	for (;;) {
		drain();
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

/* wleave when nothing is likely pending (the forward path): the same steps
 * without the loop, so that it saves no registers; anything a handler
 * added goes through wleave. */
void wleave_quick(void)
{
	if (PLD(pending.n) || PLD(pending.all)) {
		wleave();
		return;
	}
	in_write = 2;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	mmf_map_wunlock(&map);
	in_write = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (PLD(pending.n) || PLD(pending.all)) {
		wenter();
		wleave();
		return;
	}
	async_restore();
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
