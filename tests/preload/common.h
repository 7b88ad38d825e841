/* Shared helpers for the mmfold behaviour tests (header-only, all static).
 *
 * Everything printed by these helpers is deterministic: addresses are shown
 * as page indexes relative to an arena, never as absolute values. */
#ifndef MMFOLD_TEST_COMMON_H
#define MMFOLD_TEST_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The system's page size (the tests run on 4, 16 and 64 KiB page kernels);
 * PG_MAX bounds it for the few arrays sized by a page. */
static inline __attribute__((unused)) unsigned long page_size(void)
{
	static unsigned long pg;
	if (!pg)
		pg = (unsigned long)sysconf(_SC_PAGESIZE);
	return pg;
}
#define PG page_size()
#define PG_MAX 65536UL

#ifndef SYS_mseal
#define SYS_mseal 462
#endif
#ifndef PROT_SEM
#define PROT_SEM 0x8 /* accepted by x86 mprotect, maps to no VMA flag */
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#define MADV_GUARD_REMOVE 103
#endif

static inline __attribute__((unused)) const char *ename(int e)
{
	if (e == 0)
		return "0";
	const char *s = strerrorname_np(e);
	return s ? s : "E?";
}

/* ---- output: a growable text buffer written with write(2) ---- */

struct obuf {
	char *p;
	size_t n, cap;
};

static __attribute__((unused)) void wr_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			_exit(111);
		}
		p += k;
		n -= (size_t)k;
	}
}

static __attribute__((unused, format(printf, 2, 3))) void
ob_printf(struct obuf *b, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = b->cap - b->n;
		int k = vsnprintf(b->p ? b->p + b->n : NULL, room, fmt, ap);
		va_end(ap);
		if (k < 0)
			_exit(112);
		if ((size_t)k < room) {
			b->n += (size_t)k;
			return;
		}
		size_t nc = b->cap ? b->cap * 2 : 65536;
		while (nc - b->n <= (size_t)k)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (!np)
			_exit(113);
		b->p = np;
		b->cap = nc;
	}
}

/* Write the buffer out, each line preceded by prefix, and empty it. */
static __attribute__((unused)) void ob_flush(struct obuf *b, int fd,
					     const char *prefix)
{
	size_t i = 0, pl = strlen(prefix);
	while (i < b->n) {
		char *e = memchr(b->p + i, '\n', b->n - i);
		size_t end = e ? (size_t)(e - b->p) + 1 : b->n;
		if (pl)
			wr_all(fd, prefix, pl);
		wr_all(fd, b->p + i, end - i);
		i = end;
	}
	b->n = 0;
}

/* ---- deterministic random numbers (splitmix64) ---- */

static inline __attribute__((unused)) uint64_t rnd64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}
static inline __attribute__((unused)) uint64_t rnd(uint64_t *s, uint64_t n)
{
	return n ? rnd64(s) % n : 0;
}

#include "fault.h"

/* ---- per-page state from /proc/self/smaps ---- */

struct pstate {
	char perm[5];   /* "rw-p", or "...." when unmapped */
	char flags[96]; /* VmFlags without the volatile ones */
	int pkey;       /* ProtectionKey, -1 when the kernel does not show it */
	char mc;        /* mincore: '1' resident, '0' not, 'u' unmapped */
};

static __attribute__((unused)) char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap);
	for (;;) {
		if (cap - n < 4096) {
			cap *= 2;
			b = realloc(b, cap);
		}
		if (!b)
			_exit(114);
		ssize_t k = read(fd, b + n, cap - n - 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	b[n] = 0;
	*len = n;
	return b;
}

/* Flags that describe the VMA's meaning; "sd" (soft-dirty) is left out
 * because it only records that the kernel created a VMA. */
static int flag_kept(const char *f)
{
	return strncmp(f, "sd", 2) != 0;
}

/* ---- MMFOLD_BARRIER=uffd: what /proc shows differently ----
 *
 * In that mode a page the program made read-only with mprotect may be a
 * write-protected page of a read-write VMA instead (README.md, "Write
 * barriers"): /proc/self/maps and smaps say rw-p, smaps' VmFlags carry
 * "uw" (registered) and pagemap's bit 57 (uffd-wp) is set on the page.
 * When the tests run in that mode (the variable is in their environment),
 * the per-page states below show such a page as the read-only page it is
 * to the program: "r" for "w" in the protection, no "wr" and no "uw" in
 * the flags.  tests/preload/run.sh compares the untranslated /proc view
 * separately (the uffd test). */
static int barrier_uffd(void)
{
	static int v = -1;
	if (v < 0) {
		const char *e = getenv("MMFOLD_BARRIER");
		v = e && strcmp(e, "uffd") == 0;
	}
	return v;
}

/* pagemap's uffd-wp bit of the page at a (0 when it cannot be read). */
static __attribute__((unused)) int uffd_wp_bit(uintptr_t a)
{
	static int fd = -1;
	if (fd < 0)
		fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	uint64_t v = 0;
	if (fd < 0 || pread(fd, &v, sizeof v, (off_t)(a / PG * 8)) != (ssize_t)sizeof v)
		return 0;
	return (int)((v >> 57) & 1);
}

/* The state of the page at a as the program sees it (see barrier_uffd). */
static void barrier_view(struct pstate *s, uintptr_t a)
{
	char out[96] = "", *save = NULL, *tok, tmp[96];
	int wp = s->perm[1] == 'w' && uffd_wp_bit(a);
	if (wp)
		s->perm[1] = '-';
	strcpy(tmp, s->flags);
	for (tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "uw") == 0 || (wp && strcmp(tok, "wr") == 0))
			continue;
		size_t fl = strlen(out);
		if (fl + strlen(tok) + 2 < sizeof out)
			sprintf(out + fl, "%s%s", fl ? "," : "", tok);
	}
	strcpy(s->flags, out);
}

/* Fill st[0..npages) for the pages at base.  Returns 0, -1 on error. */
static __attribute__((unused)) int page_states(uintptr_t base, size_t npages,
					       struct pstate *st)
{
	for (size_t i = 0; i < npages; i++) {
		strcpy(st[i].perm, "....");
		st[i].flags[0] = 0;
		st[i].pkey = -1;
		st[i].mc = 'u';
	}
	size_t len;
	char *buf = read_file("/proc/self/smaps", &len);
	if (!buf)
		return -1;
	uintptr_t end = base + npages * PG;
	uintptr_t vs = 0, ve = 0;
	int in = 0;
	char perm[5] = "", flags[96] = "";
	int pkey = -1;
	char *line = buf;
	while (line && *line) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		unsigned long a, b;
		char pm[8];
		if (sscanf(line, "%lx-%lx %4s ", &a, &b, pm) == 3 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			vs = a;
			ve = b;
			in = vs < end && ve > base;
			memcpy(perm, pm, 4);
			perm[4] = 0;
			flags[0] = 0;
			pkey = -1;
		} else if (in && strncmp(line, "ProtectionKey:", 14) == 0) {
			pkey = atoi(line + 14);
		} else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			char *save = NULL, *tok;
			for (tok = strtok_r(line + 8, " ", &save); tok;
			     tok = strtok_r(NULL, " ", &save)) {
				if (!flag_kept(tok))
					continue;
				size_t fl = strlen(flags);
				if (fl + strlen(tok) + 2 < sizeof flags)
					sprintf(flags + fl, "%s%s", fl ? "," : "", tok);
			}
			/* VmFlags is the last field of a block, except
			 * ProtectionKey which comes before it. */
			for (uintptr_t p = vs < base ? base : vs; p < ve && p < end;
			     p += PG) {
				struct pstate *s = &st[(p - base) / PG];
				memcpy(s->perm, perm, 5);
				strcpy(s->flags, flags);
				s->pkey = pkey;
				if (barrier_uffd())
					barrier_view(s, p);
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	free(buf);
	for (size_t i = 0; i < npages; i++) {
		unsigned char v = 0;
		if (mincore((void *)(base + i * PG), PG, &v) == 0)
			st[i].mc = (v & 1) ? '1' : '0';
	}
	return 0;
}

/* Print one line per page: smaps protection and flags, protection key,
 * residency, then what touching it does (W writable, R read-only, a
 * access error, u unmapped, b bus error) and a checksum of its content.
 * Must run while nobody else changes the pages.  When save is not NULL it
 * receives the npages states read from smaps. */
static __attribute__((unused)) void probe_pages(struct obuf *o, const char *tag,
						uintptr_t base, size_t npages,
						struct pstate *save)
{
	struct pstate *st = calloc(npages, sizeof *st);
	if (!st || page_states(base, npages, st) != 0) {
		ob_printf(o, "%s: cannot read smaps\n", tag);
		free(st);
		return;
	}
	for (size_t i = 0; i < npages; i++) {
		volatile char *p = (volatile char *)(base + i * PG);
		char c;
		int r = fg_read(p, &c), w = -1;
		uint32_t sum = 0;
		char what;
		if (r) {
			what = (char)r;
		} else {
			w = fg_rewrite(p);
			what = w == 0 ? 'W' : w == 'a' ? 'R' : (char)w;
			if (fg_sum(p, PG, &sum))
				what = '?';
		}
		ob_printf(o, "%s p%03zu %s [%s] pk%d mc%c %c", tag, i, st[i].perm,
			  st[i].flags, st[i].pkey, st[i].mc, what);
		if (!r)
			ob_printf(o, " %08x", sum);
		ob_printf(o, "\n");
	}
	if (save)
		memcpy(save, st, npages * sizeof *st);
	free(st);
}

/* Reserve npages PROT_NONE at a fixed spot far below the usual mmap area,
 * so no allocation made by anyone else (malloc, thread stacks, the
 * library under test) can land in holes we punch later. */
static __attribute__((unused)) uintptr_t reserve_arena(size_t npages)
{
	for (uintptr_t hint = 0x200000000000UL; hint < 0x300000000000UL;
	     hint += 0x1000000000UL) {
		void *p = mmap((void *)hint, npages * PG, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
				       MAP_FIXED_NOREPLACE,
			       -1, 0);
		if (p == (void *)hint)
			return hint;
		if (p != MAP_FAILED)
			munmap(p, npages * PG);
	}
	return 0;
}

static void watchdog_fire(int sig)
{
	(void)sig;
	static const char m[] = "watchdog: timeout\n";
	wr_all(2, m, sizeof m - 1);
	wr_all(1, m, sizeof m - 1);
	_exit(99);
}

/* alarm()-based watchdog: a hang ends the process with status 99.  The
 * time is multiplied by WATCHDOG_SCALE (1 to 100; the arm64 VM, emulated,
 * sets it: two VMs sharing the machine's two cores made a reference run
 * of barrier take more than its 60 s there). */
static __attribute__((unused)) void watchdog(unsigned secs)
{
	const char *e = getenv("WATCHDOG_SCALE");
	int k = e ? atoi(e) : 1;
	if (k > 1 && k <= 100)
		secs *= (unsigned)k;
	signal(SIGALRM, watchdog_fire);
	alarm(secs);
}

static __attribute__((unused)) const char *prot_name(int prot)
{
	static __thread char b[48];
	if (prot == PROT_NONE)
		return "NONE";
	int k = 0;
	b[0] = 0;
	if (prot & PROT_READ)
		k += sprintf(b + k, "R");
	if (prot & PROT_WRITE)
		k += sprintf(b + k, "W");
	if (prot & PROT_EXEC)
		k += sprintf(b + k, "X");
	int rest = prot & ~(PROT_READ | PROT_WRITE | PROT_EXEC);
	if (rest)
		sprintf(b + k, "%s%#x", k ? "|" : "", rest);
	return b;
}

#endif
