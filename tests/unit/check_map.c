/* Unit tests of the shadow map (src/map.h, src/map.c).
 *
 * Test cases (CK_RUN_CASE=<name> runs one; MMF_TEST_STATS=1 prints the
 * model test's coverage figures):
 *   basic        directed tests of each operation, small and readable
 *   model        a naive per-page model against the map, random operations
 *                (8 seeds x 16,000 operations, every result compared)
 *   scale        65,530 distinct records, lookups, removals, one big merge
 *   concurrency  one writer, two lock-free readers; answers on a region the
 *                writer never touches must never change (seqlock)
 *   capacity     fills the map until `full`; answers must then be CHANGE and
 *                what is still recorded must not be wrong
 *
 * The model test works on 2048 pages at 0x10000000.  Every operation is
 * followed by: mmf_map_validate() == 0; mmf_map_count() == the model's run
 * count; a full mmf_map_walk compared record by record with the model's
 * runs; lookups around the touched ranges plus random pages (all pages every
 * 32 operations); and 8 mmf_map_check questions against the model's answer.
 * Operations alternate, 2,000 at a time, between a fragmenting phase (small
 * ranges, random attrs: the map climbs past MMF_BLOCK_CAP records so blocks
 * split) and a mixed phase (neighbour-equal attrs that merge, big spans,
 * fork_child, clear).  The test also fails when its own coverage is weak.
 * Failure messages name the seed, the operation number and the operation.
 *
 * HOW map.h IS READ HERE (the implementer reconciles; where the
 * implementation disagrees on purpose, change the model, not just the test):
 *
 * Attribute equality.  Two attrs are equal when prot, lock, owned, sealed,
 * pkey and adv_known are equal and (adv_set & adv_known) are equal: advice
 * bits outside adv_known mean nothing (map.h), so they are ignored when
 * comparing what mmf_map_lookup/mmf_map_walk return, and two adjacent
 * records that differ only in such bits count as equal and must be merged.
 * (Only test_adv_unknown_bits_merge passes such bits in on purpose; the
 * model test never creates them, but an implementation that leaves stale
 * adv_set bits behind after adv_forget and merges by raw bytes will fail
 * the model's record count.)
 *
 * Record shape.  Records are maximal: every run of consecutive mapped pages
 * with equal attrs is exactly one record (validate's "adjacent equal
 * records merged").  So mmf_map_count() must equal the number of such runs
 * in the model, and a lookup returns exactly the bounds of the run.
 *
 * mmf_map_set: every page of [start,end) becomes recorded with *a, holes
 * included.  mmf_map_remove: every page becomes a hole.
 *
 * mmf_map_update: only pages already recorded change (holes stay holes).
 * Named fields are replaced by u->a's values (MMF_UNKNOWN or pkey -1 are
 * legal values, they make the field unknown).  Advice: known |= set_mask |
 * clear_mask; set |= set_mask; set &= ~clear_mask; known &= ~forget.  The
 * tests keep the three masks disjoint, so their order does not matter.  An
 * update with fields == 0 and empty masks changes nothing (and must not
 * leave a split behind).  Updating a forgotten page sets just the named
 * fields; owned stays 0 unless MMF_F_OWNED is named.
 *
 * mmf_map_forget: every recorded page gets owned=0, prot=lock=sealed=
 * MMF_UNKNOWN, pkey=-1, adv_known=0 (adv_set irrelevant); holes stay holes.
 *
 * mmf_map_fork_child, per recorded page, over the whole map:
 *   DONTFORK known and set   -> the page becomes a hole;
 *   DONTFORK unknown         -> forgotten as above, THEN lock = NONE;
 *   DONTFORK known and clear -> kept as is (owned, sealed, pkey, prot,
 *                               advice all kept), lock = MMF_LOCK_NONE.
 * I.e. "set lock to MMF_LOCK_NONE on all remaining pages" includes the
 * forgotten ones: mlocks are never inherited by a child, so NONE is known.
 *
 * mmf_map_move(old, oldlen, new, newlen, keep_old), with oldlen, newlen > 0:
 *   S = snapshot of pages [old, old+oldlen) (recorded or hole, attrs);
 *   L = the last page of S (old+oldlen-PAGE);
 *   if (!keep_old) [old, old+oldlen) becomes holes;
 *   [new, new+newlen) becomes holes (mremap replaces the destination);
 *   for i < min(oldlen, newlen): page new+i gets S[i] (holes stay holes,
 *     attrs move unchanged, owned included);
 *   for oldlen <= i < newlen (the tail): page new+i gets L's attrs when L
 *     was recorded (whatever its attrs, even all unknown), else stays hole.
 * The tests only use the shapes mremap allows: in place (new == old,
 * shrink, grow or same size, keep_old = 0), or a move to a range disjoint
 * from the old one (any newlen; keep_old = 1 only when newlen == oldlen, as
 * MREMAP_DONTUNMAP requires).  keep_old leaves the old records untouched.
 * (Note for the engine, not the map: the kernel clears VM_LOCKED on the old
 * range of a MREMAP_DONTUNMAP move; the map is not expected to do that.)
 * Sources with holes inside are tested (holes move as holes), although the
 * kernel would refuse such an mremap.
 *
 * mmf_map_check(start, end, want): with every page of [start,end):
 *   any page a hole                      -> MMF_CHANGE
 *   any page sealed == 1                 -> MMF_CHANGE (for every MMF_Q_*)
 *   any page not satisfying want         -> MMF_CHANGE, where a needed field
 *                                          that is unknown never satisfies:
 *     MMF_Q_PROT:      prot known and == want.prot (pkey ignored)
 *     MMF_Q_PROT_PKEY: prot known and == want.prot, pkey != -1 and ==
 *                      want.pkey (want.pkey always >= 0 here)
 *     MMF_Q_LOCK:      lock known and == want.lock
 *     MMF_Q_ADV:       adv_bit in adv_known and bit value == !!adv_val
 *   else any page owned == 0 or sealed == MMF_UNKNOWN -> MMF_NOOP_UNPROVEN
 *   else                                  -> MMF_NOOP_PROVEN.
 * Fields the want does not need are ignored even when unknown.  Single
 * threaded, MMF_BUSY must never be returned.  Wants of PROT_EXEC alone are
 * not asked (exec-only pkey side effects are engine policy).
 *
 * mmf_map_lookup: returns 1 and the whole record for any address inside it
 * (also unaligned ones), 0 in a hole.  With a concurrent writer it still
 * returns 1 for an address that is recorded all along (it has no "busy"
 * answer, so 0 would claim a hole): the concurrency test counts 0 as an
 * error.
 *
 * mmf_map_walk returns 0 after a full walk and a non-zero value (presumably
 * fn's) when fn stopped it; only "non-zero" is asserted.
 *
 * Capacity: once the map ran out of blocks (m->full set), mmf_map_check
 * answers MMF_CHANGE for everything, validate still passes, and every
 * lookup is either a hole, the correct record, or a fully forgotten record
 * -- never stale attributes.  The fill needs at most MMF_TOP_CAP *
 * MMF_BLOCK_CAP records and must hold at least MMF_TOP_CAP *
 * (MMF_BLOCK_CAP / 4) (map.h: "at least 688,128 records (blocks stay a
 * quarter full)").
 *
 * Writers are always called with the writer lock held; validate, count and
 * walk are called single-threaded. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <check.h>

#include "map.h"
#include "suites.h"

/* ck_assert_msg records every passing assertion (a write to a file): far
 * too slow for millions of comparisons.  This only calls Check on failure. */
#define REQUIRE(expr, ...)                     \
	do {                                   \
		if (!(expr))                   \
			ck_abort_msg(__VA_ARGS__); \
	} while (0)

#define PG 4096ull
#define NOPROT PROT_NONE
#define RO PROT_READ
#define RW (PROT_READ | PROT_WRITE)
#define RX (PROT_READ | PROT_EXEC)
#define UNK MMF_UNKNOWN

/* ------------------------------------------------------------------ */
/* Fixed-seed PRNG (xorshift64*). */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static unsigned rnd(uint64_t *s, unsigned n)
{
	return n ? (unsigned)((rng_next(s) >> 11) % n) : 0;
}

static int chance(uint64_t *s, unsigned pct)
{
	return rnd(s, 100) < pct;
}

static uint64_t seed_of(int i)
{
	uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) ^ 0xD1B54A32D192ED03ull;
	return s ? s : 1;
}

/* ------------------------------------------------------------------ */
/* Attributes. */

static struct mmf_attr mk(uint8_t prot, uint8_t lock, uint8_t owned,
			  uint8_t sealed, int16_t pkey, uint8_t known,
			  uint8_t set)
{
	struct mmf_attr a;
	memset(&a, 0, sizeof a);
	a.prot = prot;
	a.lock = lock;
	a.owned = owned;
	a.sealed = sealed;
	a.pkey = pkey;
	a.adv_known = known;
	a.adv_set = set;
	return a;
}

/* The plain attrs of a fresh owned anonymous mapping. */
static struct mmf_attr owned_prot(uint8_t prot)
{
	return mk(prot, MMF_LOCK_NONE, 1, 0, -1, 0, 0);
}

static struct mmf_attr forgotten(void)
{
	return mk(UNK, UNK, 0, UNK, -1, 0, 0);
}

static int attr_eq(const struct mmf_attr *x, const struct mmf_attr *y)
{
	return x->prot == y->prot && x->lock == y->lock &&
	       x->owned == y->owned && x->sealed == y->sealed &&
	       x->pkey == y->pkey && x->adv_known == y->adv_known &&
	       (x->adv_set & x->adv_known) == (y->adv_set & y->adv_known);
}

static struct mmf_attr attr_norm(struct mmf_attr a)
{
	a.adv_set &= a.adv_known;
	return a;
}

/* Formats into one of a few rotating static buffers. */
static const char *astr(const struct mmf_attr *a)
{
	static char buf[8][96];
	static unsigned k;
	char *b = buf[k++ % 8];
	snprintf(b, sizeof buf[0],
		 "{prot=%#x lock=%#x owned=%u sealed=%#x pkey=%d known=%#x set=%#x}",
		 a->prot, a->lock, a->owned, a->sealed, a->pkey, a->adv_known,
		 a->adv_set);
	return b;
}

static const char *ansstr(int r)
{
	static const char *n[] = { "NOOP_PROVEN", "NOOP_UNPROVEN", "CHANGE",
				   "BUSY" };
	return r >= 0 && r <= 3 ? n[r] : "(invalid)";
}

static struct mmf_want want_prot(uint8_t prot)
{
	struct mmf_want w;
	memset(&w, 0, sizeof w);
	w.what = MMF_Q_PROT;
	w.prot = prot;
	return w;
}

static struct mmf_want want_pkey(uint8_t prot, int16_t pkey)
{
	struct mmf_want w = want_prot(prot);
	w.what = MMF_Q_PROT_PKEY;
	w.pkey = pkey;
	return w;
}

static struct mmf_want want_lock(uint8_t lock)
{
	struct mmf_want w;
	memset(&w, 0, sizeof w);
	w.what = MMF_Q_LOCK;
	w.lock = lock;
	return w;
}

static struct mmf_want want_adv(uint8_t bit, uint8_t val)
{
	struct mmf_want w;
	memset(&w, 0, sizeof w);
	w.what = MMF_Q_ADV;
	w.adv_bit = bit;
	w.adv_val = val;
	return w;
}

/* ------------------------------------------------------------------ */
/* Writers under the writer lock. */

static void w_set(struct mmf_map *m, uint64_t s, uint64_t e, struct mmf_attr a)
{
	mmf_map_wlock(m);
	mmf_map_set(m, s, e, &a);
	mmf_map_wunlock(m);
}

static void w_remove(struct mmf_map *m, uint64_t s, uint64_t e)
{
	mmf_map_wlock(m);
	mmf_map_remove(m, s, e);
	mmf_map_wunlock(m);
}

static void w_update(struct mmf_map *m, uint64_t s, uint64_t e,
		     const struct mmf_upd *u)
{
	mmf_map_wlock(m);
	mmf_map_update(m, s, e, u);
	mmf_map_wunlock(m);
}

static void w_forget(struct mmf_map *m, uint64_t s, uint64_t e)
{
	mmf_map_wlock(m);
	mmf_map_forget(m, s, e);
	mmf_map_wunlock(m);
}

static void w_move(struct mmf_map *m, uint64_t o, uint64_t ol, uint64_t n,
		   uint64_t nl, int keep)
{
	mmf_map_wlock(m);
	mmf_map_move(m, o, ol, n, nl, keep);
	mmf_map_wunlock(m);
}

static void w_fork_child(struct mmf_map *m)
{
	mmf_map_wlock(m);
	mmf_map_fork_child(m);
	mmf_map_wunlock(m);
}

static void w_clear(struct mmf_map *m)
{
	mmf_map_wlock(m);
	mmf_map_clear(m);
	mmf_map_wunlock(m);
}

static struct mmf_upd upd_fields(unsigned fields, struct mmf_attr a)
{
	struct mmf_upd u;
	memset(&u, 0, sizeof u);
	u.fields = fields;
	u.a = a;
	return u;
}

static struct mmf_upd upd_adv(uint8_t set, uint8_t clear, uint8_t forget)
{
	struct mmf_upd u;
	memset(&u, 0, sizeof u);
	u.adv_set_mask = set;
	u.adv_clear_mask = clear;
	u.adv_forget = forget;
	return u;
}

/* ------------------------------------------------------------------ */
/* Directed-test helpers.  Addresses are D + page * PG. */

#define D 0x7f0000000000ull
#define P(i) (D + (uint64_t)(i) * PG)

static void expect_rec_(const struct mmf_map *m, uint64_t addr, int found,
			uint64_t s, uint64_t e, const struct mmf_attr *a,
			int line)
{
	struct mmf_rec r;
	memset(&r, 0x5a, sizeof r);
	int f = mmf_map_lookup(m, addr, &r);
	if (!found) {
		REQUIRE(f == 0,
			      "line %d: lookup(%#llx) = %d, expected a hole; got [%#llx,%#llx) %s",
			      line, (unsigned long long)addr, f,
			      (unsigned long long)r.start,
			      (unsigned long long)r.end, astr(&r.a));
		return;
	}
	REQUIRE(f == 1, "line %d: lookup(%#llx) = %d, expected a record",
		      line, (unsigned long long)addr, f);
	REQUIRE(r.start == s && r.end == e && attr_eq(&r.a, a),
		      "line %d: lookup(%#llx) = [%#llx,%#llx) %s, expected [%#llx,%#llx) %s",
		      line, (unsigned long long)addr,
		      (unsigned long long)r.start, (unsigned long long)r.end,
		      astr(&r.a), (unsigned long long)s, (unsigned long long)e,
		      astr(a));
}
#define EXPECT_REC(m, addr, s, e, a) expect_rec_(m, addr, 1, s, e, &(a), __LINE__)
#define EXPECT_HOLE(m, addr) expect_rec_(m, addr, 0, 0, 0, NULL, __LINE__)

static void expect_count_(struct mmf_map *m, uint64_t n, int line)
{
	int v = mmf_map_validate(m);
	REQUIRE(v == 0, "line %d: mmf_map_validate() = %d", line, v);
	uint64_t c = mmf_map_count(m);
	REQUIRE(c == n, "line %d: mmf_map_count() = %llu, expected %llu",
		      line, (unsigned long long)c, (unsigned long long)n);
}
#define EXPECT_COUNT(m, n) expect_count_(m, n, __LINE__)

static void expect_check_(const struct mmf_map *m, uint64_t s, uint64_t e,
			  struct mmf_want w, int exp, int line)
{
	int r = mmf_map_check(m, s, e, &w);
	REQUIRE(r == exp,
		      "line %d: check([%#llx,%#llx), what=%d prot=%#x pkey=%d lock=%u adv=%#x/%u) = %s, expected %s",
		      line, (unsigned long long)s, (unsigned long long)e,
		      w.what, w.prot, w.pkey, w.lock, w.adv_bit, w.adv_val,
		      ansstr(r), ansstr(exp));
}
#define EXPECT_CHECK(m, s, e, w, exp) expect_check_(m, s, e, w, exp, __LINE__)

static void init_map(struct mmf_map *m)
{
	memset(m, 0, sizeof *m);
	int r = mmf_map_init(m);
	REQUIRE(r == 0, "mmf_map_init() = %d", r);
}

struct collect {
	struct mmf_rec *r;
	size_t n, cap;
	int stop_at; /* return 7 on this call (1-based), 0: never */
};

static int collect_fn(const struct mmf_rec *r, void *arg)
{
	struct collect *c = arg;
	if (c->n < c->cap)
		c->r[c->n] = *r;
	c->n++;
	return c->stop_at && (int)c->n == c->stop_at ? 7 : 0;
}

/* ------------------------------------------------------------------ */
/* basic: directed tests. */

START_TEST(test_empty)
{
	struct mmf_map m;
	init_map(&m);
	EXPECT_COUNT(&m, 0);
	EXPECT_HOLE(&m, 0);
	EXPECT_HOLE(&m, D);
	EXPECT_HOLE(&m, 0x7ffffffff000ull);
	EXPECT_CHECK(&m, P(0), P(1), want_prot(RW), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(1), want_lock(MMF_LOCK_NONE), MMF_CHANGE);
	struct mmf_rec buf[4];
	struct collect c = { buf, 0, 4, 0 };
	ck_assert_int_eq(mmf_map_walk(&m, collect_fn, &c), 0);
	ck_assert_uint_eq(c.n, 0);
	/* Writers on an empty map are no-ops. */
	w_remove(&m, P(0), P(10));
	struct mmf_upd u = upd_fields(MMF_F_PROT, owned_prot(RO));
	w_update(&m, P(0), P(10), &u);
	w_forget(&m, P(0), P(10));
	w_move(&m, P(0), 4 * PG, P(20), 4 * PG, 0);
	w_fork_child(&m);
	EXPECT_COUNT(&m, 0);
	EXPECT_HOLE(&m, P(0));
	EXPECT_HOLE(&m, P(20));
}
END_TEST

START_TEST(test_set_merge_split)
{
	struct mmf_map m;
	init_map(&m);
	struct mmf_attr a = owned_prot(RW), b = owned_prot(RO);

	w_set(&m, P(0), P(4), a);
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(0), P(0), P(4), a);
	EXPECT_REC(&m, P(4) - 1, P(0), P(4), a); /* last byte */
	EXPECT_HOLE(&m, P(4));
	EXPECT_HOLE(&m, P(0) - 1);

	w_set(&m, P(4), P(8), a); /* adjacent after: merges */
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(5) + 123, P(0), P(8), a);
	w_set(&m, P(-2), P(0), a); /* adjacent before: merges */
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(-1), P(-2), P(8), a);

	w_set(&m, P(2), P(3), b); /* splits in three */
	EXPECT_COUNT(&m, 3);
	EXPECT_REC(&m, P(1), P(-2), P(2), a);
	EXPECT_REC(&m, P(2), P(2), P(3), b);
	EXPECT_REC(&m, P(3), P(3), P(8), a);
	w_set(&m, P(2), P(3), a); /* and merges back */
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(2), P(-2), P(8), a);

	w_set(&m, P(6), P(12), b); /* overlaps the end */
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(5), P(-2), P(6), a);
	EXPECT_REC(&m, P(6), P(6), P(12), b);

	w_set(&m, P(20), P(21), a); /* across a hole: no merge */
	EXPECT_COUNT(&m, 3);
	EXPECT_HOLE(&m, P(12));
	EXPECT_HOLE(&m, P(19));
	w_set(&m, P(12), P(20), b); /* fills the hole, merges with b */
	EXPECT_COUNT(&m, 3);
	EXPECT_REC(&m, P(19), P(6), P(20), b);
	EXPECT_REC(&m, P(20), P(20), P(21), a);

	w_set(&m, P(-10), P(30), b); /* covers everything */
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(0), P(-10), P(30), b);

	/* Records differing in one field only are not merged. */
	struct mmf_attr v[] = {
		mk(RW, MMF_LOCK_NONE, 1, 0, -1, 0, 0),
		mk(RO, MMF_LOCK_NONE, 1, 0, -1, 0, 0),
		mk(RO, MMF_LOCK_ON, 1, 0, -1, 0, 0),
		mk(RO, MMF_LOCK_ON, 0, 0, -1, 0, 0),
		mk(RO, MMF_LOCK_ON, 0, UNK, -1, 0, 0),
		mk(RO, MMF_LOCK_ON, 0, UNK, 3, 0, 0),
		mk(RO, MMF_LOCK_ON, 0, UNK, 3, MMF_ADV_DONTDUMP, 0),
		mk(RO, MMF_LOCK_ON, 0, UNK, 3, MMF_ADV_DONTDUMP, MMF_ADV_DONTDUMP),
		mk(UNK, MMF_LOCK_ON, 0, UNK, 3, MMF_ADV_DONTDUMP, MMF_ADV_DONTDUMP),
		mk(UNK, UNK, 0, UNK, 3, MMF_ADV_DONTDUMP, MMF_ADV_DONTDUMP),
		mk(UNK, UNK, 0, 1, 3, MMF_ADV_DONTDUMP, MMF_ADV_DONTDUMP),
	};
	int nv = (int)(sizeof v / sizeof v[0]);
	for (int i = 0; i < nv; i++)
		w_set(&m, P(100 + i), P(101 + i), v[i]);
	EXPECT_COUNT(&m, 1 + (uint64_t)nv);
	for (int i = 0; i < nv; i++)
		EXPECT_REC(&m, P(100 + i), P(100 + i), P(101 + i), v[i]);
}
END_TEST

/* Advice bits outside adv_known carry no meaning: such records are equal. */
START_TEST(test_adv_unknown_bits_merge)
{
	struct mmf_map m;
	init_map(&m);
	struct mmf_attr a = mk(RW, MMF_LOCK_NONE, 1, 0, -1, MMF_ADV_DONTDUMP, 0);
	struct mmf_attr b = a;
	b.adv_set = MMF_ADV_HUGEPAGE; /* not known: meaningless */
	w_set(&m, P(0), P(1), a);
	w_set(&m, P(1), P(2), b);
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(1), P(0), P(2), a);
	/* Forgetting a set bit leaves a record equal to one never told. */
	struct mmf_attr c = mk(RW, MMF_LOCK_NONE, 1, 0, -1,
			       MMF_ADV_DONTDUMP | MMF_ADV_HUGEPAGE,
			       MMF_ADV_HUGEPAGE);
	w_set(&m, P(2), P(3), c);
	EXPECT_COUNT(&m, 2);
	struct mmf_upd u = upd_adv(0, 0, MMF_ADV_HUGEPAGE);
	w_update(&m, P(2), P(3), &u);
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(2), P(0), P(3), a);
}
END_TEST

START_TEST(test_remove)
{
	struct mmf_map m;
	init_map(&m);
	struct mmf_attr a = owned_prot(RW), b = owned_prot(RO);
	w_set(&m, P(0), P(10), a);
	w_remove(&m, P(3), P(5)); /* punches a hole */
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(2), P(0), P(3), a);
	EXPECT_HOLE(&m, P(3));
	EXPECT_HOLE(&m, P(4));
	EXPECT_REC(&m, P(5), P(5), P(10), a);
	w_remove(&m, P(2), P(6)); /* overlaps both records and the hole */
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(1), P(0), P(2), a);
	EXPECT_REC(&m, P(6), P(6), P(10), a);
	w_remove(&m, P(0), P(1)); /* the front */
	w_remove(&m, P(9), P(10)); /* the back */
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(1), P(1), P(2), a);
	EXPECT_REC(&m, P(8), P(6), P(9), a);
	w_set(&m, P(20), P(21), b);
	w_set(&m, P(22), P(23), a);
	w_remove(&m, P(6), P(9)); /* exactly one record */
	EXPECT_COUNT(&m, 3);
	w_remove(&m, P(-5), P(100)); /* everything */
	EXPECT_COUNT(&m, 0);
	EXPECT_HOLE(&m, P(1));
	EXPECT_HOLE(&m, P(20));
	w_remove(&m, P(0), P(1)); /* nothing there */
	EXPECT_COUNT(&m, 0);
	/* Removing the middle one of three re-creates nothing. */
	w_set(&m, P(0), P(3), a);
	w_set(&m, P(1), P(2), b);
	w_remove(&m, P(1), P(2));
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(0), P(0), P(1), a);
	EXPECT_HOLE(&m, P(1));
	EXPECT_REC(&m, P(2), P(2), P(3), a);
}
END_TEST

/* mmf_map_reprot where records sit at the edges of blocks: 600 one-page
 * records alternating RW and RO (several blocks), then every RO page made
 * RW through a reader's hint, in a scattered order, each merging with both
 * neighbours (so mmf_map_reprot_whole, which only stores in place, must
 * always decline).  Where a neighbour is in another block reprot must decline
 * (the general update merges across blocks); the count drops by two either
 * way and the map stays valid.  Then the other way: single pages split off
 * the one record, each through the hint the last change named. */
START_TEST(test_reprot_edges)
{
	struct mmf_map m;
	init_map(&m);
	enum { N = 600 };
	for (int i = 0; i < N; i++)
		w_set(&m, P(i), P(i + 1), owned_prot(i % 2 ? RO : RW));
	EXPECT_COUNT(&m, N);
	uint64_t count = N;
	long answers[3] = {0};
	for (int k = 0; k < N / 2; k++) {
		int i = 1 + 2 * ((k * 97) % (N / 2)); /* 97 is prime to 300 */
		if (i >= N - 1)
			continue;
		struct mmf_hint h;
		struct mmf_want w = {.what = MMF_Q_PROT, .prot = RW};
		ck_assert_int_eq(mmf_map_check_hint(&m, P(i), P(i + 1), &w, &h), MMF_CHANGE);
		ck_assert_ptr_nonnull(h.r.attr);
		struct mmf_slotref nr;
		mmf_map_wlock(&m);
		/* the whole record, equal to both neighbours after: never in place */
		ck_assert_int_eq(mmf_map_reprot_whole(&m, &h.r, RW, 0, *h.r.attr), 0);
		int d = mmf_map_reprot(&m, &h.r, P(i), P(i + 1), RW, 0, *h.r.attr, &nr);
		if (!d) {
			struct mmf_upd u = upd_fields(MMF_F_PROT, owned_prot(RW));
			mmf_map_update(&m, P(i), P(i + 1), &u);
		}
		mmf_map_wunlock(&m);
		ck_assert_int_ne(d, MMF_REPROT_IN_PLACE);
		answers[d]++;
		count -= 2;
		ck_assert_int_eq(mmf_map_validate(&m), 0);
		EXPECT_COUNT(&m, count);
		if (d == MMF_REPROT_MOVED) {
			struct mmf_rec r;
			ck_assert(mmf_map_lookup(&m, P(i), &r));
			ck_assert(r.start == nr.start && r.end == nr.end && nr.seq == m.seq);
		}
	}
	ck_assert_msg(answers[0] > 0 && answers[MMF_REPROT_MOVED] > 100,
		      "declined %ld, moved %ld", answers[0], answers[MMF_REPROT_MOVED]);
	/* one record now; a page split off, put back, the next one ... */
	w_set(&m, P(0), P(N), owned_prot(RW));
	struct mmf_hint h;
	struct mmf_want w = {.what = MMF_Q_PROT, .prot = RO};
	mmf_map_check_hint(&m, P(5), P(6), &w, &h);
	struct mmf_slotref r = h.r;
	for (int i = 5; i < N - 5; i += 7) {
		struct mmf_slotref nr;
		mmf_map_wlock(&m);
		ck_assert_int_eq(mmf_map_reprot(&m, &r, P(i), P(i + 1), RO, 0, *r.attr, &nr), MMF_REPROT_MOVED);
		EXPECT_COUNT(&m, 3);
		ck_assert(nr.start == P(i) && nr.end == P(i + 1));
		ck_assert_int_eq(mmf_map_reprot(&m, &nr, P(i), P(i + 1), RW, 0, *nr.attr, &r), MMF_REPROT_MOVED);
		mmf_map_wunlock(&m);
		EXPECT_COUNT(&m, 1);
		ck_assert(r.start == P(0) && r.end == P(N));
		ck_assert_int_eq(mmf_map_validate(&m), 0);
	}
	/* a stale hint is declined */
	r.seq -= 2;
	struct mmf_slotref nr;
	mmf_map_wlock(&m);
	ck_assert_int_eq(mmf_map_reprot(&m, &r, P(3), P(4), RO, 0, *r.attr, &nr), 0);
	mmf_map_wunlock(&m);
	EXPECT_COUNT(&m, 1);
}
END_TEST

/* mmf_map_reprot_whole (the forward path's store in place) declines
 * whenever a neighbour would equal the record after, whether that
 * neighbour is in the record's block or the next one: 600 records RW, RO,
 * NONE in turn, over several blocks, after 0 to 2 others (so that the RO
 * records fall on blocks' first and last slots); every RO record made RW
 * (its left neighbour then equals it), on a fresh map made NONE (its right
 * one does), and on a third made RX (neither does: stored in place,
 * unless a neighbour is in another block, where mmf_map_reprot declines
 * as well). */
START_TEST(test_reprot_whole)
{
	static const uint8_t cyc[3] = {RW, RO, NOPROT}, to[3] = {RW, NOPROT, RX};
	static const uint8_t lead[2] = {PROT_EXEC, RW | PROT_EXEC};
	enum { N = 600 };
	long edge = 0, declined = 0;
	for (int pass = 0; pass < 9; pass++) {
		int nl = pass / 3, t = pass % 3;
		struct mmf_map m;
		init_map(&m);
		for (int i = 0; i < nl; i++)
			w_set(&m, P(i), P(i + 1), owned_prot(lead[i]));
		for (int i = 0; i < N; i++)
			w_set(&m, P(nl + i), P(nl + i + 1), owned_prot(cyc[i % 3]));
		for (int i = nl + 1; i < nl + N; i += 3) {
			struct mmf_hint h;
			struct mmf_want w = {.what = MMF_Q_PROT, .prot = to[t]};
			ck_assert_int_eq(mmf_map_check_hint(&m, P(i), P(i + 1), &w, &h), MMF_CHANGE);
			ck_assert_ptr_nonnull(h.r.attr);
			edge += h.r.i == 0;
			mmf_map_wlock(&m);
			int d = mmf_map_reprot_whole(&m, &h.r, to[t], 0, *h.r.attr), g = -1;
			if (!d && t == 2) { /* only where a neighbour is in another block */
				struct mmf_slotref nr;
				g = mmf_map_reprot(&m, &h.r, P(i), P(i + 1), to[t], 0, *h.r.attr, &nr);
				declined++;
			}
			mmf_map_wunlock(&m);
			ck_assert_msg(t == 2 ? d || g == 0 : !d, "pass %d record %d: answered %d (%d)",
				      pass, i, d, g);
			if (d) {
				struct mmf_rec r;
				ck_assert(mmf_map_lookup(&m, P(i), &r) && r.start == P(i) &&
					  r.end == P(i + 1) && r.a.prot == to[t]);
			}
		}
		EXPECT_COUNT(&m, N + nl);
		ck_assert_int_eq(mmf_map_validate(&m), 0);
	}
	ck_assert_msg(edge > 0 && declined > 0 && declined < N / 10,
		      "first in a block %ld, RX declined %ld", edge, declined);
}
END_TEST

START_TEST(test_update)
{
	struct mmf_map m;
	init_map(&m);
	struct mmf_attr a = owned_prot(RW), x = a;
	w_set(&m, P(0), P(10), a);

	struct mmf_upd u = upd_fields(MMF_F_PROT, owned_prot(RO));
	w_update(&m, P(3), P(6), &u); /* splits in three */
	EXPECT_COUNT(&m, 3);
	x.prot = RO;
	EXPECT_REC(&m, P(2), P(0), P(3), a);
	EXPECT_REC(&m, P(3), P(3), P(6), x);
	EXPECT_REC(&m, P(6), P(6), P(10), a);

	struct mmf_upd none;
	memset(&none, 0, sizeof none);
	w_update(&m, P(1), P(9), &none); /* changes nothing, splits nothing */
	EXPECT_COUNT(&m, 3);
	u = upd_fields(MMF_F_PROT, owned_prot(RO));
	w_update(&m, P(4), P(5), &u); /* same value: no split */
	EXPECT_COUNT(&m, 3);

	u = upd_fields(MMF_F_PROT, owned_prot(RW));
	w_update(&m, P(3), P(6), &u); /* merges back */
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(9), P(0), P(10), a);

	/* Holes stay holes. */
	w_remove(&m, P(4), P(6));
	u = upd_fields(MMF_F_LOCK, mk(0, MMF_LOCK_ON, 0, 0, 0, 0, 0));
	w_update(&m, P(-3), P(13), &u);
	x = a;
	x.lock = MMF_LOCK_ON;
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(0), P(0), P(4), x);
	EXPECT_HOLE(&m, P(4));
	EXPECT_HOLE(&m, P(5));
	EXPECT_HOLE(&m, P(-1));
	EXPECT_HOLE(&m, P(10));
	EXPECT_REC(&m, P(9), P(6), P(10), x);

	/* An mprotect once something was locked: the locked records' state
	 * becomes unknown, an unlocked one's stays. */
	{
		struct mmf_map m2;
		ck_assert_int_eq(mmf_map_init(&m2), 0);
		struct mmf_attr lo = a, un = a;
		lo.lock = MMF_LOCK_ON;
		un.lock = MMF_LOCK_NONE;
		mmf_map_wlock(&m2);
		mmf_map_set(&m2, P(0), P(2), &lo);
		mmf_map_set(&m2, P(2), P(4), &un);
		mmf_map_wunlock(&m2);
		u = upd_fields(MMF_F_PROT | MMF_F_LOCK_HELD, owned_prot(RO));
		w_update(&m2, P(0), P(4), &u);
		lo.prot = un.prot = RO;
		lo.lock = MMF_UNKNOWN;
		EXPECT_REC(&m2, P(1), P(0), P(2), lo);
		EXPECT_REC(&m2, P(3), P(2), P(4), un);
		mmf_map_clear(&m2);
	}

	/* Each field alone. */
	struct mmf_attr y = x;
	u = upd_fields(MMF_F_OWNED, mk(0, 0, 0, 0, 0, 0, 0));
	w_update(&m, P(0), P(1), &u);
	y.owned = 0;
	EXPECT_REC(&m, P(0), P(0), P(1), y);
	u = upd_fields(MMF_F_SEALED, mk(0, 0, 0, 1, 0, 0, 0));
	w_update(&m, P(0), P(1), &u);
	y.sealed = 1;
	EXPECT_REC(&m, P(0), P(0), P(1), y);
	u = upd_fields(MMF_F_PKEY, mk(0, 0, 0, 0, 5, 0, 0));
	w_update(&m, P(0), P(1), &u);
	y.pkey = 5;
	EXPECT_REC(&m, P(0), P(0), P(1), y);
	u = upd_fields(MMF_F_PROT | MMF_F_LOCK | MMF_F_SEALED | MMF_F_PKEY,
		       mk(UNK, UNK, 1, UNK, -1, 0, 0)); /* to unknown */
	w_update(&m, P(0), P(1), &u);
	y = mk(UNK, UNK, 0, UNK, -1, 0, 0);
	EXPECT_REC(&m, P(0), P(0), P(1), y);
	EXPECT_REC(&m, P(1), P(1), P(4), x);
	EXPECT_COUNT(&m, 3);
	u = upd_fields(MMF_F_PROT | MMF_F_LOCK | MMF_F_OWNED | MMF_F_SEALED |
			       MMF_F_PKEY,
		       x); /* everything back: merges */
	w_update(&m, P(0), P(1), &u);
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(0), P(0), P(4), x);

	/* Advice masks. */
	u = upd_adv(MMF_ADV_HUGEPAGE, 0, 0);
	w_update(&m, P(0), P(10), &u);
	y = x;
	y.adv_known = y.adv_set = MMF_ADV_HUGEPAGE;
	EXPECT_REC(&m, P(0), P(0), P(4), y);
	EXPECT_REC(&m, P(6), P(6), P(10), y);
	u = upd_adv(MMF_ADV_NOHUGEPAGE, MMF_ADV_DONTDUMP | MMF_ADV_WIPEONFORK,
		    MMF_ADV_HUGEPAGE);
	w_update(&m, P(1), P(2), &u);
	struct mmf_attr z = x;
	z.adv_known = MMF_ADV_NOHUGEPAGE | MMF_ADV_DONTDUMP | MMF_ADV_WIPEONFORK;
	z.adv_set = MMF_ADV_NOHUGEPAGE;
	EXPECT_REC(&m, P(0), P(0), P(1), y);
	EXPECT_REC(&m, P(1), P(1), P(2), z);
	EXPECT_REC(&m, P(2), P(2), P(4), y);
	u = upd_adv(MMF_ADV_DONTDUMP, 0, 0); /* known clear -> known set */
	w_update(&m, P(1), P(2), &u);
	z.adv_set |= MMF_ADV_DONTDUMP;
	EXPECT_REC(&m, P(1), P(1), P(2), z);
	u = upd_adv(0, MMF_ADV_NOHUGEPAGE, 0); /* known set -> known clear */
	w_update(&m, P(1), P(2), &u);
	z.adv_set &= (uint8_t)~MMF_ADV_NOHUGEPAGE;
	EXPECT_REC(&m, P(1), P(1), P(2), z);
	u = upd_adv(MMF_ADV_HUGEPAGE, 0,
		    MMF_ADV_NOHUGEPAGE | MMF_ADV_DONTDUMP | MMF_ADV_WIPEONFORK);
	w_update(&m, P(1), P(2), &u); /* back to y: merges */
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(1), P(0), P(4), y);

	/* Updating a forgotten page sets just the named fields. */
	w_forget(&m, P(7), P(8));
	u = upd_fields(MMF_F_PROT, owned_prot(RW));
	w_update(&m, P(7), P(8), &u);
	z = forgotten();
	z.prot = RW;
	EXPECT_REC(&m, P(7), P(7), P(8), z);
	u = upd_adv(MMF_ADV_DONTFORK, 0, 0);
	w_update(&m, P(7), P(8), &u);
	z.adv_known = z.adv_set = MMF_ADV_DONTFORK;
	EXPECT_REC(&m, P(7), P(7), P(8), z);
	EXPECT_COUNT(&m, 4);
}
END_TEST

START_TEST(test_forget)
{
	struct mmf_map m;
	init_map(&m);
	struct mmf_attr a = mk(RW, MMF_LOCK_ON, 1, 0, 1,
			       MMF_ADV_DONTFORK | MMF_ADV_DONTDUMP,
			       MMF_ADV_DONTDUMP);
	struct mmf_attr b = mk(RO, MMF_LOCK_NONE, 0, UNK, -1, 0, 0);
	struct mmf_attr f = forgotten();
	w_set(&m, P(0), P(4), a);
	w_set(&m, P(6), P(8), b);
	w_forget(&m, P(1), P(7));
	EXPECT_COUNT(&m, 4);
	EXPECT_REC(&m, P(0), P(0), P(1), a);
	EXPECT_REC(&m, P(1), P(1), P(4), f);
	EXPECT_HOLE(&m, P(4));
	EXPECT_HOLE(&m, P(5));
	EXPECT_REC(&m, P(6), P(6), P(7), f);
	EXPECT_REC(&m, P(7), P(7), P(8), b);
	w_forget(&m, P(4), P(6)); /* only a hole: nothing recorded */
	EXPECT_COUNT(&m, 4);
	EXPECT_HOLE(&m, P(4));
	w_set(&m, P(4), P(6), a);
	w_forget(&m, P(4), P(6)); /* now all forgotten pages merge */
	EXPECT_COUNT(&m, 3);
	EXPECT_REC(&m, P(5), P(1), P(7), f);
	w_forget(&m, P(0), P(8));
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(0), P(0), P(8), f);
	w_forget(&m, P(0), P(8)); /* idempotent */
	EXPECT_COUNT(&m, 1);
	EXPECT_CHECK(&m, P(0), P(8), want_prot(RW), MMF_CHANGE);
}
END_TEST

START_TEST(test_move)
{
	struct mmf_map m;
	init_map(&m);
	struct mmf_attr a = owned_prot(RW), b = owned_prot(RO);
	struct mmf_attr c = mk(RX, MMF_LOCK_ON, 0, UNK, 2, 0, 0);

	/* Shrink in place. */
	w_set(&m, P(0), P(8), a);
	w_move(&m, P(0), 8 * PG, P(0), 3 * PG, 0);
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(0), P(0), P(3), a);
	EXPECT_HOLE(&m, P(3));
	EXPECT_HOLE(&m, P(7));
	w_remove(&m, P(0), P(100));

	/* Grow in place: the tail takes the last old page's attrs. */
	w_set(&m, P(0), P(3), a);
	w_set(&m, P(3), P(4), b);
	w_move(&m, P(0), 4 * PG, P(0), 8 * PG, 0);
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(0), P(0), P(3), a);
	EXPECT_REC(&m, P(7), P(3), P(8), b);
	EXPECT_HOLE(&m, P(8));
	w_remove(&m, P(0), P(100));

	/* ... also when those are observed and unknown. */
	w_set(&m, P(0), P(2), forgotten());
	w_move(&m, P(0), 2 * PG, P(0), 5 * PG, 0);
	EXPECT_COUNT(&m, 1);
	struct mmf_attr fg = forgotten();
	EXPECT_REC(&m, P(4), P(0), P(5), fg);
	w_remove(&m, P(0), P(100));

	/* Grow in place, last old page a hole: nothing in the tail. */
	w_set(&m, P(0), P(3), a);
	w_move(&m, P(0), 4 * PG, P(0), 8 * PG, 0);
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(0), P(0), P(3), a);
	for (int i = 3; i < 9; i++)
		EXPECT_HOLE(&m, P(i));
	w_remove(&m, P(0), P(100));

	/* Move elsewhere: old removed, holes move as holes. */
	w_set(&m, P(0), P(1), a);
	w_set(&m, P(2), P(4), b);
	w_move(&m, P(0), 4 * PG, P(50), 4 * PG, 0);
	EXPECT_COUNT(&m, 2);
	for (int i = 0; i < 4; i++)
		EXPECT_HOLE(&m, P(i));
	EXPECT_REC(&m, P(50), P(50), P(51), a);
	EXPECT_HOLE(&m, P(51));
	EXPECT_REC(&m, P(53), P(52), P(54), b);
	w_remove(&m, P(0), P(100));

	/* Move elsewhere and grow. */
	w_set(&m, P(0), P(2), a);
	w_set(&m, P(2), P(3), b);
	w_move(&m, P(0), 3 * PG, P(10), 7 * PG, 0);
	EXPECT_COUNT(&m, 2);
	EXPECT_HOLE(&m, P(0));
	EXPECT_REC(&m, P(10), P(10), P(12), a);
	EXPECT_REC(&m, P(16), P(12), P(17), b);
	w_remove(&m, P(0), P(100));

	/* Move elsewhere and shrink. */
	w_set(&m, P(0), P(2), a);
	w_set(&m, P(2), P(6), b);
	w_move(&m, P(0), 6 * PG, P(10), 3 * PG, 0);
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(10), P(10), P(12), a);
	EXPECT_REC(&m, P(12), P(12), P(13), b);
	EXPECT_HOLE(&m, P(13));
	EXPECT_HOLE(&m, P(2));
	w_remove(&m, P(0), P(100));

	/* keep_old (MREMAP_DONTUNMAP). */
	w_set(&m, P(0), P(4), a);
	w_move(&m, P(0), 4 * PG, P(50), 4 * PG, 1);
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(0), P(0), P(4), a);
	EXPECT_REC(&m, P(50), P(50), P(54), a);
	w_move(&m, P(50), 4 * PG, P(54), 4 * PG, 1); /* lands adjacent */
	EXPECT_COUNT(&m, 2);
	EXPECT_REC(&m, P(50), P(50), P(58), a);
	w_move(&m, P(50), 8 * PG, P(4), 8 * PG, 0); /* lands adjacent */
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, P(0), P(0), P(12), a);
	EXPECT_HOLE(&m, P(50));
	w_remove(&m, P(0), P(100));

	/* The destination's old records are replaced. */
	w_set(&m, P(20), P(30), c);
	w_set(&m, P(0), P(2), a); /* page 2 is a hole */
	w_move(&m, P(0), 3 * PG, P(22), 3 * PG, 0);
	EXPECT_COUNT(&m, 3);
	EXPECT_REC(&m, P(20), P(20), P(22), c);
	EXPECT_REC(&m, P(23), P(22), P(24), a);
	EXPECT_HOLE(&m, P(24));
	EXPECT_REC(&m, P(25), P(25), P(30), c);
	w_move(&m, P(25), 5 * PG, P(25), 5 * PG, 0); /* identity */
	EXPECT_COUNT(&m, 3);
	EXPECT_REC(&m, P(25), P(25), P(30), c);
}
END_TEST

START_TEST(test_fork_child)
{
	struct mmf_map m;
	init_map(&m);
	struct mmf_attr dropped = mk(RW, MMF_LOCK_ON, 1, 0, -1,
				     MMF_ADV_DONTFORK, MMF_ADV_DONTFORK);
	struct mmf_attr kept = mk(RW, MMF_LOCK_ON, 1, 0, 1,
				  MMF_ADV_DONTFORK | MMF_ADV_HUGEPAGE,
				  MMF_ADV_HUGEPAGE);
	struct mmf_attr unknown = mk(RO, MMF_LOCK_ONFAULT, 1, 0, 2,
				     MMF_ADV_HUGEPAGE, MMF_ADV_HUGEPAGE);
	struct mmf_attr kept2 = mk(RX, UNK, 0, 1, -1, MMF_ADV_DONTFORK, 0);
	w_set(&m, P(0), P(2), dropped);
	w_set(&m, P(2), P(4), kept);
	w_set(&m, P(4), P(6), unknown);
	w_set(&m, P(6), P(8), kept2);
	w_set(&m, P(8), P(9), forgotten());
	w_set(&m, P(10), P(11), dropped);
	EXPECT_COUNT(&m, 6);
	w_fork_child(&m);

	struct mmf_attr kept_c = kept, unknown_c = forgotten(), kept2_c = kept2;
	kept_c.lock = MMF_LOCK_NONE;
	unknown_c.lock = MMF_LOCK_NONE;
	kept2_c.lock = MMF_LOCK_NONE;
	EXPECT_COUNT(&m, 4);
	EXPECT_HOLE(&m, P(0));
	EXPECT_HOLE(&m, P(1));
	EXPECT_REC(&m, P(2), P(2), P(4), kept_c);
	EXPECT_REC(&m, P(4), P(4), P(6), unknown_c);
	EXPECT_REC(&m, P(6), P(6), P(8), kept2_c);
	EXPECT_REC(&m, P(8), P(8), P(9), unknown_c);
	EXPECT_HOLE(&m, P(10));

	EXPECT_CHECK(&m, P(2), P(4), want_lock(MMF_LOCK_NONE), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(4), P(6), want_lock(MMF_LOCK_NONE), MMF_NOOP_UNPROVEN);
	EXPECT_CHECK(&m, P(2), P(6), want_lock(MMF_LOCK_NONE), MMF_NOOP_UNPROVEN);
	EXPECT_CHECK(&m, P(4), P(6), want_prot(RO), MMF_CHANGE);
	EXPECT_CHECK(&m, P(6), P(8), want_lock(MMF_LOCK_NONE), MMF_CHANGE); /* sealed */

	w_fork_child(&m); /* again: the forgotten stay forgotten, all kept */
	EXPECT_COUNT(&m, 4);
	EXPECT_REC(&m, P(8), P(8), P(9), unknown_c);
	EXPECT_REC(&m, P(2), P(2), P(4), kept_c);
}
END_TEST

START_TEST(test_check)
{
	struct mmf_map m;
	init_map(&m);
	struct mmf_attr a = mk(RW, MMF_LOCK_NONE, 1, 0, 2,
			       MMF_ADV_HUGEPAGE | MMF_ADV_DONTDUMP,
			       MMF_ADV_HUGEPAGE);
	w_set(&m, P(0), P(4), a);
	EXPECT_CHECK(&m, P(0), P(4), want_prot(RW), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(1), P(2), want_prot(RW), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(0), P(4), want_prot(RO), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(4), want_pkey(RW, 2), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(0), P(4), want_pkey(RW, 1), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(4), want_pkey(RO, 2), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(4), want_lock(MMF_LOCK_NONE), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(0), P(4), want_lock(MMF_LOCK_ON), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(4), want_lock(MMF_LOCK_ONFAULT), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(4), want_adv(MMF_ADV_HUGEPAGE, 1), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(0), P(4), want_adv(MMF_ADV_HUGEPAGE, 0), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(4), want_adv(MMF_ADV_DONTDUMP, 0), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(0), P(4), want_adv(MMF_ADV_DONTDUMP, 1), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(4), want_adv(MMF_ADV_DONTFORK, 0), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(4), want_adv(MMF_ADV_DONTFORK, 1), MMF_CHANGE);
	/* Holes anywhere. */
	EXPECT_CHECK(&m, P(0), P(5), want_prot(RW), MMF_CHANGE);
	EXPECT_CHECK(&m, P(-1), P(4), want_prot(RW), MMF_CHANGE);
	EXPECT_CHECK(&m, P(4), P(5), want_prot(RW), MMF_CHANGE);

	/* Observed: unproven. */
	struct mmf_attr o = a;
	o.owned = 0;
	w_set(&m, P(4), P(6), o);
	EXPECT_CHECK(&m, P(0), P(6), want_prot(RW), MMF_NOOP_UNPROVEN);
	EXPECT_CHECK(&m, P(5), P(6), want_prot(RW), MMF_NOOP_UNPROVEN);
	EXPECT_CHECK(&m, P(0), P(4), want_prot(RW), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(0), P(6), want_prot(RO), MMF_CHANGE);
	/* Seal unknown: unproven. */
	struct mmf_attr su = a;
	su.sealed = UNK;
	w_set(&m, P(6), P(8), su);
	EXPECT_CHECK(&m, P(6), P(8), want_prot(RW), MMF_NOOP_UNPROVEN);
	EXPECT_CHECK(&m, P(6), P(8), want_lock(MMF_LOCK_NONE), MMF_NOOP_UNPROVEN);
	EXPECT_CHECK(&m, P(3), P(8), want_prot(RW), MMF_NOOP_UNPROVEN);
	/* Sealed: always a change, for every kind of question. */
	struct mmf_attr se = a;
	se.sealed = 1;
	w_set(&m, P(8), P(10), se);
	EXPECT_CHECK(&m, P(8), P(10), want_prot(RW), MMF_CHANGE);
	EXPECT_CHECK(&m, P(8), P(10), want_pkey(RW, 2), MMF_CHANGE);
	EXPECT_CHECK(&m, P(8), P(10), want_lock(MMF_LOCK_NONE), MMF_CHANGE);
	EXPECT_CHECK(&m, P(8), P(10), want_adv(MMF_ADV_HUGEPAGE, 1), MMF_CHANGE);
	EXPECT_CHECK(&m, P(0), P(10), want_prot(RW), MMF_CHANGE);
	EXPECT_CHECK(&m, P(9), P(10), want_prot(RW), MMF_CHANGE);
	EXPECT_CHECK(&m, P(7), P(9), want_prot(RW), MMF_CHANGE);
	se.owned = 0;
	w_set(&m, P(8), P(10), se);
	EXPECT_CHECK(&m, P(8), P(10), want_prot(RW), MMF_CHANGE);

	/* Unknown fields: a change only when the question needs them. */
	struct mmf_attr up = a;
	up.prot = UNK;
	w_set(&m, P(20), P(22), up);
	EXPECT_CHECK(&m, P(20), P(22), want_prot(RW), MMF_CHANGE);
	EXPECT_CHECK(&m, P(20), P(22), want_pkey(RW, 2), MMF_CHANGE);
	EXPECT_CHECK(&m, P(20), P(22), want_lock(MMF_LOCK_NONE), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(20), P(22), want_adv(MMF_ADV_HUGEPAGE, 1), MMF_NOOP_PROVEN);
	struct mmf_attr ul = a;
	ul.lock = UNK;
	ul.pkey = -1;
	w_set(&m, P(30), P(32), ul);
	EXPECT_CHECK(&m, P(30), P(32), want_lock(MMF_LOCK_NONE), MMF_CHANGE);
	EXPECT_CHECK(&m, P(30), P(32), want_prot(RW), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(30), P(32), want_pkey(RW, 0), MMF_CHANGE);
	EXPECT_CHECK(&m, P(30), P(32), want_pkey(RW, 2), MMF_CHANGE);

	/* A range over several distinct records that all satisfy. */
	struct mmf_attr v1 = owned_prot(RO), v2 = v1, v3 = v1;
	v2.lock = MMF_LOCK_ON;
	v3.pkey = 4;
	v3.adv_known = MMF_ADV_DONTDUMP;
	w_set(&m, P(40), P(41), v1);
	w_set(&m, P(41), P(45), v2);
	w_set(&m, P(45), P(46), v3);
	w_set(&m, P(46), P(47), v1);
	EXPECT_COUNT(&m, 10);
	EXPECT_CHECK(&m, P(40), P(47), want_prot(RO), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(40), P(47), want_lock(MMF_LOCK_NONE), MMF_CHANGE);
	EXPECT_CHECK(&m, P(42), P(44), want_lock(MMF_LOCK_ON), MMF_NOOP_PROVEN);
	EXPECT_CHECK(&m, P(40), P(47), want_prot(RW), MMF_CHANGE);
	EXPECT_CHECK(&m, P(40), P(48), want_prot(RO), MMF_CHANGE);
	EXPECT_CHECK(&m, P(39), P(47), want_prot(RO), MMF_CHANGE);
	/* A change in the middle of an otherwise good range. */
	struct mmf_upd u = upd_fields(MMF_F_PROT, owned_prot(RW));
	w_update(&m, P(43), P(44), &u);
	EXPECT_CHECK(&m, P(40), P(47), want_prot(RO), MMF_CHANGE);
	w_remove(&m, P(43), P(44));
	EXPECT_CHECK(&m, P(40), P(47), want_prot(RO), MMF_CHANGE);
	EXPECT_CHECK(&m, P(44), P(47), want_prot(RO), MMF_NOOP_PROVEN);
}
END_TEST

START_TEST(test_walk)
{
	struct mmf_map m;
	init_map(&m);
	for (int i = 4; i >= 0; i--)
		w_set(&m, P(3 * i), P(3 * i + 1 + i % 2), owned_prot(RW));
	struct mmf_rec buf[8];
	struct collect c = { buf, 0, 8, 0 };
	ck_assert_int_eq(mmf_map_walk(&m, collect_fn, &c), 0);
	ck_assert_uint_eq(c.n, 5);
	for (int i = 0; i < 5; i++) {
		ck_assert_uint_eq(buf[i].start, P(3 * i));
		ck_assert_uint_eq(buf[i].end, P(3 * i + 1 + i % 2));
	}
	struct collect s = { buf, 0, 8, 3 };
	int r = mmf_map_walk(&m, collect_fn, &s);
	REQUIRE(r != 0, "walk stopped by fn returned 0");
	ck_assert_uint_eq(s.n, 3);
}
END_TEST

START_TEST(test_clear)
{
	struct mmf_map m;
	init_map(&m);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 5000; i++)
			w_set(&m, P(2 * i), P(2 * i + 1), owned_prot(i % 3 ? RW : RO));
		EXPECT_COUNT(&m, 5000);
		w_clear(&m);
		EXPECT_COUNT(&m, 0);
		EXPECT_HOLE(&m, P(0));
		EXPECT_HOLE(&m, P(4000));
		EXPECT_CHECK(&m, P(0), P(1), want_prot(RO), MMF_CHANGE);
	}
	w_set(&m, P(0), P(1), owned_prot(RO));
	EXPECT_COUNT(&m, 1);
	EXPECT_CHECK(&m, P(0), P(1), want_prot(RO), MMF_NOOP_PROVEN);
}
END_TEST

struct lockarg {
	struct mmf_map *m;
	long n;
	long *counter;
	int result;
};

static void *try_thread(void *p)
{
	struct lockarg *a = p;
	a->result = mmf_map_trywlock(a->m);
	if (a->result)
		mmf_map_wunlock(a->m);
	return NULL;
}

static void *lock_thread(void *p)
{
	struct lockarg *a = p;
	for (long i = 0; i < a->n; i++) {
		mmf_map_wlock(a->m);
		long v = __atomic_load_n(a->counter, __ATOMIC_RELAXED);
		if ((i & 255) == 0)
			sched_yield(); /* let the other thread wait on us */
		__atomic_store_n(a->counter, v + 1, __ATOMIC_RELAXED);
		mmf_map_wunlock(a->m);
	}
	return NULL;
}

START_TEST(test_wlock)
{
	struct mmf_map m;
	init_map(&m);
	pthread_t t;
	struct lockarg a = { &m, 0, NULL, -1 };
	mmf_map_wlock(&m);
	ck_assert_int_eq(pthread_create(&t, NULL, try_thread, &a), 0);
	pthread_join(t, NULL);
	REQUIRE(a.result == 0, "trywlock of a held lock returned %d", a.result);
	mmf_map_wunlock(&m);
	ck_assert_int_eq(pthread_create(&t, NULL, try_thread, &a), 0);
	pthread_join(t, NULL);
	REQUIRE(a.result == 1, "trywlock of a free lock returned %d", a.result);
	ck_assert_int_eq(mmf_map_trywlock(&m), 1);
	mmf_map_wunlock(&m);

	long counter = 0;
	struct lockarg b1 = { &m, 50000, &counter, 0 }, b2 = b1;
	pthread_t t1, t2;
	ck_assert_int_eq(pthread_create(&t1, NULL, lock_thread, &b1), 0);
	ck_assert_int_eq(pthread_create(&t2, NULL, lock_thread, &b2), 0);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	ck_assert_int_eq(counter, 100000);
	ck_assert_int_eq(mmf_map_trywlock(&m), 1);
	mmf_map_wunlock(&m);
}
END_TEST

/* ------------------------------------------------------------------ */
/* model: the per-page model against the map. */

#define MBASE 0x10000000ull
#define MNP 2048
#define MODEL_SEEDS 8
#define MODEL_OPS 16000 /* per seed: 128,000 operations in all */
#define MODEL_MAXMOVE 512

struct mpage {
	uint8_t mapped;
	struct mmf_attr a;
};

static struct mpage mdl[MNP];
/* Maximal runs of equal recorded pages, recomputed by model_runs(). */
static int run_s[MNP], run_e[MNP], run_of[MNP], nruns;

static uint64_t maddr(long i)
{
	return (uint64_t)((int64_t)MBASE + (int64_t)i * (int64_t)PG);
}

static void model_runs(void)
{
	nruns = 0;
	for (int i = 0; i < MNP;) {
		if (!mdl[i].mapped) {
			run_of[i++] = -1;
			continue;
		}
		int j = i + 1;
		while (j < MNP && mdl[j].mapped && attr_eq(&mdl[j].a, &mdl[i].a))
			j++;
		for (int k = i; k < j; k++)
			run_of[k] = nruns;
		run_s[nruns] = i;
		run_e[nruns] = j;
		nruns++;
		i = j;
	}
}

static void m_set(int s, int e, struct mmf_attr a)
{
	a = attr_norm(a);
	for (int i = s; i < e; i++) {
		mdl[i].mapped = 1;
		mdl[i].a = a;
	}
}

static void m_remove(int s, int e)
{
	for (int i = s; i < e; i++)
		memset(&mdl[i], 0, sizeof mdl[i]);
}

static void m_upd_one(struct mmf_attr *a, const struct mmf_upd *u)
{
	if (u->fields & MMF_F_PROT)
		a->prot = u->a.prot;
	if (u->fields & MMF_F_LOCK)
		a->lock = u->a.lock;
	if ((u->fields & MMF_F_LOCK_HELD) && a->lock != MMF_LOCK_NONE)
		a->lock = MMF_UNKNOWN;
	if (u->fields & MMF_F_OWNED)
		a->owned = u->a.owned;
	if (u->fields & MMF_F_SEALED)
		a->sealed = u->a.sealed;
	if (u->fields & MMF_F_PKEY)
		a->pkey = u->a.pkey;
	a->adv_known |= u->adv_set_mask | u->adv_clear_mask;
	a->adv_set |= u->adv_set_mask;
	a->adv_set &= (uint8_t)~u->adv_clear_mask;
	a->adv_known &= (uint8_t)~u->adv_forget;
	a->adv_set &= a->adv_known;
}

static void m_update(int s, int e, const struct mmf_upd *u)
{
	for (int i = s; i < e; i++)
		if (mdl[i].mapped)
			m_upd_one(&mdl[i].a, u);
}

static void m_forget(int s, int e)
{
	for (int i = s; i < e; i++)
		if (mdl[i].mapped)
			mdl[i].a = forgotten();
}

static void m_move(int o, int ol, int n, int nl, int keep)
{
	static struct mpage snap[MNP];
	memcpy(snap, &mdl[o], (size_t)ol * sizeof snap[0]);
	struct mpage last = snap[ol - 1];
	if (!keep)
		m_remove(o, o + ol);
	m_remove(n, n + nl);
	for (int i = 0; i < nl; i++) {
		const struct mpage *src = i < ol ? &snap[i] : &last;
		if (src->mapped)
			mdl[n + i] = *src;
	}
}

static void m_fork_child(void)
{
	for (int i = 0; i < MNP; i++) {
		struct mpage *p = &mdl[i];
		if (!p->mapped)
			continue;
		if (p->a.adv_known & MMF_ADV_DONTFORK) {
			if (p->a.adv_set & MMF_ADV_DONTFORK) {
				memset(p, 0, sizeof *p);
				continue;
			}
		} else {
			p->a = forgotten();
		}
		p->a.lock = MMF_LOCK_NONE;
	}
}

static int want_ok(const struct mmf_attr *a, const struct mmf_want *w)
{
	switch (w->what) {
	case MMF_Q_PROT:
		return a->prot != UNK && a->prot == w->prot;
	case MMF_Q_PROT_PKEY:
		return a->prot != UNK && a->prot == w->prot && a->pkey != -1 &&
		       a->pkey == w->pkey;
	case MMF_Q_LOCK:
		return a->lock != UNK && a->lock == w->lock;
	case MMF_Q_ADV:
		return (a->adv_known & w->adv_bit) &&
		       !!(a->adv_set & w->adv_bit) == !!w->adv_val;
	}
	return 0;
}

/* The expected answer of mmf_map_check on pages [s, e) (may stick out of
 * the model's space: that is a hole). */
static int model_check(int s, int e, const struct mmf_want *w)
{
	int res = MMF_NOOP_PROVEN;
	for (int i = s; i < e; i++) {
		if (i < 0 || i >= MNP || !mdl[i].mapped)
			return MMF_CHANGE;
		const struct mmf_attr *a = &mdl[i].a;
		if (a->sealed == 1 || !want_ok(a, w))
			return MMF_CHANGE;
		if (a->owned != 1 || a->sealed == UNK)
			res = MMF_NOOP_UNPROVEN;
	}
	return res;
}

enum {
	K_SET, K_UPD, K_UPD_EMPTY, K_REMOVE, K_FORGET, K_SHRINK, K_GROW,
	K_MOVE, K_MOVE_KEEP, K_FORK, K_CLEAR, K_REPROT, K_NKINDS
};

struct mctx {
	uint64_t rng;
	int seed;
	long op;
	char desc[320];
	int tl[2], th[2], nt; /* page ranges touched by the last op */
	long ans[4];
	long kinds[K_NKINDS];
	int frag; /* fragmenting phase: small changes, few merges */
	int maxruns;
	long sumruns, bigops; /* bigops: ops with > MMF_BLOCK_CAP records */
	long splits, merges; /* count went up / down */
	long reprot[3]; /* mmf_map_reprot's answers: 0, in place, moved */
	long whole[2];  /* mmf_map_reprot_whole's answers (asked first when
			 * the range is the hint's record, as fastrun.c does) */
};

static const uint8_t prot_pal[] = { RW, RW, RO, NOPROT, RX, UNK };
static const uint8_t lock_pal[] = { MMF_LOCK_NONE, MMF_LOCK_NONE, MMF_LOCK_ON,
				    MMF_LOCK_ONFAULT, UNK };
static const uint8_t seal_pal[] = { 0, 0, 0, 1, UNK };
static const int16_t pkey_pal[] = { -1, -1, 0, 1, 2 };
#define PICK(c, arr) (arr[rnd(&(c)->rng, sizeof arr / sizeof arr[0])])

static struct mmf_attr rand_attr(struct mctx *c)
{
	struct mmf_attr a;
	memset(&a, 0, sizeof a);
	a.prot = PICK(c, prot_pal);
	a.lock = PICK(c, lock_pal);
	a.owned = chance(&c->rng, 60);
	a.sealed = PICK(c, seal_pal);
	a.pkey = PICK(c, pkey_pal);
	a.adv_known = (uint8_t)(rnd(&c->rng, 32) & rnd(&c->rng, 32));
	a.adv_set = (uint8_t)(rnd(&c->rng, 32) & a.adv_known);
	return a;
}

/* A recorded page next to [s, e), or any recorded page, or NULL. */
static const struct mmf_attr *neighbour(struct mctx *c, int s, int e)
{
	unsigned r = rnd(&c->rng, 3);
	if (r == 0 && s > 0 && mdl[s - 1].mapped)
		return &mdl[s - 1].a;
	if (r <= 1 && e < MNP && mdl[e].mapped)
		return &mdl[e].a;
	if (s > 0 && mdl[s - 1].mapped)
		return &mdl[s - 1].a;
	for (int k = 0; k < 4; k++) {
		int p = (int)rnd(&c->rng, MNP);
		if (mdl[p].mapped)
			return &mdl[p].a;
	}
	return NULL;
}

static struct mmf_attr gen_attr(struct mctx *c, int s, int e)
{
	unsigned r = rnd(&c->rng, 100);
	const struct mmf_attr *n = r < (c->frag ? 20u : 45u) ? neighbour(c, s, e) : NULL;
	if (!n)
		return rand_attr(c);
	struct mmf_attr a = *n;
	if (r >= 35) /* provenance change of an otherwise equal attr */
		a.owned = !a.owned;
	return a;
}

static struct mmf_upd gen_upd(struct mctx *c, int s, int e)
{
	struct mmf_upd u;
	memset(&u, 0, sizeof u);
	if (chance(&c->rng, 6))
		return u; /* empty */
	const struct mmf_attr *n = chance(&c->rng, 50) ? neighbour(c, s, e) : NULL;
	u.a = n ? *n : rand_attr(c);
	if (!n && chance(&c->rng, 10))
		u.a.owned = 1;
	static const unsigned f[] = { MMF_F_PROT, MMF_F_LOCK, MMF_F_OWNED,
				      MMF_F_SEALED, MMF_F_PKEY, MMF_F_LOCK_HELD };
	for (unsigned i = 0; i < 6; i++)
		if (chance(&c->rng, n ? 50 : 30))
			u.fields |= f[i];
	if (n && chance(&c->rng, 30)) {
		/* make the advice equal to the neighbour's */
		u.adv_set_mask = n->adv_set & n->adv_known;
		u.adv_clear_mask = n->adv_known & (uint8_t)~n->adv_set;
		u.adv_forget = MMF_ADV_ALL & (uint8_t)~n->adv_known;
	} else {
		for (unsigned b = 0; b < 5; b++) {
			unsigned r = rnd(&c->rng, 12);
			if (r == 0)
				u.adv_set_mask |= (uint8_t)(1u << b);
			else if (r == 1)
				u.adv_clear_mask |= (uint8_t)(1u << b);
			else if (r == 2)
				u.adv_forget |= (uint8_t)(1u << b);
		}
	}
	return u;
}

static int boundary(struct mctx *c)
{
	if (!nruns)
		return (int)rnd(&c->rng, MNP);
	int k = (int)rnd(&c->rng, (unsigned)nruns);
	return chance(&c->rng, 50) ? run_s[k] : run_e[k];
}

static void fix_range(int *ps, int *pe, int minlen, int maxlen)
{
	int s = *ps, e = *pe;
	if (s < 0)
		s = 0;
	if (s > MNP - 1)
		s = MNP - 1;
	if (e > MNP)
		e = MNP;
	if (e - s < minlen)
		e = s + minlen;
	if (e - s > maxlen)
		e = s + maxlen;
	if (e > MNP) {
		s -= e - MNP;
		e = MNP;
	}
	*ps = s;
	*pe = e;
}

/* A range biased towards record boundaries, single pages and big spans. */
static void pick_range(struct mctx *c, int minlen, int maxlen, int *ps, int *pe)
{
	unsigned r = rnd(&c->rng, 100);
	int s, e;
	if (c->frag) /* mostly single pages and small ranges */
		r = r < 55 ? 0 : r < 85 ? 40 : r < 98 ? 60 : r < 99 ? 80 : 90;
	if (r < 30) { /* single page */
		s = chance(&c->rng, 50) ? boundary(c) - (int)rnd(&c->rng, 2)
					: (int)rnd(&c->rng, MNP);
		e = s + 1;
	} else if (r < 55) { /* near a boundary, small */
		s = boundary(c) + (int)rnd(&c->rng, 3) - 1;
		e = s + 1 + (int)rnd(&c->rng, 8);
	} else if (r < 70) { /* anywhere, medium */
		s = (int)rnd(&c->rng, MNP);
		e = s + 1 + (int)rnd(&c->rng, 64);
	} else if (r < 88 && nruns) { /* from a run to a later run */
		int k = (int)rnd(&c->rng, (unsigned)nruns);
		int k2 = k + (int)rnd(&c->rng, (unsigned)(nruns - k < 8 ? nruns - k : 8));
		s = run_s[k] + (chance(&c->rng, 30) ? (int)rnd(&c->rng, 3) - 1 : 0);
		e = run_e[k2] + (chance(&c->rng, 30) ? (int)rnd(&c->rng, 3) - 1 : 0);
		if (e <= s)
			e = s + 1;
	} else if (r < 97) { /* big span */
		int len = 256 + (int)rnd(&c->rng, MNP - 256);
		s = (int)rnd(&c->rng, MNP);
		e = s + len;
	} else { /* everything */
		s = 0;
		e = MNP;
	}
	fix_range(&s, &e, minlen, maxlen);
	*ps = s;
	*pe = e;
}

/* An old range for a move: often exactly one or a few runs (a VMA). */
static void pick_old(struct mctx *c, int minlen, int *ps, int *pe)
{
	if (c->frag) {
		pick_range(c, minlen, 32, ps, pe);
		return;
	}
	if (nruns && chance(&c->rng, 50)) {
		int k = (int)rnd(&c->rng, (unsigned)nruns);
		int k2 = k;
		if (chance(&c->rng, 25) && k + 1 < nruns)
			k2 = k + 1;
		int s = run_s[k], e = run_e[k2];
		fix_range(&s, &e, minlen, MODEL_MAXMOVE);
		*ps = s;
		*pe = e;
		return;
	}
	pick_range(c, minlen, MODEL_MAXMOVE, ps, pe);
}

static void touch(struct mctx *c, int s, int e)
{
	if (c->nt < 2) {
		c->tl[c->nt] = s;
		c->th[c->nt] = e;
		c->nt++;
	}
}

/* What forwarded mprotects do: a reader's hint for [s,e), then, under the
 * lock, mmf_map_reprot through it, or the general update when it declines;
 * then, as the fast path does with the record it learns, up to two more
 * changes of a part of the record the last answer names.  A hint taken one
 * sequence ago (one in eight) must be declined.  When records moved, the
 * record named must be the one that holds [s,e) now, at the map's
 * sequence, and its word the record's. */
static void do_reprot(struct mmf_map *m, struct mctx *c)
{
	int s, e;
	pick_range(c, 1, c->frag ? 8 : chance(&c->rng, 80) ? 48 : MNP, &s, &e);
	static const uint8_t prots[] = {RW, RO, NOPROT, RX, RW | PROT_EXEC};
	struct mmf_hint h;
	struct mmf_want w = {.what = MMF_Q_PROT, .prot = RW};
	memset(&h, 0x5a, sizeof h);
	mmf_map_check_hint(m, maddr(s), maddr(e), &w, &h);
	struct mmf_slotref r = h.r;
	int stale = chance(&c->rng, 12), rounds = 1 + (int)rnd(&c->rng, 3);
	if (stale)
		r.seq -= 2;
	for (int k = 0; k < rounds; k++) {
		uint8_t prot = PICK(c, prots);
		int lk = chance(&c->rng, 20);
		snprintf(c->desc, sizeof c->desc,
			 "seed %d op %ld: reprot %d [%d,%d) prot=%#x lock_unknown=%d stale=%d (hint [%#llx,%#llx))",
			 c->seed, c->op, k, s, e, prot, lk, stale, (unsigned long long)r.start,
			 (unsigned long long)r.end);
		struct mmf_upd u;
		memset(&u, 0, sizeof u);
		u.fields = MMF_F_PROT | (lk ? MMF_F_LOCK_HELD : 0);
		u.a.prot = prot;
		struct mmf_slotref nr;
		memset(&nr, 0x5a, sizeof nr);
		mmf_map_wlock(m);
		int d = 0;
		/* as the forward path does: the word read under the lock, its
		 * protection made unknown while the kernel call runs (half of
		 * the time), the word before given to the update */
		uint64_t v0 = r.attr && !stale ? *r.attr : 0;
		int marked = r.attr && !stale && chance(&c->rng, 50);
		if (marked)
			mmf_map_prot_changing(m, &r, v0);
		if (r.attr && r.start == maddr(s) && r.end == maddr(e) && chance(&c->rng, 50)) {
			int w1 = mmf_map_reprot_whole(m, &r, prot, lk, v0);
			REQUIRE(!(stale && w1), "%s\n  reprot_whole took a stale hint", c->desc);
			c->whole[w1]++;
			d = w1 ? MMF_REPROT_IN_PLACE : 0;
		}
		if (!d && r.attr)
			d = mmf_map_reprot(m, &r, maddr(s), maddr(e), prot, lk, v0, &nr);
		if (!d && marked)
			*(uint64_t *)r.attr = v0; /* (fastrun.c's change_done) */
		if (!d)
			mmf_map_update(m, maddr(s), maddr(e), &u);
		mmf_map_wunlock(m);
		REQUIRE(d >= 0 && d <= MMF_REPROT_MOVED && !(stale && d),
			"%s\n  reprot answered %d", c->desc, d);
		m_update(s, e, &u);
		touch(c, s, e);
		c->reprot[d]++;
		c->kinds[K_REPROT]++;
		if (!d)
			return;
		if (d == MMF_REPROT_MOVED) {
			struct mmf_rec rec;
			REQUIRE(mmf_map_lookup(m, maddr(s), &rec) == 1 && rec.start == nr.start &&
					rec.end == nr.end && nr.seq == m->seq,
				"%s\n  moved: names [%#llx,%#llx) seq %u, lookup [%#llx,%#llx) seq %u",
				c->desc, (unsigned long long)nr.start, (unsigned long long)nr.end,
				nr.seq, (unsigned long long)rec.start, (unsigned long long)rec.end,
				m->seq);
			struct mmf_attr a;
			uint64_t v = *nr.attr;
			memcpy(&a, &v, sizeof a);
			REQUIRE(attr_eq(&a, &rec.a), "%s\n  moved: its word is %s, lookup %s",
				c->desc, astr(&a), astr(&rec.a));
			r = nr;
		}
		/* the next change: a part of the record named */
		int rs = (int)((r.start - MBASE) / PG), re = (int)((r.end - MBASE) / PG);
		if (chance(&c->rng, 35)) { /* all of it: the forward path's case */
			s = rs;
			e = re;
			continue;
		}
		s = rs + (int)rnd(&c->rng, (unsigned)(re - rs));
		e = s + 1 + (int)rnd(&c->rng, (unsigned)(re - s));
	}
}

static void do_op(struct mmf_map *m, struct mctx *c)
{
	unsigned r = rnd(&c->rng, 1000);
	int s, e;
	c->nt = 0;
	/* Half of the time fragment the map (hundreds of records, so that
	 * blocks split), the rest mixed (merges, big spans, forks, clears). */
	c->frag = (c->op / 2000) % 2 == 0;
	if (c->frag && r >= 993)
		r = rnd(&c->rng, 993);
	if (r < 270) {
		pick_range(c, 1, MNP, &s, &e);
		struct mmf_attr a = gen_attr(c, s, e);
		snprintf(c->desc, sizeof c->desc, "seed %d op %ld: set [%d,%d) %s",
			 c->seed, c->op, s, e, astr(&a));
		w_set(m, maddr(s), maddr(e), a);
		m_set(s, e, a);
		touch(c, s, e);
		c->kinds[K_SET]++;
	} else if (r < 570 && r >= 490) {
		do_reprot(m, c);
	} else if (r < 570) {
		pick_range(c, 1, MNP, &s, &e);
		struct mmf_upd u = gen_upd(c, s, e);
		snprintf(c->desc, sizeof c->desc,
			 "seed %d op %ld: update [%d,%d) fields=%#x %s set=%#x clear=%#x forget=%#x",
			 c->seed, c->op, s, e, u.fields, astr(&u.a),
			 u.adv_set_mask, u.adv_clear_mask, u.adv_forget);
		w_update(m, maddr(s), maddr(e), &u);
		m_update(s, e, &u);
		touch(c, s, e);
		c->kinds[u.fields || u.adv_set_mask || u.adv_clear_mask ||
				 u.adv_forget
			 ? K_UPD
			 : K_UPD_EMPTY]++;
	} else if (r < 690) {
		pick_range(c, 1, c->frag ? 8 : chance(&c->rng, 95) ? 48 : MNP, &s, &e);
		snprintf(c->desc, sizeof c->desc, "seed %d op %ld: remove [%d,%d)",
			 c->seed, c->op, s, e);
		w_remove(m, maddr(s), maddr(e));
		m_remove(s, e);
		touch(c, s, e);
		c->kinds[K_REMOVE]++;
	} else if (r < 770) {
		pick_range(c, 1, c->frag ? 8 : chance(&c->rng, 95) ? 48 : MNP, &s, &e);
		snprintf(c->desc, sizeof c->desc, "seed %d op %ld: forget [%d,%d)",
			 c->seed, c->op, s, e);
		w_forget(m, maddr(s), maddr(e));
		m_forget(s, e);
		touch(c, s, e);
		c->kinds[K_FORGET]++;
	} else if (r < 993) {
		unsigned kind = rnd(&c->rng, 3);
		int o, oe, ol, n, nl, keep = 0, k;
		pick_old(c, kind == 0 ? 2 : 1, &o, &oe);
		ol = oe - o;
		if (kind == 0) { /* shrink in place */
			n = o;
			nl = 1 + (int)rnd(&c->rng, (unsigned)(ol - 1));
			k = K_SHRINK;
		} else if (kind == 1) { /* grow in place */
			int g = 1 + (int)(chance(&c->rng, 80) ? rnd(&c->rng, 16)
							      : rnd(&c->rng, 256));
			if (o + ol + g > MNP)
				g = MNP - o - ol;
			n = o;
			nl = ol + g;
			k = g > 0 ? K_GROW : K_SHRINK; /* g == 0: same size */
		} else { /* move elsewhere */
			nl = chance(&c->rng, 60) ? ol
						 : 1 + (int)rnd(&c->rng, 2 * (unsigned)ol);
			if (nl > MODEL_MAXMOVE)
				nl = MODEL_MAXMOVE;
			n = -1;
			if (chance(&c->rng, 25)) { /* adjacent: merges */
				if (chance(&c->rng, 50) && o + ol + nl <= MNP)
					n = o + ol;
				else if (o - nl >= 0)
					n = o - nl;
			}
			for (int t = 0; n < 0 && t < 20; t++) {
				int cand = (int)rnd(&c->rng, (unsigned)(MNP - nl + 1));
				if (cand + nl <= o || cand >= o + ol)
					n = cand;
			}
			if (n < 0) { /* no room: same size in place */
				n = o;
				nl = ol;
			}
			keep = n != o && nl == ol && chance(&c->rng, 40);
			k = keep ? K_MOVE_KEEP : K_MOVE;
		}
		snprintf(c->desc, sizeof c->desc,
			 "seed %d op %ld: move old [%d,+%d) new [%d,+%d) keep_old=%d (old last page %s %s)",
			 c->seed, c->op, o, ol, n, nl, keep,
			 mdl[o + ol - 1].mapped ? "recorded" : "hole",
			 astr(&mdl[o + ol - 1].a));
		w_move(m, maddr(o), (uint64_t)ol * PG, maddr(n), (uint64_t)nl * PG, keep);
		m_move(o, ol, n, nl, keep);
		touch(c, o, o + ol);
		touch(c, n, n + nl);
		c->kinds[k]++;
	} else if (r < 996) {
		snprintf(c->desc, sizeof c->desc, "seed %d op %ld: fork_child",
			 c->seed, c->op);
		w_fork_child(m);
		m_fork_child();
		touch(c, 0, MNP);
		c->kinds[K_FORK]++;
	} else {
		snprintf(c->desc, sizeof c->desc, "seed %d op %ld: clear",
			 c->seed, c->op);
		w_clear(m);
		m_remove(0, MNP);
		touch(c, 0, MNP);
		c->kinds[K_CLEAR]++;
	}
}

static void check_page(const struct mmf_map *m, struct mctx *c, int i,
		       uint64_t off)
{
	uint64_t addr = maddr(i) + off;
	struct mmf_rec r;
	memset(&r, 0x5a, sizeof r);
	int f = mmf_map_lookup(m, addr, &r);
	int mapped = i >= 0 && i < MNP && mdl[i].mapped;
	if (!mapped) {
		REQUIRE(f == 0,
			      "%s\n  lookup(page %d + %llu) = %d [%#llx,%#llx) %s, model: hole",
			      c->desc, i, (unsigned long long)off, f,
			      (unsigned long long)r.start,
			      (unsigned long long)r.end, astr(&r.a));
		return;
	}
	int k = run_of[i];
	REQUIRE(f == 1 && r.start == maddr(run_s[k]) &&
			      r.end == maddr(run_e[k]) && attr_eq(&r.a, &mdl[i].a),
		      "%s\n  lookup(page %d + %llu) = %d [%#llx,%#llx) %s\n  model: [%#llx,%#llx) %s",
		      c->desc, i, (unsigned long long)off, f,
		      (unsigned long long)r.start, (unsigned long long)r.end,
		      astr(&r.a), (unsigned long long)maddr(run_s[k]),
		      (unsigned long long)maddr(run_e[k]), astr(&mdl[i].a));
}

static uint64_t rand_off(struct mctx *c)
{
	return chance(&c->rng, 25) ? rnd(&c->rng, (unsigned)PG) : 0;
}

static void gen_query(struct mctx *c, int *ps, int *pe, struct mmf_want *w)
{
	int p = -1, s, e;
	for (int t = 0; p < 0 && t < 8 && chance(&c->rng, 85); t++) {
		int q = (int)rnd(&c->rng, MNP);
		if (mdl[q].mapped)
			p = q;
	}
	if (p >= 0) {
		int k = run_of[p];
		switch (rnd(&c->rng, 5)) {
		case 0:
			s = p, e = p + 1;
			break;
		case 1:
			s = run_s[k], e = run_e[k];
			break;
		case 2:
			s = p - (int)rnd(&c->rng, 4);
			e = p + 1 + (int)rnd(&c->rng, 4);
			break;
		case 3: {
			int k2 = k + (int)rnd(&c->rng, 3);
			if (k2 >= nruns)
				k2 = nruns - 1;
			s = run_s[k], e = run_e[k2];
			break;
		}
		default:
			s = run_s[k] + (int)rnd(&c->rng, (unsigned)(run_e[k] - run_s[k]));
			e = s + 1 + (int)rnd(&c->rng, (unsigned)(run_e[k] - s));
			break;
		}
	} else {
		s = (int)rnd(&c->rng, MNP + 4) - 2;
		e = s + 1 + (int)rnd(&c->rng, 32);
	}
	struct mmf_attr src = p >= 0 && chance(&c->rng, 85) ? mdl[p].a : rand_attr(c);
	memset(w, 0, sizeof *w);
	w->what = (int)rnd(&c->rng, 4);
	w->prot = src.prot != UNK ? src.prot : prot_pal[rnd(&c->rng, 5)];
	switch (w->what) {
	case MMF_Q_PROT_PKEY:
		w->pkey = src.pkey >= 0 ? src.pkey : (int16_t)rnd(&c->rng, 3);
		break;
	case MMF_Q_LOCK:
		w->prot = 0;
		w->lock = src.lock != UNK ? src.lock : (uint8_t)rnd(&c->rng, 3);
		break;
	case MMF_Q_ADV:
		w->prot = 0;
		w->adv_bit = (uint8_t)(1u << rnd(&c->rng, 5));
		w->adv_val = (src.adv_known & w->adv_bit)
				     ? !!(src.adv_set & w->adv_bit)
				     : (uint8_t)rnd(&c->rng, 2);
		break;
	}
	*ps = s;
	*pe = e;
}

static void verify(struct mmf_map *m, struct mctx *c, int full)
{
	static struct mmf_rec recs[MNP + 64];
	uint64_t before = 0;
	int v = mmf_map_validate(m);
	REQUIRE(v == 0, "%s\n  mmf_map_validate() = %d", c->desc, v);
	before = (uint64_t)nruns;
	model_runs();
	if (nruns > c->maxruns)
		c->maxruns = nruns;
	c->sumruns += nruns;
	c->bigops += nruns > MMF_BLOCK_CAP;
	if ((uint64_t)nruns > before)
		c->splits++;
	else if ((uint64_t)nruns < before)
		c->merges++;
	uint64_t cnt = mmf_map_count(m);

	/* The whole map, record by record. */
	struct collect col = { recs, 0, MNP + 64, 0 };
	int wr = mmf_map_walk(m, collect_fn, &col);
	REQUIRE(wr == 0, "%s\n  mmf_map_walk() = %d", c->desc, wr);
	REQUIRE(col.n == cnt, "%s\n  mmf_map_walk() saw %zu records, mmf_map_count() = %llu",
		      c->desc, col.n, (unsigned long long)cnt);
	for (size_t k = 0; k < col.n && k < col.cap && k < (size_t)nruns; k++) {
		const struct mmf_rec *r = &recs[k];
		REQUIRE(r->start == maddr(run_s[k]) && r->end == maddr(run_e[k]) &&
				      attr_eq(&r->a, &mdl[run_s[k]].a),
			      "%s\n  record %zu is [%#llx,%#llx) %s\n  model run: [%#llx,%#llx) %s (pages %d..%d)",
			      c->desc, k, (unsigned long long)r->start,
			      (unsigned long long)r->end, astr(&r->a),
			      (unsigned long long)maddr(run_s[k]),
			      (unsigned long long)maddr(run_e[k]),
			      astr(&mdl[run_s[k]].a), run_s[k], run_e[k]);
	}
	if (col.n != (size_t)nruns) {
		size_t k = col.n < (size_t)nruns ? col.n : (size_t)nruns;
		char extra[200] = "";
		if (k < col.n && k < col.cap)
			snprintf(extra, sizeof extra, "first extra record [%#llx,%#llx) %s",
				 (unsigned long long)recs[k].start,
				 (unsigned long long)recs[k].end, astr(&recs[k].a));
		else if (k < (size_t)nruns)
			snprintf(extra, sizeof extra, "first missing run pages [%d,%d) %s",
				 run_s[k], run_e[k], astr(&mdl[run_s[k]].a));
		REQUIRE(0, "%s\n  map has %llu records, model has %d runs; %s",
			      c->desc, (unsigned long long)cnt, nruns, extra);
	}

	/* Lookups. */
	if (full) {
		for (int i = -2; i < MNP + 2; i++)
			check_page(m, c, i, rand_off(c));
	} else {
		for (int t = 0; t < c->nt; t++) {
			int s = c->tl[t], e = c->th[t];
			int edge[] = { s - 1, s, s + 1, e - 2, e - 1, e };
			for (int j = 0; j < 6; j++)
				check_page(m, c, edge[j], rand_off(c));
			for (int j = 0; j < 24 && e > s; j++)
				check_page(m, c, s + (int)rnd(&c->rng, (unsigned)(e - s)),
					   rand_off(c));
		}
		for (int j = 0; j < 8; j++)
			check_page(m, c, (int)rnd(&c->rng, MNP), rand_off(c));
	}

	/* Questions. */
	for (int q = 0; q < 8; q++) {
		int s, e;
		struct mmf_want w;
		gen_query(c, &s, &e, &w);
		int exp = model_check(s, e, &w);
		int got = mmf_map_check(m, maddr(s), maddr(e), &w);
		REQUIRE(got == exp,
			      "%s\n  check(pages [%d,%d), what=%d prot=%#x pkey=%d lock=%u adv=%#x/%u) = %s, model: %s\n  first page: %s %s",
			      c->desc, s, e, w.what, w.prot, w.pkey, w.lock,
			      w.adv_bit, w.adv_val, ansstr(got), ansstr(exp),
			      s >= 0 && s < MNP && mdl[s].mapped ? "recorded" : "hole",
			      s >= 0 && s < MNP ? astr(&mdl[s].a) : "-");
		c->ans[exp]++;
	}
}

START_TEST(test_model_random)
{
	static struct mctx c;
	struct mmf_map m;
	memset(&c, 0, sizeof c);
	c.seed = _i;
	c.rng = seed_of(_i);
	init_map(&m);
	m_remove(0, MNP);
	model_runs();
	snprintf(c.desc, sizeof c.desc, "seed %d: empty map", _i);
	verify(&m, &c, 1);
	for (c.op = 1; c.op <= MODEL_OPS; c.op++) {
		do_op(&m, &c);
		verify(&m, &c, c.op % 32 == 0 || (c.nt && c.th[0] - c.tl[0] == MNP));
	}
	snprintf(c.desc, sizeof c.desc, "seed %d: after %d ops", _i, MODEL_OPS);
	verify(&m, &c, 1);

	if (getenv("MMF_TEST_STATS"))
		fprintf(stderr,
			"model seed %d: proven %ld unproven %ld change %ld; records max %d avg %ld, >%d in %ld ops; count up %ld down %ld; kinds",
			_i, c.ans[0], c.ans[1], c.ans[2], c.maxruns,
			c.sumruns / (MODEL_OPS + 2), MMF_BLOCK_CAP, c.bigops,
			c.splits, c.merges);
	for (int k = 0; getenv("MMF_TEST_STATS") && k < K_NKINDS; k++)
		fprintf(stderr, " %ld%s", c.kinds[k], k + 1 < K_NKINDS ? "" : "\n");
	if (getenv("MMF_TEST_STATS"))
		fprintf(stderr, "  reprot declined %ld, in place %ld, moved %ld; whole declined %ld, done %ld\n",
			c.reprot[0], c.reprot[MMF_REPROT_IN_PLACE], c.reprot[MMF_REPROT_MOVED],
			c.whole[0], c.whole[1]);

	/* The test itself must have covered the ground. */
	REQUIRE(c.ans[MMF_NOOP_PROVEN] >= 200 && c.ans[MMF_NOOP_UNPROVEN] >= 200 &&
			      c.ans[MMF_CHANGE] >= 200,
		      "seed %d: weak coverage of answers: proven %ld unproven %ld change %ld",
		      _i, c.ans[0], c.ans[1], c.ans[2]);
	for (int k = 0; k < K_NKINDS; k++)
		REQUIRE(c.kinds[k] > 0 || k == K_CLEAR,
			      "seed %d: operation kind %d never ran", _i, k);
	REQUIRE(c.maxruns > MMF_BLOCK_CAP && c.bigops >= 500,
		"seed %d: at most %d records at once, more than a block in %ld ops",
		_i, c.maxruns, c.bigops);
	REQUIRE(c.whole[0] >= 10 && c.whole[1] >= 100, "seed %d: reprot_whole declined %ld, done %ld",
		_i, c.whole[0], c.whole[1]);
	REQUIRE(c.reprot[0] >= 50 && c.reprot[MMF_REPROT_IN_PLACE] >= 50 &&
			c.reprot[MMF_REPROT_MOVED] >= 200,
		"seed %d: reprot declined %ld, in place %ld, moved %ld", _i, c.reprot[0],
		c.reprot[MMF_REPROT_IN_PLACE], c.reprot[MMF_REPROT_MOVED]);
	REQUIRE(c.splits > 1000 && c.merges > 1000,
		      "seed %d: %ld ops added records, %ld removed some", _i,
		      c.splits, c.merges);
}
END_TEST

/* ------------------------------------------------------------------ */
/* scale: 65,530 records. */

#define SBASE 0x200000000ull
#define SN 65530

START_TEST(test_scale)
{
	struct mmf_map m;
	init_map(&m);
	struct mmf_attr a[2] = { owned_prot(RW), owned_prot(RO) };
	struct mmf_rec r;
	struct mmf_want wrw = want_prot(RW), wro = want_prot(RO);

	mmf_map_wlock(&m);
	for (uint64_t i = 0; i < SN; i++)
		mmf_map_set(&m, SBASE + i * PG, SBASE + (i + 1) * PG, &a[i & 1]);
	mmf_map_wunlock(&m);
	EXPECT_COUNT(&m, SN);
	for (uint64_t i = 0; i < SN; i++) {
		uint64_t s = SBASE + i * PG;
		int f = mmf_map_lookup(&m, s + (i * 97) % PG, &r);
		REQUIRE(f == 1 && r.start == s && r.end == s + PG &&
				      attr_eq(&r.a, &a[i & 1]),
			      "record %llu: lookup = %d [%#llx,%#llx) %s",
			      (unsigned long long)i, f, (unsigned long long)r.start,
			      (unsigned long long)r.end, astr(&r.a));
		int q = mmf_map_check(&m, s, s + PG, (i & 1) ? &wro : &wrw);
		REQUIRE(q == MMF_NOOP_PROVEN, "record %llu: check = %s",
			      (unsigned long long)i, ansstr(q));
		if (i + 1 < SN) {
			q = mmf_map_check(&m, s, s + 2 * PG, &wro);
			REQUIRE(q == MMF_CHANGE, "records %llu..+1: check = %s",
				      (unsigned long long)i, ansstr(q));
		}
	}
	EXPECT_HOLE(&m, SBASE - 1);
	EXPECT_HOLE(&m, SBASE + SN * PG);

	/* Remove every other: the RO ones. */
	mmf_map_wlock(&m);
	for (uint64_t i = 1; i < SN; i += 2)
		mmf_map_remove(&m, SBASE + i * PG, SBASE + (i + 1) * PG);
	mmf_map_wunlock(&m);
	EXPECT_COUNT(&m, SN / 2);
	for (uint64_t i = 0; i < SN; i++) {
		uint64_t s = SBASE + i * PG;
		int f = mmf_map_lookup(&m, s, &r);
		if (i & 1)
			REQUIRE(f == 0, "removed record %llu still found",
				      (unsigned long long)i);
		else
			REQUIRE(f == 1 && r.start == s && r.end == s + PG &&
					      attr_eq(&r.a, &a[0]),
				      "record %llu after removals: lookup = %d [%#llx,%#llx)",
				      (unsigned long long)i, f,
				      (unsigned long long)r.start,
				      (unsigned long long)r.end);
	}

	/* Fill the holes with RW: everything merges into one record. */
	mmf_map_wlock(&m);
	for (uint64_t i = 1; i < SN; i += 2)
		mmf_map_set(&m, SBASE + i * PG, SBASE + (i + 1) * PG, &a[0]);
	mmf_map_wunlock(&m);
	EXPECT_COUNT(&m, 1);
	EXPECT_REC(&m, SBASE + 12345 * PG, SBASE, SBASE + SN * PG, a[0]);
	EXPECT_CHECK(&m, SBASE, SBASE + SN * PG, want_prot(RW), MMF_NOOP_PROVEN);

	/* Again in descending order, after a clear (free list reuse). */
	w_clear(&m);
	EXPECT_COUNT(&m, 0);
	mmf_map_wlock(&m);
	for (uint64_t i = SN; i-- > 0;)
		mmf_map_set(&m, SBASE + i * PG, SBASE + (i + 1) * PG, &a[i & 1]);
	mmf_map_wunlock(&m);
	EXPECT_COUNT(&m, SN);
	for (uint64_t i = 0; i < SN; i += 7)
		EXPECT_REC(&m, SBASE + i * PG, SBASE + i * PG, SBASE + (i + 1) * PG,
			   a[i & 1]);

	/* Update every fourth page into its neighbours' attrs: merges in
	 * threes. */
	struct mmf_upd u = upd_fields(MMF_F_PROT, owned_prot(RW));
	mmf_map_wlock(&m);
	for (uint64_t i = 1; i < SN; i += 4)
		mmf_map_update(&m, SBASE + i * PG, SBASE + (i + 1) * PG, &u);
	mmf_map_wunlock(&m);
	/* pages 0..2 RW, 3 RO, 4..6 RW, 7 RO, ..., 65528..65529 RW */
	EXPECT_COUNT(&m, SN / 2);
	EXPECT_REC(&m, SBASE + 5 * PG, SBASE + 4 * PG, SBASE + 7 * PG, a[0]);

	/* Remove all of them in a shuffled order. */
	static uint32_t perm[SN];
	uint64_t rng = seed_of(1234);
	for (uint32_t i = 0; i < SN; i++)
		perm[i] = i;
	for (uint32_t i = SN - 1; i > 0; i--) {
		uint32_t j = (uint32_t)rnd(&rng, i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	mmf_map_wlock(&m);
	for (uint32_t i = 0; i < SN; i++) {
		uint64_t s = SBASE + (uint64_t)perm[i] * PG;
		mmf_map_remove(&m, s, s + PG);
		if (i % 8192 == 0)
			ck_assert_int_eq(mmf_map_validate(&m), 0);
	}
	mmf_map_wunlock(&m);
	EXPECT_COUNT(&m, 0);
	EXPECT_HOLE(&m, SBASE);
}
END_TEST

/* ------------------------------------------------------------------ */
/* concurrency: one writer, two readers.
 *
 * Pages relative to CBASE: the writer churns A = [0,1024) and C =
 * [1088,2112); B = [1024,1088) holds 16 records of 4 pages set up before
 * the threads start and never written again.  The writer often writes A's
 * and C's pages next to B with B's edge attrs, so B's first and last
 * records merge with and split from the writer's records: B's attributes
 * never change, but its records move inside and between blocks all the
 * time.  The readers ask questions whose answers depend only on B. */

#define CBASE 0x40000000ull
#define CB_LO 1024
#define CB_HI 1088
#define CC_HI 2112
#define CB_NREC 16
#define CHOLE 0x50000000ull /* never recorded */
#define C_WRITER_OPS 400000L
/* The writer runs for C_MAX_NS at least and then until it has made
 * C_MIN_OPS operations and each reader has 100 answers; C_CAP_NS only
 * bounds a machine so loaded that this never comes (the test then fails
 * on the counts, not on the time). */
#define C_MAX_NS 3000000000LL
#define C_MIN_OPS 10000L
#define C_CAP_NS 40000000000LL

static uint64_t caddr(int i)
{
	return CBASE + (uint64_t)i * PG;
}

static struct mmf_attr cb_attr(int k)
{
	return mk(RW, (k & 1) ? MMF_LOCK_ONFAULT : MMF_LOCK_NONE, 1, 0,
		  (int16_t)(k % 3 - 1), MMF_ADV_DONTFORK, 0);
}

struct conc {
	struct mmf_map *m;
	int stop;
	long errors;
	int have_msg;
	char msg[400];
};

struct reader {
	struct conc *cc;
	uint64_t rng;
	long answers[4], lookups;
};

static void conc_error(struct conc *cc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void conc_error(struct conc *cc, const char *fmt, ...)
{
	__atomic_add_fetch(&cc->errors, 1, __ATOMIC_RELAXED);
	int zero = 0;
	if (__atomic_compare_exchange_n(&cc->have_msg, &zero, 1, 0,
					__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(cc->msg, sizeof cc->msg, fmt, ap);
		va_end(ap);
	}
}

static void *reader_main(void *p)
{
	struct reader *rd = p;
	struct conc *cc = rd->cc;
	const struct mmf_map *m = cc->m;
	struct mmf_want wrw = want_prot(RW), wro = want_prot(RO);
	while (!__atomic_load_n(&cc->stop, __ATOMIC_ACQUIRE)) {
		int a = (int)rnd(&rd->rng, CB_HI - CB_LO);
		int b = a + 1 + (int)rnd(&rd->rng, (unsigned)(CB_HI - CB_LO - a));
		uint64_t s = caddr(CB_LO + a), e = caddr(CB_LO + b);

		int r = mmf_map_check(m, s, e, &wrw);
		if (r < 0 || r > 3)
			conc_error(cc, "check(B pages [%d,%d), RW) returned %d", a, b, r);
		else
			__atomic_add_fetch(&rd->answers[r], 1, __ATOMIC_RELAXED);
		if (r != MMF_NOOP_PROVEN && r != MMF_BUSY)
			conc_error(cc, "check(B pages [%d,%d), RW) = %s, expected NOOP_PROVEN (or BUSY)",
				   a, b, ansstr(r));

		r = mmf_map_check(m, s, e, &wro);
		if (r != MMF_CHANGE && r != MMF_BUSY)
			conc_error(cc, "check(B pages [%d,%d), RO) = %s, expected CHANGE (or BUSY)",
				   a, b, ansstr(r));

		/* Within one B record: its lock and pkey too. */
		int k = a / 4;
		struct mmf_attr ka = cb_attr(k);
		uint64_t ks = caddr(CB_LO + 4 * k), ke = ks + 4 * PG;
		struct mmf_want wl = want_lock(ka.lock);
		r = mmf_map_check(m, ks, ke, &wl);
		if (r != MMF_NOOP_PROVEN && r != MMF_BUSY)
			conc_error(cc, "check(B record %d, lock %u) = %s", k, ka.lock,
				   ansstr(r));
		wl.lock = ka.lock == MMF_LOCK_NONE ? MMF_LOCK_ONFAULT : MMF_LOCK_NONE;
		r = mmf_map_check(m, ks, ke, &wl);
		if (r != MMF_CHANGE && r != MMF_BUSY)
			conc_error(cc, "check(B record %d, wrong lock %u) = %s", k,
				   wl.lock, ansstr(r));
		if (ka.pkey >= 0) {
			struct mmf_want wp = want_pkey(RW, ka.pkey);
			r = mmf_map_check(m, ks, ke, &wp);
			if (r != MMF_NOOP_PROVEN && r != MMF_BUSY)
				conc_error(cc, "check(B record %d, pkey %d) = %s", k,
					   ka.pkey, ansstr(r));
		}

		/* Lookups in B. */
		uint64_t addr = caddr(CB_LO + a) + rnd(&rd->rng, (unsigned)PG);
		struct mmf_rec rec;
		int f = mmf_map_lookup(m, addr, &rec);
		rd->lookups++;
		if (f != 1) {
			conc_error(cc, "lookup(B page %d) = %d", a, f);
		} else {
			int ok = attr_eq(&rec.a, &ka) && rec.start <= addr &&
				 addr < rec.end &&
				 (k == 0 ? rec.start <= ks : rec.start == ks) &&
				 (k == CB_NREC - 1 ? rec.end >= ke : rec.end == ke);
			if (!ok)
				conc_error(cc, "lookup(B page %d) = [%#llx,%#llx) %s, expected [%#llx,%#llx) %s",
					   a, (unsigned long long)rec.start,
					   (unsigned long long)rec.end, astr(&rec.a),
					   (unsigned long long)ks,
					   (unsigned long long)ke, astr(&ka));
		}

		/* A hole that stays a hole. */
		r = mmf_map_check(m, CHOLE, CHOLE + 4 * PG, &wrw);
		if (r != MMF_CHANGE && r != MMF_BUSY)
			conc_error(cc, "check(hole) = %s", ansstr(r));
		f = mmf_map_lookup(m, CHOLE + PG, &rec);
		if (f != 0)
			conc_error(cc, "lookup(hole) = %d", f);

		/* Questions about the writer's pages: any answer, no crash. */
		int x = (int)rnd(&rd->rng, CC_HI - 16);
		r = mmf_map_check(m, caddr(x), caddr(x + 1 + (int)rnd(&rd->rng, 16)), &wrw);
		if (r < 0 || r > 3)
			conc_error(cc, "check(A/C) returned %d", r);
		(void)mmf_map_lookup(m, caddr(x), &rec);
	}
	return NULL;
}

/* A range inside A ([0,CB_LO)) or C ([CB_HI,CC_HI)), often touching B. */
static void conc_range(uint64_t *rng, int *ps, int *pe, int *lo, int *hi)
{
	int inA = chance(rng, 50);
	*lo = inA ? 0 : CB_HI;
	*hi = inA ? CB_LO : CC_HI;
	int len = 1 + (int)(chance(rng, 85) ? rnd(rng, 16) : rnd(rng, 256));
	int s;
	if (chance(rng, 35)) /* next to B */
		s = inA ? CB_LO - len : CB_HI;
	else
		s = *lo + (int)rnd(rng, (unsigned)(*hi - *lo - len + 1));
	*ps = s;
	*pe = s + len;
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int readers_done(struct reader *rd, int n)
{
	for (int i = 0; i < n; i++) {
		long done = 0;
		for (int k = 0; k < 3; k++)
			done += __atomic_load_n(&rd[i].answers[k], __ATOMIC_RELAXED);
		if (done < 100)
			return 0;
	}
	return 1;
}

START_TEST(test_concurrent_readers)
{
	struct mmf_map m;
	init_map(&m);
	struct conc cc;
	memset(&cc, 0, sizeof cc);
	cc.m = &m;
	uint64_t rng = seed_of(77);

	/* Fill A and C with lots of small records first: many blocks. */
	for (int i = 0; i < CB_LO; i++)
		w_set(&m, caddr(i), caddr(i + 1), mk(i % 2 ? RO : RW, MMF_LOCK_NONE, 1, 0,
						      -1, 0, 0));
	for (int i = CB_HI; i < CC_HI; i++)
		w_set(&m, caddr(i), caddr(i + 1), mk(i % 2 ? RO : RW, MMF_LOCK_NONE, 1, 0,
						      -1, 0, 0));
	for (int k = 0; k < CB_NREC; k++)
		w_set(&m, caddr(CB_LO + 4 * k), caddr(CB_LO + 4 * k + 4), cb_attr(k));
	ck_assert_int_eq(mmf_map_validate(&m), 0);
	EXPECT_CHECK(&m, caddr(CB_LO), caddr(CB_HI), want_prot(RW), MMF_NOOP_PROVEN);

	struct reader rd[2];
	pthread_t t[2];
	for (int i = 0; i < 2; i++) {
		memset(&rd[i], 0, sizeof rd[i]);
		rd[i].cc = &cc;
		rd[i].rng = seed_of(100 + i);
		ck_assert_int_eq(pthread_create(&t[i], NULL, reader_main, &rd[i]), 0);
	}

	long ops = 0;
	long long t0 = now_ns();
	for (; ops < C_WRITER_OPS; ops++) {
		if ((ops & 1023) == 0 && now_ns() - t0 > C_MAX_NS &&
		    ((ops >= C_MIN_OPS && readers_done(rd, 2)) || now_ns() - t0 > C_CAP_NS))
			break;
		if ((ops & 1023) == 512)
			sched_yield(); /* let the readers in on a busy machine */
		int s, e, lo, hi;
		conc_range(&rng, &s, &e, &lo, &hi);
		unsigned r = rnd(&rng, 100);
		mmf_map_wlock(&m);
		if (r < 35) {
			struct mmf_attr a;
			if (chance(&rng, 40))
				a = cb_attr(lo == 0 ? 0 : CB_NREC - 1);
			else
				a = mk(prot_pal[rnd(&rng, sizeof prot_pal)], MMF_LOCK_NONE,
				       (uint8_t)chance(&rng, 70), 0, -1, 0, 0);
			mmf_map_set(&m, caddr(s), caddr(e), &a);
		} else if (r < 60) {
			struct mmf_upd u;
			memset(&u, 0, sizeof u);
			u.a = cb_attr((int)rnd(&rng, CB_NREC));
			u.fields = (unsigned)rnd(&rng, 32);
			u.adv_set_mask = (uint8_t)(rnd(&rng, 32) & rnd(&rng, 32));
			u.adv_forget = (uint8_t)(rnd(&rng, 32) & rnd(&rng, 32) &
						 (uint8_t)~u.adv_set_mask);
			mmf_map_update(&m, caddr(s), caddr(e), &u);
		} else if (r < 70) {
			/* a forwarded mprotect: records split and merge in
			 * their block while the readers read */
			struct mmf_hint h;
			struct mmf_want w = want_prot(RW);
			struct mmf_slotref nr;
			uint8_t p = chance(&rng, 50) ? RW : RO;
			mmf_map_check_hint(&m, caddr(s), caddr(e), &w, &h);
			if (!h.r.attr || !mmf_map_reprot(&m, &h.r, caddr(s), caddr(e), p, 0,
							 *h.r.attr, &nr)) {
				struct mmf_upd u;
				memset(&u, 0, sizeof u);
				u.fields = MMF_F_PROT;
				u.a.prot = p;
				mmf_map_update(&m, caddr(s), caddr(e), &u);
			}
		} else if (r < 78) {
			mmf_map_remove(&m, caddr(s), caddr(e));
		} else if (r < 86) {
			mmf_map_forget(&m, caddr(s), caddr(e));
		} else {
			/* move inside the same region */
			int ol = e - s, nl = 1 + (int)rnd(&rng, 16);
			int n;
			if (chance(&rng, 50)) {
				n = s; /* in place */
				if (n + nl > hi)
					nl = hi - n;
			} else {
				n = lo + (int)rnd(&rng, (unsigned)(hi - lo - nl + 1));
				if (!(n + nl <= s || n >= e)) {
					n = s;
					nl = ol;
				}
			}
			mmf_map_move(&m, caddr(s), (uint64_t)ol * PG, caddr(n),
				     (uint64_t)nl * PG, n != s && nl == ol && chance(&rng, 30));
		}
		mmf_map_wunlock(&m);
	}
	long long elapsed = now_ns() - t0;
	__atomic_store_n(&cc.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);

	REQUIRE(cc.errors == 0, "%ld wrong answers under a concurrent writer; first: %s",
		      cc.errors, cc.msg);
	for (int i = 0; i < 2; i++) {
		long done = rd[i].answers[0] + rd[i].answers[1] + rd[i].answers[2];
		REQUIRE(done >= 100,
			      "reader %d got only %ld answers (%ld BUSY) in %lld ms, %ld writer ops",
			      i, done, rd[i].answers[3], elapsed / 1000000, ops);
	}
	REQUIRE(ops >= C_MIN_OPS, "writer did only %ld ops", ops);
	ck_assert_int_eq(mmf_map_validate(&m), 0);
	for (int k = 0; k < CB_NREC; k++) {
		struct mmf_attr ka = cb_attr(k);
		struct mmf_rec rec;
		ck_assert_int_eq(mmf_map_lookup(&m, caddr(CB_LO + 4 * k + 1), &rec), 1);
		REQUIRE(attr_eq(&rec.a, &ka), "B record %d is %s", k, astr(&rec.a));
	}
}
END_TEST

/* ------------------------------------------------------------------ */
/* capacity: run out of blocks. */

#define FBASE 0x100000000ull

START_TEST(test_capacity)
{
	struct mmf_map m;
	init_map(&m);
	/* Two-page records alternating RW and RO: every later one-page
	 * update splits a record, which needs room. */
	struct mmf_attr a[2] = { owned_prot(RW), owned_prot(RO) };
	const uint64_t limit = (uint64_t)MMF_TOP_CAP * MMF_BLOCK_CAP + 4096;
	uint64_t i;
	mmf_map_wlock(&m);
	for (i = 0; i < limit && !m.full; i++)
		mmf_map_set(&m, FBASE + 2 * i * PG, FBASE + (2 * i + 2) * PG, &a[i & 1]);
	mmf_map_wunlock(&m);
	uint64_t n = mmf_map_count(&m);
	REQUIRE(m.full, "%llu records (%llu sets) and the map is not full",
		      (unsigned long long)n, (unsigned long long)i);
	REQUIRE(n >= (uint64_t)MMF_TOP_CAP * (MMF_BLOCK_CAP / 4),
		      "full after only %llu records", (unsigned long long)n);
	REQUIRE(n <= i && n <= (uint64_t)MMF_TOP_CAP * MMF_BLOCK_CAP,
		      "%llu records after %llu sets", (unsigned long long)n,
		      (unsigned long long)i);
	ck_assert_int_eq(mmf_map_validate(&m), 0);

	/* Full: every answer is CHANGE, even where the record is there. */
	struct mmf_want w = want_prot(RW);
	int r = mmf_map_check(&m, FBASE, FBASE + 2 * PG, &w);
	REQUIRE(r == MMF_CHANGE, "full map: check = %s", ansstr(r));

	/* What is recorded is right (or gone). */
	const uint64_t nset = i;
	for (uint64_t j = 0; j < nset; j++) {
		struct mmf_rec rec;
		uint64_t s = FBASE + 2 * j * PG;
		int f = mmf_map_lookup(&m, s + PG, &rec);
		REQUIRE(f == 0 || (rec.start == s && rec.end == s + 2 * PG &&
					 attr_eq(&rec.a, &a[j & 1])),
			      "full map: record %llu is [%#llx,%#llx) %s",
			      (unsigned long long)j, (unsigned long long)rec.start,
			      (unsigned long long)rec.end, astr(&rec.a));
	}

	/* More writes that need room: no wrong record may result. */
	uint64_t rng = seed_of(99);
	static uint64_t upd_idx[4096];
	struct mmf_upd u = upd_fields(MMF_F_PROT, owned_prot(NOPROT));
	mmf_map_wlock(&m);
	for (int k = 0; k < 4096; k++) {
		upd_idx[k] = rng_next(&rng) % nset;
		uint64_t s = FBASE + 2 * upd_idx[k] * PG;
		mmf_map_update(&m, s, s + PG, &u);
	}
	mmf_map_wunlock(&m);
	ck_assert_int_eq(mmf_map_validate(&m), 0);
	r = mmf_map_check(&m, FBASE + 2 * PG, FBASE + 4 * PG, &w);
	REQUIRE(r == MMF_CHANGE, "full map after more writes: check = %s", ansstr(r));
	struct mmf_attr none = owned_prot(NOPROT), fg = forgotten();
	for (int k = 0; k < 4096; k++) {
		uint64_t j = upd_idx[k], s = FBASE + 2 * j * PG;
		struct mmf_rec rec;
		int f = mmf_map_lookup(&m, s, &rec);
		REQUIRE(f == 0 || attr_eq(&rec.a, &none) || attr_eq(&rec.a, &fg),
			      "full map: updated page of record %llu is %s",
			      (unsigned long long)j, astr(&rec.a));
		f = mmf_map_lookup(&m, s + PG, &rec);
		REQUIRE(f == 0 || attr_eq(&rec.a, &a[j & 1]) || attr_eq(&rec.a, &fg),
			      "full map: untouched page of record %llu is %s",
			      (unsigned long long)j, astr(&rec.a));
	}
}
END_TEST

/* ------------------------------------------------------------------ */

Suite *map_suite(void)
{
	Suite *s = suite_create("map");
	TCase *tc;

	tc = tcase_create("basic");
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_set_merge_split);
	tcase_add_test(tc, test_adv_unknown_bits_merge);
	tcase_add_test(tc, test_remove);
	tcase_add_test(tc, test_update);
	tcase_add_test(tc, test_reprot_edges);
	tcase_add_test(tc, test_reprot_whole);
	tcase_add_test(tc, test_forget);
	tcase_add_test(tc, test_move);
	tcase_add_test(tc, test_fork_child);
	tcase_add_test(tc, test_check);
	tcase_add_test(tc, test_walk);
	tcase_add_test(tc, test_clear);
	tcase_add_test(tc, test_wlock);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);

	tc = tcase_create("model");
	tcase_add_loop_test(tc, test_model_random, 0, MODEL_SEEDS);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("scale");
	tcase_add_test(tc, test_scale);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrency");
	tcase_add_test(tc, test_concurrent_readers);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("capacity");
	tcase_add_test(tc, test_capacity);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);

	return s;
}
