#include "folio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>

#include "config.h"
#include "core.h"
#include "fmt.h"
#include "sys.h"
#include "thp.h"

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"

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

/* One size's setting (hugepages-<kb>kB/enabled), kept in order of size. */
static void probe_size(struct mmf_folio_sys *f, uint64_t kb)
{
	char path[160], buf[256];
	if (!kb || f->nsizes == MMF_FOLIO_SIZES)
		return;
	size_path(path, kb, "enabled");
	if (mmf_sys_read_small(path, buf, sizeof buf) < 0)
		return;
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

void mmf_folio_probe(struct mmf_folio_sys *f, int by_name)
{
	char buf[256];
	memset(f, 0, sizeof *f);
	f->max_ptes_none = 511;
	if (mmf_sys_read_small(THP_DIR "/khugepaged/max_ptes_none", buf, sizeof buf) > 0 && buf[0] >= '0' &&
	    buf[0] <= '9') {
		f->max_ptes_none = 0;
		for (const char *p = buf; *p >= '0' && *p <= '9'; p++)
			f->max_ptes_none = f->max_ptes_none * 10 + (uint64_t)(*p - '0');
	}
	if (mmf_sys_read_small(THP_DIR "/enabled", buf, sizeof buf) < 0)
		return;
	f->top = parse_setting(buf);
	if (f->top < 0)
		f->top = MMF_THP_NEVER;
	if (by_name) {
		/* every size a folio can have (a power of two, 8 kB to 16 GiB)
		 * asked by name: no directory listing */
		for (uint64_t kb = 8; kb <= (16ull << 20); kb <<= 1)
			probe_size(f, kb);
		return;
	}
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
			if (!strcmp(q, "kB"))
				probe_size(f, kb);
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

int mmf_folio_any(const struct mmf_folio_sys *f)
{
	if (f->top != MMF_THP_NEVER)
		return 1;
	for (int i = 0; i < f->nsizes; i++)
		if (f->state[i] != MMF_THP_NEVER)
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
		if (mmf_sys_read_small(path, buf, sizeof buf) > 0)
			for (const char *p = buf; *p >= '0' && *p <= '9'; p++)
				out[i] = out[i] * 10 + (uint64_t)(*p - '0');
	}
}

long mmf_folio_anon_huge(void)
{
	char buf[2048];
	if (mmf_sys_read_small("/proc/self/smaps_rollup", buf, sizeof buf) < 0)
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

/* ---- the policy in force ------------------------------------------------ */

/* Large folios' state (core.h), given to the alignment functions. */
struct mmf_folio_policy folio_policy;

/* ---- mapping alignment -------------------------------------------------- */

/* The folio alignment a new mapping should get, or 0.  Only private
 * anonymous mappings where the kernel picks the address (no MAP_FIXED, no
 * hint): a caller's address is never changed. */
uint64_t align_plan(struct mmf_folio_policy *fp, const struct mmf_op *op)
{
	int flags = (int)op->a[3];
	if (!PLD(fp->align_active) || op->a[0] != 0 || !(flags & MAP_ANONYMOUS) ||
	    (flags & MAP_TYPE) != MAP_PRIVATE ||
	    (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_GROWSDOWN | MAP_HUGETLB | MAP_LOCKED |
		      MAP_32BIT)))
		return 0;
	uint64_t len = ((uint64_t)op->a[1] + page - 1) & ~(uint64_t)(page - 1);
	if (len < (uint64_t)op->a[1] || len > (1ull << 46))
		return 0;
	/* Only what record_mmap() advises at once: under MMFOLD_THP=auto a
	 * mapping that is only watched keeps the kernel's placement (a
	 * conservative collector that grows its heap with address hints, as
	 * Guile's libgc does, kept 25% more memory when such mappings moved). */
	int advised = fp->thp_active && !PLD(fp->thp_disabled) && len >= (uint64_t)cfg.v[MMF_OPT_THP_MIN] &&
		      !(flags & MAP_STACK) &&
		      mmf_thp_at_mmap(cfg.v[MMF_OPT_THP] == MMF_THP_ADVISE, (int)op->a[2] == PROT_NONE) ==
			      MMF_THP_NOW;
	return mmf_folio_align_for(&fp->sys, len, cfg.v[MMF_OPT_ALIGN], cfg.v[MMF_OPT_ALIGN_MIN], advised);
}

/* Places the mapping of op at an A-aligned address.  First one call: the
 * next aligned spot below the lowest address the kernel chose, as a hint
 * (not MAP_FIXED_NOREPLACE: the kernel takes a hint only where its own
 * search could have placed the mapping, outside a MAP_GROWSDOWN area's
 * guard gap).  Else map A bytes more and trim both ends.  Else the
 * caller's own call, unchanged: alignment never makes a call fail.  The
 * length and every other argument are the caller's, and errno is what the
 * caller's call alone would have left: a failed try does not show. */
long mmap_aligned(struct mmf_folio_policy *fp, const struct mmf_op *op, struct mmf_tstats *t,
		  uint64_t A)
{
	uint64_t len = ((uint64_t)op->a[1] + page - 1) & ~(uint64_t)(page - 1);
	struct mmf_op o = *op;
	uint64_t t0 = mmf_ticks();
	int err = errno;
	long r;
	if (fp->low_water > len + A) {
		uint64_t guess = (fp->low_water - len) & ~(A - 1);
		o.a[0] = (long)guess;
		r = o.fwd(&o);
		if (!mmf_is_err(r) && !((uint64_t)r & (A - 1)))
			goto aligned; /* the hint, or another aligned spot */
		if (!mmf_is_err(r))
			mmf_sys_munmap((void *)r, len);
	}
	o.a[0] = 0;
	o.a[3] = op->a[3];
	o.a[1] = (long)(len + A - page);
	r = o.fwd(&o);
	if (!mmf_is_err(r)) {
		uint64_t s = ((uint64_t)r + A - 1) & ~(A - 1), end = (uint64_t)r + len + A - page;
		if (s > (uint64_t)r)
			mmf_sys_munmap((void *)r, s - (uint64_t)r);
		if (end > s + len)
			mmf_sys_munmap((void *)(s + len), end - (s + len));
		r = (long)s;
		mmf_event(MMF_E_ALIGN_OVERMAP);
		goto aligned;
	}
	mmf_event(MMF_E_ALIGN_GAVEUP);
	errno = err;
	r = op->fwd(op);
	goto done;
aligned:
	errno = err;
	mmf_event(MMF_E_ALIGNED);
	mmf_event_add(MMF_E_ALIGNED_BYTES, len);
done:
	mmf_stat_add(t, op->kind, MMF_S_KERNEL_NS, mmf_ticks() - t0);
	mmf_stat_add(t, op->kind, MMF_S_FORWARDED, 1);
	mmf_stat_add(t, op->kind, MMF_S_BYTES_KERNEL, len);
	if (mmf_is_err(r))
		mmf_stat_add(t, op->kind, MMF_S_ERRORS, 1);
	return r;
}

/* mremap(MREMAP_MAYMOVE) of an aligned anonymous mapping: keep the
 * alignment.  Grow in place if the kernel can (what it tries first anyway);
 * else move it with MREMAP_FIXED into an aligned spot reserved for it; else
 * the caller's own call.  Returns 1 and sets *res when it did the call. */
int mremap_aligned(struct mmf_folio_policy *fp, const struct mmf_op *op, struct mmf_tstats *t,
		   long *res)
{
	uint64_t old = (uint64_t)op->a[0];
	uint64_t newlen = ((uint64_t)op->a[2] + page - 1) & ~(uint64_t)(page - 1);
	struct mmf_rec rec;
	uint64_t oldlen = ((uint64_t)op->a[1] + page - 1) & ~(uint64_t)(page - 1);
	/* Only a plain move of one owned, unsealed record: a resizing move of
	 * one VMA fails before it changes anything, so a failed attempt can be
	 * undone by unmapping the reserved target. */
	if (!PLD(fp->align_active) || op->a[3] != MREMAP_MAYMOVE || newlen < (uint64_t)op->a[2] ||
	    newlen > (1ull << 46) || !oldlen || newlen <= oldlen ||
	    !mmf_map_lookup(&map, old, &rec) || !rec.a.owned || rec.a.sealed != 0 ||
	    rec.start > old || rec.end < old + oldlen)
		return 0;
	int advised = (rec.a.adv_known & MMF_ADV_HUGEPAGE) && (rec.a.adv_set & MMF_ADV_HUGEPAGE);
	uint64_t A = mmf_folio_align_for(&fp->sys, newlen, cfg.v[MMF_OPT_ALIGN],
					 cfg.v[MMF_OPT_ALIGN_MIN], advised);
	if (!A || (old & (A - 1)))
		return 0;
	struct mmf_op o = *op;
	uint64_t t0 = mmf_ticks();
	int err = errno; /* a failed try does not show (mmap_aligned) */
	o.a[3] = 0; /* in place */
	long r = o.fwd(&o);
	if (mmf_is_err(r)) {
		uint64_t span_len = newlen + A - page;
		long res0 = mmf_sys6(SYS_mmap, 0, (long)span_len, PROT_NONE,
				     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		r = -ENOMEM;
		if (!mmf_is_err(res0)) {
			uint64_t base = (uint64_t)res0, tgt = (base + A - 1) & ~(A - 1);
			if (tgt > base)
				mmf_sys_munmap((void *)base, tgt - base);
			if (base + span_len > tgt + newlen)
				mmf_sys_munmap((void *)(tgt + newlen), base + span_len - (tgt + newlen));
			o.a[3] = MREMAP_MAYMOVE | MREMAP_FIXED;
			o.a[4] = (long)tgt;
			r = o.fwd(&o);
			if (mmf_is_err(r))
				mmf_sys_munmap((void *)tgt, newlen);
		}
		errno = err;
		if (mmf_is_err(r)) {
			mmf_event(MMF_E_ALIGN_GAVEUP);
			r = op->fwd(op);
		} else {
			mmf_event(MMF_E_ALIGNED);
			mmf_event_add(MMF_E_ALIGNED_BYTES, newlen);
		}
	}
	mmf_stat_add(t, op->kind, MMF_S_KERNEL_NS, mmf_ticks() - t0);
	mmf_stat_add(t, op->kind, MMF_S_FORWARDED, 1);
	mmf_stat_add(t, op->kind, MMF_S_BYTES_KERNEL, newlen);
	if (mmf_is_err(r))
		mmf_stat_add(t, op->kind, MMF_S_ERRORS, 1);
	*res = r;
	return 1;
}

void mmf_folio_report(struct mmf_buf *b, int json)
{
	const struct mmf_folio_policy *fp = &folio_policy;
	uint64_t now[MMF_FOLIO_SIZES];
	static const char *const st[] = {"never", "madvise", "always"};
	long huge = mmf_folio_anon_huge();
	mmf_folio_fault_counts(&fp->sys, now);
	if (json) {
		mmf_puts(b, ",\"folio\":{\"thp\":\"");
		mmf_puts(b, st[fp->sys.top]);
		mmf_puts(b, "\",\"advising\":");
		mmf_putu(b, (uint64_t)(fp->thp_active && !fp->thp_disabled));
		mmf_puts(b, ",\"anon_huge_bytes\":");
		mmf_puti(b, huge);
		mmf_puts(b, ",\"anon_fault_alloc\":{");
		for (int i = 0; i < fp->sys.nsizes; i++) {
			mmf_puts(b, i ? ",\"" : "\"");
			mmf_putu(b, fp->sys.size[i] >> 10);
			mmf_puts(b, "kB\":");
			mmf_putu(b, now[i] - fp->faults0[i]);
		}
		mmf_puts(b, "}}");
		return;
	}
	mmf_puts(b, "folios: THP ");
	mmf_puts(b, st[fp->sys.top]);
	mmf_puts(b, fp->thp_active && !fp->thp_disabled ? ", advising" : ", not advising");
	mmf_puts(b, "; AnonHugePages ");
	mmf_puti(b, huge < 0 ? -1 : huge >> 10);
	mmf_puts(b, " kB; anon_fault_alloc during the run (system-wide):");
	int any = 0;
	for (int i = 0; i < fp->sys.nsizes; i++)
		if (fp->sys.state[i] != MMF_THP_NEVER || now[i] != fp->faults0[i]) {
			mmf_putc(b, ' ');
			mmf_putu(b, fp->sys.size[i] >> 10);
			mmf_puts(b, "kB ");
			mmf_putu(b, now[i] - fp->faults0[i]);
			any = 1;
		}
	mmf_puts(b, any ? "\n" : " none enabled\n");
}
