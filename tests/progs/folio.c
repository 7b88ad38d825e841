/* Large-folio policy checks (tests/unit/check_preload.c, suite "folio").
 *   folio place    maps and unmaps anonymous mappings of several sizes:
 *                  prints how many came back 2 MiB / 64 KiB aligned and
 *                  whether /proc/self/maps is exactly as before (nothing
 *                  left over, no length changed)
 *   folio hint     a hinted, a MAP_FIXED and a MAP_FIXED_NOREPLACE mapping
 *                  must land where asked
 *   folio nohuge   MADV_NOHUGEPAGE and PR_SET_THP_DISABLE are respected
 *   folio inherit  a MAP_FIXED commit inside a large reservation: its
 *                  VmFlags (hg when mmfold advised the reservation)
 *   folio policy   which mappings end with MADV_HUGEPAGE (hg) under the
 *                  policy in force: a densely and a sparsely touched
 *                  read-write mapping (each followed by 64 forwarded
 *                  calls, when MMFOLD_THP=auto looks at them), a
 *                  reservation and a commit inside it, a MAP_STACK
 *                  mapping, a dense one the program marked NOHUGEPAGE
 *   folio commits [N]  a reservation committed three ways (MAP_FIXED then
 *                  touched densely, MAP_FIXED then touched one page per
 *                  2 MiB block, mprotect to read-write then touched
 *                  densely), 64 forwarded calls, then which ranges carry
 *                  hg.  With N, first binds a file holding N over
 *                  khugepaged/max_ptes_none in a mount namespace of its
 *                  own and runs itself again (root; "cannot: ..." and exit
 *                  77 where it cannot) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#define PG ((size_t)getpagesize()) /* the system's page size */

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static char *slurp(const char *path)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDONLY);
	size_t n = 0;
	ssize_t r;
	while (fd >= 0 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)r;
	if (fd >= 0)
		close(fd);
	buf[n] = 0;
	return buf;
}

/* The VmFlags line of the VMA containing p ("" if none). */
static void vmflags(void *p, char *out, size_t n)
{
	char *s = slurp("/proc/self/smaps");
	uintptr_t a = (uintptr_t)p;
	out[0] = 0;
	for (char *line = s; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		unsigned long lo, hi;
		static int in;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = a >= lo && a < hi;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			snprintf(out, n, "%s", line + 8);
			in = 0;
		}
		line = next;
	}
}

static int has(const char *flags, const char *f)
{
	char pat[8];
	snprintf(pat, sizeof pat, " %s", f);
	const char *p = strstr(flags, pat);
	return p && (p[3] == ' ' || p[3] == 0);
}

static void *must_map(void *a, size_t len, int prot, int flags)
{
	void *p = mmap(a, len, prot, flags | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "place";
	printf("folio %s\n", what);
	fflush(stdout);
	if (!strcmp(what, "place")) {
		const size_t sizes[] = {(3 << 20) + PG, 5 << 20, 2 << 20, 64 << 10,
					(1 << 20) + 3 * PG, (4 << 20) + (64 << 10)};
		static char before[1 << 16];
		int a2m = 0, a64k = 0, n = (int)(sizeof sizes / sizeof sizes[0]);
		/* a first round lets libc and mmfold make their own allocations */
		for (int round = 0; round < 4; round++) {
			if (round == 1) {
				snprintf(before, sizeof before, "%s", slurp("/proc/self/maps"));
				a2m = a64k = 0;
			}
			for (int i = 0; i < n; i++) {
				char *p = must_map(NULL, sizes[i], PROT_READ | PROT_WRITE, 0);
				char *q = must_map(NULL, 2 * PG, PROT_READ, 0); /* a neighbour */
				p[0] = 1;
				p[sizes[i] - 1] = 2;
				if (sizes[i] >= (2u << 20))
					a2m += ((uintptr_t)p & ((2u << 20) - 1)) == 0;
				a64k += ((uintptr_t)p & 0xffff) == 0;
				if (munmap(p, sizes[i]) || munmap(q, 2 * PG))
					return 3;
			}
		}
		char *after = slurp("/proc/self/maps");
		printf("2M-aligned %d of %d large, 64K-aligned %d of %d\n", a2m, 3 * 4, a64k, 3 * n);
		printf("maps as before: %s\n", strcmp(before, after) ? "NO" : "yes");
		if (strcmp(before, after))
			fprintf(stderr, "before:\n%s\nafter:\n%s\n", before, after);
	} else if (!strcmp(what, "hint")) {
		/* page-aligned, not 64 KiB-aligned */
		char *h1 = (char *)0x6f0000000000 + 3 * PG, *h2 = (char *)0x6f0001000000 + 5 * PG,
		     *h3 = (char *)0x6f0002000000 + 7 * PG;
		char *p = must_map(h1, 3 << 20, PROT_READ | PROT_WRITE, 0);
		char *q = must_map(h2, 3 << 20, PROT_READ | PROT_WRITE, MAP_FIXED);
		char *r = must_map(h3, 3 << 20, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE);
		printf("hint kept: %s\n", p == h1 ? "yes" : "NO");
		printf("fixed kept: %s\n", q == h2 ? "yes" : "NO");
		printf("noreplace kept: %s\n", r == h3 ? "yes" : "NO");
		/* exact length: the page after each is not part of it */
		printf("length kept: %s\n",
		       (munmap(p, 3 << 20) || munmap(q, 3 << 20) || munmap(r, 3 << 20) ||
			mmap(h1 + (3 << 20), PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			     -1, 0) == MAP_FAILED)
			       ? "NO"
			       : "yes");
	} else if (!strcmp(what, "nohuge")) {
		char f[512];
		char *p = must_map(NULL, 4 << 20, PROT_READ | PROT_WRITE, 0);
		if (madvise(p, 4 << 20, MADV_NOHUGEPAGE))
			return 4;
		vmflags(p, f, sizeof f);
		printf("advised away: nh %d hg %d\n", has(f, "nh"), has(f, "hg"));
		char *res = must_map(NULL, 16 << 20, PROT_NONE, MAP_NORESERVE);
		if (madvise(res, 16 << 20, MADV_NOHUGEPAGE))
			return 4;
		char *c = must_map(res + (2 << 20), 4 << 20, PROT_READ | PROT_WRITE, MAP_FIXED);
		vmflags(c, f, sizeof f);
		printf("commit in a no-huge reservation: hg %d\n", has(f, "hg"));
		if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0))
			return 5;
		char *d = must_map(NULL, 4 << 20, PROT_READ | PROT_WRITE, 0);
		vmflags(d, f, sizeof f);
		printf("with PR_SET_THP_DISABLE: hg %d\n", has(f, "hg"));
	} else if (!strcmp(what, "mremap")) {
		/* grow a mapping that cannot grow in place: it moves */
		static char before[1 << 16];
		size_t l = 4 << 20, nl = (6 << 20) + (64 << 10);
		char *w = must_map(NULL, l, PROT_READ | PROT_WRITE, 0); /* warm-up */
		munmap(w, l);
		snprintf(before, sizeof before, "%s", slurp("/proc/self/maps"));
		/* one page more, given back at once: the page after p is free
		 * whether or not the kernel left a gap above (it aligns 4 MiB
		 * to its PMD size with 4 KiB pages, not with 16 KiB pages) */
		char *p = must_map(NULL, l + PG, PROT_READ | PROT_WRITE, 0);
		munmap(p + l, PG);
		memset(p, 7, l);
		char *blk = mmap(p + l, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		char *q = mremap(p, l, nl, MREMAP_MAYMOVE);
		if (q == MAP_FAILED || blk == MAP_FAILED)
			return 6;
		q[nl - 1] = 1;
		printf("moved: %s\n", q != p ? "yes" : "no");
		printf("2M-aligned after the move: %s\n", ((uintptr_t)q & ((2u << 20) - 1)) ? "no" : "yes");
		printf("content kept: %s\n", q[0] == 7 && q[l - 1] == 7 && q[l] == 0 ? "yes" : "NO");
		munmap(q, nl);
		munmap(blk, PG);
		printf("maps as before: %s\n", strcmp(before, slurp("/proc/self/maps")) ? "NO" : "yes");
	} else if (!strcmp(what, "policy")) {
		char f[512];
		size_t big = 64 << 20, blk = 2 << 20;
		char *tick = must_map(NULL, 4096, PROT_READ | PROT_WRITE, 0);
		char *dense = must_map(NULL, big, PROT_READ | PROT_WRITE, 0);
		char *sparse = must_map(NULL, big, PROT_READ | PROT_WRITE, 0);
		char *nohuge = must_map(NULL, big, PROT_READ | PROT_WRITE, 0);
		char *stack = must_map(NULL, 8 << 20, PROT_READ | PROT_WRITE, MAP_STACK);
		char *res = must_map(NULL, big, PROT_NONE, MAP_NORESERVE);
		char *commit = must_map(res + blk, 4 * blk, PROT_READ | PROT_WRITE, MAP_FIXED);
		if (madvise(nohuge, big, MADV_NOHUGEPAGE))
			return 4;
		/* dense: the first 8 MiB whole; sparse: one page in each of 16 blocks */
		memset(dense, 1, 4 * blk);
		memset(nohuge, 1, 4 * blk);
		for (int i = 0; i < 16; i++)
			sparse[(size_t)i * blk + 4096] = 1;
		stack[(8 << 20) - 1] = 1;
		/* forwarded calls: each changes the protection of one page */
		for (int i = 0; i < 64; i++)
			if (mprotect(tick, 4096, i % 2 ? PROT_READ | PROT_WRITE : PROT_READ))
				return 7;
		memset(dense + 4 * blk, 2, 4 * blk); /* goes on touching densely */
		struct { const char *name; char *p; } m[] = {
			{"dense", dense}, {"sparse", sparse}, {"nohuge", nohuge},
			{"stack", stack}, {"reservation", res}, {"commit", commit}};
		for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
			vmflags(m[i].p, f, sizeof f);
			printf("%s: hg %d\n", m[i].name, has(f, "hg"));
		}
		printf("content ok: %s\n", dense[12345] == 1 && dense[5 * blk] == 2 && sparse[4096] == 1 ? "yes" : "NO");
	} else if (!strcmp(what, "commits") && argc > 2) {
		/* the library reads max_ptes_none when it starts: set it in a
		 * namespace of our own, then start again without the argument */
		static const char knob[] = "/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none";
		char tmp[] = "/tmp/folio-ptes-XXXXXX";
		int fd = mkstemp(tmp);
		if (fd < 0 || write(fd, argv[2], strlen(argv[2])) < 0 || write(fd, "\n", 1) != 1)
			return 5;
		close(fd);
		if (unshare(CLONE_NEWNS) || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount(tmp, knob, NULL, MS_BIND, NULL)) {
			perror("cannot: a private mount over max_ptes_none");
			unlink(tmp);
			return 77;
		}
		unlink(tmp); /* the bind keeps the file */
		char *again[] = {argv[0], (char *)"commits", NULL};
		execv("/proc/self/exe", again);
		return 6;
	} else if (!strcmp(what, "commits")) {
		char f[512];
		size_t big = 64 << 20, blk = 2 << 20;
		char *tick = must_map(NULL, 4096, PROT_READ | PROT_WRITE, 0);
		char *res = must_map(NULL, big, PROT_NONE, MAP_NORESERVE);
		char *base = (char *)(((uintptr_t)res + blk - 1) & ~(uintptr_t)(blk - 1));
		char *dense = must_map(base, 8 * blk, PROT_READ | PROT_WRITE, MAP_FIXED);
		char *sparse = must_map(base + 10 * blk, 8 * blk, PROT_READ | PROT_WRITE, MAP_FIXED);
		char *prot = base + 20 * blk;
		if (mprotect(prot, 4 * blk, PROT_READ | PROT_WRITE))
			return 4;
		memset(dense, 1, 4 * blk);
		for (int i = 0; i < 8; i++)
			sparse[(size_t)i * blk + 4096] = 1;
		memset(prot, 3, 4 * blk);
		for (int i = 0; i < 64; i++)
			if (mprotect(tick, 4096, i % 2 ? PROT_READ | PROT_WRITE : PROT_READ))
				return 7;
		memset(dense + 4 * blk, 2, 4 * blk);
		printf("max_ptes_none: %s", slurp("/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none"));
		struct { const char *name; char *p; } m[] = {
			{"reserved", base + 28 * blk}, {"dense commit", dense},
			{"sparse commit", sparse}, {"mprotect commit", prot}};
		for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
			vmflags(m[i].p, f, sizeof f);
			printf("%s: hg %d\n", m[i].name, has(f, "hg"));
		}
		printf("content ok: %s\n",
		       dense[12345] == 1 && dense[5 * blk] == 2 && sparse[4096] == 1 && prot[blk] == 3 ? "yes" : "NO");
	} else if (!strcmp(what, "inherit")) {
		char f[512];
		char *res = must_map(NULL, 64 << 20, PROT_NONE, MAP_NORESERVE);
		char *c = must_map(res + (4 << 20), 1 << 20, PROT_READ | PROT_WRITE, MAP_FIXED);
		vmflags(c, f, sizeof f);
		printf("commit: hg %d\n", has(f, "hg"));
		memset(c, 1, 1 << 20);
		printf("content ok: %s\n", c[12345] == 1 ? "yes" : "NO");
	}
	return 0;
}
