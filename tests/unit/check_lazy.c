/* The lazy-mode pending table (src/lazy.c) against a per-page model. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lazy.h"
#include "suites.h"

#define PAGES 512
#define PG 4096ull
#define BASE 0x10000000ull

static int model[PAGES]; /* -1 none, else want */

static void check_against(struct mmf_lazy *z)
{
	/* sorted, non-overlapping, non-empty, and page by page equal */
	for (uint32_t i = 0; i < z->n; i++) {
		ck_assert(z->p[i].s < z->p[i].e);
		if (i)
			ck_assert(z->p[i - 1].e <= z->p[i].s);
	}
	for (int pg = 0; pg < PAGES; pg++) {
		struct mmf_pend f;
		int r = mmf_lazy_find(z, BASE + pg * PG, &f);
		ck_assert_int_eq(r, model[pg] >= 0);
		if (r)
			ck_assert_int_eq(f.want, model[pg]);
		ck_assert_int_eq(mmf_lazy_overlaps(z, BASE + pg * PG, BASE + (pg + 1) * PG),
				 model[pg] >= 0);
	}
	if (z->n) {
		ck_assert(z->lo == z->p[0].s && z->hi == z->p[z->n - 1].e);
	}
}

START_TEST(random_ops)
{
	struct mmf_lazy z;
	ck_assert_int_eq(mmf_lazy_init(&z, 4096), 0);
	srand(7);
	for (int pg = 0; pg < PAGES; pg++)
		model[pg] = -1;
	for (int step = 0; step < 20000; step++) {
		int a = rand() % PAGES, l = 1 + rand() % (rand() % 4 ? 8 : 64);
		if (a + l > PAGES)
			l = PAGES - a;
		int want = rand() % 3 ? rand() % 8 : -1;
		ck_assert_int_eq(mmf_lazy_set(&z, BASE + a * PG, BASE + (a + l) * PG, want), 0);
		for (int pg = a; pg < a + l; pg++)
			model[pg] = want;
		if (step % 97 == 0)
			check_against(&z);
		/* collect returns exactly the clipped overlapping pieces */
		if (step % 13 == 0) {
			struct mmf_pend out[PAGES];
			int s = rand() % PAGES, e = s + 1 + rand() % 40;
			if (e > PAGES)
				e = PAGES;
			uint32_t c = mmf_lazy_collect(&z, BASE + s * PG, BASE + e * PG, out, PAGES);
			int covered = 0;
			for (uint32_t k = 0; k < c; k++) {
				ck_assert(out[k].s >= BASE + s * PG && out[k].e <= BASE + e * PG);
				for (uint64_t p = out[k].s; p < out[k].e; p += PG) {
					ck_assert_int_eq(model[(p - BASE) / PG], out[k].want);
					covered++;
				}
			}
			int want_cov = 0;
			for (int pg = s; pg < e; pg++)
				want_cov += model[pg] >= 0;
			ck_assert_int_eq(covered, want_cov);
		}
	}
	check_against(&z);
}
END_TEST

/* A full table refuses and changes nothing. */
START_TEST(full)
{
	struct mmf_lazy z;
	ck_assert_int_eq(mmf_lazy_init(&z, 4), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(mmf_lazy_set(&z, BASE + 2 * i * PG, BASE + (2 * i + 1) * PG, 3), 0);
	ck_assert_int_eq(mmf_lazy_set(&z, BASE + 20 * PG, BASE + 21 * PG, 3), -1);
	/* splitting the first range in three needs two more slots */
	ck_assert_int_eq(mmf_lazy_set(&z, BASE, BASE + PG, -1), 0);
	ck_assert_int_eq(z.n, 3);
	ck_assert_int_eq(mmf_lazy_set(&z, BASE, BASE + 3 * PG, 1), 0); /* replaces one */
	ck_assert_int_eq(z.n, 3);
	ck_assert_uint_eq(z.lo, BASE);
}
END_TEST

Suite *lazy_suite(void)
{
	Suite *s = suite_create("lazy");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, random_ops);
	tcase_add_test(tc, full);
	suite_add_tcase(s, tc);
	return s;
}
