/* The Check suites collected by tests/unit/check_main.c: the unit suites
 * of tests/unit/ and the behaviour suites of tests/behaviour/ (programs run
 * under LD_PRELOAD).  To add a suite, declare its constructor here and list
 * it in check_main.c's table. */
#ifndef MMF_TEST_SUITES_H
#define MMF_TEST_SUITES_H

#include <check.h>
#include <stddef.h>

Suite *map_suite(void);     /* tests/unit/check_map.c: the shadow map (src/map.c) */
Suite *map_fill_suite(void); /* tests/unit/check_map_fill.c: learning about holes */
Suite *lazy_suite(void);     /* tests/unit/check_lazy.c: lazy mode's pending table */
Suite *config_suite(void);  /* tests/unit/check_config.c: MMFOLD_* parsing */
Suite *verify_suite(void);  /* tests/unit/check_verify.c: MMFOLD_VERIFY's view of the kernel */
Suite *sigchain_suite(void); /* tests/unit/check_sigchain.c: SIGSEGV/SIGBUS chaining, the engine */
Suite *thp_suite(void);     /* tests/unit/check_thp.c: the density rule of MMFOLD_THP=auto */
Suite *dispatch_suite(void); /* tests/unit/check_dispatch.c: mmf_run over a fake kernel */
Suite *batch_suite(void);   /* tests/unit/check_batch.c: the batch painter over a fake kernel */
Suite *shape_suite(void);   /* tests/unit/check_shape.c: the shaping planner */
Suite *stats_suite(void);   /* tests/unit/check_stats.c: merging the counters */

/* Behaviour suites, tests/behaviour/: programs under LD_PRELOAD */
Suite *preload_suite(void); /* check_preload.c: counts, modes, folios, batch, lazy, shape, walks */
Suite *sigchain_preload_suite(void); /* check_sigchain.c: SIGSEGV/SIGBUS chaining */
Suite *wx_suite(void);      /* check_wx.c: W^X flips (src/wx.c) */
Suite *tools_suite(void);   /* check_tools.c: install, man pages, launcher */

/* Where two program outputs first differ, for a failure message that
 * stays short: "line N: got 'X', expected 'Y'" or "same output". */
void first_difference(const char *got, const char *want, char *buf, size_t n);

#endif
