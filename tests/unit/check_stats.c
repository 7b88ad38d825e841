/* The counters' merge (src/stats.c): per-thread blocks, the retired totals
 * of threads that exited, and the shared blocks used when mmfold's own
 * memory is refused (ENOMEM from the fake kernel, fake_kernel.h). */
#include <check.h>
#include <errno.h>
#include <pthread.h>

#include "fake_kernel.h"
#include "stats.h"
#include "suites.h"

#define THREADS 4

static pthread_barrier_t counted, done;

static pthread_mutex_t adding = PTHREAD_MUTEX_INITIALIZER;

/* Thread i adds i+1 calls and 10*(i+1) bytes to mprotect; the odd ones
 * exit at once, the even ones wait until the main thread has looked. */
static void *worker(void *arg)
{
	long i = (long)arg;
	/* one thread at a time: where the blocks' chunk is refused they all
	 * add to one shared block, whose plain additions race (a counter
	 * then loses an update now and then: 106 calls of 110 seen) */
	pthread_mutex_lock(&adding);
	struct mmf_tstats *t = mmf_stats_self();
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_CALLS, (uint64_t)i + 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_ASKED, 10 * ((uint64_t)i + 1));
	pthread_mutex_unlock(&adding);
	mmf_event(MMF_E_FORKS);
	if (i % 2 == 0) {
		pthread_barrier_wait(&counted);
		pthread_barrier_wait(&done);
	}
	return NULL;
}

/* Sums with the main thread's 100 calls: 100 + 1 + 2 + 3 + 4. */
static void check_sums(uint32_t min_threads)
{
	struct mmf_tstats t;
	uint64_t ev[MMF_E_COUNT];
	uint32_t threads;
	mmf_stats_snapshot(&t, ev, &threads);
	ck_assert_uint_eq(t.v[MMF_K_MPROTECT][MMF_S_CALLS], 110);
	ck_assert_uint_eq(t.v[MMF_K_MPROTECT][MMF_S_BYTES_ASKED], 100);
	ck_assert_uint_eq(t.v[MMF_K_MADVISE][MMF_S_CALLS], 0);
	ck_assert_uint_ge(threads, min_threads);
}

static void run_threads(uint32_t min_threads, int events)
{
	mmf_stat_add(mmf_stats_self(), MMF_K_MPROTECT, MMF_S_CALLS, 100);
	pthread_barrier_init(&counted, NULL, THREADS / 2 + 1);
	pthread_barrier_init(&done, NULL, THREADS / 2 + 1);
	pthread_t th[THREADS];
	for (long i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker, (void *)i), 0);
	pthread_join(th[1], NULL);
	pthread_join(th[3], NULL);
	pthread_barrier_wait(&counted);
	check_sums(min_threads); /* two live, two retired */
	pthread_barrier_wait(&done);
	for (int i = 0; i < THREADS; i += 2)
		pthread_join(th[i], NULL);
	check_sums(min_threads); /* all retired */
	ck_assert_uint_eq(fk_event(MMF_E_FORKS), events ? THREADS : 0);
}

START_TEST(merge_live_and_retired)
{
	ck_assert_int_eq(mmf_stats_late_init(), 0);
	run_threads(THREADS + 1, 1);
}
END_TEST

/* The blocks' chunk refused: every thread counts in the shared block. */
START_TEST(merge_chunk_refused)
{
	fk_install();
	ck_assert_int_eq(mmf_stats_late_init(), 0);
	mmf_event_add(MMF_E_FORKS, 0); /* maps the totals first */
	fk_fail(FK_MMAP, FK_RAW, 0, 0, ENOMEM, -1);
	run_threads(THREADS + 1, 1);
	ck_assert_uint_ge(fk_count(FK_MMAP, FK_RAW), 2);
}
END_TEST

/* Nothing can be mapped at all: the static spare block still sums, events
 * are lost (no totals). */
START_TEST(merge_nothing_mapped)
{
	fk_install();
	fk_fail(FK_MMAP, FK_RAW, 0, 0, ENOMEM, -1);
	ck_assert_int_eq(mmf_stats_late_init(), 0);
	run_threads(0, 0);
}
END_TEST

Suite *stats_suite(void)
{
	Suite *s = suite_create("stats");
	TCase *t = tcase_create("merge");
	tcase_add_test(t, merge_live_and_retired);
	tcase_add_test(t, merge_chunk_refused);
	tcase_add_test(t, merge_nothing_mapped);
	suite_add_tcase(s, t);
	return s;
}
