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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "behaviour.h"
#include "suites.h"

static const char *lib, *build;
static char tmpdir[256];

struct result {
	int status; /* exit code, or 128+signal */
	char out[8192], err[8192];
};

/* Runs argv with LD_PRELOAD=lib (unless preload is 0) and extra "K=V"
 * settings on top of a clean MMFOLD_*-free environment. */
static void run(struct result *res, int preload, const char *const *extra, char *const argv[])
{
	char out[300], err[300];
	snprintf(out, sizeof out, "%s/out", tmpdir);
	snprintf(err, sizeof err, "%s/err", tmpdir);
	res->status = bh_wait(bh_spawn(lib, preload, extra, argv, out, err));
	bh_slurp(out, res->out, sizeof res->out);
	bh_slurp(err, res->err, sizeof res->err);
}

static char *prog(const char *name)
{
	static char p[4][400];
	static int i;
	char *s = p[i++ & 3];
	snprintf(s, 400, "%s/progs/%s", build, name);
	return s;
}

static void setup(void)
{
	lib = getenv("MMFOLD_LIB");
	build = getenv("MMFOLD_BUILD");
	ck_assert_msg(lib && build, "MMFOLD_LIB and MMFOLD_BUILD must be set (make check does)");
	ck_assert_msg(access(lib, R_OK) == 0, "no library at %s", lib);
	bh_tmpdir(tmpdir, sizeof tmpdir, "check");
}

static void teardown(void) { bh_rmdir(tmpdir); }

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
		long calls = bh_jfield(r.err, "mprotect", "calls");
		long skipped = bh_jfield(r.err, "mprotect", "skipped");
		long fwd = bh_jfield(r.err, "mprotect", "forwarded");
		ck_assert_int_eq(calls, 1002);
		ck_assert_int_eq(skipped, m == 2 ? 0 : 1000);
		ck_assert_int_eq(fwd, m == 0 ? 2 : 1002);
		/* mlock twice (both forwarded: an mlock faults pages in each
		 * time), mlock2(MLOCK_ONFAULT) twice (the second skipped where
		 * RLIMIT_MEMLOCK is unlimited, else forwarded: question.c's
		 * mlock_permitted; check_dispatch has the skip under a faked
		 * unlimited one) */
		struct rlimit rl;
		ck_assert_int_eq(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
		int ml = m != 2 && rl.rlim_cur == RLIM_INFINITY;
		ck_assert_int_eq(bh_jfield(r.err, "mlock", "calls"), 4);
		ck_assert_int_eq(bh_jfield(r.err, "mlock", "skipped"), ml);
		ck_assert_int_eq(bh_jfield(r.err, "mlock", "forwarded"), m == 0 ? 4 - ml : 4);
		ck_assert_int_eq(bh_jfield(r.err, "munlock", "skipped"), m == 2 ? 0 : 1);
		ck_assert_int_eq(bh_jfield(r.err, "madvise", "skipped"), m == 2 ? 0 : 1);
		ck_assert_int_eq(bh_jfield(r.err, "mprotect", "errors"), 0);
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
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "skipped"), 0);
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "forwarded"), 2);
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "unproven"), 1);
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
	bh_slurp(cmd, list, sizeof list);
	/* two reports: the parent's (3 calls) and the child's (7 calls) */
	const char *second = strstr(list + 1, "{\"mmfold\"");
	ck_assert_ptr_nonnull(second);
	long a = bh_jfield(list, "mprotect", "calls"), b = bh_jfield(second, "mprotect", "calls");
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
	/* 50 mprotects, a munlock, an madvise, and the mlock2(MLOCK_ONFAULT)
	 * where RLIMIT_MEMLOCK is unlimited (counts_by_mode) */
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	ck_assert_int_eq(bh_jfield(r.err, "events", "verify_checks"), 52 + (rl.rlim_cur == RLIM_INFINITY));
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
	bh_slurp("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf);
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

/* The system's THP setting is "madvise" (where mmfold's advice does
 * anything under MMFOLD_THP=auto). */
static int thp_madvise(void)
{
	char buf[128];
	bh_slurp("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf);
	return strstr(buf, "[madvise]") != NULL;
}

/* Which mappings get MADV_HUGEPAGE: under auto a reservation and a commit
 * inside it at once, a read-write mapping only once found densely touched
 * (thp.c), never a sparse one, a MAP_STACK one or one the program marked
 * NOHUGEPAGE; under advise every large one but the last two; under off
 * none.  The counters say the same. */
START_TEST(folio_policy)
{
	struct result r;
	const char *env_auto[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	folio_run(&r, "policy", env_auto);
	ck_assert_msg(strstr(r.out, "content ok: yes"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "sparse: hg 0") && strstr(r.out, "nohuge: hg 0") &&
			      strstr(r.out, "stack: hg 0"),
		      "%s", r.out);
	if (thp_madvise()) {
		ck_assert_msg(strstr(r.out, "dense: hg 1") && strstr(r.out, "reservation: hg 1") &&
				      strstr(r.out, "commit: hg 1"),
			      "%s", r.out);
		/* dense, reservation, commit; watched: dense, sparse (the
		 * NOHUGEPAGE one leaves the watch at its first look) */
		ck_assert_msg(strstr(r.err, "\"thp_advised\":3,") && strstr(r.err, "\"thp_advised_dense\":1,") &&
				      strstr(r.err, "\"thp_watched\":3,"),
			      "%s", r.err);
	} else {
		ck_assert_msg(strstr(r.out, "dense: hg 0") && strstr(r.out, "reservation: hg 0"), "%s", r.out);
	}
	const char *env_advise[] = {"MMFOLD_THP=advise", NULL};
	folio_run(&r, "policy", env_advise);
	ck_assert_msg(strstr(r.out, "nohuge: hg 0") && strstr(r.out, "stack: hg 0"), "%s", r.out);
	if (!thp_never())
		ck_assert_msg(strstr(r.out, "dense: hg 1") && strstr(r.out, "sparse: hg 1") &&
				      strstr(r.out, "reservation: hg 1") && strstr(r.out, "commit: hg 1"),
			      "%s", r.out);
	const char *env_off[] = {"MMFOLD_THP=off", NULL};
	folio_run(&r, "policy", env_off);
	ck_assert_msg(strstr(r.out, "dense: hg 0") && strstr(r.out, "sparse: hg 0") &&
			      strstr(r.out, "reservation: hg 0") && strstr(r.out, "commit: hg 0"),
		      "%s", r.out);
}
END_TEST

/* A reservation committed by MAP_FIXED (densely and sparsely touched) and
 * by mprotect.  With the kernel's max_ptes_none at its default, auto
 * advises the reservation at once and every commit keeps or gets the
 * advice; with max_ptes_none lowered (64, and 0) nothing is advised up
 * front: the MAP_FIXED commits are watched and only the dense one is
 * advised, the mprotect commit stays as the kernel made it.  The lowered
 * value is bound over the sysfs file in a mount namespace of the test
 * program's own (root only; elsewhere that half cannot run). */
START_TEST(folio_commits)
{
	struct result r;
	if (!thp_madvise()) {
		fprintf(stderr, "folio_commits: THP is not in madvise mode here: auto advises nothing, "
				"cannot run\n");
		return;
	}
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	char *argv[] = {prog("folio"), (char *)"commits", NULL, NULL};
	run(&r, 1, env, argv);
	ck_assert_msg(r.status == 0 && strstr(r.out, "content ok: yes"), "%d %s%s", r.status, r.out, r.err);
	if (strstr(r.out, "max_ptes_none: 511\n")) {
		ck_assert_msg(strstr(r.out, "reserved: hg 1") && strstr(r.out, "dense commit: hg 1") &&
				      strstr(r.out, "sparse commit: hg 1") && strstr(r.out, "mprotect commit: hg 1"),
			      "%s", r.out);
		ck_assert_msg(bh_jfield(r.err, "events", "thp_advised") == 3 &&
				      bh_jfield(r.err, "events", "thp_watched") == 0,
			      "%s", r.err);
	} else {
		fprintf(stderr, "folio_commits: max_ptes_none is not 511 here (%s): the default case "
				"cannot run\n", r.out);
	}
	static const char *const lowered[] = {"64", "0"};
	for (int i = 0; i < 2; i++) {
		argv[2] = (char *)lowered[i];
		run(&r, 1, env, argv);
		if (r.status == 77) {
			fprintf(stderr, "folio_commits: %s", r.err);
			return;
		}
		ck_assert_msg(r.status == 0 && strstr(r.out, "content ok: yes"), "%d %s%s", r.status, r.out, r.err);
		ck_assert_msg(strstr(r.out, "reserved: hg 0") && strstr(r.out, "dense commit: hg 1") &&
				      strstr(r.out, "sparse commit: hg 0") && strstr(r.out, "mprotect commit: hg 0"),
			      "max_ptes_none %s:\n%s", lowered[i], r.out);
		ck_assert_msg(bh_jfield(r.err, "events", "thp_advised") == 1 &&
				      bh_jfield(r.err, "events", "thp_advised_dense") == 1 &&
				      bh_jfield(r.err, "events", "thp_watched") == 2,
			      "%s", r.err);
	}
	/* advise: the earlier rule, whatever max_ptes_none says */
	const char *env_adv[] = {"MMFOLD_THP=advise", NULL};
	argv[2] = (char *)"64";
	run(&r, 1, env_adv, argv);
	if (r.status != 77)
		ck_assert_msg(strstr(r.out, "reserved: hg 1") && strstr(r.out, "sparse commit: hg 1") &&
				      strstr(r.out, "mprotect commit: hg 1"),
			      "%s", r.out);
}
END_TEST

/* ---- the batch API ---- */

/* argv run without the library (the API's weak symbols are then absent and
 * every call is made at once) and with it in every mode: same output. */
static void batch_same(char *const argv[])
{
	struct result ref, r;
	run(&ref, 0, NULL, argv);
	ck_assert_msg(ref.status == 0, "reference run of %s %s exited %d: %s", argv[0], argv[1],
		      ref.status, ref.err);
	static const char *const modes[] = {"MMFOLD_MODE=safe", "MMFOLD_MODE=off",
					    "MMFOLD_MODE=observe"};
	for (int m = 0; m < 3; m++) {
		const char *env[] = {modes[m], "MMFOLD_VERIFY=1", NULL};
		run(&r, 1, env, argv);
		char where[600];
		first_difference(r.out, ref.out, where, sizeof where);
		ck_assert_msg(r.status == 0 && !strcmp(r.out, ref.out),
			      "%s %s with %s: exit %d, %s\noutput\n%s\nexpected\n%s\nstderr %s", argv[0],
			      argv[1], modes[m], r.status, where, r.out, ref.out, r.err);
	}
}

/* Random batches of mprotect/madvise over two regions, one with a hole
 * (calls fail, the error must name the first failing call), overlapping
 * ranges with different protections: every page's accessibility and
 * content after each batch as without mmfold. */
START_TEST(batch_diff)
{
	for (int seed = 1; seed <= 12; seed++) {
		char s[16];
		snprintf(s, sizeof s, "%d", seed);
		char *argv[] = {prog("batch"), (char *)"diff", s, (char *)"40", NULL};
		batch_same(argv);
	}
}
END_TEST

START_TEST(batch_threads_fork_vec)
{
	static const char *const what[] = {"threads", "fork", "vec", "count", "count-nopm"};
	for (int i = 0; i < 5; i++) {
		char *argv[] = {prog("batch"), (char *)what[i], NULL};
		batch_same(argv);
	}
}
END_TEST

/* Does this kernel's process_madvise take MADV_DONTNEED from a process for
 * itself?  6.13 and later do; before, only MADV_COLD, MADV_PAGEOUT,
 * MADV_WILLNEED and MADV_COLLAPSE (the arm64 VM runs 6.12). */
static int pmadv_takes_dontneed(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	ck_assert(p != MAP_FAILED && fd >= 0);
	struct iovec v = {p, (size_t)pg};
	long r = syscall(SYS_process_madvise, fd, &v, 1, MADV_DONTNEED, 0);
	close(fd);
	munmap(p, (size_t)pg);
	return r == pg;
}

/* 64 adjacent one-page mprotects become one system call; 64 scattered
 * MADV_DONTNEEDs one process_madvise (where the kernel refuses that
 * advice there: that call, then each range alone). */
START_TEST(batch_counts)
{
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	char *argv[] = {prog("batch"), (char *)"count", NULL};
	struct result r;
	run(&r, 1, env, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "count: 64 zero, 64 kept"));
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "calls"), 64);
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "deferred"), 64);
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "forwarded"), 1);
	ck_assert_int_eq(bh_jfield(r.err, "madvise", "deferred"), 64);
	int pm = pmadv_takes_dontneed();
	ck_assert_int_eq(bh_jfield(r.err, "madvise", "forwarded"), pm ? 1 : 65);
	ck_assert_int_eq(bh_jfield(r.err, "events", "batch_process_madvise"), 1);
	ck_assert_int_eq(bh_jfield(r.err, "events", "batch_madvise_fallbacks"), pm ? 0 : 64);
	/* process_madvise refused (a seccomp filter, as on kernels before
	 * 5.10): asked once, then every range alone, all applied */
	char *nopm[] = {prog("batch"), (char *)"count-nopm", NULL};
	run(&r, 1, env, nopm);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "count: 64 zero, 64 kept"));
	ck_assert_int_eq(bh_jfield(r.err, "madvise", "deferred"), 64);
	ck_assert_int_eq(bh_jfield(r.err, "madvise", "forwarded"), 65);
	ck_assert_int_eq(bh_jfield(r.err, "madvise", "errors"), 1);
	ck_assert_int_eq(bh_jfield(r.err, "events", "batch_process_madvise"), 1);
	ck_assert_int_eq(bh_jfield(r.err, "events", "batch_madvise_fallbacks"), 64);
	/* a write barrier's mprotect inside a batch is made at once when
	 * mmfold chains SIGSEGV: one fault, as without mmfold */
	char *wb[] = {prog("batch"), (char *)"barrier", NULL};
	static const char *const chained[] = {"MMFOLD_SIGCHAIN=on", "MMFOLD_MODE=lazy"};
	for (int i = 0; i < 2; i++) {
		const char *e2[] = {chained[i], NULL};
		run(&r, 1, e2, wb);
		ck_assert_int_eq(r.status, 0);
		ck_assert_str_eq(r.out, "barrier: 1 fault(s)\n");
	}
	/* mode off: the API is there, every call is made */
	const char *off[] = {"MMFOLD_MODE=off", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	run(&r, 1, off, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "forwarded"), 64);
	ck_assert_int_eq(bh_jfield(r.err, "madvise", "forwarded"), 64);
}
END_TEST

/* ---- lazy mode ---- */

/* Random calls with probes through the program's own SIGSEGV handler, the
 * kernel reading and writing the regions (a pipe, a socket pair, a file:
 * read, readv, recv, recvfrom, recvmsg, pread and their writing twins),
 * fork and a second thread:
 * the same output without mmfold and in lazy mode; and deferral really
 * happened (the test is not passing on a mode that defers nothing). */
START_TEST(lazy_diff)
{
	long deferred = 0, faults = 0, cancelled = 0, buffers = 0;
	for (int seed = 1; seed <= 16; seed++) {
		char sd[16];
		snprintf(sd, sizeof sd, "%d", seed);
		char *argv[] = {prog("lazy"), (char *)"diff", sd, (char *)"60", NULL};
		struct result ref, r;
		run(&ref, 0, NULL, argv);
		ck_assert_int_eq(ref.status, 0);
		/* odd seeds defer every promotion they can, however often
		 * they are touched */
		const char *env[] = {"MMFOLD_MODE=lazy", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json",
				     seed & 1 ? "MMFOLD_LAZY_TOUCHED=100" : NULL, NULL};
		run(&r, 1, env, argv);
		ck_assert_msg(r.status == 0 && !strcmp(r.out, ref.out),
			      "lazy diff seed %d: exit %d, output differs:\n%s\nexpected\n%s", seed,
			      r.status, r.out, ref.out);
		deferred += bh_jfield(r.err, "mprotect", "deferred");
		faults += bh_jfield(r.err, "events", "lazy_faults");
		cancelled += bh_jfield(r.err, "events", "lazy_cancelled");
		buffers += bh_jfield(r.err, "events", "lazy_buffers");
	}
	ck_assert_int_gt(deferred, 300);
	ck_assert_int_gt(faults, 100);
	ck_assert_int_gt(cancelled, 5);
	ck_assert_int_gt(buffers, 5);
}
END_TEST

/* The seeds' loop: RO then RW 40 times with no access between is one
 * mprotect (the first RO) plus the promotions the final writes fault in;
 * mlock/munlock 100 times is one of each. */
START_TEST(lazy_counts)
{
	const char *env[] = {"MMFOLD_MODE=lazy", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	char *loop[] = {prog("lazy"), (char *)"loop", (char *)"16", (char *)"40", NULL};
	struct result r;
	run(&r, 1, env, loop);
	ck_assert_int_eq(r.status, 0);
	char want_out[64]; /* one per page of the 16 MiB region */
	snprintf(want_out, sizeof want_out, "loop ok %ld\n", (16L << 20) / sysconf(_SC_PAGESIZE));
	ck_assert_str_eq(r.out, want_out);
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "calls"), 80);
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "deferred"), 40);
	ck_assert_int_eq(bh_jfield(r.err, "events", "lazy_cancelled"), 39);
	ck_assert_int_le(bh_jfield(r.err, "mprotect", "forwarded"), 1 + 4);
	char *ml[] = {prog("lazy"), (char *)"mlockloop", (char *)"4", (char *)"100", NULL};
	run(&r, 1, env, ml);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "mlockloop ok\n");
	ck_assert_int_eq(bh_jfield(r.err, "mlock", "forwarded"), 1);
	ck_assert_int_eq(bh_jfield(r.err, "munlock", "deferred"), 100);
	ck_assert_int_eq(bh_jfield(r.err, "munlock", "forwarded"), 1); /* at exit */
	/* fork-only advice waits for the fork: 100 DONTFORK/DOFORK pairs make
	 * no call, one more DONTFORK one call, made before the fork (the
	 * child does not get the range) */
	char *fa[] = {prog("lazy"), (char *)"forkadv", (char *)"100", (char *)"1", NULL};
	run(&r, 1, env, fa);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "child sees n\nforkadv ok\n");
	ck_assert_int_eq(bh_jfield(r.err, "madvise", "calls"), 201);
	ck_assert_int_eq(bh_jfield(r.err, "madvise", "forwarded"), 1);
	char *fb[] = {prog("lazy"), (char *)"forkadv", (char *)"100", (char *)"0", NULL};
	run(&r, 1, env, fb);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "child sees w\nforkadv ok\n");
	ck_assert_int_eq(bh_jfield(r.err, "madvise", "forwarded"), 0);
	/* the same loops in safe mode make every call */
	const char *safe[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	run(&r, 1, safe, loop);
	ck_assert_int_eq(r.status, 0);
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "forwarded"), 80);
}
END_TEST

/* A promotion the kernel refuses only when it is finally made (injected:
 * a seccomp filter fails every mprotect(RW) with ENOMEM but one at an
 * address of its own, made first): safe mode gives
 * the kernel's answers; lazy mode has told the program 0, so the write
 * faults (the kernel's verdict), the refusal is counted and logged, and
 * the next promotion is made at once and gets the kernel's ENOMEM. */
START_TEST(lazy_refused)
{
	char *argv[] = {prog("lazy"), (char *)"refuse", NULL};
	struct result r;
	run(&r, 0, NULL, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "first -1 ENOMEM probe r\nsecond -1 ENOMEM probe r\n");
	const char *safe[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	run(&r, 1, safe, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "first -1 ENOMEM probe r\nsecond -1 ENOMEM probe r\n");
	const char *env[] = {"MMFOLD_MODE=lazy", "MMFOLD_LOG=1", "MMFOLD_STATS=1",
			     "MMFOLD_STATS_FORMAT=json", NULL};
	run(&r, 1, env, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "first 0 0 probe r\nsecond -1 ENOMEM probe r\n");
	ck_assert_int_ge(bh_jfield(r.err, "events", "lazy_refused"), 1);
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "deferred"), 1);
	ck_assert_msg(strstr(r.err, "failed when made (errno 12); nothing more is deferred") != NULL,
		      "no log line for the refused promotion:\n%s", r.err);
	const char *quiet[] = {"MMFOLD_MODE=lazy", NULL};
	run(&r, 1, quiet, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.err, "");
}
END_TEST

/* Lazy mode's deferred calls go through the next definition like every
 * forwarded call: a second preloaded library that counts mprotect and
 * madvise (tests/progs/nextcount.c) sees the promotion when the write
 * makes it and the fork advice at the fork (before, mmfold made them with
 * raw system calls and it saw neither: "1 1 1 madvise 0 0"). */
START_TEST(lazy_next_symbol)
{
	char *argv[] = {prog("nextsym"), NULL};
	char ld[900];
	snprintf(ld, sizeof ld, "LD_PRELOAD=%s:%s", lib, prog("libnextcount.so"));
	struct result r;
	const char *safe[] = {ld, NULL};
	run(&r, 0, safe, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "mprotect 1 2 2 madvise 1 1\n");
	const char *lazy[] = {ld, "MMFOLD_MODE=lazy", NULL};
	run(&r, 0, lazy, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "mprotect 1 1 2 madvise 0 1\n");
}
END_TEST

/* A write barrier (the program's handler unprotects the written page) sees
 * exactly the pages written, its promotions are made at once, and other
 * promotions wait meanwhile. */
START_TEST(lazy_barrier)
{
	char *argv[] = {prog("lazy"), (char *)"barrier", NULL};
	struct result ref, r;
	run(&ref, 0, NULL, argv);
	ck_assert_int_eq(ref.status, 0);
	const char *env[] = {"MMFOLD_MODE=lazy", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	run(&r, 1, env, argv);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, ref.out);
	ck_assert_ptr_null(strstr(r.out, "!")); /* no page faulted twice */
	/* 20 RW promotions of the whole area wait; the handler's 256 do not */
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "deferred"), 21);
	ck_assert_int_eq(bh_jfield(r.err, "events", "signals_chained"), 256);
}
END_TEST

/* libc's own reads and writes into memory whose promotion waits (the
 * program's malloc commits every block with a deferred mprotect, as
 * Chromium's PartitionAlloc does): fgets, fscanf, fread, getline, getc,
 * fwrite and localtime_r give what they give without mmfold.  Without the
 * stdio wrappers every one of them failed with EFAULT inside libc
 * (localtime_r silently fell back to UTC). */
START_TEST(lazy_libc)
{
	char *argv[] = {prog("lazyio"), tmpdir, NULL};
	struct result ref, r;
	run(&ref, 0, NULL, argv);
	ck_assert_int_eq(ref.status, 0);
	ck_assert_ptr_nonnull(strstr(ref.out, "fgets: 20000 lines"));
	const char *env[] = {"MMFOLD_MODE=lazy", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	run(&r, 1, env, argv);
	ck_assert_msg(r.status == 0 && !strcmp(r.out, ref.out),
		      "lazyio: exit %d, output differs:\n%s\nexpected\n%s", r.status, r.out, ref.out);
	/* the promotions waited, and the fresh FILE buffers of fgets, fscanf,
	 * getline and getc were made after libc's read failed */
	ck_assert_int_gt(bh_jfield(r.err, "mprotect", "deferred"), 20);
	ck_assert_int_ge(bh_jfield(r.err, "events", "lazy_io_retried"), 4);
	ck_assert_int_gt(bh_jfield(r.err, "events", "lazy_buffers"), 0);
}
END_TEST

/* A thread that blocks every signal (Chromium, around fork() and thread
 * creation) touches memory made readable and writable before, during and
 * (in a thread that inherited the mask) after the block: the kernel cannot
 * hand those faults to mmfold, so nothing may wait then.  Without the
 * sigmask wrappers the first touch killed the process (SIGSEGV). */
START_TEST(lazy_masked)
{
	char *argv[] = {prog("lazymask"), NULL};
	struct result ref, r;
	run(&ref, 0, NULL, argv);
	ck_assert_int_eq(ref.status, 0);
	const char *env[] = {"MMFOLD_MODE=lazy", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	run(&r, 1, env, argv);
	ck_assert_msg(r.status == 0 && !strcmp(r.out, ref.out), "lazymask: exit %d, output %s",
		      r.status, r.out);
	/* the promotions before the block and after the last unblock (and
	 * the end of the thread that inherited the mask) waited */
	ck_assert_int_eq(bh_jfield(r.err, "mprotect", "deferred"), 2);
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
		long tr = bh_jfield(r.err, "events", "shaped_trimmed");
		long wi = bh_jfield(r.err, "events", "shaped_widened");
		long fb = bh_jfield(r.err, "events", "shape_fallbacks");
		ck_assert_msg(tr >= 0 && wi >= 0 && fb >= 0, "%s: no shaping events in the report:\n%s", v, r.err);
		if (i == 0)
			ck_assert_msg(tr == 0 && wi == 0 && fb == 0, "MMFOLD_SHAPE=off shaped: %ld %ld %ld", tr, wi, fb);
		if (i == 1) {
			ck_assert_msg(tr >= 4 && wi == 0, "trim: trimmed %ld (want >= 4), widened %ld", tr, wi);
			ck_assert_msg(bh_jfield(r.err, "events", "shaped_pieces") > tr, "trim never split a call");
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
/* the walk under the forced-bypass build (make's libmmfold-bypass.so) */
START_TEST(script_walk_bypass) { run_script("walk-bypass"); }
END_TEST
/* mlockall and a failed move past the map (pastmap.c) */
START_TEST(script_pastmap) { run_script("pastmap"); }
END_TEST
START_TEST(script_errno) { run_script("errno_matrix"); }
END_TEST
/* MMFOLD_STATS=1 changes no output, and the report says what safe mode did */
START_TEST(script_walk_stats) { run_script("walk-stats"); }
END_TEST
/* calls whose effect the records do not describe (contract.c): a repeated
 * mlock, READ_IMPLIES_EXEC in a thread and a vfork child, MAP_DROPPABLE,
 * errno after an aligned mmap or mremap, a growsdown area's guard gap */
START_TEST(script_contract) { run_script("contract"); }
END_TEST
/* contract cases that need a process of their own (thpjoin, wxdontunmap,
 * lazyorder, lockdrop) */
START_TEST(script_contract_alone) { run_script("contract-alone"); }
END_TEST
/* the report's counts for an mremap mmfold made again (contract thpjoin) */
START_TEST(script_contract_stats) { run_script("contract-stats"); }
END_TEST
/* a set-user-ID program: the caller's MMFOLD_* variables are not honoured */
START_TEST(script_setuid) { run_script("setuid"); }
END_TEST
START_TEST(script_barrier) { run_script("barrier"); }
END_TEST
/* MMFOLD_BARRIER=uffd: what a program sees, deaths, /proc, seccomp; and
 * the barrier test 50 times in the mode (run.sh says why when the kernel
 * does not let it run). */
START_TEST(script_uffd) { run_script("uffd"); }
END_TEST
START_TEST(script_barrier_uffd) { run_script("barrier-uffd"); }
END_TEST
START_TEST(script_ctor) { run_script("ctor"); }
END_TEST
START_TEST(script_sigreentry) { run_script("sigreentry"); }
END_TEST
/* a handler that siglongjmps out of a forwarded mprotect (jumpout.c) */
START_TEST(script_jumpout) { run_script("jumpout"); }
/* a page reused at one address while another thread's failing mprotect
 * makes and forgets what waits there (lazyreuse.c) */
START_TEST(script_lazyreuse) { run_script("lazyreuse"); }
END_TEST
/* runs of changes on one page (the forward path's flipping records),
 * threads on the same pages, each call's page probed (flip.c) */
START_TEST(script_flip) { run_script("flip"); }
END_TEST
/* Children made by fork(), clone(), _Fork() and syscall() while threads
 * change protections: none hangs, each sees its own protections. */
START_TEST(script_clonefork) { run_script("clonefork"); }
END_TEST
/* fork() while a thread holds a library's lock (taken by the library's
 * atfork prepare handler) and calls mprotect under it: no deadlock. */
START_TEST(script_forklock) { run_script("forklock"); }
END_TEST
START_TEST(script_broken_is_caught) { run_script("broken"); }
END_TEST
/* Threads racing lazy mode's deferred promotions: no spurious or missed
 * fault, the same output as without mmfold (a bounded run; make soak). */
START_TEST(script_lazystress) { run_script("lazystress"); }
END_TEST
/* A collector that stops the world with signals and calls mprotect while
 * it is stopped: no deadlock in any mode. */
START_TEST(script_stopworld) { run_script("stopworld"); }
END_TEST
/* Threads racing on the same pages while calls bypass the map (the writer
 * lock not waited for): no page allows other than it was set to, the same
 * output as without mmfold. */
START_TEST(script_bypass) { run_script("bypass"); }
END_TEST

/* ---- call-site profile (MMFOLD_PROFILE) ---------------------------------- */

/* A JSON validator (RFC 8259 grammar, no semantics): returns the end of
 * the value at p, or NULL. */
static const char *jws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static const char *jvalue(const char *p, int depth);

static const char *jstring(const char *p)
{
	if (*p++ != '"')
		return NULL;
	while (*p != '"') {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
						return NULL;
				p += 4;
			} else if (!*p || !strchr("\"\\/bfnrt", *p)) {
				return NULL;
			}
		}
		p++;
	}
	return p + 1;
}

static const char *jnumber(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	if (*p == '.') {
		if (!(*++p >= '0' && *p <= '9'))
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return NULL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return p;
}

static const char *jvalue(const char *p, int depth)
{
	if (depth > 64)
		return NULL;
	p = jws(p);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		p = jws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (close == '}') {
				if (!(p = jstring(jws(p))) || *(p = jws(p)) != ':')
					return NULL;
				p++;
			}
			if (!(p = jvalue(p, depth + 1)))
				return NULL;
			p = jws(p);
			if (*p == close)
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	}
	if (*p == '"')
		return jstring(p);
	if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
		return p + 4;
	if (!strncmp(p, "false", 5))
		return p + 5;
	return jnumber(p);
}

static int json_valid(const char *s)
{
	const char *e = jvalue(s, 0);
	return e && *jws(e) == 0;
}

static char pbuf[1 << 18];

/* Runs tests/progs/profile under the library with the settings given and
 * the report in a file; returns the report. */
static const char *profile_run(const char *const *settings)
{
	char file[400], fset[450];
	snprintf(file, sizeof file, "%s/profile.out", tmpdir);
	unlink(file);
	snprintf(fset, sizeof fset, "MMFOLD_STATS_FILE=%s", file);
	const char *env[12];
	int n = 0;
	env[n++] = "MMFOLD_STATS=1";
	env[n++] = fset;
	for (; *settings && n < 11; settings++)
		env[n++] = *settings;
	env[n] = NULL;
	char *argv[] = {prog("profile"), NULL};
	static struct result r;
	run(&r, 1, env, argv);
	ck_assert_msg(r.status == 0, "profile exited %d: %s%s", r.status, r.out, r.err);
	ck_assert_str_eq(r.out, "profile ok\n");
	bh_slurp(file, pbuf, sizeof pbuf);
	ck_assert_msg(strlen(pbuf) < sizeof pbuf - 1, "report too long for the test's buffer");
	return pbuf;
}

/* A number field of the flat JSON object starting at o, or -1. */
static long long ofield(const char *o, const char *field)
{
	char key[64];
	const char *end = strchr(o, '}');
	snprintf(key, sizeof key, "\"%s\":", field);
	const char *f = strstr(o, key);
	if (!f || f > end)
		return -1;
	f += strlen(key);
	if (*f == '"')
		f++;
	return strtoll(f, NULL, 0);
}

/* The list ("by_count" or "by_time") of kind in the profile: [start, end). */
static int plist(const char *json, const char *kind, const char *list, const char **s,
		 const char **e)
{
	char key[80];
	const char *p = strstr(json, "\"profile\":{");
	if (!p)
		return 0;
	snprintf(key, sizeof key, "\"%s\":{\"by_count\":[", kind);
	if (!(p = strstr(p, key)))
		return 0;
	if (!strcmp(list, "by_time") && !(p = strstr(p, "],\"by_time\":[")))
		return 0;
	*s = strchr(p, '[') + 1;
	*e = strchr(*s, ']');
	return *e != NULL;
}

/* The one site of function fn in a list (the test fails if it is not
 * there exactly once). */
static const char *psite(const char *json, const char *kind, const char *list, const char *fn)
{
	const char *s, *e, *found = NULL;
	char key[80];
	ck_assert_msg(plist(json, kind, list, &s, &e), "no %s list for %s", list, kind);
	snprintf(key, sizeof key, "{\"function\":\"%s\",", fn);
	int n = 0;
	for (const char *p = s; (p = strstr(p, key)) && p < e; p++, n++)
		found = p;
	ck_assert_msg(n == 1, "%s %s: %d sites of %s", kind, list, n, fn);
	return found;
}

/* Every site of tests/progs/profile with its exact counts, in both lists;
 * the lists are sorted; the JSON is valid; the text report says the
 * same. */
START_TEST(profile_sites)
{
	static const struct {
		const char *fn, *kind;
		long long calls, fwd, skipped, pages, insig; /* pages: bytes / page size */
	} want[] = {
		{"site_alpha", "mprotect", 1000, 501, 499, 1000, 0},
		{"site_gamma", "mprotect", 77, 77, 0, 77 * 2, 0},
		{"site_handler", "mprotect", 64, 64, 0, 64, 64},
		{"site_beta", "madvise", 300, 151, 149, 300 * 16, 0},
	};
	const long long pg = sysconf(_SC_PAGESIZE);
	const char *js[] = {"MMFOLD_PROFILE=10", "MMFOLD_STATS_FORMAT=json", NULL};
	static char json[sizeof pbuf];
	strcpy(json, profile_run(js));
	ck_assert_msg(json_valid(json), "not valid JSON: %s", json);
	const char *prof = strstr(json, "\"profile\":{\"top\":10,\"depth\":16,\"sites\":");
	ck_assert_msg(prof, "no profile header: %s", json);
	long long sites = ofield(prof + 11, "sites"), lost = ofield(prof + 11, "lost");
	ck_assert_int_ge(sites, 4);
	for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++)
		for (int l = 0; l < 2; l++) {
			const char *o = psite(json, want[i].kind, l ? "by_time" : "by_count", want[i].fn);
			ck_assert_int_eq(ofield(o, "calls"), want[i].calls);
			ck_assert_int_eq(ofield(o, "forwarded"), want[i].fwd);
			ck_assert_int_eq(ofield(o, "skipped"), want[i].skipped);
			ck_assert_int_eq(ofield(o, "bytes"), want[i].pages * pg);
			ck_assert_int_eq(ofield(o, "in_signal"), want[i].insig);
			ck_assert_int_gt(ofield(o, "kernel_ns"), 0);
			ck_assert_int_gt(ofield(o, "function_offset"), 0);
			ck_assert_int_gt(ofield(o, "library_offset"), ofield(o, "function_offset"));
			ck_assert_msg(strstr(o, "\"library\":\"") && strstr(o, "progs/profile\","),
				      "library of %s", want[i].fn);
		}
	/* sorted, descending */
	static const char *const kinds[] = {"mprotect", "madvise"};
	for (int k = 0; k < 2; k++)
		for (int l = 0; l < 2; l++) {
			const char *s, *e, *field = l ? "kernel_ns" : "calls";
			ck_assert(plist(json, kinds[k], l ? "by_time" : "by_count", &s, &e));
			long long prev = -1;
			for (const char *p = s; (p = strstr(p, "{\"function\"")) && p < e; p++) {
				long long v = ofield(p, field);
				ck_assert_msg(prev < 0 || v <= prev, "%s not sorted by %s", kinds[k], field);
				prev = v;
			}
		}

	/* The text report: the same sites and counts. */
	const char *tx[] = {"MMFOLD_PROFILE=10", NULL};
	const char *text = profile_run(tx);
	char head[120];
	snprintf(head, sizeof head, "call sites (MMFOLD_PROFILE=10, depth 16, %lld sites, %lld lost)\n",
		 sites, lost);
	ck_assert_msg(strstr(text, head), "no '%s' in: %s", head, text);
	ck_assert_msg(strstr(text, "mprotect by calls:\n       calls  forwarded    skipped          "
				   "bytes  kernel ms  site\n"), "%s", text);
	ck_assert(strstr(text, "mprotect by kernel time:\n"));
	ck_assert(strstr(text, "madvise by calls:\n"));
	for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++) {
		char key[64];
		snprintf(key, sizeof key, "  %s+0x", want[i].fn);
		const char *p = strstr(text, key);
		ck_assert_msg(p, "no %s in: %s", key, text);
		const char *line = p;
		while (line > text && line[-1] != '\n')
			line--;
		long long c, f, sk, b;
		ck_assert_int_eq(sscanf(line, "%lld %lld %lld %lld", &c, &f, &sk, &b), 4);
		ck_assert_int_eq(c, want[i].calls);
		ck_assert_int_eq(f, want[i].fwd);
		ck_assert_int_eq(sk, want[i].skipped);
		ck_assert_int_eq(b, want[i].pages * pg);
	}
}
END_TEST

/* Every counted call is in exactly one site or lost: with room for every
 * site, the sites' calls plus the lost ones are the kinds' calls. */
START_TEST(profile_complete)
{
	const char *js[] = {"MMFOLD_PROFILE=1000", "MMFOLD_STATS_FORMAT=json", NULL};
	const char *json = profile_run(js);
	ck_assert(json_valid(json));
	const char *prof = strstr(json, "\"profile\":{");
	ck_assert(prof);
	long long total = 0, attributed = 0;
	/* every kind the report names (the library's list, src/stats.h) */
	const char *kp = strstr(json, "\"kinds\":{");
	ck_assert(kp);
	int nkinds = 0;
	for (kp += 9; *kp == '"'; nkinds++) {
		const char *q = strchr(kp + 1, '"');
		char kind[32];
		ck_assert(q && (size_t)(q - kp - 1) < sizeof kind);
		memcpy(kind, kp + 1, (size_t)(q - kp - 1));
		kind[q - kp - 1] = 0;
		kp = strchr(q, '}'); /* a kind's counters hold no object */
		ck_assert(kp);
		kp += kp[1] == ',' ? 2 : 1;
		long c = bh_jfield(json, kind, "calls");
		ck_assert_int_ge(c, 0);
		total += c;
		const char *s, *e;
		if (!plist(json, kind, "by_count", &s, &e))
			continue;
		for (const char *p = s; (p = strstr(p, "{\"function\"")) && p < e; p++)
			attributed += ofield(p, "calls");
	}
	ck_assert_int_ge(nkinds, 10);
	long long lost = ofield(prof + 11, "lost");
	ck_assert_int_ge(lost, 0);
	ck_assert_int_eq(attributed + lost, total);
	ck_assert_int_ge(attributed, 1000 + 77 + 64 + 300);
}
END_TEST

/* Off by default: no profile section, nothing changes in the report. */
START_TEST(profile_off)
{
	const char *js[] = {"MMFOLD_STATS_FORMAT=json", NULL};
	const char *json = profile_run(js);
	ck_assert(json_valid(json));
	ck_assert_ptr_null(strstr(json, "\"profile\""));
	const char *tx[] = {"MMFOLD_PROFILE=0", NULL};
	ck_assert_ptr_null(strstr(profile_run(tx), "call sites"));
}
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
	tcase_add_test(f, folio_policy);
	tcase_add_test(f, folio_commits);
	suite_add_tcase(s, f);
	TCase *b = tcase_create("batch");
	tcase_add_checked_fixture(b, setup, teardown);
	tcase_set_timeout(b, 120);
	tcase_add_test(b, batch_diff);
	tcase_add_test(b, batch_threads_fork_vec);
	tcase_add_test(b, batch_counts);
	suite_add_tcase(s, b);
	TCase *z = tcase_create("lazy");
	tcase_add_checked_fixture(z, setup, teardown);
	tcase_set_timeout(z, 120);
	tcase_add_test(z, lazy_diff);
	tcase_add_test(z, lazy_counts);
	tcase_add_test(z, lazy_barrier);
	tcase_add_test(z, lazy_libc);
	tcase_add_test(z, lazy_masked);
	tcase_add_test(z, lazy_refused);
	tcase_add_test(z, lazy_next_symbol);
	suite_add_tcase(s, z);
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
	tcase_add_test(d, script_walk_bypass);
	tcase_add_test(d, script_pastmap);
	tcase_add_test(d, script_errno);
	tcase_add_test(d, script_walk_stats);
	tcase_add_test(d, script_contract);
	tcase_add_test(d, script_contract_alone);
	tcase_add_test(d, script_contract_stats);
	tcase_add_test(d, script_setuid);
	tcase_add_test(d, script_barrier);
	tcase_add_test(d, script_uffd);
	tcase_add_test(d, script_barrier_uffd);
	tcase_add_test(d, script_ctor);
	tcase_add_test(d, script_sigreentry);
	tcase_add_test(d, script_jumpout);
	tcase_add_test(d, script_lazyreuse);
	tcase_add_test(d, script_flip);
	tcase_add_test(d, script_clonefork);
	tcase_add_test(d, script_forklock);
	tcase_add_test(d, script_broken_is_caught);
	tcase_add_test(d, script_lazystress);
	tcase_add_test(d, script_stopworld);
	tcase_add_test(d, script_bypass);
	suite_add_tcase(s, d);
	TCase *p = tcase_create("profile");
	tcase_add_checked_fixture(p, setup, teardown);
	tcase_set_timeout(p, 120);
	tcase_add_test(p, profile_sites);
	tcase_add_test(p, profile_complete);
	tcase_add_test(p, profile_off);
	suite_add_tcase(s, p);
	return s;
}
