/* The shaping planner (src/shape.c) on a shadow map built by hand, and the
 * shaped forwarding through the dispatcher over the fake kernel
 * (fake_kernel.h): the pieces the kernel gets; a refused piece makes the
 * caller's own call go out, whose answer the caller gets. */
#include <check.h>
#include <errno.h>
#include <sys/mman.h>

#include "config.h"
#include "fake_kernel.h"
#include "shape.h"
#include "stats.h"
#include "suites.h"
#include "sys.h"

#define PG ((uint64_t)mmf_page_size())
#define RW (PROT_READ | PROT_WRITE)
#define BASE (1ull << 40) /* 1 TiB: aligned to any folio size */

static struct mmf_map m;

/* Records [BASE + a pages, BASE + b pages) owned with protection prot. */
static void rec(int a, int b, int prot)
{
	struct mmf_attr at = {.prot = (uint8_t)prot, .lock = MMF_LOCK_NONE, .owned = 1,
			      .sealed = 0, .pkey = 0, .adv_known = MMF_ADV_ALL};
	mmf_map_set(&m, BASE + a * PG, BASE + b * PG, &at);
}

static int plan(int a, int b, int prot, int policy, struct mmf_shape_plan *p)
{
	struct mmf_want w = {.what = MMF_Q_PROT, .prot = (uint8_t)prot};
	return mmf_shape_plan(&m, BASE + a * PG, BASE + b * PG, &w, policy,
			      &mmf_shape_cost_default, p);
}

static void setup(void)
{
	ck_assert_int_eq(mmf_map_init(&m), 0);
	/* R R R W R R W R: making all 8 read-only changes pages 3 and 6 */
	rec(0, 3, PROT_READ);
	rec(3, 4, RW);
	rec(4, 6, PROT_READ);
	rec(6, 7, RW);
	rec(7, 8, PROT_READ);
}

START_TEST(trim_splits_runs)
{
	setup();
	struct mmf_shape_plan p;
	ck_assert_int_eq(plan(0, 8, PROT_READ, MMF_SHAPE_TRIM, &p), MMF_SHAPED_TRIMMED);
	ck_assert_int_eq(p.n, 2);
	ck_assert_uint_eq(p.s[0], BASE + 3 * PG);
	ck_assert_uint_eq(p.e[0], BASE + 4 * PG);
	ck_assert_uint_eq(p.s[1], BASE + 6 * PG);
	ck_assert_uint_eq(p.e[1], BASE + 7 * PG);
	/* one changing run: trimmed to it */
	ck_assert_int_eq(plan(0, 5, PROT_READ, MMF_SHAPE_TRIM, &p), MMF_SHAPED_TRIMMED);
	ck_assert_int_eq(p.n, 1);
	ck_assert_uint_eq(p.s[0], BASE + 3 * PG);
	ck_assert_uint_eq(p.e[0], BASE + 4 * PG);
}
END_TEST

START_TEST(auto_keeps_cheap_calls)
{
	setup();
	struct mmf_shape_plan p;
	/* the model: 3 unchanged VMAs walked (3 x 55 ns) do not pay for one
	 * more call (2.2 us) nor pass the 1.5 us resolution */
	ck_assert_int_eq(plan(0, 8, PROT_READ, MMF_SHAPE_AUTO, &p), MMF_SHAPED_ASIS);
	ck_assert_int_eq(plan(0, 8, PROT_READ, MMF_SHAPE_OFF, &p), MMF_SHAPED_ASIS);
}
END_TEST

START_TEST(unproven_records_block_shaping)
{
	setup();
	struct mmf_shape_plan p;
	struct mmf_upd u = {.fields = MMF_F_SEALED, .a = {.sealed = 1}};
	mmf_map_update(&m, BASE, BASE + PG, &u); /* a sealed page proves nothing */
	ck_assert_int_eq(plan(0, 8, PROT_READ, MMF_SHAPE_TRIM, &p), MMF_SHAPED_ASIS);
	ck_assert_int_eq(plan(1, 8, PROT_READ, MMF_SHAPE_TRIM, &p), MMF_SHAPED_TRIMMED);
	mmf_map_forget(&m, BASE + 7 * PG, BASE + 8 * PG); /* observed */
	ck_assert_int_eq(plan(1, 8, PROT_READ, MMF_SHAPE_TRIM, &p), MMF_SHAPED_ASIS);
	mmf_map_remove(&m, BASE + 5 * PG, BASE + 6 * PG); /* a hole */
	ck_assert_int_eq(plan(1, 7, PROT_READ, MMF_SHAPE_TRIM, &p), MMF_SHAPED_ASIS);
}
END_TEST

START_TEST(widen_to_folio)
{
	uint64_t g = 64u << 10;
	if (PG * 2 > g) {
		/* a 64 KiB page has no smaller folio to widen to */
		return;
	}
	int gp = (int)(g / PG);
	ck_assert_int_eq(mmf_map_init(&m), 0);
	rec(0, 1, PROT_NONE);
	rec(1, 2, PROT_READ);
	rec(2, gp, PROT_NONE);
	struct mmf_shape_plan p;
	ck_assert_int_eq(plan(1, 2, PROT_NONE, MMF_SHAPE_WIDEN, &p), MMF_SHAPED_WIDENED);
	ck_assert_int_eq(p.n, 1);
	ck_assert_uint_eq(p.s[0], BASE);
	ck_assert_uint_eq(p.e[0], BASE + g);
	/* not over pages at another state */
	rec(gp - 1, gp, RW);
	ck_assert_int_eq(plan(1, 2, PROT_NONE, MMF_SHAPE_WIDEN, &p), MMF_SHAPED_WIDENED);
	ck_assert_uint_eq(p.s[0], BASE);
	ck_assert_uint_eq(p.e[0], BASE + 2 * PG);
}
END_TEST

/* Through the dispatcher with MMFOLD_SHAPE=trim: the kernel gets the
 * pieces; one piece refused (EPERM), the caller's own call goes out and its
 * answer is the caller's; refused too, the caller gets the kernel's errno
 * and the range is not recorded. */
static char *striped(void)
{
	char *p = fk_map(8, RW);
	ck_assert_int_eq(fk_mprotect(p + 3 * PG, 1, PROT_READ), 0);
	ck_assert_int_eq(fk_mprotect(p + 6 * PG, 1, PROT_READ), 0);
	return p;
}

START_TEST(forward_pieces_and_fallback)
{
	const char *env[] = {"MMFOLD_SHAPE=trim", NULL};
	fk_start("safe", env);
	char *p = striped();
	ck_assert_int_eq(fk_mprotect(p, 8, PROT_READ), 0);
	ck_assert_int_eq(fk_log_n, 5);
	for (int i = 0; i < 3; i++) {
		static const long want[3][2] = {{0, 3}, {4, 2}, {7, 1}};
		struct fk_mp *c = &fk_log[2 + i];
		ck_assert_int_eq((long)(c->s - (uint64_t)p) / (long)PG, want[i][0]);
		ck_assert_int_eq((long)c->len / (long)PG, want[i][1]);
	}
	ck_assert_uint_eq(fk_event(MMF_E_SHAPED_TRIMMED), 1);
	ck_assert_uint_eq(fk_event(MMF_E_SHAPED_PIECES), 3);

	/* the second piece refused once: the whole call is made */
	char *q = striped();
	fk_fail(FK_MPROTECT, FK_NEXT, (uint64_t)q + 5 * PG, (uint64_t)q + 6 * PG, EPERM, 1);
	errno = 12345;
	ck_assert_int_eq(fk_mprotect(q, 8, PROT_READ), 0);
	ck_assert_int_eq(errno, 12345); /* the refused piece does not show */
	ck_assert_uint_eq(fk_event(MMF_E_SHAPE_FALLBACK), 1);
	/* the refused piece is not an error of the caller's */
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_ERRORS), 0);
	struct fk_mp *last = &fk_log[fk_log_n - 1];
	ck_assert_uint_eq(last->s, (uint64_t)q);
	ck_assert_uint_eq(last->len, 8 * PG);
	unsigned long n = fk_count(FK_MPROTECT, FK_NEXT);
	ck_assert_int_eq(fk_mprotect(q, 8, PROT_READ), 0); /* recorded: skipped */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n);

	/* refused for good: the caller gets EPERM, nothing recorded */
	char *r = striped();
	fk_fail(FK_MPROTECT, FK_NEXT, (uint64_t)r + 5 * PG, (uint64_t)r + 6 * PG, EPERM, -1);
	ck_assert_int_eq(fk_mprotect(r, 8, PROT_READ), -EPERM);
	ck_assert_uint_eq(fk_event(MMF_E_SHAPE_FALLBACK), 2);
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_ERRORS), 1);
	fk_clear();
	n = fk_count(FK_MPROTECT, FK_NEXT);
	ck_assert_int_eq(fk_mprotect(r, 3, PROT_READ), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 1);
}
END_TEST

Suite *shape_suite(void)
{
	Suite *s = suite_create("shape");
	TCase *t = tcase_create("planner");
	tcase_add_test(t, trim_splits_runs);
	tcase_add_test(t, auto_keeps_cheap_calls);
	tcase_add_test(t, unproven_records_block_shaping);
	tcase_add_test(t, widen_to_folio);
	suite_add_tcase(s, t);
	TCase *f = tcase_create("forward");
	tcase_add_test(f, forward_pieces_and_fallback);
	suite_add_tcase(s, f);
	return s;
}
