#include "folio.h"

#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>

#include "config.h"
#include "sys.h"

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"

/* Reads a small file into buf (NUL-terminated); returns its length or -1. */
static long read_small(const char *path, char *buf, size_t n)
{
	long fd = mmf_sys_open(path, O_RDONLY, 0);
	if (fd < 0)
		return -1;
	long r = mmf_sys_read((int)fd, buf, n - 1);
	mmf_sys_close((int)fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return r;
}

/* "always [madvise] never" or "always inherit madvise [never]": the word in
 * brackets; -2 means inherit. */
static int parse_setting(const char *s)
{
	const char *b = strchr(s, '[');
	if (!b)
		return MMF_THP_NEVER;
	b++;
	if (!strncmp(b, "always]", 7))
		return MMF_THP_ALWAYS;
	if (!strncmp(b, "madvise]", 8))
		return MMF_THP_MADVISE;
	if (!strncmp(b, "inherit]", 8))
		return -2;
	return MMF_THP_NEVER;
}

static void put_u(char *p, uint64_t v, char **end)
{
	char t[24];
	int n = 0;
	do
		t[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		*p++ = t[--n];
	*end = p;
}

/* THP_DIR/hugepages-<kb>kB/<leaf> */
static void size_path(char *out, uint64_t kb, const char *leaf)
{
	char *p = out;
	memcpy(p, THP_DIR "/hugepages-", sizeof(THP_DIR "/hugepages-") - 1);
	p += sizeof(THP_DIR "/hugepages-") - 1;
	put_u(p, kb, &p);
	memcpy(p, "kB/", 3);
	p += 3;
	memcpy(p, leaf, strlen(leaf) + 1);
}

void mmf_folio_probe(struct mmf_folio_sys *f)
{
	char buf[256];
	memset(f, 0, sizeof *f);
	f->max_ptes_none = 511;
	if (read_small(THP_DIR "/khugepaged/max_ptes_none", buf, sizeof buf) > 0 && buf[0] >= '0' &&
	    buf[0] <= '9') {
		f->max_ptes_none = 0;
		for (const char *p = buf; *p >= '0' && *p <= '9'; p++)
			f->max_ptes_none = f->max_ptes_none * 10 + (uint64_t)(*p - '0');
	}
	if (read_small(THP_DIR "/enabled", buf, sizeof buf) < 0)
		return;
	f->top = parse_setting(buf);
	if (f->top < 0)
		f->top = MMF_THP_NEVER;

	long fd = mmf_sys_open(THP_DIR, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return;
	char dents[4096];
	long n;
	while ((n = mmf_sys6(SYS_getdents64, fd, (long)dents, sizeof dents, 0, 0, 0)) > 0) {
		for (long off = 0; off < n;) {
			struct {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *d = (void *)(dents + off);
			off += d->reclen;
			if (strncmp(d->name, "hugepages-", 10))
				continue;
			uint64_t kb = 0;
			const char *q = d->name + 10;
			while (*q >= '0' && *q <= '9')
				kb = kb * 10 + (uint64_t)(*q++ - '0');
			if (strcmp(q, "kB") || !kb || f->nsizes == MMF_FOLIO_SIZES)
				continue;
			char path[160];
			size_path(path, kb, "enabled");
			if (read_small(path, buf, sizeof buf) < 0)
				continue;
			int st = parse_setting(buf);
			if (st == -2)
				st = f->top;
			/* insert sorted */
			int i = f->nsizes++;
			while (i > 0 && f->size[i - 1] > kb * 1024) {
				f->size[i] = f->size[i - 1];
				f->state[i] = f->state[i - 1];
				i--;
			}
			f->size[i] = kb * 1024;
			f->state[i] = st;
		}
	}
	mmf_sys_close((int)fd);
}

int mmf_folio_advice_pays(const struct mmf_folio_sys *f)
{
	for (int i = 0; i < f->nsizes; i++)
		if (f->state[i] == MMF_THP_MADVISE)
			return 1;
	return 0;
}

uint64_t mmf_folio_advice_size(const struct mmf_folio_sys *f)
{
	uint64_t a = 0;
	for (int i = 0; i < f->nsizes; i++)
		if (f->state[i] == MMF_THP_MADVISE)
			a = f->size[i];
	return a;
}

uint64_t mmf_folio_contpte_size(void)
{
#if defined(__aarch64__)
	/* CONT_PTE_SIZE of arch/arm64: 16 x 4 KiB, 128 x 16 KiB, 32 x 64 KiB */
	switch (mmf_page_size()) {
	case 4096: return 64u << 10;
	case 16384: return 2u << 20;
	case 65536: return 2u << 20;
	}
#endif
	return 0;
}

uint64_t mmf_folio_align_for(const struct mmf_folio_sys *f, uint64_t len, long cfg_align,
			     long cfg_min, int advised)
{
	uint64_t a = 0;
	if (cfg_align == MMF_ALIGN_OFF)
		return 0;
	if (cfg_align > 0) {
		a = (uint64_t)cfg_align;
	} else {
		/* arm64: the contiguous-PTE block when len holds one; smaller
		 * mappings (and other architectures) get the largest folio
		 * size in use for them that len holds */
		uint64_t cont = mmf_folio_contpte_size();
		if (cont && len >= cont)
			a = cont;
		else
			for (int i = 0; i < f->nsizes; i++)
				if (f->size[i] <= len && (f->state[i] == MMF_THP_ALWAYS ||
							  (f->state[i] == MMF_THP_MADVISE && advised)))
					a = f->size[i];
	}
	uint64_t min = cfg_min > 0 ? (uint64_t)cfg_min : a;
	if (!a || len < a || len < min)
		return 0;
	return a;
}

void mmf_folio_fault_counts(const struct mmf_folio_sys *f, uint64_t out[MMF_FOLIO_SIZES])
{
	char path[160], buf[64];
	for (int i = 0; i < f->nsizes; i++) {
		out[i] = 0;
		size_path(path, f->size[i] / 1024, "stats/anon_fault_alloc");
		if (read_small(path, buf, sizeof buf) > 0)
			for (const char *p = buf; *p >= '0' && *p <= '9'; p++)
				out[i] = out[i] * 10 + (uint64_t)(*p - '0');
	}
}

long mmf_folio_anon_huge(void)
{
	char buf[2048];
	if (read_small("/proc/self/smaps_rollup", buf, sizeof buf) < 0)
		return -1;
	const char *p = strstr(buf, "AnonHugePages:");
	if (!p)
		return -1;
	p += 14;
	while (*p == ' ')
		p++;
	long kb = 0;
	while (*p >= '0' && *p <= '9')
		kb = kb * 10 + (*p++ - '0');
	return kb * 1024;
}
