/* MMFOLD_VERIFY's reading of the kernel (src/verify.c): the PROCMAP_QUERY
 * path and the /proc/self/smaps path must both see protections, holes,
 * mlock states and advice flags as they are. */
#include <check.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine.h"
#include "suites.h"

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif

static char *p;
static long pg;

static uint64_t A(int i) { return (uint64_t)(uintptr_t)(p + i * pg); }

static struct mmf_want prot(int pr)
{
	struct mmf_want w = {.what = MMF_Q_PROT, .prot = (uint8_t)pr};
	return w;
}

static void setup(void)
{
	pg = sysconf(_SC_PAGESIZE);
	mmf_verify_prepare(); /* what start-up does when MMFOLD_VERIFY is set */
	/* 6 pages: RW RO RW RW hole RW (a guard page on each side) */
	char *g = mmap(NULL, 8 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(g, MAP_FAILED);
	p = g + pg;
	ck_assert_int_eq(mprotect(p, 6 * pg, PROT_READ | PROT_WRITE), 0);
	ck_assert_int_eq(mprotect(p + pg, pg, PROT_READ), 0);
	ck_assert_int_eq(munmap(p + 4 * pg, pg), 0);
}

static void teardown(void) { munmap(p - pg, 8 * pg); }

static void check_prot(int (*v)(uint64_t, uint64_t, const struct mmf_want *))
{
	struct mmf_want rw = prot(PROT_READ | PROT_WRITE), ro = prot(PROT_READ);
	ck_assert_int_eq(v(A(0), A(1), &rw), 1);
	ck_assert_int_eq(v(A(1), A(2), &ro), 1);
	ck_assert_int_eq(v(A(0), A(2), &rw), 0); /* second page is RO */
	ck_assert_int_eq(v(A(2), A(4), &rw), 1);
	ck_assert_int_eq(v(A(2), A(5), &rw), 0); /* a hole */
	ck_assert_int_eq(v(A(4), A(5), &rw), 0);
	ck_assert_int_eq(v(A(5), A(6), &rw), 1);
	ck_assert_int_eq(v(A(5), A(6), &ro), 0);
}

START_TEST(prot_procmap_query) { check_prot(mmf_verify); }
END_TEST

START_TEST(prot_smaps) { check_prot(mmf_verify_smaps); }
END_TEST

#ifndef __SANITIZE_ADDRESS__ /* ASan turns mlock and munlock into no-ops */
START_TEST(lock_states)
{
	struct mmf_want on = {.what = MMF_Q_LOCK, .lock = MMF_LOCK_ON};
	struct mmf_want fault = {.what = MMF_Q_LOCK, .lock = MMF_LOCK_ONFAULT};
	struct mmf_want none = {.what = MMF_Q_LOCK, .lock = MMF_LOCK_NONE};
	ck_assert_int_eq(mmf_verify(A(0), A(1), &none), 1);
	ck_assert_int_eq(mlock(p, pg), 0);
	ck_assert_int_eq(mmf_verify(A(0), A(1), &on), 1);
	ck_assert_int_eq(mmf_verify(A(0), A(1), &none), 0);
	ck_assert_int_eq(mmf_verify(A(0), A(2), &on), 0);
	ck_assert_int_eq(mlock2(p + 2 * pg, pg, MLOCK_ONFAULT), 0);
	ck_assert_int_eq(mmf_verify(A(2), A(3), &fault), 1);
	ck_assert_int_eq(mmf_verify(A(2), A(3), &on), 0);
	ck_assert_int_eq(munlock(p, 6 * pg), -1); /* the hole: ENOMEM, but unlocked before it */
	ck_assert_int_eq(mmf_verify(A(0), A(4), &none), 1);
}
END_TEST
#endif

START_TEST(advice_flags)
{
	struct mmf_want dd = {.what = MMF_Q_ADV, .adv_bit = MMF_ADV_DONTDUMP, .adv_val = 1};
	struct mmf_want nodd = {.what = MMF_Q_ADV, .adv_bit = MMF_ADV_DONTDUMP, .adv_val = 0};
	struct mmf_want df = {.what = MMF_Q_ADV, .adv_bit = MMF_ADV_DONTFORK, .adv_val = 1};
	struct mmf_want hg = {.what = MMF_Q_ADV, .adv_bit = MMF_ADV_HUGEPAGE, .adv_val = 1};
	struct mmf_want nh = {.what = MMF_Q_ADV, .adv_bit = MMF_ADV_NOHUGEPAGE, .adv_val = 1};
	ck_assert_int_eq(mmf_verify(A(0), A(4), &nodd), 1);
	ck_assert_int_eq(madvise(p, 2 * pg, MADV_DONTDUMP), 0);
	ck_assert_int_eq(mmf_verify(A(0), A(2), &dd), 1);
	ck_assert_int_eq(mmf_verify(A(0), A(3), &dd), 0);
	ck_assert_int_eq(mmf_verify(A(0), A(2), &df), 0);
	ck_assert_int_eq(madvise(p, 2 * pg, MADV_DONTFORK), 0);
	ck_assert_int_eq(mmf_verify(A(0), A(2), &df), 1);
	ck_assert_int_eq(madvise(p + 2 * pg, 2 * pg, MADV_HUGEPAGE), 0);
	ck_assert_int_eq(mmf_verify(A(2), A(4), &hg), 1);
	ck_assert_int_eq(mmf_verify(A(2), A(4), &nh), 0);
	ck_assert_int_eq(madvise(p + 2 * pg, 2 * pg, MADV_NOHUGEPAGE), 0);
	ck_assert_int_eq(mmf_verify(A(2), A(4), &nh), 1);
	ck_assert_int_eq(mmf_verify(A(2), A(4), &hg), 0);
}
END_TEST

Suite *verify_suite(void)
{
	Suite *s = suite_create("verify");
	TCase *tc = tcase_create("kernel");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, prot_procmap_query);
	tcase_add_test(tc, prot_smaps);
#ifndef __SANITIZE_ADDRESS__ /* ASan turns mlock and munlock into no-ops */
	tcase_add_test(tc, lock_states);
#endif
	tcase_add_test(tc, advice_flags);
	suite_add_tcase(s, tc);
	return s;
}
