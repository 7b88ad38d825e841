/* The fast paths: a call answered from this thread's hint (the record the
 * last decision on this thread looked at) before the general decision runs.
 *
 * A skipped mprotect costs a few dozen instructions: the gate word (every
 * reason the fast paths are closed, and the number of open batch queues)
 * read once, the range tested against the hint, the map's sequence read
 * before and after the record's attribute word, and this thread's counters.
 * No lock, no atomic read-modify-write, no call through a pointer.
 *
 * Why it is right: the hint names a slot of the shadow map; the map's
 * sequence moves whenever records move (map.h), and only a record's
 * attribute word changes in place, atomically.  So while the sequence is
 * the one the hint was taken at, the slot still holds that record, and the
 * word read is one the map held, as for any reader.  A thread's hint is
 * not used while the thread is in a writer section (in_write: a signal
 * handler that runs while the section is open must take the general
 * path, which forwards), and is emptied when it opens a batch.  Anything the hint cannot decide (another
 * record, a change, a protection the fast path does not answer) returns 0:
 * the caller takes the general path, which may learn a new hint. */
#ifndef MMF_FAST_H
#define MMF_FAST_H

#include <stddef.h>
#include <stdint.h>

#include "map.h"
#include "stats.h"

/* Reasons the fast paths are closed (bits of mmf_fast.f.off), and of the
 * forward path alone (MMF_FAST_SHAPE: mmf_fast_chg_prots is 0). */
enum {
	MMF_FAST_INIT = 1,    /* not initialised yet */
	MMF_FAST_MODE = 2,    /* the mode is not safe (off, observe, lazy) */
	MMF_FAST_PROFILE = 4, /* MMFOLD_PROFILE: every call is sampled */
	MMF_FAST_TRACE = 8,   /* MMFOLD_LOG=3: every call is logged */
	MMF_FAST_VERIFY = 16, /* MMFOLD_VERIFY: skips are checked */
	MMF_FAST_RIE = 32,    /* READ_IMPLIES_EXEC: mprotect is never skipped */
	MMF_FAST_SHAPE = 64,  /* range shaping may change a one-record call */
	MMF_FAST_BARRIER = 128, /* MMFOLD_BARRIER=uffd: mprotect may be a barrier */
	MMF_FAST_REFRESH = 256, /* the tables are behind (a seccomp filter let a
				   protection through, question.c): the general
				   path sets them again (engine.c) */
	MMF_FAST_OFF = 512,   /* with MMF_FAST_MODE: the mode is off; that
				 alone (no batch queue either): an mprotect
				 takes fastrun.c's mmf_fast_off */
};
/* Lazy mode is on (engine.c's lazy_on, copied once it is set): the one
 * test the buffer-taking wrappers of preload/io.c make, inline. */
extern uint32_t mmf_fast_lazy;

/* all == 0: open.  batch_live is batch.c's count of threads with queued
 * calls (batch.h), kept here so that one load tests everything. */
union mmf_fast_gate {
	uint64_t all;
	struct {
		uint32_t off;
		uint32_t batch_live;
	} f;
};
extern union mmf_fast_gate mmf_fast;

/* The attribute bits a skip compares, and for each protection 0-7 the
 * value they must have (owned, unsealed, that protection; a value no
 * record has for protections the fast path does not answer or may not
 * skip, which mmf_fast_chg_prots then leaves out too: a request for one
 * takes the general path). */
extern uint64_t mmf_fast_mask;
extern uint64_t mmf_fast_want[8];
extern uint64_t mmf_fast_pgmask;
/* A record the forward path updates in place: owned, unsealed, its
 * protection known (in relax mode: not a W^X area); bit p of chg_prots:
 * a request for protection p may be (not exec-only, not W+X under MDWE;
 * none while the forward path is closed). */
extern uint64_t mmf_fast_cmask, mmf_fast_cwant;
/* The same with the protection MMF_PROT_FLIP (mmf_fast_flipping; 0 and 0,
 * which every word matches, until mmf_fast_set: its callers all come after
 * the gate, which opens only after it). */
extern uint64_t mmf_fast_fmask, mmf_fast_fwant;
extern uint32_t mmf_fast_chg_prots;
extern struct mmf_map map; /* the shadow map (wlock.c), for its sequence */
/* Calls bypassing the map not yet accounted for (bits 0-30), a section's
 * call in flight (bit 31) and flights ever begun (bits 32-63): wlock.c.
 * Read before and after the map; no skip while its low half is not 0 but
 * where mmf_flight_lets, and the word read after must equal the word read
 * before (the same flight, no bypass since). */
union mmf_stale_word {
	uint64_t all;
	struct {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		uint32_t now, flights; /* now: the low half */
#else
		uint32_t flights, now;
#endif
	} h;
};
extern union mmf_stale_word mmf_stale_word;
#define mmf_stale (mmf_stale_word.all)
#define MMF_FLIGHT_BIT (1ull << 31)
static inline uint32_t mmf_stale_now(uint64_t v) { return (uint32_t)v; }
/* A section's call in the kernel (wlock.c, "calls in flight"): [s,e) the
 * range it may change, id the flight's number (mmf_stale's high half). */
struct mmf_flight {
	uint64_t s, e;
	uint32_t id;
};
extern struct mmf_flight mmf_flight;

/* v, mmf_stale as read before the map (acquire): 1 when all it counts is
 * a section's call in flight whose range lies apart from [a, a + len).
 * The range read after v is the flight's that v numbers, or a later
 * one's: then mmf_stale, read again by the caller after the map, differs
 * from v. */
static inline int mmf_flight_lets(uint64_t v, uint64_t a, uint64_t len)
{
	if (mmf_stale_now(v) != MMF_FLIGHT_BIT ||
	    __atomic_load_n(&mmf_flight.id, __ATOMIC_RELAXED) != (uint32_t)(v >> 32))
		return 0;
	uint64_t s = __atomic_load_n(&mmf_flight.s, __ATOMIC_RELAXED);
	uint64_t e = __atomic_load_n(&mmf_flight.e, __ATOMIC_RELAXED);
	return e <= a || (s > a && s - a >= len);
}

/* Ranges changed behind a writer section's back by re-entrant calls
 * (wlock.c). */
#define PENDING_MAX 8
struct mmf_pending {
	union {
		struct {
			int n, all;
		};
		uint64_t any; /* n and all read at once: 0 when nothing is pending */
	};
	uint64_t s[PENDING_MAX], e[PENDING_MAX];
};

struct mmf_op; /* engine.h */

/* This thread's fast-path state, and its writer state (wlock.c's in_write,
 * wmasked and pending, in one block so that a call reaches all of it from
 * one base register).  Signal handlers on this thread use it too, so a
 * hint is never changed while it may be read: a learn writes the other of
 * the two records and then moves gen (one store); a reader takes
 * r[gen & 1] and checks that gen did not move while it read. */
struct mmf_fast_tls {
	volatile int w_in;     /* wlock.c's in_write: 0 none, 1 in a writer section, 2 leaving it */
	volatile int w_masked; /* wlock.c's wmasked: the section's asynchronous signals blocked */
	struct mmf_slotref r[2];
	const struct mmf_slotref *cur; /* r[gen & 1] (NULL: none yet) */
	uint32_t gen;         /* moves at every learn */
	uint32_t learning;    /* a learn is writing r[(gen + 1) & 1] */
	struct mmf_tstats *t; /* this thread's counters, once allocated (stats.c) */
	struct mmf_pending w_pending; /* wlock.c's pending */
	/* fastrun.c's flipping test: the page range of this thread's last
	 * change through the forward path, how many such changes in a row,
	 * this thread's count of skipped mprotect calls then, and the
	 * protection it last asked for on a flipping record (-1: none) */
	uint64_t flip_a, flip_e, flip_skips;
	uint32_t flip_n;
	int flip_prot;
	/* fastrun.c's hot flip: [flip_hot, flip_he), a range this thread
	 * last found inside a flipping record (0, 0: none), that record's
	 * attribute word and the map's sequence then */
	uint64_t flip_hot, flip_he;
	const uint64_t *flip_attr;
	uint32_t flip_seq;
	/* fastrun.c's flat forward course across its kernel call, so that
	 * it keeps nothing in registers there (written and read in the
	 * writer section, where no handler of this thread takes that course):
	 * the hint's record as judged under the lock, its word then, the
	 * call's length and protection, what the record says after it and
	 * the mmf_op forwarder */
	struct mmf_slotref chg_fr;
	uint64_t chg_v, chg_len;
	int chg_prot;
	uint8_t chg_rp;
	long (*chg_fwd)(const struct mmf_op *);
	/* r[(gen + 1) & 1] once cur is set (NULL before): the slot not
	 * current, for the wrapper's test of its range */
	const struct mmf_slotref *oth;
};
extern __thread struct mmf_fast_tls mmf_fast_tls __attribute__((tls_model("initial-exec")));

/* This thread's block as a plain pointer.  Named directly, each access is
 * relative to the thread register with the block's offset loaded from the
 * GOT, and GCC loads that offset again after every fence or atomic; a
 * pointer the compiler cannot see through stays in a register. */
static inline struct mmf_fast_tls *mmf_fast_self(void)
{
	struct mmf_fast_tls *x = &mmf_fast_tls;
	__asm__("" : "+r"(x));
	return x;
}

/* Sets the gate and the tables.  off: MMF_FAST_* bits; mdwe: W+X requests
 * are checked by the kernel (PR_SET_MDWE); wx_relax: MMFOLD_WX=relax, whose
 * flipping areas are answered by wx.c; skip_prots: bit p, a request for
 * protection p may be skipped (under a seccomp filter, those the kernel
 * accepted: question.c). */
void mmf_fast_set(unsigned off, int mdwe, int wx_relax, size_t page, int lazy,
		  unsigned skip_prots);

#define MMF_FAST_FENCE() __atomic_signal_fence(__ATOMIC_SEQ_CST)

/* A learn's first step: the learning flag set, and the slot that is not
 * current returned, to be written (a handler that runs meanwhile neither
 * learns nor reads it); NULL when a learn is under way (this runs in a
 * handler that interrupted it): nothing done. */
static inline struct mmf_slotref *mmf_fast_learn_begin(struct mmf_fast_tls *x)
{
	if (x->learning)
		return NULL;
	x->learning = 1;
	MMF_FAST_FENCE();
	return &x->r[(x->gen + 1) & 1];
}

/* Its last: when the slot r was written (ok), it becomes current and gen
 * moves; the flag cleared. */
static inline void mmf_fast_learn_end(struct mmf_fast_tls *x, struct mmf_slotref *r, int ok)
{
	MMF_FAST_FENCE();
	if (ok) {
		x->cur = r;
		x->oth = &x->r[x->gen & 1];
		MMF_FAST_FENCE();
		x->gen++;
		MMF_FAST_FENCE();
	}
	x->learning = 0;
	MMF_FAST_FENCE();
}

/* This thread's hint is what a reader or a writer found: the record
 * holding the call's range (map.h's mmf_slotref).  A learn that interrupts
 * another (from a signal handler) does nothing. */
static inline void mmf_fast_learn(const struct mmf_slotref *mh)
{
	struct mmf_fast_tls *x = &mmf_fast_tls;
	struct mmf_slotref *r = mmf_fast_learn_begin(x);
	if (!r)
		return;
	*r = *mh;
	mmf_fast_learn_end(x, r, 1);
}

/* Empties this thread's hint, both records (a store each;
 * async-signal-safe). */
static inline void mmf_fast_forget(void)
{
	struct mmf_fast_tls *x = &mmf_fast_tls;
	x->r[0].end = x->r[0].start;
	x->r[1].end = x->r[1].start;
	MMF_FAST_FENCE();
}

/* A consistent copy of this thread's hint as of gen g: 0 when gen moved. */
static inline int mmf_fast_copy(uint32_t g, struct mmf_slotref *out)
{
	struct mmf_fast_tls *x = mmf_fast_self();
	MMF_FAST_FENCE();
	const struct mmf_slotref *r = x->cur;
	if (!r)
		return 0;
	*out = *r;
	MMF_FAST_FENCE();
	return x->gen == g;
}

/* mprotect(a, len, prot), asked of the hint (mmf_fast_mprotect below).
 * MMF_FAST_SKIPPED: it changes nothing (counted as a call, skipped);
 * MMF_FAST_MAYBE: the hint holds the range and the call changes it: the
 * engine's mmf_run_change forwards it and, when it changes exactly the
 * hint's record (owned, unsealed, of known protection), updates that slot
 * in place; MMF_FAST_OTHER: the current slot does not hold the range, or
 * its record moved (mmf_fast_mprotect_other may hold it); from that test,
 * neither slot does (the map may: mmf_fast_find); MMF_FAST_GENERAL: the
 * general path. */
enum { MMF_FAST_GENERAL, MMF_FAST_SKIPPED, MMF_FAST_OTHER, MMF_FAST_MAYBE };

/* The protection in an attribute word. */
static inline int mmf_fast_prot(uint64_t v)
{
	struct mmf_attr at;
	__builtin_memcpy(&at, &v, sizeof at);
	return at.prot;
}

/* The word with protection p alone (for masks: a constant). */
static inline uint64_t mmf_fast_prot_word(uint8_t p)
{
	struct mmf_attr at = {.prot = p};
	uint64_t v;
	__builtin_memcpy(&v, &at, sizeof v);
	return v;
}

/* A flipping record the forward path forwards to without a change to the
 * map (fastrun.c): what mmf_fast_cwant says but MMF_PROT_FLIP. */
static inline int mmf_fast_flipping(uint64_t v)
{
	return (v & mmf_fast_fmask) == mmf_fast_fwant;
}

/* The call may change the hint's record (all of it, or a part that it
 * splits off) without the general path: mmf_run_change's test, on the
 * copy h of the hint and the attribute word v read with it.  What
 * mmf_fast_mprotect established for MMF_FAST_MAYBE is not tested again
 * (a page-aligned a inside the record, 0 < len <= end - a, and v not
 * already at prot unless the thread had no counters). */
static inline int mmf_fast_changes(const struct mmf_slotref *h, int prot, uint64_t v)
{
	return ((__atomic_load_n(&mmf_fast_chg_prots, __ATOMIC_RELAXED) >> prot) & 1) && h->b &&
	       mmf_fast_self()->t && (v & mmf_fast_cmask) == mmf_fast_cwant;
}

/* The slot that is not current, r[(g + 1) & 1], becomes current, as a
 * learn would make it (gen moves to g + 1), under the learning flag: 1
 * when it did; 0 when gen is no longer g (a handler learned since it was
 * read), nothing done.  The skip test's, for a call in that slot that
 * changes its record. */
static inline int mmf_fast_take(struct mmf_fast_tls *x, uint32_t g)
{
	/* a learn that writes nothing: the slot is what the skip test read
	 * (the caller found no learn under way) */
	x->learning = 1;
	MMF_FAST_FENCE();
	int ok = x->gen == g;
	mmf_fast_learn_end(x, &x->r[(g + 1) & 1], ok);
	return ok;
}

/* MMF_FAST_SKIPPED, MMF_FAST_GENERAL, MMF_FAST_OTHER or MMF_FAST_MAYBE:
 * the hint holds the range and says it is not a no-op; *v is the record's
 * attribute word and *g the hint's generation, for mmf_run_change.
 * flights: a section's call in flight apart from the range does not stop
 * it (else the general path, the caller's mmf_fast_mprotect_flight, tries
 * that: a call out of the hot path would give it a frame).  other: the
 * test made on the slot that is not current (mmf_fast_mprotect_other),
 * which becomes current for MMF_FAST_MAYBE (mmf_fast_take); else the
 * current one, and MMF_FAST_OTHER when the range alone failed it. */
static inline __attribute__((always_inline)) int
mmf_fast_mprotect_in(uint64_t a, uint64_t len, int prot, uint64_t *v_, uint32_t *g,
		     const int flights, const int gate_read, const int other)
{
	struct mmf_fast_tls *x = &mmf_fast_tls;
	if ((!gate_read &&
	     __builtin_expect(__atomic_load_n(&mmf_fast.all, __ATOMIC_RELAXED) != 0, 0)) ||
	    (unsigned)prot > 7)
		return MMF_FAST_GENERAL;
	/* without flights, its low half alone: 0 before and after the map
	 * (a flight that began after the first read calls the kernel after
	 * it too, so a skip then comes first) */
	uint64_t stale = 0;
	if (flights) {
		stale = __atomic_load_n(&mmf_stale, __ATOMIC_ACQUIRE);
		if (mmf_stale_now(stale) && !mmf_flight_lets(stale, a, len))
			return MMF_FAST_GENERAL;
	} else if (__atomic_load_n(&mmf_stale_word.h.now, __ATOMIC_ACQUIRE)) {
		return MMF_FAST_GENERAL;
	}
	uint32_t gen = x->gen;
	MMF_FAST_FENCE();
	const struct mmf_slotref *h = x->cur;
	/* no hint yet, or a signal handler that interrupted this thread's
	 * writer section: the kernel may already have done what the record
	 * does not say yet (the general path takes it as re-entrant); the
	 * other slot, the record found before the current one, not while a
	 * learn (this thread's, interrupted by the handler that runs this)
	 * is writing it */
	if (__builtin_expect(!h || x->w_in, 0) || (other && x->learning))
		return MMF_FAST_GENERAL;
	if (other)
		h = &x->r[(gen + 1) & 1];
	uint64_t hs = h->start, he = h->end;
	/* hs <= a < he, a page aligned, 0 < len <= he - a */
	if (a < hs || a >= he || (a & mmf_fast_pgmask) || len - 1 >= he - a)
		return flights ? MMF_FAST_GENERAL : MMF_FAST_OTHER;
	uint32_t hseq = h->seq;
	const uint64_t *attr = h->attr;
	MMF_FAST_FENCE();
	if (x->gen != gen) /* a handler learned meanwhile: what was read may be torn */
		return MMF_FAST_GENERAL;
	/* a slot taken before records moved: the map may hold the range
	 * still, elsewhere */
	uint32_t seq = __atomic_load_n(&map.seq, __ATOMIC_ACQUIRE);
	if (seq != hseq)
		return flights ? MMF_FAST_GENERAL : MMF_FAST_OTHER;
	uint64_t v = __atomic_load_n(attr, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&map.seq, __ATOMIC_RELAXED) != seq ||
	    (flights ? __atomic_load_n(&mmf_stale, __ATOMIC_RELAXED) != stale
		     : __atomic_load_n(&mmf_stale_word.h.now, __ATOMIC_RELAXED) != 0))
		return MMF_FAST_GENERAL;
	struct mmf_tstats *t = x->t;
	if ((v & mmf_fast_mask) != mmf_fast_want[prot] || __builtin_expect(!t, 0)) {
		/* the forward path's courses copy the current slot */
		if (other && !mmf_fast_take(x, gen++))
			return MMF_FAST_GENERAL;
		*v_ = v;
		*g = gen;
		return MMF_FAST_MAYBE;
	}
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_CALLS, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_SKIPPED, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_ASKED, len);
	return MMF_FAST_SKIPPED;
}

/* The call starts where this thread's hot flip does (fastrun.c's
 * mmf_fast_hot): taken before the skip test, which it would only repeat. */
static inline int mmf_fast_hot_start(uint64_t a)
{
	return a == mmf_fast_tls.flip_hot;
}

static inline __attribute__((always_inline)) int
mmf_fast_mprotect(uint64_t a, uint64_t len, int prot, uint64_t *v_, uint32_t *g)
{
	return mmf_fast_mprotect_in(a, len, prot, v_, g, 0, 0, 0);
}

/* mmf_fast_mprotect asked of the slot that is not current, after the
 * current one answered MMF_FAST_OTHER (the gate was read open then, as
 * for the skip test after it, the wrapper's): for a thread that works on
 * two records in turn, each call finds the current slot holding the other
 * record.  MMF_FAST_SKIPPED, MMF_FAST_GENERAL, MMF_FAST_MAYBE with the
 * slot made current (*g its generation then), or MMF_FAST_OTHER when it
 * does not hold the range either, or its record moved (mmf_fast_find). */
static inline __attribute__((always_inline)) int
mmf_fast_mprotect_other(uint64_t a, uint64_t len, int prot, uint64_t *v_, uint32_t *g)
{
	return mmf_fast_mprotect_in(a, len, prot, v_, g, 0, 1, 1);
}

/* Neither slot of this thread's hint held [a, a + len) (the other slot's
 * test answered MMF_FAST_OTHER): the record that holds it, looked up in
 * the map without a lock (mmf_map_find, one try), learned as the hint,
 * and the skip test's answer for mprotect(a, len, prot) given from the
 * word the lookup read: MMF_FAST_SKIPPED (counted) or MMF_FAST_MAYBE (*v
 * the word, *g the learn's generation), as mmf_fast_mprotect would give
 * them from the slot learned.  MMF_FAST_OTHER: learned, but that word
 * cannot answer (the gate closed, a call bypassing the map, prot above
 * 7): ask the skip test.  MMF_FAST_GENERAL: nothing was learned (not page
 * aligned, empty or past the address space, no record holds it all, or
 * one the fast paths do not answer for (observed, sealed, a W^X area in
 * relax mode), a writer busy, this thread in a writer section or a
 * learn, in a batch, or without counters yet): the general path. */
int mmf_fast_find(uint64_t a, uint64_t len, int prot, uint64_t *v, uint32_t *g);
/* mmf_fast_find for the wrapper: 0 for a call it skipped, else after's
 * answer for its other answers (f, and *v and *g for MMF_FAST_MAYBE; a
 * tail call, so that a skip saves no register). */
int mmf_fast_find_then(void *addr, size_t len, int prot,
		       int (*after)(void *, size_t, int, int, uint64_t, uint32_t));
/* The slot that is not current may hold [a, a + len): a test of its range
 * alone, without the skip test's guards (a handler may change the slot
 * meanwhile), that only chooses the course: the slot's test
 * (mmf_fast_mprotect_other) or the map's (mmf_fast_find_then), each of
 * which tests again. */
static inline int mmf_fast_other_may_hold(uint64_t a, uint64_t len)
{
	const struct mmf_slotref *h = mmf_fast_tls.oth;
	if (!h)
		return 1; /* no hint yet: the slot's test says so */
	uint64_t hs = h->start, he = h->end;
	return a >= hs && a < he && len - 1 < he - a;
}

/* mmf_fast_mprotect when the caller read the gate open just before. */
static inline __attribute__((always_inline)) int
mmf_fast_mprotect_open(uint64_t a, uint64_t len, int prot, uint64_t *v_, uint32_t *g)
{
	return mmf_fast_mprotect_in(a, len, prot, v_, g, 0, 1, 0);
}

/* mmf_fast_mprotect when mmf_stale counts a section's call in flight
 * (fastrun.c). */
int mmf_fast_mprotect_flight(uint64_t a, uint64_t len, int prot, uint64_t *v_, uint32_t *g);

#endif
