/* The tools: make install into a staging directory, the public API built
 * with pkg-config, the man pages, the mmfold launcher (run, report, bench).
 * The checks are in tests/tools/run.sh (one line each, "ok", "FAIL" or
 * "SKIP" with the reason); this runs it with the library and build
 * directory of make check and fails with its output if any check failed. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suites.h"

START_TEST(tools_script)
{
	const char *lib = getenv("MMFOLD_LIB"), *build = getenv("MMFOLD_BUILD");
	ck_assert_msg(lib && build, "MMFOLD_LIB and MMFOLD_BUILD must be set (make check does)");
	char log[512];
	snprintf(log, sizeof log, "%s/tests-tools.log", build);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		/* Check's own variables are not for the programs run there. */
		unsetenv("CK_RUN_SUITE");
		unsetenv("CK_RUN_CASE");
		unsetenv("LD_PRELOAD");
		execl("tests/tools/run.sh", "tests/tools/run.sh", (char *)NULL);
		_exit(127);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	char out[8192] = "";
	int fd = open(log, O_RDONLY);
	if (fd >= 0) {
		/* The end of the log: the failures and the summary line. */
		off_t end = lseek(fd, 0, SEEK_END);
		lseek(fd, end > (off_t)sizeof out - 1 ? end - (off_t)sizeof out + 1 : 0, SEEK_SET);
		ssize_t r = read(fd, out, sizeof out - 1);
		out[r > 0 ? r : 0] = 0;
		close(fd);
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "tests/tools/run.sh failed (status %d; log %s):\n%s",
		      WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), log, out);
	ck_assert_msg(strstr(out, " 0 failed"), "tests/tools/run.sh printed no summary:\n%s", out);
}
END_TEST

Suite *tools_suite(void)
{
	Suite *s = suite_create("tools");
	TCase *tc = tcase_create("launcher");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, tools_script);
	suite_add_tcase(s, tc);
	return s;
}
