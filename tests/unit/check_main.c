/* Runner for the Check unit test suites of mmfold.
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
#include <stdlib.h>

#include <check.h>

#include "suites.h"

static Suite *(*const all_suites[])(void) = {
	map_suite,
	map_fill_suite,
	lazy_suite,
	config_suite,
	verify_suite,
	preload_suite,
	sigchain_suite,
	tools_suite,
	wx_suite,
	thp_suite,
	dispatch_suite,
	batch_suite,
	shape_suite,
	stats_suite,
};

int main(void)
{
	size_t n = sizeof all_suites / sizeof all_suites[0];
	SRunner *sr = srunner_create(all_suites[0]());
	for (size_t i = 1; i < n; i++)
		srunner_add_suite(sr, all_suites[i]());
	srunner_run_all(sr, CK_ENV); /* CK_NORMAL unless CK_VERBOSITY says */
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
