/* The tools: make install into a staging directory, the public API built
 * with pkg-config, the man pages, the mmfold launcher (run, report, bench).
 * The checks are in tests/tools/run.sh (one line each, "ok", "FAIL" or
 * "SKIP" with the reason); this runs it with the library and build
 * directory of make check and fails with its output if any check failed.
 * The docs case checks that every name the report prints is documented. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "stats.h"
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

/* The whole of a file (run from the repository's top, as make check does). */
static char *slurp(const char *path)
{
	int fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "%s: cannot open (make check runs from the repository's top)", path);
	off_t n = lseek(fd, 0, SEEK_END);
	ck_assert_int_gt(n, 0);
	char *buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, (size_t)n, 0), n);
	buf[n] = 0;
	close(fd);
	return buf;
}

/* Does w occur in text as a whole name (no lower-case letter, digit or '_'
 * either side; troff's "\fB" before it counts as a boundary)? */
static int has_name(const char *text, const char *w)
{
	size_t n = strlen(w);
	for (const char *p = strstr(text, w); p; p = strstr(p + 1, w)) {
		char b = p == text ? ' ' : p[-1], a = p[n];
		int in_b = (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b == '_';
		int in_a = (a >= 'a' && a <= 'z') || (a >= '0' && a <= '9') || a == '_';
		if (!in_b && !in_a)
			return 1;
	}
	return 0;
}

/* Every name the report prints (src/stats.h: the call kinds, their
 * counters and the events, in the text and JSON reports) is documented in
 * README.md or man/mmfold.7. */
START_TEST(report_names_documented)
{
	static const char *const names[] = {
#define X(id, name, ...) name,
		MMF_KINDS(X) MMF_FIELDS(X) MMF_EVENTS(X)
#undef X
	};
	char *readme = slurp("README.md"), *man = slurp("man/mmfold.7");
	char missing[2048] = "";
	int n = 0;
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!has_name(readme, names[i]) && !has_name(man, names[i])) {
			n++;
			strncat(missing, " ", sizeof missing - strlen(missing) - 1);
			strncat(missing, names[i], sizeof missing - strlen(missing) - 1);
		}
	ck_assert_msg(n == 0, "%d report names documented in neither README.md nor man/mmfold.7:%s", n,
		      missing);
	ck_assert_int_eq(sizeof names / sizeof names[0], MMF_K_COUNT + MMF_S_COUNT + MMF_E_COUNT);
	/* the check itself: a name that is nowhere is found missing */
	ck_assert(!has_name(readme, "no_such_counter") && has_name(readme, "forwarded"));
	ck_assert(!has_name("thp_advised_dense", "thp_advised"));
	free(readme);
	free(man);
}
END_TEST

/* The launcher's choices (tools/mmfold: --mode, --thp, --stats-format)
 * are the library's (src/config.h's lists, the one source of the names):
 * "choices=[\"a\", \"b\"]" after the flag equals "a|b". */
static void launcher_choices(const char *launcher, const char *flag, const char *want)
{
	char key[64], got[256] = "";
	snprintf(key, sizeof key, "\"%s\", choices=[", flag);
	const char *p = strstr(launcher, key);
	ck_assert_msg(p != NULL, "tools/mmfold: no %s with choices", flag);
	p += strlen(key);
	const char *end = strchr(p, ']');
	ck_assert_ptr_nonnull(end);
	for (; p < end; p++) {
		if (*p == '"' || *p == ' ')
			continue;
		char c[2] = {*p == ',' ? '|' : *p, 0};
		strncat(got, c, sizeof got - strlen(got) - 1);
	}
	ck_assert_msg(!strcmp(got, want), "tools/mmfold %s offers %s, the library %s", flag, got, want);
}

START_TEST(launcher_choices_from_library)
{
	char *launcher = slurp("tools/mmfold");
	launcher_choices(launcher, "--mode", MMF_CHOICES(MMF_MODES));
	launcher_choices(launcher, "--thp", MMF_CHOICES(MMF_THPS));
	launcher_choices(launcher, "--stats-format", MMF_CHOICES(MMF_FMTS));
	free(launcher);
}
END_TEST

Suite *tools_suite(void)
{
	Suite *s = suite_create("tools");
	TCase *tc = tcase_create("launcher");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, tools_script);
	suite_add_tcase(s, tc);
	tc = tcase_create("docs");
	tcase_add_test(tc, report_names_documented);
	tcase_add_test(tc, launcher_choices_from_library);
	suite_add_tcase(s, tc);
	return s;
}
