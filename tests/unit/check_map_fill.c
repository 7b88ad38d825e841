/* mmf_map_fill and the hole report of mmf_map_update (src/map.c): how the
 * engine learns about memory it did not map. */
#include <check.h>
#include <string.h>

#include "map.h"
#include "suites.h"

#define PG 4096ull
#define B 0x40000000ull
#define P(i) (B + (uint64_t)(i) * PG)

static struct mmf_attr owned(uint8_t prot)
{
	struct mmf_attr a = {.prot = prot, .lock = MMF_LOCK_NONE, .owned = 1, .sealed = 0,
			     .pkey = 0, .adv_known = MMF_ADV_ALL, .adv_set = 0};
	return a;
}

static struct mmf_attr observed(uint8_t prot)
{
	struct mmf_attr a = {.prot = prot, .lock = MMF_UNKNOWN, .owned = 0,
			     .sealed = MMF_UNKNOWN, .pkey = -1, .adv_known = 0, .adv_set = 0};
	return a;
}

START_TEST(fill_only_holes)
{
	struct mmf_map m;
	ck_assert_int_eq(mmf_map_init(&m), 0);
	struct mmf_attr rw = owned(3), ro = observed(1);
	mmf_map_wlock(&m);
	mmf_map_set(&m, P(2), P(4), &rw);
	mmf_map_set(&m, P(6), P(7), &rw);
	struct mmf_upd u = {.fields = MMF_F_PROT, .a = {.prot = 1}};
	/* [0,10) has holes at [0,2), [4,6), [7,10) */
	ck_assert_int_eq(mmf_map_update(&m, P(0), P(10), &u), 1);
	ck_assert_int_eq(mmf_map_update(&m, P(2), P(4), &u), 0);
	ck_assert_int_eq(mmf_map_update(&m, P(2), P(3), &u), 0);
	mmf_map_fill(&m, P(0), P(10), &ro);
	mmf_map_wunlock(&m);
	ck_assert_int_eq(mmf_map_validate(&m), 0);
	/* owned records keep their provenance, holes became observed */
	struct mmf_rec r;
	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(mmf_map_lookup(&m, P(i), &r), 1);
		int own = (i >= 2 && i < 4) || i == 6;
		ck_assert_int_eq(r.a.owned, own);
		ck_assert_int_eq(r.a.prot, 1);
	}
	ck_assert_int_eq(mmf_map_lookup(&m, P(10), &r), 0);
	struct mmf_want w = {.what = MMF_Q_PROT, .prot = 1};
	ck_assert_int_eq(mmf_map_check(&m, P(2), P(4), &w), MMF_NOOP_PROVEN);
	ck_assert_int_eq(mmf_map_check(&m, P(0), P(10), &w), MMF_NOOP_UNPROVEN);
	ck_assert_int_eq(mmf_map_check(&m, P(0), P(11), &w), MMF_CHANGE);
	/* 5 runs: observed [0,2), owned [2,4), observed [4,6), owned 6, observed [7,10) */
	ck_assert_int_eq(mmf_map_count(&m), 5);
}
END_TEST

Suite *map_fill_suite(void)
{
	Suite *s = suite_create("map_fill");
	TCase *tc = tcase_create("fill");
	tcase_add_test(tc, fill_only_holes);
	suite_add_tcase(s, tc);
	return s;
}
