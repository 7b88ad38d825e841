/* The rule of MMFOLD_THP=auto (src/thp.c): what a new mapping gets, and
 * which residency of a watched mapping's 2 MiB blocks gets it advised;
 * which THP settings make advice pay (src/folio.c); which neighbours
 * mmfold's advice kept apart from a range it joins again. */
#include <check.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "folio.h"
#include "suites.h"
#include "thp.h"

#define PER 512 /* 4 KiB pages in a 2 MiB block */

/* Residency of blocks given as resident page counts; max_ptes_none. */
static int dense(const unsigned *n, int blocks, unsigned max_none)
{
	struct mmf_thp_use u;
	memset(&u, 0, sizeof u);
	for (int i = 0; i < blocks; i++)
		mmf_thp_count(&u, n[i], PER, max_none);
	return mmf_thp_dense(&u);
}

START_TEST(thp_dense_rule)
{
	/* nothing touched, or touched without one whole block: not yet */
	static const unsigned none[4] = {0, 0, 0, 0}, thin[4] = {1, 1, 0, 1};
	ck_assert_int_eq(dense(none, 4, 511), 0);
	ck_assert_int_eq(dense(thin, 4, 511), 0);
	static const unsigned almost[3] = {PER - 1, PER - 1, PER - 1};
	ck_assert_int_eq(dense(almost, 3, 511), 0);
	/* filled in order: whole blocks and a half-filled frontier */
	static const unsigned seq[4] = {PER, PER, PER / 2, 0};
	ck_assert_int_eq(dense(seq, 4, 511), 1);
	static const unsigned one[2] = {PER, 0};
	ck_assert_int_eq(dense(one, 2, 511), 1);
	/* a whole block beside sparse ones (Mono's nursery): filling them
	 * would more than double what is resident */
	static const unsigned mixed[5] = {PER, 8, 8, 8, 8};
	ck_assert_int_eq(dense(mixed, 5, 511), 0);
	/* the bound: beyond the frontier, at most resident/16 may be filled */
	unsigned edge[20];
	for (int i = 0; i < 16; i++)
		edge[i] = PER;
	edge[16] = PER - 128; /* 16 whole blocks, 3 x 128 missing: 384 x 16 <= 9345 */
	edge[17] = PER - 128;
	edge[18] = PER - 128;
	edge[19] = 1; /* the frontier */
	ck_assert_int_eq(dense(edge, 20, 511), 1);
	edge[18] = PER - 400; /* 656 missing beyond the frontier: 656 x 16 > 9073 */
	ck_assert_int_eq(dense(edge, 20, 511), 0);
	/* max_ptes_none 0: khugepaged never fills a partly touched block, so
	 * only new blocks get huge pages: sparse blocks cost nothing */
	ck_assert_int_eq(dense(mixed, 5, 0), 1);
	ck_assert_int_eq(dense(thin, 4, 0), 0); /* still no whole block */
}
END_TEST

START_TEST(thp_count_fields)
{
	struct mmf_thp_use u;
	memset(&u, 0, sizeof u);
	mmf_thp_count(&u, 0, PER, 511);
	mmf_thp_count(&u, PER, PER, 511);
	mmf_thp_count(&u, 500, PER, 511);
	mmf_thp_count(&u, 2, PER, 64); /* 510 missing > 64: khugepaged leaves it */
	ck_assert_uint_eq(u.touched, 3);
	ck_assert_uint_eq(u.full, 1);
	ck_assert_uint_eq(u.resident, PER + 502);
	ck_assert_uint_eq(u.fill, 12);
	ck_assert_uint_eq(u.fill_max, 12);
}
END_TEST

/* advise: everything now; auto: a read-write mapping later (watched), a
 * reservation now only with max_ptes_none at the kernel's default (a block
 * one page short of empty may fill), else left (its commits are watched). */
START_TEST(thp_mmap_rule)
{
	for (int res = 0; res < 2; res++)
		for (unsigned none = 0; none < PER; none += 73)
			ck_assert_int_eq(mmf_thp_rule(1, res, PER, none), MMF_THP_NOW);
	ck_assert_int_eq(mmf_thp_rule(0, 0, PER, 511), MMF_THP_LATER);
	ck_assert_int_eq(mmf_thp_rule(0, 0, PER, 0), MMF_THP_LATER);
	ck_assert_int_eq(mmf_thp_rule(0, 1, PER, 511), MMF_THP_NOW);
	ck_assert_int_eq(mmf_thp_rule(0, 1, PER, 510), MMF_THP_LEAVE);
	ck_assert_int_eq(mmf_thp_rule(0, 1, PER, 64), MMF_THP_LEAVE);
	ck_assert_int_eq(mmf_thp_rule(0, 1, PER, 0), MMF_THP_LEAVE);
	/* 16 KiB pages: 2048 pages in a 32 MiB block */
	ck_assert_int_eq(mmf_thp_rule(0, 1, 2048, 2047), MMF_THP_NOW);
	ck_assert_int_eq(mmf_thp_rule(0, 1, 2048, 511), MMF_THP_LEAVE);
	/* 64 KiB blocks (16 pages): the kernel scales 511 down to 15 */
	ck_assert_int_eq(mmf_thp_rule(0, 1, 16, 511 * 16 / PER), MMF_THP_NOW);
	ck_assert_int_eq(mmf_thp_rule(0, 1, 0, 511), MMF_THP_LEAVE); /* no block */
}
END_TEST

/* Which settings make advice do something.  The arm64 VM's folio test
 * sets the top level to "never" and only hugepages-64kB to "madvise":
 * MMFOLD_THP=advise went inactive there (it looked at the top level only)
 * and the kernel gave no 64 KiB folio. */
START_TEST(thp_settings_in_use)
{
	struct mmf_folio_sys f;
	memset(&f, 0, sizeof f);
	f.top = MMF_THP_NEVER;
	f.nsizes = 2;
	f.size[0] = 64 << 10;
	f.size[1] = 2 << 20;
	ck_assert_int_eq(mmf_folio_any(&f), 0);
	ck_assert_int_eq(mmf_folio_advice_pays(&f), 0);
	f.state[0] = MMF_THP_MADVISE; /* top never, 64 KiB madvise */
	ck_assert_int_eq(mmf_folio_any(&f), 1);
	ck_assert_int_eq(mmf_folio_advice_pays(&f), 1);
	ck_assert_uint_eq(mmf_folio_advice_size(&f), 64 << 10);
	f.state[0] = MMF_THP_ALWAYS; /* in use, but advice changes nothing */
	ck_assert_int_eq(mmf_folio_any(&f), 1);
	ck_assert_int_eq(mmf_folio_advice_pays(&f), 0);
	f.state[0] = MMF_THP_NEVER;
	f.nsizes = 0; /* a kernel before 6.8: the top level alone */
	f.top = MMF_THP_MADVISE;
	ck_assert_int_eq(mmf_folio_any(&f), 1);
}
END_TEST

/* A private anonymous mapping made through mmfold, nothing advised. */
static struct mmf_attr plain(uint8_t prot)
{
	struct mmf_attr a = {.prot = prot, .lock = 0, .owned = 1, .sealed = 0, .pkey = 0,
			     .adv_known = MMF_ADV_ALL | MMF_ADV_ANON, .adv_set = MMF_ADV_ANON};
	return a;
}

static struct mmf_attr ours(uint8_t prot)
{
	struct mmf_attr a = plain(prot);
	a.adv_known |= MMF_ADV_OURS;
	a.adv_set |= MMF_ADV_HUGEPAGE | MMF_ADV_OURS;
	return a;
}

START_TEST(thp_join_rule)
{
	struct mmf_attr p = plain(PROT_READ | PROT_WRITE), o = ours(PROT_READ | PROT_WRITE);
	ck_assert_int_eq(mmf_thp_join_fits(&p), 1);
	ck_assert_int_eq(mmf_thp_join_fits(&o), 1);
	ck_assert_int_eq(mmf_thp_join_alike(&p, &o), 1);
	/* the program's own huge-page advice, or its no-huge advice: its call */
	struct mmf_attr x = o;
	x.adv_set &= (uint8_t)~MMF_ADV_OURS;
	ck_assert_int_eq(mmf_thp_join_fits(&x), 0);
	x = p;
	x.adv_set |= MMF_ADV_NOHUGEPAGE;
	ck_assert_int_eq(mmf_thp_join_fits(&x), 0);
	/* not known, not mmfold's own mapping, a file, sealed */
	x = p;
	x.prot = MMF_UNKNOWN;
	ck_assert_int_eq(mmf_thp_join_fits(&x), 0);
	x = p;
	x.lock = MMF_UNKNOWN;
	ck_assert_int_eq(mmf_thp_join_fits(&x), 0);
	x = p;
	x.owned = 0;
	ck_assert_int_eq(mmf_thp_join_fits(&x), 0);
	x = p;
	x.adv_set &= (uint8_t)~MMF_ADV_ANON;
	ck_assert_int_eq(mmf_thp_join_fits(&x), 0);
	x = p;
	x.adv_known &= (uint8_t)~MMF_ADV_DONTFORK;
	ck_assert_int_eq(mmf_thp_join_fits(&x), 0);
	x = p;
	x.sealed = 1;
	ck_assert_int_eq(mmf_thp_join_fits(&x), 0);
	/* what keeps VMAs apart besides: protection, lock, key, other flags */
	x = o;
	x.prot = PROT_READ;
	ck_assert_int_eq(mmf_thp_join_alike(&p, &x), 0);
	x = o;
	x.lock = 1;
	ck_assert_int_eq(mmf_thp_join_alike(&p, &x), 0);
	x = o;
	x.pkey = 1;
	ck_assert_int_eq(mmf_thp_join_alike(&p, &x), 0);
	x = o;
	x.adv_set |= MMF_ADV_DONTDUMP;
	ck_assert_int_eq(mmf_thp_join_alike(&p, &x), 0);
	x = o;
	x.adv_set |= MMF_ADV_WX;
	ck_assert_int_eq(mmf_thp_join_alike(&p, &x), 0);
}
END_TEST

/* On a map and real memory (the advice is a real madvise). */
START_TEST(thp_join_map)
{
	static struct mmf_map m;
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	ck_assert_int_eq(mmf_map_init(&m), 0);
	mmf_thp_init(&m, pg, 2 << 20, 511);
	char *mem = mmap(NULL, 16 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(mem, MAP_FAILED);
	uint64_t b = (uint64_t)mem;
	struct mmf_attr p = plain(PROT_READ | PROT_WRITE), o = ours(PROT_READ | PROT_WRITE);
	mmf_map_wlock(&m);
	mmf_map_set(&m, b, b + 4 * pg, &o);
	/* a new small mapping after an advised one, or before it, alike */
	ck_assert_int_eq(mmf_thp_join_next_to(b + 4 * pg, b + 6 * pg, &p), 1);
	struct mmf_attr r = p;
	r.prot = PROT_READ;
	ck_assert_int_eq(mmf_thp_join_next_to(b + 4 * pg, b + 6 * pg, &r), 0);
	ck_assert_int_eq(mmf_thp_join_next_to(b + 5 * pg, b + 6 * pg, &p), 0); /* a gap */
	mmf_map_set(&m, b + 10 * pg, b + 12 * pg, &o);
	ck_assert_int_eq(mmf_thp_join_next_to(b + 8 * pg, b + 10 * pg, &p), 1);
	/* between advised memory and plain memory alike: the kernel merges
	 * it with the plain one */
	mmf_map_set(&m, b + 6 * pg, b + 8 * pg, &p);
	ck_assert_int_eq(mmf_thp_join_next_to(b + 4 * pg, b + 6 * pg, &p), 0);
	ck_assert_int_eq(mmf_thp_join_next_to(b + 8 * pg, b + 10 * pg, &p), 0);
	mmf_map_remove(&m, b + 6 * pg, b + 8 * pg);
	ck_assert_int_eq(mmf_thp_join_next_to(b + 8 * pg, b + 10 * pg, &p), 1);
	/* a range: the plain part gets the advice, once */
	mmf_map_set(&m, b + 4 * pg, b + 8 * pg, &p);
	ck_assert_int_eq(mmf_thp_join(b + 2 * pg, b + 7 * pg), 1);
	struct mmf_rec rec;
	ck_assert_int_eq(mmf_map_lookup(&m, b + 6 * pg, &rec), 1);
	ck_assert(rec.a.adv_set & MMF_ADV_HUGEPAGE);
	ck_assert(rec.a.adv_set & MMF_ADV_OURS);
	ck_assert_uint_eq(rec.start, b); /* merged with the advised record */
	ck_assert_uint_eq(rec.end, b + 7 * pg);
	ck_assert_int_eq(mmf_map_lookup(&m, b + 7 * pg, &rec), 1); /* the rest not */
	ck_assert(!(rec.a.adv_set & MMF_ADV_HUGEPAGE));
	ck_assert_int_eq(mmf_thp_join(b, b + 7 * pg), 0);
	/* nothing advised in it, a hole, a record unlike the others */
	ck_assert_int_eq(mmf_thp_join(b + 7 * pg, b + 8 * pg), 0);
	ck_assert_int_eq(mmf_thp_join(b + 6 * pg, b + 12 * pg), 0);
	mmf_map_set(&m, b + 8 * pg, b + 10 * pg, &r);
	ck_assert_int_eq(mmf_thp_join(b + 6 * pg, b + 12 * pg), 0);
	mmf_map_set(&m, b + 8 * pg, b + 10 * pg, &p);
	ck_assert_int_eq(mmf_thp_join(b + 6 * pg, b + 12 * pg), 1);
	ck_assert_int_eq(mmf_map_lookup(&m, b + 9 * pg, &rec), 1);
	ck_assert_uint_eq(rec.start, b);
	ck_assert_uint_eq(rec.end, b + 12 * pg);
	mmf_map_wunlock(&m);
	munmap(mem, 16 * pg);
}
END_TEST

Suite *thp_suite(void)
{
	Suite *s = suite_create("thp");
	TCase *t = tcase_create("rule");
	tcase_add_test(t, thp_dense_rule);
	tcase_add_test(t, thp_count_fields);
	tcase_add_test(t, thp_mmap_rule);
	tcase_add_test(t, thp_settings_in_use);
	tcase_add_test(t, thp_join_rule);
	tcase_add_test(t, thp_join_map);
	suite_add_tcase(s, t);
	return s;
}
