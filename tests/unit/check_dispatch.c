/* The dispatcher (mmf_run), its decisions and records, and lazy mode's
 * deferred calls, linked without LD_PRELOAD over the fake kernel
 * (fake_kernel.h), which refuses calls as the kernel rarely does.  What each
 * test asserts: the caller gets the kernel's answer unchanged; the shadow
 * map does not record a state the kernel refused (a later call that would
 * be a no-op only under the refused state is forwarded, not skipped, and
 * one under the state the kernel did make is skipped); the counters. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"
#include "fake_kernel.h"
#include "fast.h"
#include "stats.h"
#include "suites.h"
#include "sys.h"

#define PGL ((long)mmf_page_size())
#define RW (PROT_READ | PROT_WRITE)

/* ENOMEM at the map-count limit: an mprotect that would split a VMA is
 * refused, nothing changes.  Only the refused range is forgotten. */
START_TEST(mprotect_enomem_split)
{
	fk_start("safe", NULL);
	char *p = fk_map(4, RW);
	fk_fail(FK_MPROTECT, FK_NEXT, (uint64_t)p + PGL, (uint64_t)p + 2 * PGL, ENOMEM, 1);
	ck_assert_int_eq(fk_mprotect(p + PGL, 1, PROT_READ), -ENOMEM);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED), 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_ERRORS), 1);
	p[PGL] = 1; /* the kernel left it writable */
	/* not recorded read-only: the same call again reaches the kernel */
	ck_assert_int_eq(fk_mprotect(p + PGL, 1, PROT_READ), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 2);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), 0);
	/* ... nor trusted again (forgotten: no longer owned): looks
	 * redundant, is forwarded, counted unproven */
	ck_assert_int_eq(fk_mprotect(p + PGL, 1, PROT_READ), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 3);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_UNPROVEN), 1);
	/* the neighbours' records were kept: their no-ops are skipped */
	ck_assert_int_eq(fk_mprotect(p, 1, RW), 0);
	ck_assert_int_eq(fk_mprotect(p + 2 * PGL, 2, RW), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 3);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), 2);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_CALLS), 5);
}
END_TEST

/* ENOMEM from mmap: the caller gets it; a refused MAP_FIXED (which may have
 * unmapped the old range) leaves the range unknown, never at the refused
 * protection. */
START_TEST(mmap_enomem)
{
	fk_start("safe", NULL);
	fk_fail(FK_MMAP, FK_NEXT, 0, 0, ENOMEM, 1);
	ck_assert_int_eq(fk_call(MMF_K_MMAP, 0, 4 * PGL, RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
			 -ENOMEM);
	ck_assert_uint_eq(fk_stat(MMF_K_MMAP, MMF_S_ERRORS), 1);
	char *p = fk_map(4, RW);
	fk_fail(FK_MMAP, FK_NEXT, (uint64_t)p, (uint64_t)p + 4 * PGL, ENOMEM, 1);
	ck_assert_int_eq(fk_call(MMF_K_MMAP, (long)p, 2 * PGL, PROT_READ,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
			 -ENOMEM);
	ck_assert_uint_eq(fk_stat(MMF_K_MMAP, MMF_S_ERRORS), 2);
	unsigned long n = fk_count(FK_MPROTECT, FK_NEXT);
	ck_assert_int_eq(fk_mprotect(p, 2, PROT_READ), 0); /* not skipped as "already so" */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 1);
	ck_assert_int_eq(fk_mprotect(p + 2 * PGL, 2, RW), 0); /* the rest still known */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), 1);
}
END_TEST

/* EAGAIN from mlock (pages could not be locked): given to the caller, the
 * range not recorded locked. */
START_TEST(mlock_eagain)
{
	fk_start("safe", NULL);
	char *p = fk_map(2, RW);
	fk_fail(FK_MLOCK, FK_NEXT, 0, 0, EAGAIN, 1);
	ck_assert_int_eq(fk_call(MMF_K_MLOCK, (long)p, 2 * PGL, 0, 0, 0, 0), -EAGAIN);
	ck_assert_uint_eq(fk_stat(MMF_K_MLOCK, MMF_S_ERRORS), 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MLOCK, MMF_S_FORWARDED), 1);
	long r = fk_call(MMF_K_MLOCK, (long)p, 2 * PGL, 0, 0, 0, 0);
	ck_assert_uint_eq(fk_count(FK_MLOCK, FK_NEXT), 2); /* not skipped */
	ck_assert_uint_eq(fk_stat(MMF_K_MLOCK, MMF_S_SKIPPED), 0);
	if (r == 0) /* (RLIMIT_MEMLOCK allowing) */
		ck_assert_int_eq(fk_call(MMF_K_MUNLOCK, (long)p, 2 * PGL, 0, 0, 0, 0), 0);
}
END_TEST

/* A repeated mlock2(MLOCK_ONFAULT) over a range so locked: skipped while
 * RLIMIT_MEMLOCK is unlimited, which is asked every time (another process
 * may lower it); forwarded once it is found finite, and the limit then not
 * asked again (it could only allow skips).  The forwarder pretends: the
 * kernel's mlock2 is not needed for what the map records, and valgrind
 * knows no mlock2. */
static unsigned long onfault_calls;
static long fwd_onfault(const struct mmf_op *o)
{
	(void)o;
	onfault_calls++;
	return 0;
}

static long onfault(char *p)
{
	struct mmf_op op = {.kind = MMF_K_MLOCK, .flags = MMF_OPF_MLOCK2,
			    .a = {(long)p, 2 * PGL, MLOCK_ONFAULT}, .fwd = fwd_onfault};
	return mmf_run(&op);
}

START_TEST(mlock2_onfault_repeated)
{
	fk_start("safe", NULL);
	char *p = fk_map(2, RW);
	fk_memlock = FK_MEMLOCK_UNLIMITED;
	ck_assert_int_eq(onfault(p), 0);
	ck_assert_uint_eq(onfault_calls, 1);
	unsigned long asked = fk_prlimit_calls;
	ck_assert_int_eq(onfault(p), 0);
	ck_assert_int_eq(onfault(p), 0);
	ck_assert_uint_eq(onfault_calls, 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MLOCK, MMF_S_SKIPPED), 2);
	ck_assert_uint_eq(fk_prlimit_calls, asked + 2);
	fk_memlock = FK_MEMLOCK_CAPPED;
	ck_assert_int_eq(onfault(p), 0);
	ck_assert_uint_eq(onfault_calls, 2);
	ck_assert_uint_eq(fk_prlimit_calls, asked + 3);
	fk_memlock = FK_MEMLOCK_UNLIMITED; /* not asked again */
	ck_assert_int_eq(onfault(p), 0);
	ck_assert_int_eq(onfault(p), 0);
	ck_assert_uint_eq(onfault_calls, 4);
	ck_assert_uint_eq(fk_prlimit_calls, asked + 3);
	ck_assert_uint_eq(fk_stat(MMF_K_MLOCK, MMF_S_SKIPPED), 2);
	ck_assert_uint_eq(fk_stat(MMF_K_MLOCK, MMF_S_UNPROVEN), 3);
}
END_TEST

/* A section's call in flight (wlock.c, "calls in flight": what decide()
 * counts while a signal handler could leave its section half-way): no
 * skip on its range, none anywhere while a bypassing call is counted too,
 * and skips apart from it go on; once it ends, and the bypass is
 * accounted for, its range is skipped again. */
START_TEST(flight_reader)
{
	fk_start("safe", NULL);
	char *p = fk_map(8, RW);
	uint64_t s = (uint64_t)p;
	ck_assert_int_eq(fk_mprotect(p + 4 * PGL, 4, PROT_READ), 0);
	unsigned long n = fk_count(FK_MPROTECT, FK_NEXT);
	ck_assert_int_eq(fk_mprotect(p, 1, RW), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n);
	flight_begin(s, s + 4 * (uint64_t)PGL);
	ck_assert_int_eq(fk_mprotect(p + 3 * PGL, 1, RW), 0); /* on its range */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 1);
	ck_assert_int_eq(fk_mprotect(p + 4 * PGL, 1, PROT_READ), 0); /* apart */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 1);
	stale_begin(); /* a bypassing call as well */
	ck_assert_int_eq(fk_mprotect(p + 4 * PGL, 1, PROT_READ), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 2);
	flight_end();
	ck_assert_int_eq(fk_mprotect(p, 1, RW), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 3);
	stale_end(); /* accounted for by the next section */
	ck_assert_int_eq(fk_mprotect(p + 5 * PGL, 1, PROT_READ), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 4);
	ck_assert_int_eq(fk_mprotect(p + 3 * PGL, 1, RW), 0);
	ck_assert_int_eq(fk_mprotect(p + 5 * PGL, 1, PROT_READ), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 4);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), 4);
	/* the rule at its edges: a range that ends where the flight's
	 * begins, or begins where it ends, lies apart; one from below it
	 * whose end wraps past the top of the address space does not */
	flight_begin(s + 2 * (uint64_t)PGL, s + 4 * (uint64_t)PGL);
	uint64_t w = __atomic_load_n(&mmf_stale, __ATOMIC_RELAXED), g = (uint64_t)PGL;
	ck_assert_int_eq(mmf_flight_lets(w, s, 2 * g), 1);
	ck_assert_int_eq(mmf_flight_lets(w, s + 4 * g, g), 1);
	ck_assert_int_eq(mmf_flight_lets(w, s, 2 * g + 1), 0);
	ck_assert_int_eq(mmf_flight_lets(w, s + 3 * g, g), 0);
	ck_assert_int_eq(mmf_flight_lets(w, s + g, UINT64_MAX - g), 0);
	ck_assert_int_eq(mmf_flight_lets(w + 1, s, g), 0); /* a bypass too */
	ck_assert_int_eq(mmf_flight_lets(w + (1ull << 32), s, g), 0); /* another flight's word */
	flight_end();
	ck_assert_int_eq(mmf_flight_lets(__atomic_load_n(&mmf_stale, __ATOMIC_RELAXED), s, g), 0);
}
END_TEST

/* mmf_fast_forward's course when it declines: a value no call returns. */
static int declined(void *a, size_t len, int prot, uint64_t v, uint32_t g)
{
	return INT_MIN;
}

/* mprotect as preload/mman.c's wrapper runs it: the skip test, then the
 * forward path's courses (a flipping record's, the flat one), then the
 * engine's.  The kernel's convention. */
static long wrapped(char *p, int prot)
{
	uint64_t a = (uint64_t)p, len = (uint64_t)PGL, v = 0;
	uint32_t g = 0;
	int f = mmf_fast_mprotect(a, len, prot, &v, &g);
	if (f == MMF_FAST_OTHER && mmf_fast_other_may_hold(a, len))
		f = mmf_fast_mprotect_other(a, len, prot, &v, &g);
	if (f == MMF_FAST_OTHER) { /* neither slot: the map asked (mmf_fast_find_then) */
		f = mmf_fast_find(a, len, prot, &v, &g);
		if (f == MMF_FAST_OTHER &&
		    (f = mmf_fast_mprotect(a, len, prot, &v, &g)) == MMF_FAST_OTHER)
			f = MMF_FAST_GENERAL;
	}
	if (f == MMF_FAST_SKIPPED)
		return 0;
	long (*fwd)(const struct mmf_op *) = fk_fwd(MMF_K_MPROTECT);
	if (f == MMF_FAST_MAYBE && !((prot | mmf_fast_prot(v)) & PROT_EXEC)) {
		long r = MMF_FAST_DECLINED;
		if (mmf_fast_flipping(v))
			r = mmf_fast_flip(a, len, prot, g, mmf_next.mprotect, fwd);
		if (r != MMF_FAST_DECLINED)
			return r;
		int lr = mmf_fast_forward(p, len, prot, v, g, mmf_next.mprotect, fwd, declined);
		if (lr != INT_MIN)
			return lr == 0 ? 0 : -errno;
	}
	struct mmf_op op = {.kind = MMF_K_MPROTECT, .a = {(long)a, (long)len, prot}, .fwd = fwd};
	return f == MMF_FAST_MAYBE ? mmf_run_change(&op, v, g) : mmf_run(&op);
}

/* A thread's block before its first learn: no slot named as the other
 * one, and the wrapper's test of its range sends every call to the
 * slot's own test (which finds no hint). */
static void *fresh_thread(void *arg)
{
	(void)arg;
	int ok = mmf_fast_tls.cur == NULL && mmf_fast_tls.oth == NULL &&
		 mmf_fast_other_may_hold(0x10000, 4096) == 1;
	return ok ? (void *)1 : NULL;
}

/* mmf_fast_find learned a record for [a, a + len) (a protection it never
 * answers for: no counter moves). */
static int find_learns(uint64_t a, uint64_t len)
{
	uint64_t v = 0;
	uint32_t g = 0;
	int f = mmf_fast_find(a, len, 8, &v, &g);
	ck_assert(f == MMF_FAST_GENERAL || f == MMF_FAST_OTHER);
	return f == MMF_FAST_OTHER;
}

static int prot_at(char *p)
{
	struct mmf_rec r;
	ck_assert(mmf_map_lookup(&map, (uint64_t)p, &r));
	return r.a.prot;
}

/* Flipping records (fastrun.c): 8 changes of one page in a row through
 * the forward path make its record flipping; each later change reaches
 * the kernel and leaves the map as it was; a call that repeats the last
 * one records the protection again and the next is skipped; a skip in a
 * run starts the count again; PROT_EXEC takes the general course, which
 * records what it did. */
START_TEST(flipping)
{
	fk_start("safe", NULL);
	/* the forward path open (MMFOLD_SHAPE=off, fk_start's: no shaping) */
	ck_assert_uint_eq(__atomic_load_n(&mmf_fast_chg_prots, __ATOMIC_RELAXED) & (1u << RW), 1u << RW);
	char *m = fk_map(3, PROT_NONE);
	char *p = m + PGL; /* a record of its own: its neighbours stay PROT_NONE */
	ck_assert_int_eq(wrapped(p, RW), 0); /* learns the hint */
	for (int k = 1; k <= 8; k++) {
		ck_assert_uint_eq(fk_event(MMF_E_FLIP_BEGUN), 0);
		ck_assert_int_eq(wrapped(p, k & 1 ? PROT_READ : RW), 0);
	}
	ck_assert_uint_eq(fk_event(MMF_E_FLIP_BEGUN), 1);
	ck_assert_int_eq(prot_at(p), MMF_PROT_FLIP);
	/* the run goes on (the 8th call asked for RW) */
	unsigned long n = fk_count(FK_MPROTECT, FK_NEXT);
	uint32_t seq = map.seq;
	for (int k = 1; k <= 6; k++) {
		int prot = k & 1 ? PROT_READ : RW;
		ck_assert_int_eq(wrapped(p, prot), 0);
		ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + (unsigned long)k);
		ck_assert_int_eq(fk_log[fk_log_n - 1].prot, prot);
		ck_assert_int_eq(prot_at(p), MMF_PROT_FLIP);
		ck_assert_uint_eq(map.seq, seq); /* no record moved */
	}
	p[0] = 1; /* the kernel made it RW */
	/* the last call again: forwarded, and recorded */
	ck_assert_int_eq(wrapped(p, RW), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 7);
	ck_assert_uint_eq(fk_event(MMF_E_FLIP_ENDED), 1);
	ck_assert_int_eq(prot_at(p), RW);
	uint64_t skipped = fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED);
	ck_assert_int_eq(wrapped(p, RW), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 7);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), skipped + 1);
	/* 7 changes, a skip, 7 changes: still followed; one more makes 8 */
	for (int k = 1; k <= 7; k++)
		ck_assert_int_eq(wrapped(p, k & 1 ? PROT_READ : RW), 0);
	ck_assert_int_eq(wrapped(p, PROT_READ), 0);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), skipped + 2);
	for (int k = 1; k <= 7; k++)
		ck_assert_int_eq(wrapped(p, k & 1 ? RW : PROT_READ), 0);
	ck_assert_uint_eq(fk_event(MMF_E_FLIP_BEGUN), 1);
	ck_assert_int_eq(prot_at(p), RW);
	ck_assert_int_eq(wrapped(p, PROT_READ), 0);
	ck_assert_uint_eq(fk_event(MMF_E_FLIP_BEGUN), 2);
	ck_assert_int_eq(prot_at(p), MMF_PROT_FLIP);
	/* an executable request: the general course records it */
	n = fk_count(FK_MPROTECT, FK_NEXT);
	ck_assert_int_eq(wrapped(p, PROT_READ | PROT_EXEC), 0);
	ck_assert_int_eq(prot_at(p), PROT_READ | PROT_EXEC);
	ck_assert_int_eq(wrapped(p, PROT_READ | PROT_EXEC), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 1);
	ck_assert_int_eq(mmf_map_validate(&map), 0);
}
END_TEST

/* mmf_fast_hot's cold course, as preload/mman.c's mprotect_cold: here it
 * only says it was taken. */
static int hot_colds;
static int hot_cold(void *addr, size_t len, int prot)
{
	(void)addr, (void)len, (void)prot;
	hot_colds++;
	return 7;
}

/* The hot flip (fastrun.c, mmf_fast_hot): the range a thread found inside
 * a flipping record is kept; a call on exactly it asking for another
 * protection reaches the kernel without the skip test and leaves the map
 * as it is; a repeat, another range, a record no longer flipping or moved
 * go to the cold course, the last two forgetting the range; a call the
 * kernel refuses keeps its errno and forgets the range and its record. */
START_TEST(hot_flip)
{
	fk_start("safe", NULL);
	struct mmf_fast_tls *x = &mmf_fast_tls;
	char *m = fk_map(3, PROT_NONE);
	char *p = m + PGL;
	ck_assert_int_eq(wrapped(p, RW), 0);
	for (int k = 1; k <= 8; k++)
		ck_assert_int_eq(wrapped(p, k & 1 ? PROT_READ : RW), 0);
	ck_assert_int_eq(prot_at(p), MMF_PROT_FLIP);
	ck_assert_uint_eq(x->flip_hot, (uint64_t)p); /* kept when it began */
	ck_assert_uint_eq(x->flip_he, (uint64_t)p + PGL);
	unsigned long n = fk_count(FK_MPROTECT, FK_NEXT);
	uint64_t calls = fk_stat(MMF_K_MPROTECT, MMF_S_CALLS);
	uint32_t seq = map.seq;
	hot_colds = 0;
	for (int k = 1; k <= 4; k++) { /* the 8th asked for RW */
		int prot = k & 1 ? PROT_READ : RW;
		ck_assert_int_eq(mmf_fast_hot(p, PGL, prot, mmf_next.mprotect, hot_cold), 0);
		ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + (unsigned long)k);
		ck_assert_int_eq(fk_log[fk_log_n - 1].prot, prot);
	}
	ck_assert_int_eq(hot_colds, 0);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_CALLS), calls + 4);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED) >= 4, 1);
	ck_assert_uint_eq(map.seq, seq);
	ck_assert_int_eq(prot_at(p), MMF_PROT_FLIP);
	/* a repeat, a longer range, an executable request: cold, the range kept */
	ck_assert_int_eq(mmf_fast_hot(p, PGL, RW, mmf_next.mprotect, hot_cold), 7);
	ck_assert_int_eq(mmf_fast_hot(p, 2 * PGL, PROT_READ, mmf_next.mprotect, hot_cold), 7);
	ck_assert_int_eq(mmf_fast_hot(p, PGL, PROT_READ | PROT_EXEC, mmf_next.mprotect, hot_cold), 7);
	ck_assert_int_eq(hot_colds, 3);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 4);
	ck_assert_uint_eq(x->flip_hot, (uint64_t)p);
	/* inside a writer section (a signal handler's call): cold */
	in_write = 1;
	ck_assert_int_eq(mmf_fast_hot(p, PGL, PROT_READ, mmf_next.mprotect, hot_cold), 7);
	in_write = 0;
	ck_assert_int_eq(hot_colds, 4);
	/* the kernel refuses: its errno, the range and its record forgotten */
	fk_fail(FK_MPROTECT, FK_NEXT, (uint64_t)p, (uint64_t)p + PGL, EACCES, 1);
	uint64_t errors = fk_stat(MMF_K_MPROTECT, MMF_S_ERRORS);
	errno = 0;
	ck_assert_int_eq(mmf_fast_hot(p, PGL, PROT_READ, mmf_next.mprotect, hot_cold), -1);
	ck_assert_int_eq(errno, EACCES);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_ERRORS), errors + 1);
	ck_assert_uint_eq(x->flip_hot, 0);
	ck_assert_int_eq(prot_at(p), MMF_UNKNOWN); /* forgotten: unknown */
	ck_assert_int_eq(in_write, 0); /* the section left */
	/* flipping again (the page mapped anew), then ended by a general
	 * course's call: the next hot call finds the word known, goes cold
	 * and forgets the range */
	fk_clear();
	ck_assert_int_eq(fk_call(MMF_K_MMAP, (long)p, PGL, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
			 (long)p);
	ck_assert_int_eq(wrapped(p, RW), 0); /* a no-op: the hint learned */
	for (int k = 1; k <= 8; k++)
		ck_assert_int_eq(wrapped(p, k & 1 ? PROT_READ : RW), 0);
	ck_assert_uint_eq(x->flip_hot, (uint64_t)p);
	ck_assert_int_eq(wrapped(p, PROT_READ | PROT_EXEC), 0);
	ck_assert_int_eq(prot_at(p), PROT_READ | PROT_EXEC);
	hot_colds = 0;
	ck_assert_int_eq(mmf_fast_hot(p, PGL, PROT_READ, mmf_next.mprotect, hot_cold), 7);
	ck_assert_int_eq(hot_colds, 1);
	ck_assert_uint_eq(x->flip_hot, 0);
	ck_assert_int_eq(mmf_map_validate(&map), 0);
}
END_TEST

/* The hint's other slot (mmf_fast_mprotect_other): a call that the
 * current record misses (MMF_FAST_OTHER) is asked of the record found
 * before it.  A no-op there is skipped and leaves the hint as it is; a
 * change makes that slot current (gen moved, cur the slot gen names), so
 * that the forward path copies it.  Nothing is answered from it for a
 * call it does not hold, inside a writer section or a learn, or after its
 * record moved; mmf_fast_forget empties both slots. */
START_TEST(hint_other)
{
	fk_start("safe", NULL);
	struct mmf_fast_tls *x = &mmf_fast_tls;
	char *a = fk_map(3, PROT_NONE), *b = fk_map(3, PROT_NONE), *c = fk_map(3, PROT_NONE);
	char *pa = a + PGL, *pb = b + PGL;
	ck_assert_int_eq(wrapped(pb, RW), 0);
	ck_assert_int_eq(wrapped(pa, RW), 0); /* splits a's record: b's hint is stale */
	ck_assert_int_eq(wrapped(pb, RW), 0); /* a no-op, b's record learned again */
	ck_assert_int_eq(wrapped(pa, RW), 0); /* a no-op, skipped from the other slot */
	ck_assert_ptr_eq(x->cur, &x->r[x->gen & 1]);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pb);
	uint64_t v;
	uint32_t g, gen = x->gen;
	/* the current slot holds b: a's call misses it, and the other holds a */
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_OTHER);
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)c + PGL, PGL, RW, &v, &g), MMF_FAST_OTHER);
	/* what the other slot does not hold: MMF_FAST_OTHER (the map asked) */
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pb, PGL, RW, &v, &g), MMF_FAST_OTHER);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)c + PGL, PGL, RW, &v, &g),
			 MMF_FAST_OTHER); /* in neither */
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, 2 * PGL, RW, &v, &g),
			 MMF_FAST_OTHER); /* past a's record */
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa + 1, PGL, RW, &v, &g),
			 MMF_FAST_OTHER); /* not page aligned */
	in_write = 1;
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_GENERAL);
	in_write = 0;
	x->learning = 1; /* a handler that interrupted a learn writing that slot */
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_GENERAL);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, PGL, PROT_READ, &v, &g),
			 MMF_FAST_GENERAL);
	x->learning = 0;
	ck_assert_uint_eq(x->gen, gen);
	/* a no-op in the other slot: skipped, the hint left as it is */
	uint64_t skipped = fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_SKIPPED);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), skipped + 1);
	ck_assert_uint_eq(x->gen, gen);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pb);
	/* a take whose generation moved does nothing */
	ck_assert_int_eq(mmf_fast_take(x, gen - 1), 0);
	ck_assert_uint_eq(x->gen, gen);
	ck_assert_int_eq(x->learning, 0);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pb);
	/* a change there: the slot becomes current, g its generation */
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, PGL, PROT_READ, &v, &g),
			 MMF_FAST_MAYBE);
	ck_assert_uint_eq(x->gen, gen + 1);
	ck_assert_uint_eq(g, gen + 1);
	ck_assert_int_eq(x->learning, 0);
	ck_assert_ptr_eq(x->cur, &x->r[x->gen & 1]);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pa);
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_SKIPPED);
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)pb, PGL, RW, &v, &g), MMF_FAST_OTHER);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pb, PGL, RW, &v, &g), MMF_FAST_SKIPPED);
	/* the change made through the wrapper's course: the forward path
	 * takes the slot it made current, and the map follows the kernel */
	uint64_t fwd = fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED);
	ck_assert_int_eq(wrapped(pb, PROT_READ), 0);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED), fwd + 1);
	ck_assert_int_eq(prot_at(pb), PROT_READ);
	ck_assert_int_eq(wrapped(pa, PROT_READ), 0);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED), fwd + 2);
	ck_assert_int_eq(prot_at(pa), PROT_READ);
	ck_assert_int_eq(wrapped(pb, RW), 0);
	ck_assert_int_eq(wrapped(pa, RW), 0);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED), fwd + 4);
	ck_assert_int_eq(prot_at(pa), RW);
	ck_assert_int_eq(prot_at(pb), RW);
	ck_assert_int_eq(wrapped(pb, RW), 0); /* both no-ops, one from each slot */
	ck_assert_int_eq(wrapped(pa, RW), 0);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED), fwd + 4);
	/* a learn after a take writes the slot that is not current (c's
	 * call a no-op: no record moves, so a's hint stays good) */
	ck_assert_int_eq(wrapped(c + PGL, PROT_NONE), 0);
	ck_assert_ptr_eq(x->cur, &x->r[x->gen & 1]);
	/* (c's record may reach into a neighbour's PROT_NONE pages) */
	ck_assert(x->cur->start <= (uint64_t)c + PGL && (uint64_t)c + PGL < x->cur->end);
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_OTHER);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_SKIPPED);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pb, PGL, RW, &v, &g), MMF_FAST_OTHER);
	/* emptied, both slots: nothing answered from either */
	mmf_fast_forget();
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)c + PGL, PGL, PROT_NONE, &v, &g),
			 MMF_FAST_OTHER);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_OTHER);
	/* a record that moved since its hint was taken: not trusted */
	ck_assert_int_eq(wrapped(pa, RW), 0); /* learned again */
	ck_assert_int_eq(wrapped(c + PGL, PROT_READ), 0); /* splits c's record */
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_OTHER);
	ck_assert_int_eq(mmf_map_validate(&map), 0);
}
END_TEST

/* The map asked when neither slot of the hint holds the call's range, or
 * their records moved (mmf_fast_find): the record that holds it all is
 * looked up without a lock and learned (the slot that is not current
 * written, gen moved by one), and the skip test answers from it.  Nothing
 * is learned for a range no one record holds (across records, a hole), an
 * unaligned or empty one, while a writer is busy, inside a writer
 * section, during a learn, or in a batch.  Three records changed and
 * repeated in turn through the wrapper's course: each call finds its
 * record in the map, the changes are forwarded, the no-ops skipped, and
 * the map follows the kernel. */
START_TEST(hint_find)
{
	fk_start("safe", NULL);
	struct mmf_fast_tls *x = &mmf_fast_tls;
	char *a = fk_map(3, PROT_NONE), *b = fk_map(3, PROT_NONE), *c = fk_map(3, PROT_NONE);
	char *pa = a + PGL, *pb = b + PGL, *pc = c + PGL;
	ck_assert_int_eq(wrapped(pa, RW), 0);
	/* b's first call finds b's mapping one record, splits pb off it and
	 * learns pb's record; so for c */
	ck_assert_int_eq(wrapped(pb, RW), 0);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pb);
	ck_assert_int_eq(wrapped(pc, RW), 0);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pc);
	/* a no-op on pb: the other slot holds c's record before the split
	 * (moved since): pb's record found and learned; then pc's skipped
	 * from the other slot */
	ck_assert_int_eq(wrapped(pb, RW), 0);
	ck_assert_int_eq(wrapped(pc, RW), 0);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pb);
	ck_assert_uint_eq(x->r[(x->gen + 1) & 1].start, (uint64_t)pc);
	uint64_t v;
	uint32_t g, gen = x->gen;
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_OTHER);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_OTHER);
	/* refused: nothing learned */
	ck_assert_int_eq(find_learns((uint64_t)pa + 1, PGL), 0);
	ck_assert_int_eq(find_learns((uint64_t)pa, 0), 0);
	ck_assert_int_eq(find_learns((uint64_t)pa, 2 * PGL), 0); /* into the guard's record */
	ck_assert_int_eq(find_learns((uint64_t)a, 3 * PGL), 0);
	ck_assert_int_eq(find_learns(UINT64_MAX & ~(uint64_t)(PGL - 1), PGL), 0); /* a hole */
	ck_assert_int_eq(find_learns((uint64_t)pa, UINT64_MAX), 0);
	in_write = 1;
	ck_assert_int_eq(find_learns((uint64_t)pa, PGL), 0);
	in_write = 0;
	x->learning = 1;
	ck_assert_int_eq(find_learns((uint64_t)pa, PGL), 0);
	x->learning = 0;
	mmf_batch_depth = 1;
	ck_assert_int_eq(find_learns((uint64_t)pa, PGL), 0);
	mmf_batch_depth = 0;
	__atomic_add_fetch(&map.seq, 1, __ATOMIC_RELAXED); /* a writer busy */
	ck_assert_int_eq(find_learns((uint64_t)pa, PGL), 0);
	__atomic_sub_fetch(&map.seq, 1, __ATOMIC_RELAXED);
	ck_assert_uint_eq(x->gen, gen);
	ck_assert_int_eq(x->learning, 0);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pb);
	pthread_t th;
	void *fresh = NULL;
	ck_assert_int_eq(pthread_create(&th, NULL, fresh_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(th, &fresh), 0);
	ck_assert_ptr_nonnull(fresh);
	/* found and learned: the current slot, the one before kept */
	const struct mmf_slotref *before = x->cur;
	ck_assert_int_eq(find_learns((uint64_t)pa, PGL), 1);
	ck_assert_uint_eq(x->gen, gen + 1);
	ck_assert_int_eq(x->learning, 0);
	ck_assert_ptr_eq(x->cur, &x->r[x->gen & 1]);
	ck_assert_ptr_ne(x->cur, before);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pa);
	ck_assert_uint_eq(x->cur->end, (uint64_t)pa + PGL);
	ck_assert_uint_eq(x->cur->seq, __atomic_load_n(&map.seq, __ATOMIC_RELAXED));
	ck_assert_uint_eq(before->start, (uint64_t)pb);
	/* the slot not current named for the wrapper's test of its range */
	ck_assert_ptr_eq(x->oth, before);
	ck_assert_int_eq(mmf_fast_other_may_hold((uint64_t)pb, PGL), 1);
	ck_assert_int_eq(mmf_fast_other_may_hold((uint64_t)pb, PGL + 1), 0);
	ck_assert_int_eq(mmf_fast_other_may_hold((uint64_t)pb - PGL, PGL), 0);
	ck_assert_int_eq(mmf_fast_other_may_hold((uint64_t)pa, PGL), 0);
	ck_assert_int_eq(mmf_fast_other_may_hold((uint64_t)pc, PGL), 0);
	uint64_t skipped = fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED);
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_SKIPPED);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), skipped + 1);
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)pa, PGL, PROT_READ, &v, &g), MMF_FAST_MAYBE);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pb, PGL, RW, &v, &g), MMF_FAST_SKIPPED);
	ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)pc, PGL, RW, &v, &g), MMF_FAST_OTHER);
	/* the skip test's answer given from the word the lookup read: a
	 * no-op skipped and counted, a change MMF_FAST_MAYBE with the word and
	 * the learn's generation; a call bypassing the map (mmf_stale's low
	 * half), the gate closed, or a protection above 7: learned, no answer
	 * (the skip test asked then) */
	uint64_t calls = fk_stat(MMF_K_MPROTECT, MMF_S_CALLS);
	skipped = fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED);
	gen = x->gen;
	ck_assert_int_eq(mmf_fast_find((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_SKIPPED);
	ck_assert_uint_eq(x->gen, gen + 1);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pa);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), skipped + 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_CALLS), calls + 1);
	v = 0;
	g = 0;
	ck_assert_int_eq(mmf_fast_find((uint64_t)pa, PGL, PROT_READ, &v, &g), MMF_FAST_MAYBE);
	ck_assert_uint_eq(g, gen + 2);
	ck_assert_uint_eq(x->gen, g);
	ck_assert_uint_eq(v, *x->cur->attr);
	ck_assert_int_eq(mmf_fast_prot(v), RW);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_CALLS), calls + 1);
	__atomic_add_fetch(&mmf_stale, 1, __ATOMIC_RELAXED);
	ck_assert_int_eq(mmf_fast_find((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_OTHER);
	ck_assert_int_eq(mmf_fast_mprotect((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_GENERAL);
	__atomic_sub_fetch(&mmf_stale, 1, __ATOMIC_RELAXED);
	ck_assert_uint_eq(x->gen, gen + 3);
	uint64_t gate = mmf_fast.all;
	mmf_fast.f.off |= MMF_FAST_PROFILE;
	ck_assert_int_eq(mmf_fast_find((uint64_t)pa, PGL, RW, &v, &g), MMF_FAST_OTHER);
	mmf_fast.all = gate;
	ck_assert_int_eq(mmf_fast_find((uint64_t)pa, PGL, 8, &v, &g), MMF_FAST_OTHER);
	ck_assert_uint_eq(x->gen, gen + 5);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), skipped + 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_CALLS), calls + 1);
	/* a record that holds part of a range alone is not found: a's
	 * record is its middle page; a range from its start into the next
	 * record is not found, one inside it is */
	ck_assert_int_eq(find_learns((uint64_t)pa, PGL + 1), 0);
	ck_assert_int_eq(find_learns((uint64_t)pa, PGL - 1), 1);
	/* three records in turn through the wrapper's course: a change or a
	 * no-op each, every call finding its record in the map */
	char *p3[3] = {pb, pc, pa}; /* the slots hold a's record twice */
	int want[3] = {RW, RW, RW};
	uint64_t fwd = fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED), next = fk_count(FK_MPROTECT, FK_NEXT);
	uint64_t skips = fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), changes = 0, noops = 0;
	for (int k = 0; k < 24; k++) {
		int i = k % 3, prot = (k / 3) % 3 == 2 ? want[i] : want[i] == RW ? PROT_READ : RW;
		gen = x->gen;
		ck_assert_int_eq(mmf_fast_mprotect((uint64_t)p3[i], PGL, prot, &v, &g), MMF_FAST_OTHER);
		ck_assert_int_eq(mmf_fast_mprotect_other((uint64_t)p3[i], PGL, prot, &v, &g),
				 MMF_FAST_OTHER);
		ck_assert_int_eq(wrapped(p3[i], prot), 0);
		ck_assert_uint_eq(x->cur->start, (uint64_t)p3[i]); /* learned */
		ck_assert_ptr_eq(x->oth, &x->r[(x->gen + 1) & 1]);
		if (prot == want[i])
			noops++;
		else
			changes++;
		want[i] = prot;
		for (int j = 0; j < 3; j++)
			ck_assert_int_eq(prot_at(p3[j]), want[j]);
	}
	ck_assert_uint_eq(changes, 18);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED), fwd + changes);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), next + changes);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), skips + noops);
	/* a record the fast paths do not answer for is not learned: a call
	 * the kernel refused left d's page observed, its protection unknown */
	char *d = fk_map(3, PROT_NONE), *pd = d + PGL;
	ck_assert_int_eq(wrapped(pd, RW), 0);
	fk_fail(FK_MPROTECT, FK_NEXT, (uint64_t)pd, (uint64_t)pd + PGL, ENOMEM, 1);
	ck_assert_int_eq(wrapped(pd, PROT_READ), -ENOMEM);
	struct mmf_rec rd;
	ck_assert(mmf_map_lookup(&map, (uint64_t)pd, &rd));
	ck_assert_int_eq(rd.a.owned, 0);
	ck_assert_int_eq(wrapped(pa, RW), 0); /* the slots hold neither */
	ck_assert_int_eq(wrapped(pb, RW), 0);
	gen = x->gen;
	ck_assert_int_eq(find_learns((uint64_t)pd, PGL), 0);
	ck_assert_uint_eq(x->gen, gen);
	ck_assert_uint_eq(x->cur->start, (uint64_t)pb);
	ck_assert_int_eq(mmf_map_validate(&map), 0);
}
END_TEST

/* The flat forward course when the record's block cannot take the change
 * (mmf_map_reprot declines: the record is the first of a block other
 * than the map's first, so that the record before it lies in another
 * block): the kernel called once, change_rest records the protection
 * through the general course's record(), and the next call, a no-op, is
 * skipped from it.  The same for a call that fails there. */
START_TEST(forward_block_edge)
{
	fk_start("safe", NULL);
	struct mmf_fast_tls *x = &mmf_fast_tls;
	int n = 3 * MMF_BLOCK_CAP;
	char *m = fk_map(n, PROT_NONE);
	for (int k = 1; k < n; k += 2)
		ck_assert_int_eq(fk_mprotect(m + k * PGL, 1, RW), 0);
	/* pages RW and PROT_NONE in turn, a record each, over several
	 * blocks: one first in its block */
	char *p = NULL;
	for (int k = 1; k < n - 1 && !p; k++) {
		struct mmf_slotref r;
		uint64_t w;
		uint64_t s = (uint64_t)m + (uint64_t)k * PGL;
		if (mmf_map_find(&map, s, s + PGL, 0, 0, NULL, &r, &w) && r.i == 0 &&
		    r.b != map.top[0])
			p = m + k * PGL;
	}
	ck_assert_ptr_nonnull(p);
	int was = prot_at(p), to = was == RW ? PROT_READ : RW, back = was == RW ? RW : PROT_READ;
	uint64_t next = fk_count(FK_MPROTECT, FK_NEXT);
	uint64_t fwd = fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED);
	uint64_t skipped = fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED);
	ck_assert_int_eq(wrapped(p, to), 0);
	ck_assert_uint_eq(x->flip_a, (uint64_t)p); /* the flat course took it */
	ck_assert_uint_eq(x->flip_n, 1);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), next + 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_FORWARDED), fwd + 1);
	ck_assert_int_eq(prot_at(p), to);
	ck_assert_int_eq(prot_at(p - PGL), was == RW ? PROT_NONE : RW);
	ck_assert_int_eq(prot_at(p + PGL), was == RW ? PROT_NONE : RW);
	ck_assert_int_eq(wrapped(p, to), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), next + 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), skipped + 1);
	/* a call the kernel refuses there: the error, and the protection
	 * left unknown (record()'s course for a failure) */
	fk_fail(FK_MPROTECT, FK_NEXT, (uint64_t)p, (uint64_t)p + PGL, EACCES, 1);
	ck_assert_int_eq(wrapped(p, back), -EACCES);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), next + 2);
	struct mmf_rec r;
	ck_assert(mmf_map_lookup(&map, (uint64_t)p, &r));
	ck_assert_int_ne(r.a.prot, to);
	ck_assert_int_eq(wrapped(p, to), 0); /* forwarded: not known */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), next + 3);
	ck_assert_int_eq(mmf_map_validate(&map), 0);
}
END_TEST

/* mmf_map_find with a record found before (near): the two records after
 * it are looked at first; whatever near is, the answer is the search's.
 * Every range around three records (each page of three 3-page mappings,
 * one page and two, and a page past them), asked with each of the
 * records around as near, with near's sequence current or not: found or
 * not, and the record found, as without near. */
START_TEST(find_near)
{
	fk_start("safe", NULL);
	char *m[3];
	for (int k = 0; k < 3; k++) {
		m[k] = fk_map(3, PROT_NONE);
		ck_assert_int_eq(fk_mprotect(m[k] + PGL, 1, RW), 0);
	}
	/* the records the ranges fall in, as nears */
	struct mmf_slotref nears[9 * 2];
	uint64_t word;
	int nn = 0;
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 3; j++)
			if (mmf_map_find(&map, (uint64_t)m[k] + j * PGL, (uint64_t)m[k] + (j + 1) * PGL,
					 0, 0, NULL, &nears[nn], &word))
				nn++;
	ck_assert_int_ge(nn, 7);
	for (int k = 0; k < nn; k++) { /* the same records at another sequence */
		nears[nn + k] = nears[k];
		nears[nn + k].seq += 2;
	}
	int asked = 0, found = 0;
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 4; j++)
			for (int len = 1; len <= 2; len++) {
				uint64_t s = (uint64_t)m[k] + j * PGL, e = s + len * PGL;
				struct mmf_slotref want, got;
				uint64_t ww = 0, gw = 1;
				int w = mmf_map_find(&map, s, e, 0, 0, NULL, &want, &ww);
				for (int q = 0; q < 2 * nn; q++) {
					memset(&got, 0, sizeof got);
					int f = mmf_map_find(&map, s, e, 0, 0, &nears[q], &got, &gw);
					ck_assert_int_eq(f, w);
					if (w) {
						ck_assert_uint_eq(got.start, want.start);
						ck_assert_uint_eq(got.end, want.end);
						ck_assert_ptr_eq(got.attr, want.attr);
						ck_assert_ptr_eq(got.b, want.b);
						ck_assert_uint_eq(got.i, want.i);
						ck_assert_uint_eq(got.seq, want.seq);
						ck_assert_uint_eq(gw, ww); /* the record's word */
						ck_assert_uint_eq(ww, *want.attr);
					}
					asked++;
					found += f;
				}
			}
	ck_assert_int_gt(found, 0);
	ck_assert_int_gt(asked - found, 0);
	/* the word's test: a mask that no record's word meets finds none */
	struct mmf_slotref r;
	ck_assert_int_eq(mmf_map_find(&map, (uint64_t)m[0] + PGL, (uint64_t)m[0] + 2 * PGL,
				      ~0ull, 0, &nears[0], &r, &word), 0);
	ck_assert_int_eq(mmf_map_find(&map, (uint64_t)m[0] + PGL, (uint64_t)m[0] + 2 * PGL,
				      ~0ull, 0, NULL, &r, &word), 0);
}
END_TEST

/* A sealed range: mseal made through mmfold (the fake pretends it
 * succeeded), then the kernel refuses mprotect, munmap and madvise there
 * with EPERM even when nothing would change.  Each gets EPERM, every time:
 * none is answered from the map. */
START_TEST(seal_eperm)
{
	fk_start("safe", NULL);
	char *p = fk_map(4, RW);
	uint64_t s = (uint64_t)p, e = s + 2 * PGL;
	fk_fail(FK_MSEAL, FK_NEXT, s, e, FK_OK, -1);
	ck_assert_int_eq(fk_call(MMF_K_MSEAL, (long)p, 2 * PGL, 0, 0, 0, 0), 0);
	fk_fail(FK_MPROTECT, FK_NEXT, s, e, EPERM, -1);
	fk_fail(FK_MUNMAP, FK_NEXT, s, e, EPERM, -1);
	fk_fail(FK_MADVISE, FK_NEXT, s, e, EPERM, -1);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(fk_mprotect(p, 2, RW), -EPERM); /* a no-op but for the seal */
		ck_assert_int_eq(fk_call(MMF_K_MUNMAP, (long)p, 2 * PGL, 0, 0, 0, 0), -EPERM);
		ck_assert_int_eq(fk_call(MMF_K_MADVISE, (long)p, PGL, MADV_DONTDUMP, 0, 0, 0),
				 -EPERM);
	}
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 2);
	ck_assert_uint_eq(fk_count(FK_MUNMAP, FK_NEXT), 2);
	ck_assert_uint_eq(fk_count(FK_MADVISE, FK_NEXT), 2);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_ERRORS), 2);
	ck_assert_uint_eq(fk_stat(MMF_K_MUNMAP, MMF_S_ERRORS), 2);
	ck_assert_uint_eq(fk_stat(MMF_K_MADVISE, MMF_S_ERRORS), 2);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), 0);
	p[0] = 1; /* still mapped, still writable */
	/* the unsealed half is still answered from the map */
	ck_assert_int_eq(fk_mprotect(p + 2 * PGL, 2, RW), 0);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), 1);
}
END_TEST

/* mmfold's own memory refused (ENOMEM on every raw mmap at start-up): no
 * shadow map, so everything is forwarded, nothing skipped, nothing fails
 * for the program. */
START_TEST(own_memory_refused)
{
	fk_install();
	fk_fail(FK_MMAP, FK_RAW, 0, 0, ENOMEM, -1);
	/* the one line it logs, caught */
	int fds[2], saved = dup(2);
	ck_assert_int_eq(pipe(fds), 0);
	dup2(fds[1], 2);
	fk_start("safe", NULL);
	dup2(saved, 2);
	close(fds[1]);
	char line[200] = {0};
	ck_assert_int_gt(read(fds[0], line, sizeof line - 1), 0);
	ck_assert_str_eq(line, "mmfold: cannot map memory for the shadow map; forwarding everything\n");
	char *p = fk_map(2, RW);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(fk_mprotect(p, 2, RW), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 3);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_SKIPPED), 0);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_CALLS), 3); /* in the spare block */
}
END_TEST

/* EINTR: mmfold's own reads and writes are retried, the data arrives. */
START_TEST(eintr_retried)
{
	fk_install();
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	fk_fail(FK_WRITE, FK_RAW, 0, 0, EINTR, 2);
	ck_assert_int_eq(mmf_sys_write_all(fds[1], "mmfold", 6), 6);
	ck_assert_uint_eq(fk_count(FK_WRITE, FK_RAW), 3);
	fk_fail(FK_READ, FK_RAW, 0, 0, EINTR, 3);
	char buf[8] = {0};
	ck_assert_int_eq(mmf_sys_read(fds[0], buf, sizeof buf), 6);
	ck_assert_str_eq(buf, "mmfold");
	ck_assert_uint_eq(fk_count(FK_READ, FK_RAW), 4);
	fk_fail(FK_READ, FK_RAW, 0, 0, EIO, 1); /* other errors are returned */
	ck_assert_int_eq(mmf_sys_read(fds[0], buf, sizeof buf), -EIO);
}
END_TEST

/* Lazy mode: a deferred promotion that the kernel refuses when it is made
 * (ENOMEM at the map-count limit).  The program was told 0 long ago: the
 * range is forgotten, the refusal counted, errno untouched (it may run in
 * the fault handler), and from then on nothing is deferred, so the next
 * refusal reaches the call that caused it. */
START_TEST(lazy_promotion_enomem)
{
	fk_start("lazy", NULL);
	char *p = fk_map(4, RW);
	ck_assert_int_eq(fk_mprotect(p, 4, PROT_READ), 0); /* a demotion: made at once */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 1);
	ck_assert_int_eq(fk_mprotect(p, 4, RW), 0); /* a promotion: waits */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_DEFERRED), 1);
	fk_fail(FK_MPROTECT, FK_NEXT, 0, 0, ENOMEM, 1);
	errno = 4242;
	mmf_lazy_flush_all(); /* made through the next definition */
	ck_assert_int_eq(errno, 4242);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 2);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_RAW), 0);
	ck_assert_uint_eq(fk_event(MMF_E_LAZY_REFUSED), 1);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_ERRORS), 1);
	/* forgotten, not recorded read-write: the promotion is made again */
	ck_assert_int_eq(fk_mprotect(p, 4, RW), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 3);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_DEFERRED), 1);
	p[0] = 1;
	ck_assert_int_eq(fk_mprotect(p, 4, PROT_READ), 0);
	fk_fail(FK_MPROTECT, FK_NEXT, 0, 0, ENOMEM, 1);
	ck_assert_int_eq(fk_mprotect(p, 4, RW), -ENOMEM); /* at once, the kernel's answer */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), 5);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_DEFERRED), 1);
}
END_TEST

/* Lazy mode: a deferred munlock refused when made leaves the lock state
 * unknown (a later mlock is forwarded); the fork advice waiting for a fork
 * goes out as one process_madvise, and per range with madvise when that is
 * refused (ENOSYS: a kernel without it). */
START_TEST(lazy_munlock_and_fork_advice)
{
	fk_start("lazy", NULL);
	char *p = fk_map(6, RW);
	long r = fk_call(MMF_K_MLOCK, (long)p, 2 * PGL, 0, 0, 0, 0);
	if (r == 0) {
		ck_assert_int_eq(fk_call(MMF_K_MUNLOCK, (long)p, 2 * PGL, 0, 0, 0, 0), 0);
		ck_assert_uint_eq(fk_count(FK_MUNLOCK, FK_NEXT), 0); /* waits */
		fk_fail(FK_MUNLOCK, FK_NEXT, 0, 0, ENOMEM, 1);
		mmf_lazy_flush_all();
		ck_assert_uint_eq(fk_count(FK_MUNLOCK, FK_NEXT), 1);
		ck_assert_int_eq(fk_call(MMF_K_MUNLOCK, (long)p, 2 * PGL, 0, 0, 0, 0), 0);
		mmf_lazy_flush_all();
		ck_assert_uint_eq(fk_count(FK_MUNLOCK, FK_NEXT), 2); /* not skipped */
	}
	unsigned long m0 = fk_count(FK_MADVISE, FK_NEXT);
	ck_assert_int_eq(fk_call(MMF_K_MADVISE, (long)p + 2 * PGL, PGL, MADV_DONTFORK, 0, 0, 0), 0);
	ck_assert_int_eq(fk_call(MMF_K_MADVISE, (long)p + 4 * PGL, PGL, MADV_DONTFORK, 0, 0, 0), 0);
	ck_assert_uint_eq(fk_count(FK_MADVISE, FK_NEXT), m0); /* both wait */
	fk_fail(FK_PMADVISE, FK_ANY, 0, 0, ENOSYS, 1);
	mmf_lazy_flush_all();
	ck_assert_uint_eq(fk_count(FK_PMADVISE, FK_NEXT), 1);
	ck_assert_uint_eq(fk_count(FK_MADVISE, FK_NEXT), m0 + 2);
	ck_assert_uint_eq(fk_stat(MMF_K_MADVISE, MMF_S_FORWARDED), 3);
}
END_TEST

Suite *dispatch_suite(void)
{
	Suite *s = suite_create("dispatch");
	TCase *f = tcase_create("failures");
	tcase_add_test(f, mprotect_enomem_split);
	tcase_add_test(f, flipping);
	tcase_add_test(f, hot_flip);
	tcase_add_test(f, hint_other);
	tcase_add_test(f, hint_find);
	tcase_add_test(f, find_near);
	tcase_add_test(f, forward_block_edge);
	tcase_add_test(f, mmap_enomem);
	tcase_add_test(f, mlock_eagain);
	tcase_add_test(f, mlock2_onfault_repeated);
	tcase_add_test(f, flight_reader);
	tcase_add_test(f, seal_eperm);
	tcase_add_test(f, own_memory_refused);
	tcase_add_test(f, eintr_retried);
	suite_add_tcase(s, f);
	TCase *z = tcase_create("lazy");
	tcase_add_test(z, lazy_promotion_enomem);
	tcase_add_test(z, lazy_munlock_and_fork_advice);
	suite_add_tcase(s, z);
	return s;
}
