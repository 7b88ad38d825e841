/* Configuration parsing (src/config.c): every variable with good and bad
 * values; one warning line per problem; defaults kept. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "suites.h"

struct lines {
	int n;
	char last[512];
};

static void collect(const char *line, void *arg)
{
	struct lines *l = arg;
	l->n++;
	strncpy(l->last, line, sizeof l->last - 1);
	ck_assert_ptr_null(strchr(line, '\n'));
}

static int parse1(struct mmf_config *c, const char *kv, struct lines *l)
{
	char *env[] = {(char *)"PATH=/bin", (char *)kv, NULL};
	memset(l, 0, sizeof *l);
	return mmf_config_parse(c, env, collect, l);
}

START_TEST(defaults)
{
	struct mmf_config c;
	char *env[] = {(char *)"HOME=/root", NULL};
	ck_assert_int_eq(mmf_config_parse(&c, env, NULL, NULL), 0);
	ck_assert_int_eq(c.v[MMF_OPT_MODE], MMF_MODE_SAFE);
	ck_assert_int_eq(c.v[MMF_OPT_STATS], 0);
	ck_assert_int_eq(c.v[MMF_OPT_STATS_FORMAT], MMF_FMT_TEXT);
	ck_assert_int_eq(c.v[MMF_OPT_VERIFY], 0);
	ck_assert_int_eq(c.v[MMF_OPT_LOG], 0);
	ck_assert_int_eq(c.v[MMF_OPT_STRICT], 0);
	ck_assert_int_eq(c.v[MMF_OPT_PROFILE], 0);
	ck_assert_int_eq(c.v[MMF_OPT_PROFILE_DEPTH], 16);
	ck_assert_str_eq(c.stats_file, "");
	ck_assert_int_eq(c.v[MMF_OPT_SIGCHAIN], MMF_SIGCHAIN_AUTO);
}
END_TEST

START_TEST(good_values)
{
	struct mmf_config c;
	struct lines l;
	static const struct {
		const char *kv;
		int opt;
		long v;
	} t[] = {
		{"MMFOLD_MODE=off", MMF_OPT_MODE, MMF_MODE_OFF},
		{"MMFOLD_MODE=OBSERVE", MMF_OPT_MODE, MMF_MODE_OBSERVE},
		{"MMFOLD_MODE=safe", MMF_OPT_MODE, MMF_MODE_SAFE},
		{"MMFOLD_STATS=1", MMF_OPT_STATS, 1},
		{"MMFOLD_STATS=yes", MMF_OPT_STATS, 1},
		{"MMFOLD_STATS=On", MMF_OPT_STATS, 1},
		{"MMFOLD_STATS=false", MMF_OPT_STATS, 0},
		{"MMFOLD_STATS_FORMAT=json", MMF_OPT_STATS_FORMAT, MMF_FMT_JSON},
		{"MMFOLD_VERIFY=2", MMF_OPT_VERIFY, 2},
		{"MMFOLD_LOG=0x3", MMF_OPT_LOG, 3},
		{"MMFOLD_STRICT=1", MMF_OPT_STRICT, 1},
		{"MMFOLD_THP=off", MMF_OPT_THP, MMF_THP_OFF},
		{"MMFOLD_THP=advise", MMF_OPT_THP, MMF_THP_ADVISE},
		{"MMFOLD_SHAPE=off", MMF_OPT_SHAPE, MMF_SHAPE_OFF},
		{"MMFOLD_SHAPE=trim", MMF_OPT_SHAPE, MMF_SHAPE_TRIM},
		{"MMFOLD_SHAPE=widen", MMF_OPT_SHAPE, MMF_SHAPE_WIDEN},
		{"MMFOLD_THP_MIN=64K", MMF_OPT_THP_MIN, 65536},
		{"MMFOLD_THP_MIN=1g", MMF_OPT_THP_MIN, 1L << 30},
		{"MMFOLD_THP_MIN=8192", MMF_OPT_THP_MIN, 8192},
		{"MMFOLD_ALIGN=off", MMF_OPT_ALIGN, MMF_ALIGN_OFF},
		{"MMFOLD_ALIGN=AUTO", MMF_OPT_ALIGN, MMF_ALIGN_AUTO},
		{"MMFOLD_ALIGN=2M", MMF_OPT_ALIGN, 2L << 20},
		{"MMFOLD_ALIGN=65536", MMF_OPT_ALIGN, 65536},
		{"MMFOLD_ALIGN_MIN=1M", MMF_OPT_ALIGN_MIN, 1L << 20},
		{"MMFOLD_ALIGN_MIN=0", MMF_OPT_ALIGN_MIN, 0},
		{"MMFOLD_SIGCHAIN=on", MMF_OPT_SIGCHAIN, MMF_SIGCHAIN_ON},
		{"MMFOLD_SIGCHAIN=Auto", MMF_OPT_SIGCHAIN, MMF_SIGCHAIN_AUTO},
		{"MMFOLD_PROFILE=1000", MMF_OPT_PROFILE, 1000},
		{"MMFOLD_PROFILE=10", MMF_OPT_PROFILE, 10},
		{"MMFOLD_PROFILE_DEPTH=1", MMF_OPT_PROFILE_DEPTH, 1},
		{"MMFOLD_PROFILE_DEPTH=64", MMF_OPT_PROFILE_DEPTH, 64},
		{"MMFOLD_WX=relax", MMF_OPT_WX, MMF_WX_RELAX},
		{"MMFOLD_WX=KEEP", MMF_OPT_WX, MMF_WX_KEEP},
		{"MMFOLD_WX=off", MMF_OPT_WX, MMF_WX_OFF},
		{"MMFOLD_LAZY_TOUCHED=100", MMF_OPT_LAZY_TOUCHED, 100},
		{"MMFOLD_LAZY_TOUCHED=1", MMF_OPT_LAZY_TOUCHED, 1},
	};
	for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) {
		ck_assert_msg(parse1(&c, t[i].kv, &l) == 0, "%s: %s", t[i].kv, l.last);
		ck_assert_int_eq(c.v[t[i].opt], t[i].v);
	}
	ck_assert_int_eq(parse1(&c, "MMFOLD_LIB=/opt/mmfold/lib/libmmfold.so", &l), 0);
	ck_assert_int_eq(l.n, 0);
	ck_assert_int_eq(parse1(&c, "MMFOLD_STATS_FILE=/tmp/x.%p.json", &l), 0);
	ck_assert_str_eq(c.stats_file, "/tmp/x.%p.json");
}
END_TEST

/* A bad value for every variable: one line naming the variable, the value
 * and the default used; the default is kept. */
START_TEST(bad_values)
{
	struct mmf_config c;
	struct lines l;
	static const struct {
		const char *kv, *name, *dflt;
		int opt;
		long v;
	} t[] = {
		{"MMFOLD_MODE=fast", "MMFOLD_MODE", "using safe", MMF_OPT_MODE, MMF_MODE_SAFE},
		{"MMFOLD_MODE=", "MMFOLD_MODE", "using safe", MMF_OPT_MODE, MMF_MODE_SAFE},
		{"MMFOLD_STATS=2", "MMFOLD_STATS", "using 0", MMF_OPT_STATS, 0},
		{"MMFOLD_STATS=maybe", "MMFOLD_STATS", "using 0", MMF_OPT_STATS, 0},
		{"MMFOLD_STATS_FORMAT=xml", "MMFOLD_STATS_FORMAT", "using text", MMF_OPT_STATS_FORMAT, MMF_FMT_TEXT},
		{"MMFOLD_VERIFY=3", "out of range 0..2", "using 0", MMF_OPT_VERIFY, 0},
		{"MMFOLD_VERIFY=-1", "out of range 0..2", "using 0", MMF_OPT_VERIFY, 0},
		{"MMFOLD_VERIFY=1x", "not a number", "using 0", MMF_OPT_VERIFY, 0},
		{"MMFOLD_LOG=99999999999999999999999", "not a number", "using 0", MMF_OPT_LOG, 0},
		{"MMFOLD_LOG= 1", "not a number", "using 0", MMF_OPT_LOG, 0},
		{"MMFOLD_STRICT=please", "MMFOLD_STRICT", "using 0", MMF_OPT_STRICT, 0},
		{"MMFOLD_MODEE=safe", "unknown variable MMFOLD_MODEE", "ignored", MMF_OPT_MODE, MMF_MODE_SAFE},
		{"MMFOLD_THP=always", "MMFOLD_THP", "using auto", MMF_OPT_THP, MMF_THP_AUTO},
		{"MMFOLD_SHAPE=both", "MMFOLD_SHAPE", "using auto", MMF_OPT_SHAPE, MMF_SHAPE_AUTO},
		{"MMFOLD_SHAPE=", "MMFOLD_SHAPE", "using auto", MMF_OPT_SHAPE, MMF_SHAPE_AUTO},
		{"MMFOLD_THP_MIN=2X", "expected a size", "using 2097152", MMF_OPT_THP_MIN, 2L << 20},
		{"MMFOLD_THP_MIN=100", "out of range 4096..", "using 2097152", MMF_OPT_THP_MIN, 2L << 20},
		{"MMFOLD_THP_MIN=-1M", "expected a size", "using 2097152", MMF_OPT_THP_MIN, 2L << 20},
		{"MMFOLD_THP_MIN=99999999999G", "expected a size", "using 2097152", MMF_OPT_THP_MIN, 2L << 20},
		{"MMFOLD_ALIGN=3M", "power of two", "using auto", MMF_OPT_ALIGN, MMF_ALIGN_AUTO},
		{"MMFOLD_ALIGN=2G", "power of two", "using auto", MMF_OPT_ALIGN, MMF_ALIGN_AUTO},
		{"MMFOLD_ALIGN=big", "expected auto, off or a size", "using auto", MMF_OPT_ALIGN, MMF_ALIGN_AUTO},
		{"MMFOLD_ALIGN_MIN=1T", "expected a size", "using 0", MMF_OPT_ALIGN_MIN, 0},
		{"MMFOLD_SIGCHAIN=1", "MMFOLD_SIGCHAIN", "using auto", MMF_OPT_SIGCHAIN, MMF_SIGCHAIN_AUTO},
		{"MMFOLD_SIGCHAIN=off", "MMFOLD_SIGCHAIN", "using auto", MMF_OPT_SIGCHAIN, MMF_SIGCHAIN_AUTO},
		{"MMFOLD_PROFILE=1001", "out of range 0..1000", "using 0", MMF_OPT_PROFILE, 0},
		{"MMFOLD_PROFILE=-1", "out of range 0..1000", "using 0", MMF_OPT_PROFILE, 0},
		{"MMFOLD_PROFILE=ten", "not a number", "using 0", MMF_OPT_PROFILE, 0},
		{"MMFOLD_PROFILE_DEPTH=0", "out of range 1..64", "using 16", MMF_OPT_PROFILE_DEPTH, 16},
		{"MMFOLD_PROFILE_DEPTH=65", "out of range 1..64", "using 16", MMF_OPT_PROFILE_DEPTH, 16},
		{"MMFOLD_PROFILE_DEPTH=8k", "not a number", "using 16", MMF_OPT_PROFILE_DEPTH, 16},
		{"MMFOLD_WX=rwx", "MMFOLD_WX", "using keep", MMF_OPT_WX, MMF_WX_KEEP},
		{"MMFOLD_WX=", "MMFOLD_WX", "using keep", MMF_OPT_WX, MMF_WX_KEEP},
		{"MMFOLD_WX=1", "MMFOLD_WX", "using keep", MMF_OPT_WX, MMF_WX_KEEP},
		{"MMFOLD_LAZY_TOUCHED=0", "out of range 1..100", "using 75", MMF_OPT_LAZY_TOUCHED, 75},
		{"MMFOLD_LAZY_TOUCHED=101", "out of range 1..100", "using 75", MMF_OPT_LAZY_TOUCHED, 75},
		{"MMFOLD_LAZY_TOUCHED=75%", "not a number", "using 75", MMF_OPT_LAZY_TOUCHED, 75},
	};
	for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) {
		ck_assert_int_eq(parse1(&c, t[i].kv, &l), 1);
		ck_assert_int_eq(l.n, 1);
		ck_assert_msg(strstr(l.last, t[i].name), "%s: got '%s'", t[i].kv, l.last);
		ck_assert_msg(strstr(l.last, t[i].dflt), "%s: got '%s'", t[i].kv, l.last);
		ck_assert_msg(!strncmp(l.last, "mmfold: ", 8), "%s: got '%s'", t[i].kv, l.last);
		ck_assert_int_eq(c.v[t[i].opt], t[i].v);
	}
	char big[400] = "MMFOLD_STATS_FILE=";
	memset(big + strlen(big), 'a', 300);
	ck_assert_int_eq(parse1(&c, big, &l), 1);
	ck_assert_str_eq(c.stats_file, "");
}
END_TEST

START_TEST(several_problems_counted)
{
	struct mmf_config c;
	struct lines l = {0};
	char *env[] = {(char *)"MMFOLD_MODE=x", (char *)"MMFOLD_LOG=9", (char *)"MMFOLD_STATS=1",
		       (char *)"MMFOLD_FOO=1", NULL};
	ck_assert_int_eq(mmf_config_parse(&c, env, collect, &l), 3);
	ck_assert_int_eq(l.n, 3);
	ck_assert_int_eq(c.v[MMF_OPT_STATS], 1);
}
END_TEST

/* The choices of every 'E' variable come from one list (config.h): each
 * name parses to its enum value, and a bad value's message lists them all. */
START_TEST(choice_lists)
{
	static const struct {
		int opt;
		const char *name;
		long v;
	} t[] = {
#define C_(var, p, id, name) {MMF_OPT_##var, name, p##id},
#define MODE_(p, id, name) C_(MODE, p, id, name)
#define FMT_(p, id, name) C_(STATS_FORMAT, p, id, name)
#define THP_(p, id, name) C_(THP, p, id, name)
#define SIGCHAIN_(p, id, name) C_(SIGCHAIN, p, id, name)
#define SHAPE_(p, id, name) C_(SHAPE, p, id, name)
#define WX_(p, id, name) C_(WX, p, id, name)
#define BARRIER_(p, id, name) C_(BARRIER, p, id, name)
		MMF_MODES(MODE_) MMF_FMTS(FMT_) MMF_THPS(THP_) MMF_SIGCHAINS(SIGCHAIN_)
		MMF_SHAPES(SHAPE_) MMF_WXS(WX_) MMF_BARRIERS(BARRIER_)
#undef C_
	};
	static const struct {
		int opt;
		const char *var, *choices;
	} lists[] = {
		{MMF_OPT_MODE, "MMFOLD_MODE", "off|observe|safe|lazy"},
		{MMF_OPT_STATS_FORMAT, "MMFOLD_STATS_FORMAT", "text|json"},
		{MMF_OPT_THP, "MMFOLD_THP", "off|auto|advise"},
		{MMF_OPT_SIGCHAIN, "MMFOLD_SIGCHAIN", "auto|on"},
		{MMF_OPT_SHAPE, "MMFOLD_SHAPE", "off|auto|trim|widen"},
		{MMF_OPT_WX, "MMFOLD_WX", "keep|relax|off"},
		{MMF_OPT_BARRIER, "MMFOLD_BARRIER", "off|uffd"},
	};
	struct mmf_config c;
	struct lines l;
	char kv[128];
	ck_assert_int_eq(sizeof t / sizeof t[0], 4 + 2 + 3 + 2 + 4 + 3 + 2);
	ck_assert_int_eq(MMF_MODE_COUNT, 4);
	ck_assert_str_eq(mmf_mode_name(MMF_MODE_LAZY), "lazy");
	for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) {
		const char *var = NULL;
		for (unsigned j = 0; j < sizeof lists / sizeof lists[0]; j++)
			if (lists[j].opt == t[i].opt)
				var = lists[j].var;
		ck_assert_ptr_nonnull(var);
		snprintf(kv, sizeof kv, "%s=%s", var, t[i].name);
		ck_assert_msg(parse1(&c, kv, &l) == 0, "%s: '%s'", kv, l.last);
		ck_assert_msg(c.v[t[i].opt] == t[i].v, "%s: %ld, not %ld", kv, c.v[t[i].opt], t[i].v);
	}
	for (unsigned j = 0; j < sizeof lists / sizeof lists[0]; j++) {
		snprintf(kv, sizeof kv, "%s=nonesuch", lists[j].var);
		ck_assert_int_eq(parse1(&c, kv, &l), 1);
		char want[128];
		snprintf(want, sizeof want, "expected one of %s", lists[j].choices);
		ck_assert_msg(strstr(l.last, want), "%s: got '%s'", kv, l.last);
	}
}
END_TEST

Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, defaults);
	tcase_add_test(tc, good_values);
	tcase_add_test(tc, bad_values);
	tcase_add_test(tc, several_problems_counted);
	tcase_add_test(tc, choice_lists);
	suite_add_tcase(s, tc);
	return s;
}
