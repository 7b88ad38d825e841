/* The batch painter (src/batch.c) over the fake kernel (fake_kernel.h):
 * queued mprotect calls become one call per run of equal protection; a
 * refused piece is replayed call by call so the error names the caller's
 * first failing call, and the map does not record the refused state;
 * advice batched into process_madvise falls back to one madvise per range
 * when process_madvise is refused (ENOSYS: no such call; EINVAL: an older
 * kernel that takes few advice values), and the refusal is remembered per
 * advice. */
#include <check.h>
#include <errno.h>
#include <sys/mman.h>

#include "batch.h"
#include "fake_kernel.h"
#include "stats.h"
#include "suites.h"
#include "sys.h"

#define PGL ((long)mmf_page_size())
#define RW (PROT_READ | PROT_WRITE)

static long adv(char *p, long pages, int advice)
{
	return fk_call(MMF_K_MADVISE, (long)p, pages * PGL, advice, 0, 0, 0);
}

/* The last n logged mprotect calls are these (page offsets from base). */
static void last_calls(char *base, int n, const long (*want)[3])
{
	ck_assert_int_ge(fk_log_n, n);
	for (int i = 0; i < n; i++) {
		struct fk_mp *m = &fk_log[fk_log_n - n + i];
		ck_assert_int_eq((long)(m->s - (uint64_t)base) / PGL, want[i][0]);
		ck_assert_int_eq((long)m->len / PGL, want[i][1]);
		ck_assert_int_eq(m->prot, want[i][2]);
	}
}

/* Overlapping calls are painted: each page takes the last call's
 * protection, runs of equal protection are one call. */
START_TEST(paint)
{
	fk_start("safe", NULL);
	char *p = fk_map(8, RW);
	unsigned long n0 = fk_count(FK_MPROTECT, FK_NEXT);
	ck_assert_int_eq(mmf_batch_begin(), 1);
	ck_assert_int_eq(fk_mprotect(p, 4, PROT_READ), 0);
	ck_assert_int_eq(fk_mprotect(p + 2 * PGL, 4, PROT_NONE), 0);
	ck_assert_int_eq(fk_mprotect(p + 6 * PGL, 2, PROT_READ), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n0); /* all queued */
	ck_assert_uint_eq(fk_stat(MMF_K_MPROTECT, MMF_S_DEFERRED), 3);
	struct mmf_batch_err err;
	ck_assert_int_eq(mmf_batch_end(&err), 0);
	ck_assert_uint_eq(err.failures, 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n0 + 3);
	static const long want[3][3] = {{0, 2, PROT_READ}, {2, 4, PROT_NONE}, {6, 2, PROT_READ}};
	last_calls(p, 3, want);
	ck_assert_uint_eq(fk_event(MMF_E_BATCH_FLUSHES), 1);
	/* recorded: the same state asked again is skipped */
	ck_assert_int_eq(fk_mprotect(p + 2 * PGL, 4, PROT_NONE), 0);
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n0 + 3);
}
END_TEST

/* A sealed page in the middle (EPERM): the merged call fails, the run is
 * replayed one call at a time, the first failing call is reported with the
 * kernel's errno, and the refused page is not recorded. */
START_TEST(paint_refused)
{
	fk_start("safe", NULL);
	char *p = fk_map(8, RW);
	uint64_t bad = (uint64_t)p + 3 * PGL;
	fk_fail(FK_MPROTECT, FK_NEXT, bad, bad + PGL, EPERM, -1);
	mmf_batch_begin();
	ck_assert_int_eq(fk_mprotect(p + 6 * PGL, 2, PROT_READ), 0);
	ck_assert_int_eq(fk_mprotect(p, 5, PROT_READ), 0);
	struct mmf_batch_err err;
	ck_assert_int_eq(mmf_batch_end(&err), -EPERM);
	ck_assert_uint_ge(err.failures, 1);
	ck_assert_int_eq(err.kind, MMF_K_MPROTECT);
	ck_assert_int_eq(err.error, EPERM);
	ck_assert_uint_eq(err.s, (uint64_t)p); /* the caller's call, as asked */
	ck_assert_uint_eq(err.e, (uint64_t)p + 5 * PGL);
	ck_assert_int_eq(err.arg, PROT_READ);
	ck_assert_uint_ge(fk_stat(MMF_K_MPROTECT, MMF_S_ERRORS), 1);
	fk_clear();
	unsigned long n = fk_count(FK_MPROTECT, FK_NEXT);
	ck_assert_int_eq(fk_mprotect((char *)bad, 1, PROT_READ), 0); /* not recorded: made */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 1);
	ck_assert_int_eq(fk_mprotect(p + 6 * PGL, 2, PROT_READ), 0); /* recorded: skipped */
	ck_assert_uint_eq(fk_count(FK_MPROTECT, FK_NEXT), n + 1);
}
END_TEST

/* Batched MADV_DONTNEED goes out as one process_madvise; refused with
 * ENOSYS, every range is made with madvise, and later batches of that
 * advice do not try process_madvise again.  Another advice refused with
 * EINVAL is remembered apart. */
START_TEST(process_madvise_refused)
{
	fk_start("safe", NULL);
	char *p = fk_map(8, RW);
	for (int i = 0; i < 8; i++)
		p[i * PGL] = 1;
	fk_fail(FK_PMADVISE, FK_ANY, 0, 0, ENOSYS, -1);
	for (int round = 0; round < 2; round++) {
		unsigned long m0 = fk_count(FK_MADVISE, FK_NEXT);
		mmf_batch_begin();
		for (int i = 0; i < 3; i++)
			ck_assert_int_eq(adv(p + 2 * i * PGL, 1, MADV_DONTNEED), 0);
		ck_assert_uint_eq(fk_count(FK_MADVISE, FK_NEXT), m0);
		ck_assert_int_eq(mmf_batch_end(NULL), 0);
		ck_assert_uint_eq(fk_count(FK_PMADVISE, FK_ANY), 1); /* asked once */
		ck_assert_uint_eq(fk_count(FK_MADVISE, FK_NEXT), m0 + 3);
		ck_assert_uint_eq(fk_event(MMF_E_BATCH_FALLBACK), 3 * (round + 1));
		ck_assert_uint_eq(fk_event(MMF_E_BATCH_PMADV), 1);
	}
	ck_assert_int_eq(p[0], 0); /* DONTNEED was made */
	fk_clear();
	fk_fail(FK_PMADVISE, FK_ANY, 0, 0, EINVAL, 1);
	mmf_batch_begin();
	ck_assert_int_eq(adv(p, 1, MADV_COLD), 0);
	ck_assert_int_eq(adv(p + 4 * PGL, 1, MADV_COLD), 0);
	ck_assert_int_eq(mmf_batch_end(NULL), 0);
	ck_assert_uint_eq(fk_count(FK_PMADVISE, FK_ANY), 2); /* COLD asked on its own */
	ck_assert_uint_eq(fk_event(MMF_E_BATCH_FALLBACK), 8);
	mmf_batch_begin();
	ck_assert_int_eq(adv(p, 1, MADV_COLD), 0);
	ck_assert_int_eq(adv(p + 4 * PGL, 1, MADV_COLD), 0);
	ck_assert_int_eq(mmf_batch_end(NULL), 0);
	ck_assert_uint_eq(fk_count(FK_PMADVISE, FK_ANY), 2); /* remembered */
}
END_TEST

/* Without a refusal: one process_madvise for the three ranges. */
START_TEST(process_madvise_merged)
{
	fk_start("safe", NULL);
	char *p = fk_map(8, RW);
	unsigned long m0 = fk_count(FK_MADVISE, FK_NEXT);
	mmf_batch_begin();
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(adv(p + 2 * i * PGL, 1, MADV_DONTNEED), 0);
	ck_assert_int_eq(mmf_batch_end(NULL), 0);
	if (fk_event(MMF_E_BATCH_FALLBACK)) /* this kernel refused it */
		ck_assert_uint_eq(fk_count(FK_MADVISE, FK_NEXT), m0 + 3);
	else
		ck_assert_uint_eq(fk_count(FK_MADVISE, FK_NEXT), m0);
	ck_assert_uint_ge(fk_count(FK_PMADVISE, FK_RAW), 1);
	ck_assert_uint_eq(fk_event(MMF_E_BATCH_PMADV), 1);
}
END_TEST

Suite *batch_suite(void)
{
	Suite *s = suite_create("batch");
	TCase *t = tcase_create("painter");
	tcase_add_test(t, paint);
	tcase_add_test(t, paint_refused);
	tcase_add_test(t, process_madvise_refused);
	tcase_add_test(t, process_madvise_merged);
	suite_add_tcase(s, t);
	return s;
}
