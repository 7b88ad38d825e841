/* W^X flips under the preload (src/wx.c): tests/progs/wxflip flips four
 * adjacent 64 KiB code areas RW<->RX and runs code in them.
 *   keep:  no mapping is ever writable and executable (a sampler reads
 *          /proc/PID/maps while it flips), the areas end as four VMAs where
 *          the kernel alone makes one, and everything the program can probe
 *          (SIGSEGV on read/write/execute, contents) is as with
 *          MMFOLD_MODE=off; the program's own readahead advice wins.
 *   relax: the areas are rwx, exactly 21 mprotect calls reach the kernel,
 *          the computed output is the same; where the kernel refuses RWX
 *          (a seccomp filter standing in for SELinux execmem) every flip
 *          is forwarded and nothing else changes; mremap, munmap and other
 *          mprotects end a relaxation exactly.
 *   alternating areas (all RW, then all RX) are kept apart as well.
 * tests/progs/yjitflip makes one page at a time RW inside a code block and
 * then the whole block RX (Ruby's YJIT):
 *   keep:  never rwx, both blocks recognised, every flip counted, windows
 *          in VMAs of their own, probes as with MMFOLD_MODE=off;
 *   relax: few calls reach the kernel, and every call that ends the
 *          relaxation leaves what MMFOLD_MODE=off leaves. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "behaviour.h"
#include "suites.h"

#define AREAS "4"

static const char *lib, *build;
static const char *prog = "wxflip"; /* the program run() runs */
static char tmpdir[256];

struct res {
	int status;
	char out[16384], err[16384];
	/* sampler */
	int samples;      /* reads of /proc/PID/maps with the areas in them */
	int rwx_any;      /* samples with an rwx line anywhere */
	int rwx_areas;    /* samples with an rwx line over the areas */
	int saw_rx, saw_rw; /* samples with r-x / rw- over the areas */
};

/* One sample of /proc/pid/maps over [lo,hi). */
static void sample(pid_t pid, unsigned long lo, unsigned long hi, struct res *r)
{
	static char buf[1 << 16];
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	bh_slurp(path, buf, sizeof buf);
	int in = 0, rwx = 0, rwx_in = 0, rx = 0, rw = 0;
	for (char *l = buf; l && *l;) {
		char *nl = strchr(l, '\n');
		unsigned long s, e;
		char perms[8];
		if (sscanf(l, "%lx-%lx %7s", &s, &e, perms) == 3) {
			int over = lo && s < hi && e > lo;
			if (!strncmp(perms, "rwx", 3)) {
				rwx = 1;
				rwx_in |= over;
			}
			if (over) {
				in = 1;
				rx |= !strncmp(perms, "r-x", 3);
				rw |= !strncmp(perms, "rw-", 3);
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	r->rwx_any += rwx;
	if (in) {
		r->samples++;
		r->rwx_areas += rwx_in;
		r->saw_rx += rx;
		r->saw_rw += rw;
	}
}

/* Runs wxflip with args under the preload (unless preload is 0) with extra
 * "K=V" settings on a clean environment; samples its maps while it runs. */
static void run(struct res *r, int preload, const char *const *extra, const char *const *args)
{
	char out[300], err[300], basefile[300];
	snprintf(out, sizeof out, "%s/out", tmpdir);
	snprintf(err, sizeof err, "%s/err", tmpdir);
	snprintf(basefile, sizeof basefile, "%s/base", tmpdir);
	unlink(basefile);
	memset(r, 0, sizeof *r);
	char bf[400], progpath[400];
	const char *env[64];
	char *argv[16];
	int n = 0, a = 0;
	snprintf(bf, sizeof bf, "WXFLIP_BASE_FILE=%s", basefile);
	env[n++] = bf;
	for (; extra && *extra && n < 62; extra++)
		env[n++] = *extra;
	env[n] = NULL;
	snprintf(progpath, sizeof progpath, "%s/progs/%s", build, prog);
	argv[a++] = progpath;
	for (; args && *args && a < 15; args++)
		argv[a++] = (char *)*args;
	argv[a] = NULL;
	pid_t pid = bh_spawn(lib, preload, env, argv, out, err);
	unsigned long lo = 0, hi = 0;
	int st;
	for (;;) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		if (!lo) {
			char b[100];
			bh_slurp(basefile, b, sizeof b);
			if (sscanf(b, "%lx %lx", &lo, &hi) != 2)
				lo = hi = 0;
		}
		sample(pid, lo, hi, r);
	}
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	bh_slurp(out, r->out, sizeof r->out);
	bh_slurp(err, r->err, sizeof r->err);
}

/* out without the lines that start with prefix (the "vma" lines). */
static void without(const char *out, const char *prefix, char *dst, size_t n)
{
	size_t len = 0, pl = strlen(prefix);
	dst[0] = 0;
	for (const char *l = out; *l;) {
		const char *nl = strchr(l, '\n');
		size_t ll = nl ? (size_t)(nl - l + 1) : strlen(l);
		if (strncmp(l, prefix, pl) && len + ll < n) {
			memcpy(dst + len, l, ll);
			len += ll;
			dst[len] = 0;
		}
		l += ll;
	}
}

/* The first line of out that starts with prefix, or "". */
static const char *line(const char *out, const char *prefix, char *dst, size_t n)
{
	dst[0] = 0;
	for (const char *l = out; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t ll = nl ? (size_t)(nl - l) : strlen(l);
		if (!strncmp(l, prefix, strlen(prefix))) {
			snprintf(dst, n, "%.*s", (int)ll, l);
			break;
		}
		l = nl ? nl + 1 : NULL;
	}
	return dst;
}

static struct res a, b; /* too big for the stack of a test */

/* p and q are the same but for their "vma" lines (what mmfold may change). */
static void same_view(const char *p, const char *q)
{
	static char x[65536], y[65536];
	without(p, "vma", x, sizeof x);
	without(q, "vma", y, sizeof y);
	char where[600];
	first_difference(y, x, where, sizeof where); /* got: with mmfold */
	ck_assert_msg(!strcmp(x, y), "the outputs differ at %s\nwith MMFOLD_MODE=off:\n%.3000s",
		      where, x);
}

/* Runs the program with args under MMFOLD_MODE=off into a and with env
 * into b; both must succeed and show the same but for their "vma" lines. */
static void off_and(const char *const *env, const char *const *args)
{
	const char *off[] = {"MMFOLD_MODE=off", NULL};
	run(&a, 1, off, args);
	run(&b, 1, env, args);
	ck_assert_msg(a.status == 0 && b.status == 0, "status %d/%d: %s", a.status, b.status, b.err);
	same_view(a.out, b.out);
}

static void setup(void)
{
	lib = getenv("MMFOLD_LIB");
	build = getenv("MMFOLD_BUILD");
	ck_assert_msg(lib && build, "MMFOLD_LIB and MMFOLD_BUILD must be set (make check does)");
	bh_tmpdir(tmpdir, sizeof tmpdir, "check-wx");
	prog = "wxflip";
}

static void teardown(void) { bh_rmdir(tmpdir); }


/* Keep: sampled from another process while the areas flip, no mapping is
 * ever rwx; the sampler saw the areas both r-x and rw- (it sampled during
 * the flips).  Every area was kept apart. */
START_TEST(keep_never_rwx)
{
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	const char *args[] = {AREAS, "4000", "hold=100", NULL};
	run(&a, 1, env, args);
	ck_assert_msg(a.status == 0, "status %d, stderr: %s", a.status, a.err);
	ck_assert_msg(a.samples >= 5, "only %d samples of the areas", a.samples);
	ck_assert_msg(a.saw_rx && a.saw_rw, "samples r-x %d rw- %d: not sampled during flips",
		      a.saw_rx, a.saw_rw);
	ck_assert_msg(a.rwx_any == 0, "%d of %d samples had an rwx mapping", a.rwx_any, a.samples);
	ck_assert_int_eq(bh_jfield(a.err, NULL, "wx_kept_apart"), 4);
	ck_assert_int_eq(bh_jfield(a.err, "mprotect", "forwarded"), 1 + (2 * 4000 - 1) * 4 + 2);
}
END_TEST

/* Keep: after the flips, with all four areas r-x, the kernel alone makes
 * one VMA of them; under keep they are four VMAs of 64 KiB each.  What the
 * program can probe (read, write, execute of each area, caught by a SIGSEGV
 * handler, and the contents) is the same as with MMFOLD_MODE=off. */
START_TEST(keep_apart_same_view)
{
	const char *args[] = {AREAS, "2000", NULL};
	const char *off[] = {"MMFOLD_MODE=off", NULL};
	char x[16384], y[16384], l[200];
	run(&a, 1, off, args);
	ck_assert_int_eq(a.status, 0);
	ck_assert_str_eq(line(a.out, "vma count", l, sizeof l), "vma count 1");
	run(&b, 1, NULL, args);
	ck_assert_int_eq(b.status, 0);
	ck_assert_msg(strstr(b.out, "vma 0 64 r-xp\nvma 64 128 r-xp\nvma 128 192 r-xp\n"
				    "vma 192 256 r-xp\nvma count 4\n"),
		      "areas not kept apart:\n%s", b.out);
	without(a.out, "vma", x, sizeof x);
	without(b.out, "vma", y, sizeof y);
	ck_assert_str_eq(x, y);
	ck_assert_msg(strstr(y, "probe 0 r-x") && strstr(y, "probe 0 rw-") && strstr(y, "probe 1 r-x"),
		      "probes: %s", y);
	/* the same without mmfold at all */
	run(&a, 0, NULL, args);
	without(a.out, "vma", x, sizeof x);
	ck_assert_str_eq(x, y);
}
END_TEST

/* The program's own readahead advice wins: MADV_SEQUENTIAL on area 0
 * before the flips, MADV_NORMAL on area 1 halfway; their VmFlags end as
 * with MMFOLD_MODE=off ("sr" and none), and mmfold left them alone. */
START_TEST(keep_program_advice_wins)
{
	const char *args[] = {AREAS, "400", "advice", NULL};
	const char *off[] = {"MMFOLD_MODE=off", NULL};
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	char x[16384], y[16384];
	run(&a, 1, off, args);
	run(&b, 1, env, args);
	ck_assert_int_eq(a.status, 0);
	ck_assert_int_eq(b.status, 0);
	without(a.out, "vma", x, sizeof x);
	without(b.out, "vma", y, sizeof y);
	ck_assert_str_eq(x, y);
	ck_assert_msg(strstr(y, "ra 0 sr\nra 1 -\n"), "readahead flags: %s", y);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_kept_apart"), 3);  /* areas 1, 2, 3 */
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_program_advice"), 2); /* 0 left, 1 given up */
}
END_TEST

/* Relax: the areas are rwx (sampled, and in the program's own maps), only
 * the first five flips of each area reach the kernel (1 + 5 * 4 = 21 of
 * 8 * ITERS + 3 calls), and the computed result is the same as off. */
START_TEST(relax_rwx_few_calls)
{
	const char *args[] = {AREAS, "3000", "hold=150", NULL};
	const char *off[] = {"MMFOLD_MODE=off", NULL};
	const char *env[] = {"MMFOLD_WX=relax", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	char l1[200], l2[200];
	run(&a, 1, off, args);
	run(&b, 1, env, args);
	ck_assert_msg(b.status == 0, "status %d, stderr: %s", b.status, b.err);
	ck_assert_str_eq(line(a.out, "flips", l1, sizeof l1), line(b.out, "flips", l2, sizeof l2));
	ck_assert_msg(b.rwx_areas > 0, "no rwx mapping over the areas in %d samples", b.samples);
	ck_assert_msg(strstr(b.out, "rwxp"), "program's maps: %s", b.out);
	ck_assert_int_eq(bh_jfield(b.err, "mprotect", "calls"), 8 * 3000 + 3);
	ck_assert_int_eq(bh_jfield(b.err, "mprotect", "forwarded"), 21);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_relaxed"), 4);
	ck_assert_int_eq(bh_jfield(a.err, NULL, "wx_relaxed"), -1);
}
END_TEST

/* Relax where the kernel refuses RWX (a seccomp filter fails mprotect to
 * RWX with EACCES, as SELinux does without execmem): no error reaches the
 * program, every flip is forwarded, the output is that of off. */
START_TEST(relax_refused_falls_back)
{
	const char *args[] = {AREAS, "500", "deny_rwx", NULL};
	const char *off[] = {"MMFOLD_MODE=off", NULL};
	const char *env[] = {"MMFOLD_WX=relax", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	run(&a, 1, off, args);
	run(&b, 1, env, args);
	ck_assert_msg(a.status == 0 && b.status == 0, "status %d/%d: %s", a.status, b.status, b.err);
	ck_assert_str_eq(a.out, b.out);
	ck_assert_int_eq(b.rwx_any, 0);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_rwx_refused"), 1);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_relaxed"), 0);
	/* all but the four first RW requests (redundant, skipped as always) */
	ck_assert_int_eq(bh_jfield(b.err, "mprotect", "forwarded"), 8 * 500 + 3 - 4);
}
END_TEST

/* Calls that end a relaxation, or meet keep's advice, give exactly what
 * they give without mmfold: an mremap of two adjacent areas (one VMA
 * without mmfold: keep must not make it fail with EFAULT), munmap,
 * mprotect to R, of half an area to RW, to PROT_EXEC, to RWX and back to
 * RX; the probes after each are those of MMFOLD_MODE=off, and no rwx
 * mapping is left once the relaxation has ended. */
START_TEST(end_relaxation_exact)
{
	const char *args[] = {AREAS, "200", "end", NULL};
	const char *off[] = {"MMFOLD_MODE=off", NULL};
	const char *keep[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	const char *relax[] = {"MMFOLD_WX=relax", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	static char x[16384], y[16384];
	run(&a, 1, off, args);
	ck_assert_int_eq(a.status, 0);
	ck_assert_msg(strstr(a.out, "end mremap of areas 2-3 ok\n"), "%s", a.out);
	without(a.out, "vma", x, sizeof x);
	run(&b, 1, keep, args);
	ck_assert_int_eq(b.status, 0);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_kept_apart"), 4);
	without(b.out, "vma", y, sizeof y);
	ck_assert_str_eq(x, y);
	run(&b, 1, relax, args);
	ck_assert_int_eq(b.status, 0);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_relaxed"), 4);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_relax_ended"), 4);
	without(b.out, "vma", y, sizeof y);
	ck_assert_str_eq(x, y);
	ck_assert_msg(!strstr(b.out, "rwx"), "rwx left after the relaxations ended:\n%s", b.out);
}
END_TEST

/* Alternating areas: the four areas are made RW one after another, then
 * RX one after another (RW 0, RW 1, ..., RX 0, RX 1, ...): each is still
 * recognised and kept apart, and the program sees what it sees with
 * MMFOLD_MODE=off. */
START_TEST(keep_alternating_areas)
{
	const char *args[] = {AREAS, "2000", "interleave", NULL};
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	off_and(env, args);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_kept_apart"), 4);
	ck_assert_msg(strstr(b.out, "vma count 4\n"), "areas not kept apart:\n%s", b.out);
	ck_assert_int_eq(b.rwx_any, 0);
}
END_TEST

/* A writable window (tests/progs/yjitflip, YJIT's shape: one page RW
 * inside a 16 MiB code block, then the whole block RX), keep: sampled
 * from another process while it flips, no mapping is ever rwx; both
 * blocks are recognised and every RX of a block after a window counts
 * (2 per iteration); windows get a VMA of their own; the same calls reach
 * the kernel as with MMFOLD_WX=off. */
START_TEST(window_keep_never_rwx)
{
	const char *args[] = {"16", "6000", "hold=100", NULL};
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	const char *wxoff[] = {"MMFOLD_WX=off", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	prog = "yjitflip";
	run(&a, 1, env, args);
	ck_assert_msg(a.status == 0, "status %d, stderr: %s", a.status, a.err);
	ck_assert_msg(a.samples >= 5, "only %d samples of the blocks", a.samples);
	ck_assert_msg(a.saw_rx && a.saw_rw, "samples r-x %d rw- %d: not sampled during flips",
		      a.saw_rx, a.saw_rw);
	ck_assert_msg(a.rwx_any == 0, "%d of %d samples had an rwx mapping", a.rwx_any, a.samples);
	ck_assert_int_eq(bh_jfield(a.err, NULL, "wx_window_regions"), 2);
	ck_assert_int_eq(bh_jfield(a.err, NULL, "wx_window_flips"), 2 * 6000);
	ck_assert_int_ge(bh_jfield(a.err, NULL, "wx_windows_kept"), 2);
	ck_assert_int_eq(bh_jfield(a.err, NULL, "wx_kept_apart"), 0);
	run(&b, 1, wxoff, args);
	ck_assert_int_eq(b.status, 0);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_window_flips"), 0);
	ck_assert_int_eq(bh_jfield(a.err, "mprotect", "forwarded"), bh_jfield(b.err, "mprotect", "forwarded"));
	same_view(a.out, b.out);
}
END_TEST

/* Keep, a window: what the program probes (read, write, execute, contents
 * of the window while RW and after the RX every 64th iteration, and after
 * each call that ends a relaxation) is what it probes with MMFOLD_MODE=off
 * and without mmfold; the blocks end as one VMA with off and as a few more
 * (at most two kept windows per block) with keep. */
START_TEST(window_keep_same_view)
{
	const char *args[] = {"16", "3000", "probe", "end", NULL};
	const char *off[] = {"MMFOLD_MODE=off", NULL};
	char l[200];
	prog = "yjitflip";
	run(&a, 1, off, args);
	ck_assert_msg(a.status == 0, "status %d: %s", a.status, a.err);
	ck_assert_str_eq(line(a.out, "vma count", l, sizeof l), "vma count 1");
	run(&b, 1, NULL, args);
	ck_assert_msg(b.status == 0, "status %d: %s", b.status, b.err);
	int n = atoi(line(b.out, "vma count", l, sizeof l) + 10);
	ck_assert_msg(n > 1 && n <= 9, "vma count %d after the flips under keep", n);
	same_view(a.out, b.out);
	ck_assert_msg(strstr(b.out, "probe it rw rw-") && strstr(b.out, "probe it rx r-x") &&
			      strstr(b.out, "probe win6 rw-") && strstr(b.out, "probe half1 rw-"),
		      "probes: %s", b.out);
	run(&a, 0, NULL, args);
	same_view(a.out, b.out);
}
END_TEST

/* Keep, a window: the program's own readahead advice on a page of the
 * inline block halfway wins: that page ends with the VmFlags it has with
 * MMFOLD_MODE=off, mmfold gives the block up (its other windows give
 * their advice back) and keeps only the outlined block's windows. */
START_TEST(window_program_advice_wins)
{
	const char *args[] = {"16", "3000", "advice", NULL};
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	char l[200];
	prog = "yjitflip";
	off_and(env, args);
	ck_assert_str_eq(line(b.out, "ra ", l, sizeof l), "ra sr");
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_program_advice"), 1);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_window_regions"), 2);
	/* after the advice only the outlined block's RX calls count */
	ck_assert_int_lt(bh_jfield(b.err, NULL, "wx_window_flips"), 2 * 3000);
	ck_assert_int_gt(bh_jfield(b.err, NULL, "wx_window_flips"), 3000);
}
END_TEST

/* Keep with more flipping areas than followed at once (64): yjitflip
 * rx=page makes only the pages it wrote RX, so each page in turn is an
 * area.  Once every entry is kept, the least recently flipped area gives
 * its advice back for the newest one: more than 64 areas are kept over the
 * run, the blocks never hold more than about 64 extra VMAs, no mapping is
 * ever rwx and the output is that of MMFOLD_MODE=off. */
START_TEST(keep_full_table)
{
	const char *args[] = {"16", "20000", "rx=page", "hold=50", NULL};
	const char *env[] = {"MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	char l[200];
	prog = "yjitflip";
	off_and(env, args);
	ck_assert_int_eq(b.rwx_any, 0);
	long kept = bh_jfield(b.err, NULL, "wx_kept_apart");
	ck_assert_msg(kept > 64, "wx_kept_apart %ld: no kept area was given up", kept);
	int n = atoi(line(b.out, "vma count", l, sizeof l) + 10);
	ck_assert_msg(n > 1 && n <= 1 + 2 * 64, "vma count %d", n);
}
END_TEST

/* Relax, a window: the blocks are rwx while they flip (sampled), few
 * mprotect calls reach the kernel, the flips counted are keep's; every
 * call that ends a relaxation (mprotect to R, more windows than followed,
 * an RX cutting a window, mmap(MAP_FIXED), munmap) leaves what
 * MMFOLD_MODE=off leaves (the probes after each), and no rwx mapping is
 * left once they ended. */
START_TEST(window_relax_exact)
{
	const char *args[] = {"16", "6000", "end", "pause=200", NULL};
	const char *env[] = {"MMFOLD_WX=relax", "MMFOLD_STATS=1", "MMFOLD_STATS_FORMAT=json", NULL};
	prog = "yjitflip";
	off_and(env, args);
	ck_assert_msg(b.rwx_areas > 0, "no rwx mapping over the blocks in %d samples", b.samples);
	long calls = bh_jfield(b.err, "mprotect", "calls"), fwd = bh_jfield(b.err, "mprotect", "forwarded");
	ck_assert_msg(calls > 4 * 6000 && fwd < calls / 50, "%ld of %ld mprotect calls forwarded", fwd,
		      calls);
	long relaxed = bh_jfield(b.err, NULL, "wx_relaxed");
	ck_assert_msg(relaxed >= 5, "wx_relaxed %ld", relaxed);
	ck_assert_int_eq(bh_jfield(b.err, NULL, "wx_relax_ended"), relaxed);
	ck_assert_int_ge(bh_jfield(b.err, NULL, "wx_window_flips"), 2 * 6000);
	const char *tail = strstr(b.out, "end mprotect RX across hole");
	ck_assert_msg(tail && !strstr(tail, "rwx"), "rwx left after the relaxations ended:\n%s", b.out);
}
END_TEST

Suite *wx_suite(void)
{
	Suite *s = suite_create("wx");
	TCase *tc = tcase_create("flips");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, keep_never_rwx);
	tcase_add_test(tc, keep_apart_same_view);
	tcase_add_test(tc, keep_program_advice_wins);
	tcase_add_test(tc, relax_rwx_few_calls);
	tcase_add_test(tc, relax_refused_falls_back);
	tcase_add_test(tc, end_relaxation_exact);
	tcase_add_test(tc, keep_alternating_areas);
	tcase_add_test(tc, window_keep_never_rwx);
	tcase_add_test(tc, window_keep_same_view);
	tcase_add_test(tc, window_program_advice_wins);
	tcase_add_test(tc, keep_full_table);
	tcase_add_test(tc, window_relax_exact);
	suite_add_tcase(s, tc);
	return s;
}
