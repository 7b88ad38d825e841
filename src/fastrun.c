/* The engine's side of the fast paths (fast.h): an mprotect that changes
 * the record of the thread's hint, through mmf_run_change or, on memory
 * not executable, the flat course of mmf_fast_forward. */
#include "core.h"

#include <errno.h>

#include "fast.h"
#include "profile.h"
#include "shape.h"
#include "thp.h"
#include "wx.h"

/* What follows the kernel call of a change to the hint's record (r its
 * result, kernel style; the writer section held; exec: the call or the
 * record involves PROT_EXEC, mmf_wx_before done): the map updated, the
 * W^X and huge-page bookkeeping, the section left, the hint kept or
 * learned. */
static inline __attribute__((always_inline)) long
change_done(const struct mmf_op *op, long r, const struct mmf_slotref *fr, int exec,
	    uint64_t v0)
{
	struct mmf_slotref nr;
	uint64_t a = (uint64_t)op->a[0];
	uint64_t e = (a + (uint64_t)op->a[1] + mmf_fast_pgmask) & ~mmf_fast_pgmask;
	int prot = (int)op->a[2];
	int d = r == 0 ? mmf_map_reprot(&map, fr, a, e, (uint8_t)prot, safe_state.mlock_seen, v0, &nr)
		       : 0;
	if (!d) {
		/* v0: the word as it was (mmf_map_prot_changing) */
		struct mmf_hint h = {.b = a == fr->start && e == fr->end ? fr->b : NULL, .i = fr->i,
				     .seq = fr->seq, .start = a, .end = e, .r = *fr, .v0 = v0};
		record(op, r, &h);
	}
	if (exec)
		mmf_wx_after(op, r);
	else if (r == 0 && prot == (PROT_READ | PROT_WRITE))
		mmf_wx_rw_done(a, e); /* what mmf_wx_after does for it */
	mmf_thp_tick(PLD(folio_policy.thp_disabled));
	wleave_quick();
	/* in place: the hint holds still (the sequence did not move) */
	if (d == MMF_REPROT_MOVED && __atomic_load_n(&map.seq, __ATOMIC_RELAXED) == nr.seq)
		mmf_fast_learn(&nr); /* the record that holds the range now */
	return r;
}

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
	struct mmf_slotref fr;
	uint64_t asked = (uint64_t)op->a[1];
	int prot = (int)op->a[2];
	/* one copy of the hint; a handler that ran since it was read may have
	 * changed it (the copy fails); a call inside this thread's section
	 * (mmf_fast_mprotect declines those already) re-enters (mmf_run); a
	 * copy that ends at or below the call's start is a hint a handler
	 * emptied (mmf_fast_forget moves its end to its start, not gen) */
	if (in_write || !mmf_fast_copy(g, &fr) || fr.end <= (uint64_t)op->a[0] ||
	    !mmf_fast_changes(&fr, prot, v0))
		return mmf_run(op);
	struct mmf_tstats *t = mmf_fast_tls.t;
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_CALLS, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_ASKED, asked);
	if (!wenter_try())
		return mmf_bypass(op, t, asked);
	uint64_t v = PLD(*fr.attr);
	if (map.seq != fr.seq || (v & mmf_fast_cmask) != mmf_fast_cwant) {
		wleave();
		return decide(op, t, asked);
	}
	int exec = (prot | mmf_fast_prot(v)) & PROT_EXEC;
	if (exec)
		mmf_wx_before(op);
	mmf_map_prot_changing(&map, &fr, v);
	return change_done(op, forward(op, t, asked), &fr, exec, v);
}

/* kfn's call with its kernel time sampled (forward()'s rule), errno kept. */
static __attribute__((noinline)) int timed(struct mmf_tstats *t, uint64_t n,
					   int (*kfn)(void *, size_t, int), uint64_t a,
					   uint64_t len, int prot)
{
	uint64_t t0 = mmf_ticks();
	int r = kfn((void *)a, len, prot);
	int err = errno;
	mmf_time_add(t, MMF_K_MPROTECT, n, mmf_ticks() - t0);
	errno = err;
	return r;
}

/* An mprotect made through kfn and counted as mmf_run and forward()
 * count it (bytes: the length they would count); kfn's result. */
static inline __attribute__((always_inline)) int
counted(struct mmf_tstats *t, int (*kfn)(void *, size_t, int), uint64_t a, uint64_t len, int prot,
	uint64_t bytes)
{
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_CALLS, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_ASKED, bytes);
	uint64_t n = t->v[MMF_K_MPROTECT][MMF_S_CALLS];
	int r = mmf_time_due(n) ? timed(t, n, kfn, a, len, prot) : kfn((void *)a, len, prot);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_FORWARDED, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_KERNEL, bytes);
	return r;
}

/* counted()'s counters for a call of len bytes, all added before it (the
 * courses that keep nothing across their kernel call: mmf_fast_hot,
 * mmf_fast_forward); the thread's count of mprotect calls then, for
 * mmf_time_due. */
static inline __attribute__((always_inline)) uint64_t counted_before(struct mmf_tstats *t,
								    uint64_t len)
{
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_CALLS, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_FORWARDED, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_ASKED, len);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_KERNEL, len);
	return t->v[MMF_K_MPROTECT][MMF_S_CALLS];
}

long mmf_fast_off(uint64_t a, uint64_t len, int prot, int (*kfn)(void *, size_t, int))
{
	struct mmf_tstats *t = mmf_fast_self()->t;
	if (!kfn || !t)
		return MMF_FAST_DECLINED;
	int r = counted(t, kfn, a, len, prot, len > (1ull << 47) ? 0 : len /* mmf_run's rule */);
	if (r == 0)
		return 0;
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_ERRORS, 1);
	return -(long)errno;
}

int mmf_fast_mprotect_flight(uint64_t a, uint64_t len, int prot, uint64_t *v_, uint32_t *g)
{
	return mmf_fast_mprotect_in(a, len, prot, v_, g, 1, 0, 0);
}

static inline __attribute__((always_inline)) int find_in(uint64_t a, uint64_t len, int prot,
							 uint64_t *v_, uint32_t *g)
{
	struct mmf_fast_tls *x = mmf_fast_self();
	/* (the general path's rules for a learn: decide() learns outside a
	 * writer section and a batch, whose calls are queued, not answered) */
	if ((a & mmf_fast_pgmask) || len - 1 >= (1ull << 47) || x->w_in || !x->t ||
	    mmf_batch_depth)
		return MMF_FAST_GENERAL;
	uint64_t e = (a + len + mmf_fast_pgmask) & ~mmf_fast_pgmask;
	struct mmf_slotref *r;
	if (e <= a || !(r = mmf_fast_learn_begin(x)))
		return MMF_FAST_GENERAL;
	/* the skip test's reads before the map's (the gate, then the low
	 * half of mmf_stale, acquire): the word read below answers only when
	 * the gate was open and nothing bypassed the map before it */
	int answer = (unsigned)prot <= 7 &&
		     !__atomic_load_n(&mmf_fast.all, __ATOMIC_RELAXED) &&
		     !__atomic_load_n(&mmf_stale_word.h.now, __ATOMIC_ACQUIRE);
	/* a learn, the record found written into the slot straight from the
	 * map: a record the fast paths may answer for (owned, unsealed; in
	 * relax mode not a W^X area: mmf_fast_cmask without its protection
	 * bits), else none learned: the general course takes the call at
	 * once; the current slot the lookup's first guess.  Under the
	 * learning flag no handler learns: gen + 1 is this learn's. */
	uint64_t v = 0;
	uint32_t gen = x->gen + 1;
	int found = mmf_map_find(&map, a, e, mmf_fast_cmask & ~mmf_fast_prot_word(0xff),
				 mmf_fast_cwant, x->cur, r, &v);
	mmf_fast_learn_end(x, r, found);
	if (!found)
		return MMF_FAST_GENERAL;
	/* (after the map's sequence read again, as in the skip test) */
	if (!answer || __atomic_load_n(&mmf_stale_word.h.now, __ATOMIC_RELAXED))
		return MMF_FAST_OTHER;
	/* the skip test's answer from that word, as if asked of the slot now
	 * current (it holds [a, e), and was taken at the sequence the word
	 * was read at) */
	if ((v & mmf_fast_mask) != mmf_fast_want[prot]) {
		*v_ = v;
		*g = gen;
		return MMF_FAST_MAYBE;
	}
	struct mmf_tstats *t = x->t;
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_CALLS, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_SKIPPED, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_ASKED, len);
	return MMF_FAST_SKIPPED;
}

int mmf_fast_find(uint64_t a, uint64_t len, int prot, uint64_t *v, uint32_t *g)
{
	return find_in(a, len, prot, v, g);
}

int mmf_fast_find_then(void *addr, size_t len, int prot,
		       int (*after)(void *, size_t, int, int, uint64_t, uint32_t))
{
	uint64_t v = 0;
	uint32_t g = 0;
	int f = find_in((uint64_t)addr, len, prot, &v, &g);
	if (f == MMF_FAST_SKIPPED)
		return 0;
	return after(addr, len, prot, f, v, g);
}

/* mmf_fast_forward's course when the call failed or the map's block could
 * not take the change: change_done, from an mmf_op. */
static __attribute__((noinline)) long change_rest(uint64_t a, uint64_t len, int prot, int r,
						  const struct mmf_slotref *fr,
						  long (*fwd)(const struct mmf_op *), uint64_t v0)
{
	struct mmf_op op = {.kind = MMF_K_MPROTECT, .a = {(long)a, (long)len, prot}, .fwd = fwd};
	long kr = r == 0 ? 0 : -(long)errno;
	if (r != 0)
		mmf_stat_add(mmf_fast_tls.t, MMF_K_MPROTECT, MMF_S_ERRORS, 1);
	return change_done(&op, kr, fr, 0, v0);
}

/* The call asks for what this thread asked last on a flipping record, on
 * the range of that request or of its hot flip (mmf_fast_hot, which
 * keeps flip_prot alone). */
static inline int flip_again(const struct mmf_fast_tls *x, uint64_t a, uint64_t e, int prot)
{
	return x->flip_prot == prot &&
	       ((x->flip_a == a && x->flip_e == e) || (x->flip_hot == a && x->flip_he == e));
}

/* Writer lock held: [a,e) lies inside the flipping record whose word is
 * *attr, the map's sequence seq: this thread's hot flip (mmf_fast_hot).
 * A handler of this thread that reads these meanwhile finds the section
 * open and does not use them (mmf_fast_hot judges them under the lock). */
static inline void hot_keep(struct mmf_fast_tls *x, uint64_t a, uint64_t e, const uint64_t *attr,
			    uint32_t seq)
{
	x->flip_hot = a;
	x->flip_he = e;
	x->flip_attr = attr;
	x->flip_seq = seq;
}

/* This thread's hot flip given up (the range kept: none). */
static inline void hot_drop(struct mmf_fast_tls *x)
{
	x->flip_hot = x->flip_he = 0;
}

long mmf_fast_flip(uint64_t a, uint64_t len, int prot, uint32_t g,
		   int (*kfn)(void *, size_t, int), long (*fwd)(const struct mmf_op *))
{
	struct mmf_fast_tls *x = mmf_fast_self();
	struct mmf_tstats *t = x->t;
	uint64_t e = (a + len + mmf_fast_pgmask) & ~mmf_fast_pgmask;
	if (!kfn || !t || flip_again(x, a, e, prot) || !wenter_quick(x))
		return MMF_FAST_DECLINED;
	/* the hint judged again under the lock, as mmf_fast_forward does,
	 * without a copy: its fields read, then gen unchanged (a handler's
	 * learn writes the other record) */
	MMF_FAST_FENCE();
	const struct mmf_slotref *h = x->cur;
	uint64_t hend = h->end;
	uint32_t hseq = h->seq;
	const uint64_t *attr = h->attr;
	MMF_FAST_FENCE();
	if (x->gen != g || hend <= a || map.seq != hseq || !mmf_fast_flipping(PLD(*attr)) ||
	    !((__atomic_load_n(&mmf_fast_chg_prots, __ATOMIC_RELAXED) >> prot) & 1)) {
		wleave_quick();
		return MMF_FAST_DECLINED;
	}
	x->flip_a = a;
	x->flip_e = e;
	x->flip_prot = prot;
	x->flip_n = 0;
	int r = counted(t, kfn, a, len, prot, len);
	if (r != 0) {
		struct mmf_slotref fr = *h;
		return change_rest(a, len, prot, r, &fr, fwd, PLD(*attr));
	}
	hot_keep(x, a, e, attr, hseq);
	if (prot == (PROT_READ | PROT_WRITE))
		mmf_wx_rw_done(a, e);
	mmf_thp_tick(PLD(folio_policy.thp_disabled));
	wleave_quick();
	return 0;
}

/* hot_done for a call that failed: record()'s course for a failure (it
 * may be partial: the range forgotten), the hot flip given up. */
static __attribute__((noinline, cold)) int hot_failed(int r)
{
	struct mmf_fast_tls *x = mmf_fast_self();
	int err = errno;
	mmf_stat_add(x->t, MMF_K_MPROTECT, MMF_S_ERRORS, 1);
	mmf_map_forget(&map, x->flip_hot, x->flip_he);
	hot_drop(x);
	mmf_thp_tick(PLD(folio_policy.thp_disabled));
	wleave_hot(x);
	errno = err;
	return r;
}

static inline __attribute__((always_inline)) int hot_leave(struct mmf_fast_tls *x)
{
	if (__builtin_expect(mmf_thp_watching(), 0))
		mmf_thp_tick(PLD(folio_policy.thp_disabled));
	wleave_hot(x);
	return 0;
}

/* mmf_fast_hot after its kernel call (r: its result, libc style, errno
 * set): the W^X note of an RW request, the huge-page tick, the section
 * left; r, errno kept.  What the call was is read back from this thread's
 * block (the range kept and flip_prot), where no handler changes it while
 * the section is open: mmf_fast_hot keeps nothing across the kernel call,
 * so it saves no register. */
static __attribute__((noinline)) int hot_done(int r)
{
	if (__builtin_expect(r != 0, 0))
		return hot_failed(r);
	struct mmf_fast_tls *x = mmf_fast_self();
	if (x->flip_prot == (PROT_READ | PROT_WRITE)) {
		mmf_wx_rw_done(x->flip_hot, x->flip_he);
		return hot_leave(mmf_fast_self()); /* nothing kept across the call */
	}
	return hot_leave(x);
}

/* mmf_fast_hot declined under the lock: the range forgotten when its
 * record no longer holds it (drop), the section left, cold's answer. */
static __attribute__((noinline)) int hot_declined(void *addr, size_t len, int prot,
						  int (*cold)(void *, size_t, int), int drop)
{
	struct mmf_fast_tls *x = mmf_fast_self();
	if (drop)
		hot_drop(x);
	wleave_hot(x);
	return cold(addr, len, prot);
}

/* The hot flip: a call that starts where this thread's last call inside a
 * flipping record started (mmf_fast_hot_start, tested before the skip
 * test), ends where it ended, and asks for another protection without
 * PROT_EXEC: mmf_fast_flip's course without the skip test, which would
 * only find the record flipping again.  The lock makes the test here: the
 * map's sequence unchanged since the range was kept means its slot holds
 * that record still, whose word must still say flipping.  Anything else
 * goes to cold (the course of any call), with the range forgotten when it
 * no longer holds.  kfn: the next mprotect, never NULL here (the courses
 * that keep a range have it, and it is never unset). */
int mmf_fast_hot(void *addr, size_t len, int prot, int (*kfn)(void *, size_t, int),
		 int (*cold)(void *, size_t, int))
{
	struct mmf_fast_tls *x = mmf_fast_self();
	/* (the caller read the gate open) a request for no PROT_EXEC (and no
	 * other bit), not this thread's last one on a flipping record
	 * (flip_again's test for the hot flip's range, as good as any here) */
	if (((unsigned)prot & ~(unsigned)(PROT_READ | PROT_WRITE)) || prot == x->flip_prot ||
	    !wenter_hot(x))
		return cold(addr, len, prot);
	/* under the lock, where no handler of this thread changes them: the
	 * hot flip's range exactly (e > a: the range kept when there is
	 * none, 0 to 0, matches only calls that fail it; another range
	 * leaves it kept), its record in its slot still and flipping (else
	 * it is forgotten) */
	uint64_t a = (uint64_t)addr;
	uint64_t e = (a + len + mmf_fast_pgmask) & ~mmf_fast_pgmask;
	if (x->flip_hot != a || x->flip_he != e || e <= a)
		return hot_declined(addr, len, prot, cold, 0);
	if (__atomic_load_n(&map.seq, __ATOMIC_RELAXED) != x->flip_seq ||
	    !mmf_fast_flipping(PLD(*x->flip_attr)))
		return hot_declined(addr, len, prot, cold, 1);
	x->flip_prot = prot;
	/* counted() and its counters, all before the call; the thread's block
	 * is there while a range is kept (stats.c forgets it first) */
	struct mmf_tstats *t = x->t;
	uint64_t n = counted_before(t, len);
	if (__builtin_expect(mmf_time_due(n), 0))
		return hot_done(timed(t, n, kfn, a, len, prot));
	return hot_done(kfn(addr, len, prot));
}

/* Forwarded changes of one range in a row on a thread, no mprotect
 * skipped on it in between, before the range's record becomes flipping. */
#define FLIP_AFTER 8

/* The libc convention for a kernel-style result r (0 or -errno). */
static inline int libc_ret(long r)
{
	if (r == 0)
		return 0;
	errno = (int)-r;
	return -1;
}

/* change_after for a call that failed (r, libc style; errno set):
 * change_rest, from what the course kept in this thread's block. */
static __attribute__((noinline, cold)) int change_failed(int r)
{
	struct mmf_fast_tls *x = mmf_fast_self();
	return libc_ret(change_rest(x->flip_a, x->chg_len, x->chg_prot, r, &x->chg_fr, x->chg_fwd,
				    x->chg_v));
}

/* The end of the course after the map's update: the W^X note of an RW
 * request, the huge-page tick, the section left (x read again: nothing
 * is kept across the note's call). */
static inline __attribute__((always_inline)) int change_leave(uint64_t a, uint64_t e, int prot)
{
	if (prot == (PROT_READ | PROT_WRITE))
		mmf_wx_rw_done(a, e);
	mmf_thp_tick(PLD(folio_policy.thp_disabled));
	wleave_quick();
	return 0;
}

/* change_after's course when the word alone cannot say it (a part of
 * the record, a neighbour equal after the call, or a record becoming
 * flipping): mmf_map_reprot, the record the range is in after it kept as
 * the hint, and as the hot flip when it is flipping; when the block
 * cannot take it, change_rest records the protection. */
static __attribute__((noinline)) int change_reshape(void)
{
	struct mmf_fast_tls *x = mmf_fast_self();
	const struct mmf_slotref *fr = &x->chg_fr;
	struct mmf_slotref nr;
	uint64_t a = x->flip_a, e = x->flip_e, v = x->chg_v;
	uint8_t rp = x->chg_rp;
	int d = mmf_map_reprot(&map, fr, a, e, rp, safe_state.mlock_seen, v, &nr);
	if (!d) /* the block cannot take it: change_rest records the protection */
		return libc_ret(change_rest(a, x->chg_len, x->chg_prot, 0, fr, x->chg_fwd, v));
	if (rp == MMF_PROT_FLIP) {
		mmf_event(MMF_E_FLIP_BEGUN);
		hot_keep(x, a, e, d == MMF_REPROT_IN_PLACE ? fr->attr : nr.attr,
			 __atomic_load_n(&map.seq, __ATOMIC_RELAXED));
	}
	change_leave(a, e, x->chg_prot);
	if (d != MMF_REPROT_IN_PLACE && __atomic_load_n(&map.seq, __ATOMIC_RELAXED) == nr.seq)
		mmf_fast_learn(&nr);
	return 0;
}

/* mmf_fast_forward after its kernel call (r: its result, libc style,
 * errno set; the writer section held; the call's range [flip_a, flip_e)
 * and the rest in this thread's block: nothing kept across the call): a
 * call for all of the record, which stays apart from its neighbours and
 * does not become flipping, has the record's word set in place;
 * anything else is change_reshape's. */
static __attribute__((noinline)) int change_after(int r)
{
	if (__builtin_expect(r != 0, 0))
		return change_failed(r);
	struct mmf_fast_tls *x = mmf_fast_self();
	const struct mmf_slotref *fr = &x->chg_fr;
	uint64_t a = x->flip_a, e = x->flip_e;
	uint8_t rp = x->chg_rp;
	if (rp == MMF_PROT_FLIP || a != fr->start || e != fr->end ||
	    !mmf_map_reprot_whole(&map, fr, rp, safe_state.mlock_seen, x->chg_v))
		return change_reshape();
	return change_leave(a, e, rp);
}

/* mmf_fast_forward's course for a flipping record (the section held, the
 * record judged, this thread's block holding it as chg_fr): the word is
 * unknown already, so there is no mark, and the map is left as it is,
 * unless the call repeats this thread's last one on the range: its
 * protection is then recorded (change_after). */
static __attribute__((noinline)) int forward_flipping(uint64_t a, uint64_t len, int prot,
						      int (*kfn)(void *, size_t, int))
{
	struct mmf_fast_tls *x = mmf_fast_self();
	uint64_t e = (a + len + mmf_fast_pgmask) & ~mmf_fast_pgmask;
	int again = flip_again(x, a, e, prot);
	x->flip_a = a;
	x->flip_e = e;
	x->flip_prot = again ? -1 : prot;
	x->flip_n = 0;
	int r = counted(x->t, kfn, a, len, prot, len);
	if (r != 0) {
		hot_drop(x);
		return change_failed(r);
	}
	if (!again) {
		hot_keep(x, a, e, x->chg_fr.attr, x->chg_fr.seq);
		return change_leave(a, e, prot);
	}
	hot_drop(x);
	mmf_event(MMF_E_FLIP_ENDED); /* the protection recorded */
	x->chg_rp = (uint8_t)prot;
	return change_after(0);
}

/* mmf_fast_forward declined under the lock: the section left, declined's
 * answer. */
static __attribute__((noinline)) int forward_declined(void *addr, size_t len, int prot, uint64_t v0,
						      uint32_t g,
						      int (*declined)(void *, size_t, int, uint64_t,
								      uint32_t))
{
	wleave_quick();
	return declined(addr, len, prot, v0, g);
}

/* mmf_fast_forward with the lock held (x: this thread's block, t its
 * counters): all its calls are tail calls, so that it saves no register. */
static inline __attribute__((always_inline)) int
forward_locked(struct mmf_fast_tls *x, struct mmf_tstats *t, void *addr, size_t len, int prot,
	       uint64_t v0, uint32_t g, int (*kfn)(void *, size_t, int),
	       long (*fwd)(const struct mmf_op *),
	       int (*declined)(void *, size_t, int, uint64_t, uint32_t))
{
	uint64_t a = (uint64_t)addr;
	/* The hint, copied under the lock: gen unchanged since the skip test
	 * read it means the copy is the record that test judged (a handler
	 * that learned since moved gen); the sequence unchanged since the
	 * hint was taken means its slot still holds that record, whose word
	 * the lock now keeps still (v0, the word the skip test read, is
	 * judged again here, where it counts).  One copy and one judgement,
	 * where the general course (mmf_run_change) copies before the lock
	 * and judges again after it.  A hint emptied since (mmf_fast_forget,
	 * from a handler opening a batch: end moved to start, gen not) ends
	 * below a. */
	MMF_FAST_FENCE();
	x->chg_fr = *x->cur;
	MMF_FAST_FENCE();
	const struct mmf_slotref *fr = &x->chg_fr;
	uint64_t v = PLD(*fr->attr);
	int flipping = 0;
	if (x->gen != g || fr->end <= a || map.seq != fr->seq || !fr->b ||
	    !((__atomic_load_n(&mmf_fast_chg_prots, __ATOMIC_RELAXED) >> prot) & 1) ||
	    ((v & mmf_fast_cmask) != mmf_fast_cwant && !(flipping = mmf_fast_flipping(v))))
		return forward_declined(addr, len, prot, v0, g, declined);
	x->chg_v = v;
	x->chg_len = len;
	x->chg_prot = prot;
	x->chg_fwd = fwd;
	if (flipping)
		return forward_flipping(a, len, prot, kfn);
	mmf_map_prot_changing(&map, fr, v);
	uint64_t e = (a + len + mmf_fast_pgmask) & ~mmf_fast_pgmask;
	uint64_t skips = t->v[MMF_K_MPROTECT][MMF_S_SKIPPED];
	uint8_t rp = (uint8_t)prot; /* what the record says after the call */
	if (x->flip_a == a && x->flip_e == e && x->flip_skips == skips) {
		if (++x->flip_n >= FLIP_AFTER) {
			rp = MMF_PROT_FLIP;
			x->flip_n = 0;
			x->flip_prot = prot;
		}
	} else {
		x->flip_a = a;
		x->flip_e = e;
		x->flip_skips = skips;
		x->flip_n = 1;
	}
	x->chg_rp = rp;
	uint64_t n = counted_before(t, len);
	if (__builtin_expect(mmf_time_due(n), 0))
		return change_after(timed(t, n, kfn, a, len, prot));
	return change_after(kfn(addr, len, prot));
}

/* mmf_fast_forward when calls bypassing the map are to be drained first
 * (wenter_quick's step, out of line). */
static __attribute__((noinline)) int
forward_drain(void *addr, size_t len, int prot, uint64_t v0, uint32_t g,
	      int (*kfn)(void *, size_t, int), long (*fwd)(const struct mmf_op *),
	      int (*declined)(void *, size_t, int, uint64_t, uint32_t))
{
	stale_drain();
	struct mmf_fast_tls *x = mmf_fast_self();
	return forward_locked(x, x->t, addr, len, prot, v0, g, kfn, fwd, declined);
}

/* The forward path at its shortest: mmf_run_change for a call on memory
 * not executable before or after (the caller tests it; no W^X bookkeeping
 * then but the RW note), when bypassing is allowed (safe mode's defaults, no signal masking) and
 * the writer lock is free at the first try; the kernel reached through
 * kfn (the next mprotect) without an mmf_op, and the map updated in the
 * record's block (change_after).  What the course needs after its kernel
 * call it keeps in this thread's block, and its other calls are tail
 * calls, so that it saves no register.  A call that fails, or that the
 * block cannot take, goes on as mmf_run_change would from the same point
 * (change_rest).
 *
 * Flipping records: a range this thread changed FLIP_AFTER times in a row
 * here, with no mprotect skipped on the thread in between, is recorded
 * with its protection not followed (MMF_PROT_FLIP: unknown to every
 * reader, and not executable).  A call inside such a record is forwarded
 * under the lock and the map left as it is: no word to mark, no record to
 * split or merge.  Nothing is skipped there meanwhile, so a call that asks
 * for what this thread asked last on the range (likely a redundant one)
 * records the protection again, and the next such call is skipped.  Any
 * call through the general path (an executable protection, a call across
 * records, an munmap) records what it did over it, under the same lock. */
int mmf_fast_forward(void *addr, size_t len, int prot, uint64_t v0, uint32_t g,
		     int (*kfn)(void *, size_t, int), long (*fwd)(const struct mmf_op *),
		     int (*declined)(void *, size_t, int, uint64_t, uint32_t))
{
	struct mmf_fast_tls *x = mmf_fast_self();
	/* this thread's counters: read before the section, whose fences
	 * would have the block's address loaded again */
	struct mmf_tstats *t = x->t;
	if (!kfn || !t || !wenter_hot(x)) /* wenter_quick, its drain apart */
		return declined(addr, len, prot, v0, g);
	if (mmf_stale_now(__atomic_load_n(&mmf_stale, __ATOMIC_RELAXED)))
		return forward_drain(addr, len, prot, v0, g, kfn, fwd, declined);
	return forward_locked(x, t, addr, len, prot, v0, g, kfn, fwd, declined);
}
