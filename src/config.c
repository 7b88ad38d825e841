#include "config.h"

#include <string.h>

#include "fmt.h"

struct opt {
	const char *name;
	char type;
	long def, min, max;
	const char *choices;
};

static const struct opt opts[MMF_OPT_COUNT] = {
#define X(id, name, type, def, min, max, choices) {name, type, def, min, max, choices},
	MMF_OPTIONS(X)
#undef X
};

const char *mmf_mode_name(int mode)
{
	static const char *const names[] = {
#define X(p, id, name) name,
		MMF_MODES(X)
#undef X
	};
	return mode >= 0 && mode < MMF_MODE_COUNT ? names[mode] : "";
}

/* Strict decimal (or 0x hex) parse of the whole string. */
static int parse_long(const char *s, long *out)
{
	int neg = 0, base = 10, any = 0;
	unsigned long v = 0;
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && s[2]) {
		base = 16;
		s += 2;
	}
	for (; *s; s++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			return -1;
		if (v > (unsigned long)(0x7fffffffffffffffL - d) / (unsigned long)base)
			return -1;
		v = v * (unsigned long)base + (unsigned long)d;
		any = 1;
	}
	if (!any)
		return -1;
	*out = neg ? -(long)v : (long)v;
	return 0;
}

/* A size: digits with an optional K, M or G (powers of 1024). */
static int parse_size(const char *s, long *out)
{
	char num[32];
	size_t n = strlen(s);
	long mul = 1;
	if (n == 0 || n >= sizeof num)
		return -1;
	memcpy(num, s, n + 1);
	switch (num[n - 1]) {
	case 'k': case 'K': mul = 1L << 10; break;
	case 'm': case 'M': mul = 1L << 20; break;
	case 'g': case 'G': mul = 1L << 30; break;
	}
	if (mul != 1)
		num[n - 1] = 0;
	long v;
	if (num[0] == '-' || num[0] == '+' || parse_long(num, &v) || v > 0x7fffffffffffffffL / mul)
		return -1;
	*out = v * mul;
	return 0;
}

static int eqi(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a;
		char y = *b >= 'A' && *b <= 'Z' ? (char)(*b + 32) : *b;
		if (x != y)
			return 0;
	}
	return *a == *b;
}

static int parse_bool(const char *s, long *out)
{
	static const char *const yes[] = {"1", "yes", "on", "true"}, *const no[] = {"0", "no", "off", "false"};
	for (int i = 0; i < 4; i++) {
		if (eqi(s, yes[i])) {
			*out = 1;
			return 0;
		}
		if (eqi(s, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

/* Index of s among "a|b|c", or -1. */
static int parse_choice(const char *s, const char *choices)
{
	int idx = 0;
	const char *p = choices;
	while (*p) {
		const char *q = p;
		while (*q && *q != '|')
			q++;
		size_t n = (size_t)(q - p);
		if (strlen(s) == n) {
			int ok = 1;
			for (size_t i = 0; i < n; i++) {
				char x = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] + 32) : s[i];
				if (x != p[i])
					ok = 0;
			}
			if (ok)
				return idx;
		}
		idx++;
		p = *q ? q + 1 : q;
	}
	return -1;
}

/* The text of choice i, copied into b. */
static void put_choice(struct mmf_buf *b, const char *choices, long i)
{
	const char *p = choices;
	for (long k = 0; k < i && *p; k++) {
		while (*p && *p != '|')
			p++;
		if (*p)
			p++;
	}
	while (*p && *p != '|')
		mmf_putc(b, *p++);
}

static void put_default(struct mmf_buf *b, const struct opt *o)
{
	switch (o->type) {
	case 'E':
		put_choice(b, o->choices, o->def);
		break;
	case 'S':
		mmf_puts(b, "(unset)");
		break;
	case 'A':
		mmf_puts(b, o->def == MMF_ALIGN_AUTO ? "auto" : o->def == MMF_ALIGN_OFF ? "off" : "");
		if (o->def > 0)
			mmf_puti(b, o->def);
		break;
	default:
		mmf_puti(b, o->def);
	}
}

static void problem(struct mmf_config *c, void (*warn)(const char *, void *), void *arg,
		    const struct opt *o, const char *value, const char *why)
{
	char line[512];
	MMF_BUF(b, line);
	mmf_puts(&b, "mmfold: ");
	mmf_puts(&b, o->name);
	mmf_putc(&b, '=');
	mmf_puts(&b, value);
	mmf_puts(&b, ": ");
	mmf_puts(&b, why);
	mmf_puts(&b, "; using ");
	put_default(&b, o);
	c->problems++;
	if (warn)
		warn(line, arg);
}

int mmf_config_parse(struct mmf_config *c, char *const *envp,
		     void (*warn)(const char *line, void *arg), void *arg)
{
	memset(c, 0, sizeof *c);
	for (int i = 0; i < MMF_OPT_COUNT; i++)
		c->v[i] = opts[i].def;
	for (; envp && *envp; envp++) {
		const char *e = *envp;
		if (strncmp(e, "MMFOLD_", 7) != 0)
			continue;
		const char *eq = strchr(e, '=');
		if (!eq)
			continue;
		size_t nlen = (size_t)(eq - e);
		const char *val = eq + 1;
		int found = -1;
		for (int i = 0; i < MMF_OPT_COUNT; i++)
			if (strlen(opts[i].name) == nlen && !strncmp(opts[i].name, e, nlen))
				found = i;
		if (found < 0) {
			char line[512];
			MMF_BUF(b, line);
			mmf_puts(&b, "mmfold: unknown variable ");
			for (size_t k = 0; k < nlen && k < 64; k++)
				mmf_putc(&b, e[k]);
			mmf_puts(&b, " ignored");
			c->problems++;
			if (warn)
				warn(line, arg);
			continue;
		}
		const struct opt *o = &opts[found];
		long v;
		switch (o->type) {
		case 'B':
			if (parse_bool(val, &v))
				problem(c, warn, arg, o, val, "expected 1/yes/on/true or 0/no/off/false");
			else
				c->v[found] = v;
			break;
		case 'I':
			if (parse_long(val, &v))
				problem(c, warn, arg, o, val, "not a number");
			else if (v < o->min || v > o->max) {
				char why[64];
				MMF_BUF(w, why);
				mmf_puts(&w, "out of range ");
				mmf_puti(&w, o->min);
				mmf_puts(&w, "..");
				mmf_puti(&w, o->max);
				problem(c, warn, arg, o, val, why);
			} else
				c->v[found] = v;
			break;
		case 'Z':
		case 'A': {
			if (o->type == 'A' && eqi(val, "auto")) {
				c->v[found] = MMF_ALIGN_AUTO;
				break;
			}
			if (o->type == 'A' && eqi(val, "off")) {
				c->v[found] = MMF_ALIGN_OFF;
				break;
			}
			char why[96];
			MMF_BUF(w, why);
			if (parse_size(val, &v)) {
				problem(c, warn, arg, o,
					val, o->type == 'A' ? "expected auto, off or a size such as 64K or 2M"
							    : "expected a size such as 4096, 64K or 2M");
			} else if (v < o->min || v > o->max || (o->type == 'A' && (v & (v - 1)))) {
				mmf_puts(&w, o->type == 'A' ? "expected a power of two in " : "out of range ");
				mmf_puti(&w, o->min);
				mmf_puts(&w, "..");
				mmf_puti(&w, o->max);
				problem(c, warn, arg, o, val, why);
			} else {
				c->v[found] = v;
			}
			break;
		}
		case 'E': {
			int k = parse_choice(val, o->choices);
			char why[128];
			MMF_BUF(w, why);
			mmf_puts(&w, "expected one of ");
			mmf_puts(&w, o->choices);
			if (k < 0)
				problem(c, warn, arg, o, val, why);
			else
				c->v[found] = k;
			break;
		}
		case 'S':
			if (strlen(val) >= MMF_STR_MAX)
				problem(c, warn, arg, o, "...", "longer than 255 bytes");
			else if (found == MMF_OPT_STATS_FILE)
				memcpy(c->stats_file, val, strlen(val) + 1);
			break;
		}
	}
	return c->problems;
}
