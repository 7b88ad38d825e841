/* Runner for the Check suites of mmfold: the unit suites (tests/unit/) and
 * the behaviour suites (tests/behaviour/), so one Check summary line ends
 * make check; make check-unit picks the unit suites with CK_RUN_SUITE.
 *
 * Build and run from the top of the tree:
 *
 *   gcc -O1 -g -Wall -Wextra -Werror -std=gnu11 -Isrc \
 *       tests/unit/check_main.c tests/unit/check_map.c src/map.c src/sys.c \
 *       $(pkg-config --cflags --libs check) -pthread
 *   ./a.out
 *
 * Exit status: 0 when every test passed, 1 otherwise.
 *
 * Check's own environment variables apply, e.g.
 *   CK_RUN_SUITE=map CK_RUN_CASE=model ./a.out   run one test case
 *   CK_FORK=no ./a.out                           no fork (for gdb)
 *   CK_TIMEOUT_MULTIPLIER=10 ./a.out             slow builds (valgrind, ASan)
 *   CK_VERBOSITY=verbose ./a.out                 one line per test
 *
 * To add a suite: declare its constructor in suites.h and list it below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "suites.h"

static Suite *(*const all_suites[])(void) = {
	map_suite,
	map_fill_suite,
	lazy_suite,
	config_suite,
	verify_suite,
	sigchain_suite,
	thp_suite,
	dispatch_suite,
	batch_suite,
	shape_suite,
	stats_suite,
	/* behaviour: programs under LD_PRELOAD */
	preload_suite,
	sigchain_preload_suite,
	tools_suite,
	wx_suite,
};

/* Where two outputs first differ: "line N: got 'X', expected 'Y'". */
void first_difference(const char *got, const char *want, char *buf, size_t n)
{
	int line = 1;
	const char *g = got, *w = want;
	while (*g && *g == *w) {
		if (*g == '\n') {
			line++;
			got = g + 1;
			want = w + 1;
		}
		g++;
		w++;
	}
	if (!*g && !*w) {
		snprintf(buf, n, "same output");
		return;
	}
	snprintf(buf, n, "line %d: got '%.*s', expected '%.*s'", line, (int)strcspn(got, "\n"), got,
		 (int)strcspn(want, "\n"), want);
}

int main(void)
{
	size_t n = sizeof all_suites / sizeof all_suites[0];
	SRunner *sr = srunner_create(all_suites[0]());
	for (size_t i = 1; i < n; i++)
		srunner_add_suite(sr, all_suites[i]());
	/* A failure message carries a program's output (up to 3 x 8 KiB):
	 * past Check's default limit (4 KiB) the message is lost and the test
	 * reads as "Early exit with return value 2". */
	check_set_max_msg_size(1 << 16);
	srunner_run_all(sr, CK_ENV); /* CK_NORMAL unless CK_VERBOSITY says */
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
