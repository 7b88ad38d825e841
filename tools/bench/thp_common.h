/* Helpers for the large-folio benchmarks (tools/bench_thp.sh): the kernel's
 * THP counters.  On top of common.h.
 *
 * The counters are system-wide (/proc/vmstat, /sys/kernel/mm/transparent_
 * hugepage/hugepages-<size>kB/stats/anon_fault_alloc), so a delta also
 * counts other processes' faults; on an idle benchmark machine that is
 * close to nothing.  AnonHugePages (PMD-mapped THP only) comes from
 * /proc/<pid>/smaps_rollup and is per process. */
#ifndef MMF_BENCH_THP_COMMON_H
#define MMF_BENCH_THP_COMMON_H

#include "common.h"

#include <dirent.h>
#include <string.h>
#include <sys/resource.h>

#define THP_SYSFS "/sys/kernel/mm/transparent_hugepage"
#define THP_MAX_SIZES 24

struct thp_counters {
	int n;                            /* sizes found */
	unsigned kb[THP_MAX_SIZES];       /* folio size in KiB, ascending */
	unsigned long alloc[THP_MAX_SIZES];    /* anon_fault_alloc */
	unsigned long fallback[THP_MAX_SIZES]; /* anon_fault_fallback */
	unsigned long pmd_fault_alloc;    /* /proc/vmstat thp_fault_alloc */
};

/* First unsigned number in a file; 0 when it cannot be read. */
static inline unsigned long read_ul_file(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long v = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* Value of "key" in a "key value" file (/proc/vmstat, smaps_rollup). */
static inline unsigned long read_key_file(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t kl = strlen(key);
	unsigned long v = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, key, kl) == 0 && (line[kl] == ' ' || line[kl] == ':' || line[kl] == '\t')) {
			char *p = line + kl + 1;
			while (*p == ' ' || *p == '\t' || *p == ':')
				p++;
			v = strtoul(p, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static inline void thp_read(struct thp_counters *c)
{
	DIR *d = opendir(THP_SYSFS);
	struct dirent *e;
	memset(c, 0, sizeof *c);
	c->pmd_fault_alloc = read_key_file("/proc/vmstat", "thp_fault_alloc");
	if (!d)
		return;
	while ((e = readdir(d)) != NULL && c->n < THP_MAX_SIZES) {
		unsigned kb;
		char path[512];
		if (sscanf(e->d_name, "hugepages-%ukB", &kb) != 1)
			continue;
		snprintf(path, sizeof path, THP_SYSFS "/%s/stats/anon_fault_alloc", e->d_name);
		/* sizes without anonymous THP support (no such file) are left out */
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		fclose(f);
		int i = c->n++;
		while (i > 0 && c->kb[i - 1] > kb) { /* keep ascending */
			c->kb[i] = c->kb[i - 1];
			c->alloc[i] = c->alloc[i - 1];
			c->fallback[i] = c->fallback[i - 1];
			i--;
		}
		c->kb[i] = kb;
		c->alloc[i] = read_ul_file(path);
		snprintf(path, sizeof path, THP_SYSFS "/%s/stats/anon_fault_fallback", e->d_name);
		c->fallback[i] = read_ul_file(path);
	}
	closedir(d);
}

/* "64kB:123,2048kB:4" for the sizes whose anon_fault_alloc grew, "-" if
 * none did. */
static inline void thp_delta_str(const struct thp_counters *a, const struct thp_counters *b,
				 char *out, size_t len)
{
	size_t o = 0;
	out[0] = '\0';
	for (int i = 0; i < b->n; i++) {
		unsigned long before = 0;
		for (int j = 0; j < a->n; j++)
			if (a->kb[j] == b->kb[i])
				before = a->alloc[j];
		if (b->alloc[i] > before && o < len)
			o += (size_t)snprintf(out + o, len - o, "%s%ukB:%lu", o ? "," : "", b->kb[i],
					      b->alloc[i] - before);
	}
	if (o == 0)
		snprintf(out, len, "-");
}

/* anon_fault_alloc delta at one size (KiB); 0 if the size is unknown. */
static inline unsigned long thp_delta_at(const struct thp_counters *a, const struct thp_counters *b,
					 unsigned kb)
{
	unsigned long x = 0, y = 0;
	for (int i = 0; i < a->n; i++)
		if (a->kb[i] == kb)
			x = a->alloc[i];
	for (int i = 0; i < b->n; i++)
		if (b->kb[i] == kb)
			y = b->alloc[i];
	return y >= x ? y - x : 0;
}

static inline unsigned long thp_fallback_delta_at(const struct thp_counters *a,
						  const struct thp_counters *b, unsigned kb)
{
	unsigned long x = 0, y = 0;
	for (int i = 0; i < a->n; i++)
		if (a->kb[i] == kb)
			x = a->fallback[i];
	for (int i = 0; i < b->n; i++)
		if (b->kb[i] == kb)
			y = b->fallback[i];
	return y >= x ? y - x : 0;
}

static inline long self_minflt(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return ru.ru_minflt;
}

/* AnonHugePages (KiB) of the calling process. */
static inline unsigned long self_anonhuge_kb(void)
{
	return read_key_file("/proc/self/smaps_rollup", "AnonHugePages");
}

#endif
