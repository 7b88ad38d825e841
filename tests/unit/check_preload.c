/* Behaviour under LD_PRELOAD: programs are run with the built library (the
 * path comes from MMFOLD_LIB, the build directory from MMFOLD_BUILD) and
 * what they print, and what mmfold reports, is checked.  The differential
 * suites of tests/preload/run.sh run from here too, one test each, so a
 * single Check summary covers everything. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suites.h"

static const char *lib, *build;
static char tmpdir[256];

struct result {
	int status; /* exit code, or 128+signal */
	char out[8192], err[8192];
};

static void slurp(const char *path, char *buf, size_t n)
{
	buf[0] = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	ssize_t r = read(fd, buf, n - 1);
	buf[r > 0 ? r : 0] = 0;
	close(fd);
}

/* Runs argv with LD_PRELOAD=lib (unless preload is 0) and extra "K=V"
 * settings on top of a clean MMFOLD_*-free environment. */
static void run(struct result *res, int preload, const char *const *extra, char *const argv[])
{
	char out[300], err[300];
	snprintf(out, sizeof out, "%s/out", tmpdir);
	snprintf(err, sizeof err, "%s/err", tmpdir);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		extern char **environ;
		char *env[64];
		int n = 0;
		char ld[600];
		for (char **e = environ; *e && n < 40; e++)
			if (strncmp(*e, "MMFOLD_", 7) && strncmp(*e, "LD_PRELOAD=", 11) &&
			    strncmp(*e, "CK_", 3))
				env[n++] = *e;
		if (preload) {
			snprintf(ld, sizeof ld, "LD_PRELOAD=%s", lib);
			env[n++] = ld;
		}
		for (; extra && *extra && n < 62; extra++)
			env[n++] = (char *)*extra;
		env[n] = NULL;
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e2 = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(o, 1);
		dup2(e2, 2);
		execve(argv[0], argv, env);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	slurp(out, res->out, sizeof res->out);
	slurp(err, res->err, sizeof res->err);
}

static char *prog(const char *name)
{
	static char p[4][400];
	static int i;
	char *s = p[i++ & 3];
	snprintf(s, 400, "%s/progs/%s", build, name);
	return s;
}

/* The value of "field" inside "kind":{...} of a JSON report, or -1. */
static long jfield(const char *json, const char *kind, const char *field)
{
	char key[80];
	snprintf(key, sizeof key, "\"%s\":{", kind);
	const char *k = strstr(json, key);
	if (!k)
		return -1;
	const char *end = strchr(k, '}');
	snprintf(key, sizeof key, "\"%s\":", field);
	const char *f = strstr(k, key);
	if (!f || f > end)
		return -1;
	return atol(f + strlen(key));
}

static void setup(void)
{
	lib = getenv("MMFOLD_LIB");
	build = getenv("MMFOLD_BUILD");
	ck_assert_msg(lib && build, "MMFOLD_LIB and MMFOLD_BUILD must be set (make check does)");
	ck_assert_msg(access(lib, R_OK) == 0, "no library at %s", lib);
	snprintf(tmpdir, sizeof tmpdir, "/tmp/mmfold-check.%d", (int)getpid());
	mkdir(tmpdir, 0700);
}

static void teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* Exact counts: 1000 redundant mprotects are skipped in safe mode, counted
 * as skippable but forwarded in observe mode, and forwarded in off mode. */
START_TEST(counts_by_mode)
{
	static const char *const modes[] = {"safe", "observe", "off"};
	for (int m = 0; m < 3; m++) {
		char mode[40];
		snprintf(mode, sizeof mode, "MMFOLD_MODE=%s", modes[m]);
		const char *env[] = {mode, "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
		char *argv[] = {prog("scenario"), (char *)"noop", (char *)"1000", NULL};
		struct result r;
		run(&r, 1, env, argv);
		ck_assert_int_eq(r.status, 0);
		ck_assert_str_eq(r.out, "noop ok\n");
		long calls = jfield(r.err, "mprotect", "calls");
		long skipped = jfield(r.err, "mprotect", "skipped");
		long fwd = jfield(r.err, "mprotect", "forwarded");
		ck_assert_int_eq(calls, 1002);
		ck_assert_int_eq(skipped, m == 2 ? 0 : 1000);
		ck_assert_int_eq(fwd, m == 0 ? 2 : 1002);
		ck_assert_int_eq(jfield(r.err, "mlock", "skipped"), m == 2 ? 0 : 1);
		ck_assert_int_eq(jfield(r.err, "munlock", "skipped"), m == 2 ? 0 : 1);
		ck_assert_int_eq(jfield(r.err, "madvise", "skipped"), m == 2 ? 0 : 1);
		ck_assert_int_eq(jfield(r.err, "mprotect", "errors"), 0);
	}
}
END_TEST

/* Memory mmfold did not map: never skipped, but the missed chance shows. */
START_TEST(unproven_on_foreign_memory)
{
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	char *argv[] = {prog("scenario"), (char *)"heap", NULL};
	struct result r;
	run(&r, 1, env, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_int_eq(jfield(r.err, "mprotect", "skipped"), 0);
	ck_assert_int_eq(jfield(r.err, "mprotect", "forwarded"), 2);
	ck_assert_int_eq(jfield(r.err, "mprotect", "unproven"), 1);
}
END_TEST

/* Each process writes its own report; %p names the file after the pid. */
START_TEST(fork_reports_per_process)
{
	char file[400];
	snprintf(file, sizeof file, "MMFOLD_STATS_FILE=%s/rep.%%p.json", tmpdir);
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", file, NULL};
	char *argv[] = {prog("scenario"), (char *)"fork", (char *)"7", NULL};
	struct result r;
	run(&r, 1, env, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "fork ok 0\n");
	ck_assert_str_eq(r.err, "");
	char cmd[600], list[16384];
	snprintf(cmd, sizeof cmd, "cat %s/rep.*.json > %s/all 2>/dev/null", tmpdir, tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "%s/all", tmpdir);
	slurp(cmd, list, sizeof list);
	/* two reports: the parent's (3 calls) and the child's (7 calls) */
	const char *second = strstr(list + 1, "{\"mmfold\"");
	ck_assert_ptr_nonnull(second);
	long a = jfield(list, "mprotect", "calls"), b = jfield(second, "mprotect", "calls");
	ck_assert_msg((a == 3 && b == 7) || (a == 7 && b == 3), "calls %ld and %ld", a, b);
	/* the file name carries the pid written inside */
	snprintf(cmd, sizeof cmd,
		 "cd %s && for f in rep.*.json; do p=${f#rep.}; p=${p%%.json}; grep -q \"\\\"pid\\\":$p,\" $f || exit 1; done",
		 tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Nothing on stdout ever; nothing on stderr unless asked; _exit exempt. */
START_TEST(quiet_unless_asked)
{
	char *argv[] = {prog("scenario"), (char *)"noop", (char *)"10", NULL};
	struct result r;
	run(&r, 1, NULL, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "noop ok\n");
	ck_assert_str_eq(r.err, "");
	const char *env[] = {"MMFOLD_STATS=1", NULL};
	char *argv2[] = {prog("scenario"), (char *)"quick_exit", NULL};
	run(&r, 1, env, argv2);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "");
	ck_assert_str_eq(r.err, "");
	run(&r, 1, env, argv);
	ck_assert_str_eq(r.out, "noop ok\n");
	ck_assert_ptr_nonnull(strstr(r.err, "mmfold 0.1.0: pid"));
	ck_assert_ptr_nonnull(strstr(r.err, "mprotect"));
}
END_TEST

/* A bad value for every variable: the program still runs, unchanged, and
 * mmfold says one line per problem on stderr; MMFOLD_STRICT=1 stops. */
START_TEST(bad_configuration)
{
	const char *env[] = {"MMFOLD_MODE=turbo",      "MMFOLD_STATS=2",   "MMFOLD_STATS_FORMAT=yaml",
			     "MMFOLD_VERIFY=7",        "MMFOLD_LOG=loud",  "MMFOLD_STRICT=maybe",
			     "MMFOLD_THP=yes",         "MMFOLD_THP_MIN=1", "MMFOLD_ALIGN=5K",
			     "MMFOLD_ALIGN_MIN=x",
			     "MMFOLD_STATS_FILE=/nonexistent-dir/x", NULL};
	char *argv[] = {prog("scenario"), (char *)"noop", (char *)"10", NULL};
	struct result r;
	run(&r, 1, env, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "noop ok\n");
	int lines = 0;
	for (const char *p = r.err; *p; p++)
		lines += *p == '\n';
	ck_assert_msg(lines == 10, "expected 10 warning lines, got:\n%s", r.err);
	static const char *const names[] = {"MMFOLD_MODE=turbo", "MMFOLD_STATS=2", "MMFOLD_STATS_FORMAT=yaml",
					    "MMFOLD_VERIFY=7", "MMFOLD_LOG=loud", "MMFOLD_STRICT=maybe",
					    "MMFOLD_THP=yes", "MMFOLD_THP_MIN=1", "MMFOLD_ALIGN=5K",
					    "MMFOLD_ALIGN_MIN=x"};
	for (int i = 0; i < 10; i++)
		ck_assert_msg(strstr(r.err, names[i]), "no line for %s in:\n%s", names[i], r.err);
	/* the stats file that cannot be opened is reported when used */
	const char *env2[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FILE=/nonexistent-dir/x", NULL};
	run(&r, 1, env2, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.err, "MMFOLD_STATS_FILE=/nonexistent-dir/x: cannot open"));
	const char *env3[] = {"MMFOLD_STRICT=1", "MMFOLD_MODE=turbo", NULL};
	run(&r, 1, env3, argv);
	ck_assert_int_eq(r.status, 1);
	ck_assert_str_eq(r.out, "");
	ck_assert_ptr_nonnull(strstr(r.err, "MMFOLD_MODE=turbo"));
	ck_assert_ptr_nonnull(strstr(r.err, "MMFOLD_STRICT=1"));
}
END_TEST

/* MMFOLD_VERIFY checks skips against the kernel: clean on honest traffic,
 * and it catches a record made stale by a raw system call (which mmfold
 * cannot see: a documented limit), forwarding the call instead. */
START_TEST(verify_mode)
{
	const char *env[] = {"MMFOLD_VERIFY=1", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	char *argv[] = {prog("scenario"), (char *)"noop", (char *)"50", NULL};
	struct result r;
	run(&r, 1, env, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.err, "\"verify_checks\":53"));
	ck_assert_ptr_nonnull(strstr(r.err, "\"verify_mismatches\":0"));
	char *argv2[] = {prog("scenario"), (char *)"raw", NULL};
	run(&r, 1, env, argv2);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "raw ok\n");
	ck_assert_ptr_nonnull(strstr(r.err, "verify: the kernel disagrees with a skip of mprotect"));
	ck_assert_ptr_nonnull(strstr(r.err, "\"verify_mismatches\":1"));
	/* without verify the stale record is trusted: the limit is real */
	const char *env2[] = {NULL};
	run(&r, 1, env2, argv2);
	ck_assert_int_eq(r.status, 128 + 11);
}
END_TEST

/* ---- large folios: placement and advice (tests/progs/folio.c) ---- */

static int thp_never(void)
{
	char buf[128];
	slurp("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf);
	return !buf[0] || strstr(buf, "[never]") != NULL;
}

static void folio_run(struct result *r, const char *what, const char *const *env)
{
	char *argv[] = {prog("folio"), (char *)what, NULL};
	run(r, 1, env, argv);
	ck_assert_msg(r->status == 0, "folio %s exited %d:\n%s%s", what, r->status, r->out, r->err);
}

/* Alignment never leaves pages behind nor changes a length; with an
 * explicit 2 MiB alignment every mapping of at least 2 MiB is aligned. */
START_TEST(folio_place)
{
	struct result r;
	const char *env_off[] = {"MMFOLD_MODE=off", NULL};
	folio_run(&r, "place", env_off);
	ck_assert_ptr_nonnull(strstr(r.out, "maps as before: yes"));
	folio_run(&r, "place", NULL);
	ck_assert_msg(strstr(r.out, "maps as before: yes"), "%s%s", r.out, r.err);
	const char *env2m[] = {"MMFOLD_ALIGN=2M", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	folio_run(&r, "place", env2m);
	ck_assert_msg(strstr(r.out, "2M-aligned 12 of 12 large"), "%s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "maps as before: yes"));
	ck_assert_msg(strstr(r.err, "\"aligned\":"), "%s", r.err);
	ck_assert_msg(!strstr(r.err, "\"aligned\":0,"), "no mapping aligned:\n%s", r.err);
	const char *env64k[] = {"MMFOLD_ALIGN=64K", NULL};
	folio_run(&r, "place", env64k);
	ck_assert_msg(strstr(r.out, "64K-aligned 18 of 18"), "%s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "maps as before: yes"));
}
END_TEST

/* A caller's address (hint, MAP_FIXED, MAP_FIXED_NOREPLACE) and length
 * are never changed. */
START_TEST(folio_hint)
{
	struct result off, on;
	const char *env_off[] = {"MMFOLD_MODE=off", NULL};
	const char *env_on[] = {"MMFOLD_ALIGN=2M", "MMFOLD_THP=advise", NULL};
	folio_run(&off, "hint", env_off);
	folio_run(&on, "hint", env_on);
	ck_assert_str_eq(on.out, off.out);
	ck_assert_ptr_null(strstr(on.out, "NO"));
}
END_TEST

/* An aligned mapping that mremap must move stays aligned; nothing leaks. */
START_TEST(folio_mremap)
{
	struct result r;
	const char *env_off[] = {"MMFOLD_MODE=off", NULL};
	folio_run(&r, "mremap", env_off);
	ck_assert_msg(strstr(r.out, "content kept: yes") && strstr(r.out, "maps as before: yes"), "%s",
		      r.out);
	const char *env_on[] = {"MMFOLD_ALIGN=2M", NULL};
	folio_run(&r, "mremap", env_on);
	ck_assert_msg(strstr(r.out, "moved: yes") && strstr(r.out, "2M-aligned after the move: yes") &&
			      strstr(r.out, "content kept: yes") && strstr(r.out, "maps as before: yes"),
		      "%s", r.out);
}
END_TEST

/* MADV_NOHUGEPAGE and PR_SET_THP_DISABLE win over mmfold's advice. */
START_TEST(folio_nohuge)
{
	struct result off, on;
	const char *env_off[] = {"MMFOLD_MODE=off", NULL};
	const char *env_on[] = {"MMFOLD_THP=advise", NULL};
	folio_run(&off, "nohuge", env_off);
	folio_run(&on, "nohuge", env_on);
	ck_assert_str_eq(on.out, off.out);
	ck_assert_ptr_nonnull(strstr(on.out, "advised away: nh 1 hg 0"));
	ck_assert_ptr_nonnull(strstr(on.out, "reservation: hg 0"));
	ck_assert_ptr_nonnull(strstr(on.out, "THP_DISABLE: hg 0"));
}
END_TEST

/* A MAP_FIXED commit inside a reservation mmfold advised gets the advice
 * again (how JVMs commit heap); MMFOLD_THP=off and mode off do nothing. */
START_TEST(folio_inherit)
{
	struct result r;
	const char *env_on[] = {"MMFOLD_THP=advise", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	folio_run(&r, "inherit", env_on);
	ck_assert_ptr_nonnull(strstr(r.out, "content ok: yes"));
	if (!thp_never()) {
		ck_assert_msg(strstr(r.out, "commit: hg 1"), "%s", r.out);
		ck_assert_msg(!strstr(r.err, "\"thp_advised\":0,"), "%s", r.err);
	}
	const char *env_thp_off[] = {"MMFOLD_THP=off", NULL};
	folio_run(&r, "inherit", env_thp_off);
	ck_assert_ptr_nonnull(strstr(r.out, "commit: hg 0"));
	const char *env_off[] = {"MMFOLD_MODE=off", NULL};
	folio_run(&r, "inherit", env_off);
	ck_assert_ptr_nonnull(strstr(r.out, "commit: hg 0"));
}
END_TEST

/* ---- range shaping (tests/progs/shape.c) ---- */

/* Every page's access and contents, every return value and errno and the
 * VMA layout inside the test mappings are the same without mmfold, with
 * MMFOLD_MODE=off and under each MMFOLD_SHAPE policy; and the forced
 * policies really shaped (so the comparison is not of two unshaped runs),
 * including calls that failed and fell back to the caller's call. */
START_TEST(shape_same_pages)
{
	static const char *const pol[] = {"off", "trim", "widen", "auto"};
	char *argv[] = {prog("shape"), NULL};
	struct result ref, r;
	run(&ref, 0, NULL, argv);
	ck_assert_msg(ref.status == 0, "shape exited %d without mmfold:\n%s", ref.status, ref.err);
	ck_assert_ptr_nonnull(strstr(ref.out, "eacces widen: r=-1 errno=13"));
	const char *env_off[] = {"MMFOLD_MODE=off", NULL};
	run(&r, 1, env_off, argv);
	ck_assert_str_eq(r.out, ref.out);
	for (int i = 0; i < 4; i++) {
		char v[40];
		snprintf(v, sizeof v, "MMFOLD_SHAPE=%s", pol[i]);
		const char *env[] = {v, "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
		run(&r, 1, env, argv);
		ck_assert_msg(r.status == 0, "%s: exit %d\n%s", v, r.status, r.err);
		ck_assert_msg(!strcmp(r.out, ref.out), "%s: output differs from the run without mmfold:\n%s\n---- expected:\n%s",
			      v, r.out, ref.out);
		long tr = jfield(r.err, "events", "shaped_trimmed");
		long wi = jfield(r.err, "events", "shaped_widened");
		long fb = jfield(r.err, "events", "shape_fallbacks");
		ck_assert_msg(tr >= 0 && wi >= 0 && fb >= 0, "%s: no shaping events in the report:\n%s", v, r.err);
		if (i == 0)
			ck_assert_msg(tr == 0 && wi == 0 && fb == 0, "MMFOLD_SHAPE=off shaped: %ld %ld %ld", tr, wi, fb);
		if (i == 1) {
			ck_assert_msg(tr >= 4 && wi == 0, "trim: trimmed %ld (want >= 4), widened %ld", tr, wi);
			ck_assert_msg(jfield(r.err, "events", "shaped_pieces") > tr, "trim never split a call");
		}
		if (i == 2)
			ck_assert_msg(wi >= 3 && tr == 0, "widen: widened %ld (want >= 3), trimmed %ld", wi, tr);
		if (i == 1 || i == 2)
			ck_assert_msg(fb >= 1, "%s: the EACCES call did not fall back", v);
	}
}
END_TEST

/* One test per differential suite of tests/preload/run.sh. */
static void run_script(const char *name)
{
	char bdir[400], libv[600];
	snprintf(bdir, sizeof bdir, "BUILD=%s/tests", build);
	snprintf(libv, sizeof libv, "MMFOLD_LIB=%s", lib);
	const char *env[] = {bdir, libv, NULL};
	char *argv[] = {(char *)"tests/preload/run.sh", (char *)name, NULL};
	struct result r;
	run(&r, 0, env, argv);
	ck_assert_msg(r.status == 0, "tests/preload/run.sh %s exited %d:\n%s%s", name, r.status, r.out,
		      r.err);
}

START_TEST(script_walk) { run_script("walk"); }
END_TEST
START_TEST(script_walk_shape) { run_script("walk-shape"); }
END_TEST
START_TEST(script_errno) { run_script("errno_matrix"); }
END_TEST
START_TEST(script_barrier) { run_script("barrier"); }
END_TEST
START_TEST(script_ctor) { run_script("ctor"); }
END_TEST
START_TEST(script_sigreentry) { run_script("sigreentry"); }
END_TEST
START_TEST(script_broken_is_caught) { run_script("broken"); }
END_TEST

Suite *preload_suite(void)
{
	Suite *s = suite_create("preload");
	TCase *tc = tcase_create("behaviour");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, counts_by_mode);
	tcase_add_test(tc, unproven_on_foreign_memory);
	tcase_add_test(tc, fork_reports_per_process);
	tcase_add_test(tc, quiet_unless_asked);
	tcase_add_test(tc, bad_configuration);
	tcase_add_test(tc, verify_mode);
	suite_add_tcase(s, tc);
	TCase *f = tcase_create("folio");
	tcase_add_checked_fixture(f, setup, teardown);
	tcase_set_timeout(f, 120);
	tcase_add_test(f, folio_place);
	tcase_add_test(f, folio_hint);
	tcase_add_test(f, folio_mremap);
	tcase_add_test(f, folio_nohuge);
	tcase_add_test(f, folio_inherit);
	suite_add_tcase(s, f);
	TCase *sh = tcase_create("shape");
	tcase_add_checked_fixture(sh, setup, teardown);
	tcase_set_timeout(sh, 120);
	tcase_add_test(sh, shape_same_pages);
	suite_add_tcase(s, sh);
	TCase *d = tcase_create("differential");
	tcase_add_checked_fixture(d, setup, teardown);
	tcase_set_timeout(d, 300);
	tcase_add_test(d, script_walk);
	tcase_add_test(d, script_walk_shape);
	tcase_add_test(d, script_errno);
	tcase_add_test(d, script_barrier);
	tcase_add_test(d, script_ctor);
	tcase_add_test(d, script_sigreentry);
	tcase_add_test(d, script_broken_is_caught);
	suite_add_tcase(s, d);
	return s;
}
