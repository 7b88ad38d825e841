/* errno_matrix — one line per case: call, argument class, result, errno.
 *
 * Every call is made TWICE in a row (the second one is the "redundant"
 * call an optimiser may be tempted to skip), once through the libc
 * wrappers and once more through syscall().  Cases that leave partial
 * effects print the resulting per-page state.  Output must not change
 * when the library under test is loaded. */
#include "common.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define SLOTPG 16
#define NSLOTS 160

static int via; /* 0: libc wrappers, 1: syscall() */
static uintptr_t arena, S; /* S: the current case's slot */
static unsigned next_slot;
static struct obuf out;

/* ---- the calls, through libc or syscall() ---- */

static long x_mprotect(uintptr_t a, size_t l, long p)
{
	return via ? syscall(SYS_mprotect, a, l, p) : mprotect((void *)a, l, (int)p);
}
static long x_pkey_mprotect(uintptr_t a, size_t l, long p, long k)
{
	return via ? syscall(SYS_pkey_mprotect, a, l, p, k)
		   : pkey_mprotect((void *)a, l, (int)p, (int)k);
}
static long x_munmap(uintptr_t a, size_t l)
{
	return via ? syscall(SYS_munmap, a, l) : munmap((void *)a, l);
}
static long x_madvise(uintptr_t a, size_t l, long adv)
{
	return via ? syscall(SYS_madvise, a, l, adv) : madvise((void *)a, l, (int)adv);
}
static long x_mlock(uintptr_t a, size_t l)
{
	return via ? syscall(SYS_mlock, a, l) : mlock((void *)a, l);
}
static long x_mlock2(uintptr_t a, size_t l, long f)
{
	return via ? syscall(SYS_mlock2, a, l, f) : mlock2((void *)a, l, (unsigned)f);
}
static long x_munlock(uintptr_t a, size_t l)
{
	return via ? syscall(SYS_munlock, a, l) : munlock((void *)a, l);
}
static long x_mlockall(long f)
{
	return via ? syscall(SYS_mlockall, f) : mlockall((int)f);
}
static long x_munlockall(void)
{
	return via ? syscall(SYS_munlockall) : munlockall();
}
static long x_mseal(uintptr_t a, size_t l, long f)
{
	return syscall(SYS_mseal, a, l, f); /* no glibc wrapper */
}
static long x_pkey_alloc(long f, long r)
{
	return via ? syscall(SYS_pkey_alloc, f, r) : pkey_alloc((unsigned)f, (unsigned)r);
}
static uintptr_t x_mremap(uintptr_t a, size_t ol, size_t nl, long f, uintptr_t na)
{
	if (via)
		return (uintptr_t)syscall(SYS_mremap, a, ol, nl, f, na);
	return (uintptr_t)mremap((void *)a, ol, nl, (int)f, (void *)na);
}
static uintptr_t x_mmap(uintptr_t a, size_t l, long prot, long fl, int fd)
{
	if (via)
		return (uintptr_t)syscall(SYS_mmap, a, l, prot, fl, (long)fd, 0L);
	return (uintptr_t)mmap((void *)a, l, (int)prot, (int)fl, fd, 0);
}

/* ---- reporting ---- */

/* errno before each call; a successful call must leave it alone. */
#define MARK 4242

static void line(const char *name, int k, long r, int e)
{
	ob_printf(&out, "[%s] %-44s #%d: %ld %s", via ? "sys " : "libc", name, k,
		  r, r == -1 ? ename(e) : "");
	if (r != -1 && e != MARK)
		ob_printf(&out, " (errno changed to %d)", e);
	ob_printf(&out, "\n");
}
static void pline(const char *name, int k, uintptr_t r, int e)
{
	if (r != (uintptr_t)MAP_FAILED && e != MARK)
		ob_printf(&out, "[%s] %-44s #%d: errno changed to %d\n",
			  via ? "sys " : "libc", name, k, e);
	if (r == (uintptr_t)MAP_FAILED)
		ob_printf(&out, "[%s] %-44s #%d: FAILED %s\n", via ? "sys " : "libc",
			  name, k, ename(e));
	else if (r >= S && r < S + SLOTPG * PG && (r - S) % PG == 0)
		ob_printf(&out, "[%s] %-44s #%d: p%lu\n", via ? "sys " : "libc", name,
			  k, (r - S) / PG);
	else if (r >= arena && r < arena + NSLOTS * SLOTPG * PG)
		ob_printf(&out, "[%s] %-44s #%d: arena+%#lx\n", via ? "sys " : "libc",
			  name, k, (r - arena) % (SLOTPG * PG));
	else
		ob_printf(&out, "[%s] %-44s #%d: elsewhere\n", via ? "sys " : "libc",
			  name, k);
}

/* Each case is run twice; errno is set to MARK before each call. */
#define T(name, expr)                                                         \
	do {                                                                  \
		for (int k_ = 1; k_ <= 2; k_++) {                             \
			errno = MARK;                                         \
			long r_ = (long)(expr);                               \
			line(name, k_, r_, errno);                            \
		}                                                             \
	} while (0)
#define TP(name, expr)                                                        \
	do {                                                                  \
		for (int k_ = 1; k_ <= 2; k_++) {                             \
			errno = MARK;                                         \
			uintptr_t r_ = (uintptr_t)(expr);                     \
			pline(name, k_, r_, errno);                           \
		}                                                             \
	} while (0)

/* Print the state of pages [from, to) of the slot: protection, the flags
 * that matter here, and whether the content is all zero. */
static void show(const char *what, unsigned from, unsigned to)
{
	struct pstate st[SLOTPG];
	page_states(S, SLOTPG, st);
	ob_printf(&out, "       %s:", what);
	for (unsigned i = from; i < to; i++) {
		static const char *keep[] = { "lo", "lf", "hg", "nh", "dc", "dd", "wf", "sl" };
		char fl[64] = "";
		for (unsigned j = 0; j < sizeof keep / sizeof keep[0]; j++) {
			const char *f = st[i].flags;
			size_t kl = strlen(keep[j]);
			for (const char *p = f; (p = strstr(p, keep[j])); p += kl)
				if ((p == f || p[-1] == ',') && (p[kl] == ',' || !p[kl])) {
					strcat(fl, fl[0] ? "," : "");
					strcat(fl, keep[j]);
					break;
				}
		}
		char c;
		const char *content = "";
		if (fg_read((volatile char *)(S + i * PG), &c) == 0) {
			static const char zero[PG_MAX];
			content = memcmp((const void *)(S + i * PG), zero, PG) ? "=data" : "=0";
		}
		ob_printf(&out, " p%u:%s%s%s%s%s%s", i, st[i].perm, fl[0] ? "(" : "", fl,
			  fl[0] ? ")" : "", st[i].mc == '1' ? "+res" : "", content);
	}
	ob_printf(&out, "\n");
}

/* A fresh slot: all SLOTPG pages unmapped, so the first and last pages
 * stay holes unless a case maps them. */
static uintptr_t slot(const char *title)
{
	if (next_slot >= NSLOTS) {
		ob_printf(&out, "out of slots\n");
		ob_flush(&out, 1, "");
		exit(1);
	}
	S = arena + (uintptr_t)next_slot++ * SLOTPG * PG;
	munmap((void *)S, SLOTPG * PG);
	ob_printf(&out, "-- %s\n", title);
	return S;
}

/* Set-up mapping; a failure here is a harness error. */
static void map(unsigned pg, unsigned n, int prot, int flags)
{
	void *p = mmap((void *)(S + pg * PG), n * PG, prot,
		       flags | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p == MAP_FAILED) {
		ob_printf(&out, "setup mmap failed: %s\n", ename(errno));
		ob_flush(&out, 1, "");
		exit(1);
	}
}
static void fill(unsigned pg, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		memset((void *)(S + (pg + i) * PG), 0x5a + (int)i, PG);
}
#define P(n) (S + (uintptr_t)(n) * PG)

static void cases_mprotect(void)
{
	slot("mprotect: argument checks");
	map(1, 2, PROT_READ, MAP_PRIVATE);
	T("mprotect unaligned-addr R", x_mprotect(P(1) + 1, PG, PROT_READ));
	T("mprotect unaligned-addr RW", x_mprotect(P(1) + 123, PG, PROT_READ | PROT_WRITE));
	T("mprotect unaligned-len R (rounds up)", x_mprotect(P(1), PG + 1, PROT_READ));
	T("mprotect prot|0x10", x_mprotect(P(1), PG, PROT_READ | 0x10));
	T("mprotect prot|0x1000000 (GROWSDOWN) non-gd", x_mprotect(P(1), PG, PROT_READ | 0x1000000));
	T("mprotect prot|GROWSUP", x_mprotect(P(1), PG, PROT_READ | PROT_GROWSUP));
	T("mprotect prot|GROWSDOWN|GROWSUP", x_mprotect(P(1), PG, PROT_READ | PROT_GROWSDOWN | PROT_GROWSUP));
	T("mprotect prot R|SEM(0x8) on R", x_mprotect(P(1), PG, PROT_READ | PROT_SEM));
	T("mprotect prot 0x80000000", x_mprotect(P(1), PG, (long)(int)0x80000000));
	show("after", 1, 3);
	T("mprotect len 0 mapped", x_mprotect(P(1), 0, PROT_WRITE));
	T("mprotect len 0 unmapped", x_mprotect(P(5), 0, PROT_WRITE));
	T("mprotect len 0 unaligned", x_mprotect(P(5) + 7, 0, PROT_WRITE));
	T("mprotect len SIZE_MAX", x_mprotect(P(1), SIZE_MAX, PROT_READ));
	T("mprotect len wraps to 0 (-addr)", x_mprotect(P(1), (size_t)0 - P(1), PROT_READ));
	T("mprotect len wraps past 0 (-addr+2pg)", x_mprotect(P(1), (size_t)0 - P(1) + 2 * PG, PROT_READ));
	T("mprotect addr > TASK_SIZE", x_mprotect(0xffff800000000000UL, PG, PROT_READ));
	show("after", 1, 3);

	slot("mprotect: holes");
	map(1, 2, PROT_READ, MAP_PRIVATE);
	map(4, 1, PROT_READ, MAP_PRIVATE);
	T("mprotect R->RW over [map map hole map]", x_mprotect(P(1), 4 * PG, PROT_READ | PROT_WRITE));
	show("after", 0, 6);
	/* The failed call changed p1-p2: asking for R again is no no-op. */
	T("mprotect R p1-p2 after failed call", x_mprotect(P(1), 2 * PG, PROT_READ));
	show("after", 0, 6);
	T("mprotect RW p1-p2 again", x_mprotect(P(1), 2 * PG, PROT_READ | PROT_WRITE));
	T("mprotect same over [hole map map]", x_mprotect(P(0), 3 * PG, PROT_READ | PROT_WRITE));
	T("mprotect RW->R over [hole map map]", x_mprotect(P(0), 3 * PG, PROT_READ));
	show("after", 0, 6);
	T("mprotect unmapped", x_mprotect(P(8), 2 * PG, PROT_READ));
	T("mprotect huge len ending in hole", x_mprotect(P(4), 1UL << 40, PROT_READ | PROT_WRITE));
	show("after", 0, 6);
	T("pkey_mprotect(-1) RW same", x_pkey_mprotect(P(4), PG, PROT_READ | PROT_WRITE, -1));
	T("pkey_mprotect(-1) over hole", x_pkey_mprotect(P(1), 4 * PG, PROT_READ, -1));
	show("after", 0, 6);

	slot("mprotect: files");
	char path[] = "/tmp/mmfold-matrix.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, 2 * PG) != 0) {
		ob_printf(&out, "cannot create temp file\n");
	} else {
		int ro = open(path, O_RDONLY);
		unlink(path);
		close(fd);
		TP("mmap SHARED RW of O_RDONLY file", x_mmap(P(1), PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, ro));
		TP("mmap SHARED R of O_RDONLY file", x_mmap(P(1), PG, PROT_READ, MAP_SHARED | MAP_FIXED, ro));
		T("mprotect RW on SHARED O_RDONLY", x_mprotect(P(1), PG, PROT_READ | PROT_WRITE));
		T("mprotect W on SHARED O_RDONLY", x_mprotect(P(1), PG, PROT_WRITE));
		T("mprotect R (same) on SHARED O_RDONLY", x_mprotect(P(1), PG, PROT_READ));
		T("mprotect RX on SHARED O_RDONLY", x_mprotect(P(1), PG, PROT_READ | PROT_EXEC));
		TP("mmap PRIVATE R of O_RDONLY file", x_mmap(P(3), PG, PROT_READ, MAP_PRIVATE | MAP_FIXED, ro));
		T("mprotect RW on PRIVATE O_RDONLY", x_mprotect(P(3), PG, PROT_READ | PROT_WRITE));
		show("after", 1, 4);
		close(ro);
	}
}

/* PROT_EXEC on a file from a noexec mount.  The mount lives in a private
 * mount namespace, so nothing leaks when the process ends. */
static void cases_noexec(void)
{
	slot("noexec mount");
	char dir[] = "/tmp/mmfold-nx.XXXXXX";
	if (!mkdtemp(dir)) {
		ob_printf(&out, "skip: noexec\n");
		return;
	}
	static int unshared = -1;
	if (unshared < 0) {
		unshared = unshare(CLONE_NEWNS) == 0 &&
			   mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
	}
	if (mount("tmpfs", dir, "tmpfs", MS_NOEXEC | MS_NOSUID | MS_NODEV,
		  "size=64k") != 0) {
		rmdir(dir);
		ob_printf(&out, "skip: noexec\n");
		return;
	}
	char file[64];
	snprintf(file, sizeof file, "%s/f", dir);
	int fd = open(file, O_RDWR | O_CREAT, 0755);
	if (fd >= 0 && ftruncate(fd, 2 * PG) == 0) {
		TP("mmap RX PRIVATE of noexec file", x_mmap(P(1), PG, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd));
		TP("mmap R PRIVATE of noexec file", x_mmap(P(1), PG, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd));
		T("mprotect RX on noexec file", x_mprotect(P(1), PG, PROT_READ | PROT_EXEC));
		T("mprotect X on noexec file", x_mprotect(P(1), PG, PROT_EXEC));
		T("pkey_mprotect(-1) RX on noexec file", x_pkey_mprotect(P(1), PG, PROT_READ | PROT_EXEC, -1));
		T("mprotect R (same) on noexec file", x_mprotect(P(1), PG, PROT_READ));
		T("mprotect RW on noexec PRIVATE file", x_mprotect(P(1), PG, PROT_READ | PROT_WRITE));
		TP("mmap RW SHARED of noexec file", x_mmap(P(3), PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd));
		T("mprotect RWX on noexec SHARED file", x_mprotect(P(3), PG, PROT_READ | PROT_WRITE | PROT_EXEC));
		show("after", 1, 4);
		munmap((void *)P(1), 3 * PG);
	} else {
		ob_printf(&out, "noexec file: %s\n", ename(errno));
	}
	if (fd >= 0)
		close(fd);
	umount2(dir, MNT_DETACH);
	rmdir(dir);
}

static void cases_pkey(void)
{
	slot("pkeys");
	map(1, 1, PROT_READ, MAP_PRIVATE);
	T("pkey_mprotect pkey 5 (unallocated)", x_pkey_mprotect(P(1), PG, PROT_READ, 5));
	T("pkey_mprotect pkey 15 (unallocated)", x_pkey_mprotect(P(1), PG, PROT_READ | PROT_WRITE, 15));
	T("pkey_mprotect pkey 16 (out of range)", x_pkey_mprotect(P(1), PG, PROT_READ, 16));
	T("pkey_mprotect pkey -2", x_pkey_mprotect(P(1), PG, PROT_READ, -2));
	T("pkey_mprotect pkey 0", x_pkey_mprotect(P(1), PG, PROT_READ, 0));
	T("pkey_mprotect pkey -1 same", x_pkey_mprotect(P(1), PG, PROT_READ, -1));
	T("pkey_mprotect pkey -1 prot|0x10", x_pkey_mprotect(P(1), PG, PROT_READ | 0x10, -1));
	T("pkey_alloc flags 1", x_pkey_alloc(1, 0));
	errno = 0;
	long k = x_pkey_alloc(0, 0);
	ob_printf(&out, "[%s] pkey_alloc(0,0): %s %s\n", via ? "sys " : "libc",
		  k >= 0 ? "ok" : "-1", k >= 0 ? "" : ename(errno));
	if (k >= 0) {
		T("pkey_mprotect allocated key RW", x_pkey_mprotect(P(1), PG, PROT_READ | PROT_WRITE, k));
		T("mprotect RW (keeps key)", x_mprotect(P(1), PG, PROT_READ | PROT_WRITE));
		T("pkey_mprotect allocated key RW again", x_pkey_mprotect(P(1), PG, PROT_READ | PROT_WRITE, k));
		T("pkey_mprotect key 0 RW", x_pkey_mprotect(P(1), PG, PROT_READ | PROT_WRITE, 0));
		syscall(SYS_pkey_free, k);
		T("pkey_mprotect freed key", x_pkey_mprotect(P(1), PG, PROT_READ, k));
	}
	show("after", 1, 2);
}

static void cases_munmap(void)
{
	slot("munmap");
	map(1, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	map(5, 1, PROT_READ, MAP_PRIVATE);
	T("munmap unaligned", x_munmap(P(1) + 8, PG));
	T("munmap len 0", x_munmap(P(1), 0));
	T("munmap len SIZE_MAX", x_munmap(P(1), SIZE_MAX));
	T("munmap len wraps", x_munmap(P(1), (size_t)0 - P(1)));
	T("munmap addr > TASK_SIZE", x_munmap(0xffff800000000000UL, PG));
	T("munmap unmapped", x_munmap(P(8), 2 * PG));
	show("after", 0, 6);
	T("munmap unaligned len (rounds up)", x_munmap(P(2), 1));
	T("munmap across hole", x_munmap(P(1), 5 * PG));
	show("after", 0, 6);
}

static void cases_madvise(void)
{
	slot("madvise: argument checks");
	map(1, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	T("madvise unaligned", x_madvise(P(1) + 1, PG, MADV_DONTNEED));
	T("madvise unaligned HUGEPAGE", x_madvise(P(1) + 1, PG, MADV_HUGEPAGE));
	T("madvise advice 12345", x_madvise(P(1), PG, 12345));
	T("madvise advice 999", x_madvise(P(1), PG, 999));
	T("madvise advice -1", x_madvise(P(1), PG, -1));
	T("madvise DONTNEED_LOCKED (24) unlocked", x_madvise(P(1), PG, 24));
	T("madvise advice 12345 len 0", x_madvise(P(1), 0, 12345));
	T("madvise len 0 DONTNEED", x_madvise(P(1), 0, MADV_DONTNEED));
	T("madvise len 0 unmapped", x_madvise(P(8), 0, MADV_HUGEPAGE));
	T("madvise len SIZE_MAX", x_madvise(P(1), SIZE_MAX, MADV_HUGEPAGE));
	T("madvise len wraps", x_madvise(P(1), (size_t)0 - P(1), MADV_HUGEPAGE));
	T("madvise unmapped HUGEPAGE", x_madvise(P(8), PG, MADV_HUGEPAGE));
	T("madvise unmapped DONTNEED", x_madvise(P(8), PG, MADV_DONTNEED));
	T("madvise unmapped WILLNEED", x_madvise(P(8), PG, MADV_WILLNEED));
	T("madvise unmapped NORMAL", x_madvise(P(8), PG, MADV_NORMAL));
	T("madvise REMOVE on private anon", x_madvise(P(1), PG, MADV_REMOVE));
	show("after", 1, 3);

	slot("madvise: flags, twice");
	map(1, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	static const struct { const char *n; int a; } fl[] = {
		{ "HUGEPAGE", MADV_HUGEPAGE }, { "NOHUGEPAGE", MADV_NOHUGEPAGE },
		{ "DONTFORK", MADV_DONTFORK }, { "DOFORK", MADV_DOFORK },
		{ "DONTDUMP", MADV_DONTDUMP }, { "DODUMP", MADV_DODUMP },
		{ "WIPEONFORK", MADV_WIPEONFORK }, { "KEEPONFORK", MADV_KEEPONFORK },
		{ "RANDOM", MADV_RANDOM }, { "SEQUENTIAL", MADV_SEQUENTIAL },
		{ "NORMAL", MADV_NORMAL },
	};
	for (unsigned i = 0; i < sizeof fl / sizeof fl[0]; i++) {
		char n[64];
		snprintf(n, sizeof n, "madvise %s", fl[i].n);
		T(n, x_madvise(P(1), PG, fl[i].a));
		show(fl[i].n, 1, 3);
	}

	slot("madvise: holes and special mappings");
	map(1, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	map(4, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	fill(1, 2);
	fill(4, 1);
	T("madvise HUGEPAGE over hole", x_madvise(P(1), 4 * PG, MADV_HUGEPAGE));
	T("madvise DONTDUMP over hole", x_madvise(P(0), 5 * PG, MADV_DONTDUMP));
	T("madvise DONTNEED over hole", x_madvise(P(2), 3 * PG, MADV_DONTNEED));
	show("after", 0, 6);
	T("madvise DODUMP after failed DONTDUMP", x_madvise(P(1), 2 * PG, MADV_DODUMP));
	T("madvise NOHUGEPAGE after failed HUGEPAGE", x_madvise(P(4), PG, MADV_NOHUGEPAGE));
	show("after", 0, 6);
	map(7, 1, PROT_READ | PROT_WRITE, MAP_SHARED);
	T("madvise WIPEONFORK on shared anon", x_madvise(P(7), PG, MADV_WIPEONFORK));
	T("madvise KEEPONFORK on shared anon", x_madvise(P(7), PG, MADV_KEEPONFORK));
	T("madvise REMOVE on shared anon", x_madvise(P(7), PG, MADV_REMOVE));
	map(9, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	fill(9, 1);
	T("mlock for DONTNEED-on-locked", x_mlock(P(9), PG));
	T("madvise DONTNEED on mlocked", x_madvise(P(9), PG, MADV_DONTNEED));
	T("madvise GUARD_INSTALL on mlocked", x_madvise(P(9), PG, MADV_GUARD_INSTALL));
	T("madvise HUGEPAGE on mlocked", x_madvise(P(9), PG, MADV_HUGEPAGE));
	show("after", 7, 10);
	map(11, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	T("madvise GUARD_INSTALL", x_madvise(P(11), PG, MADV_GUARD_INSTALL));
	show("guarded", 11, 12);
	T("mprotect RW on guarded (same)", x_mprotect(P(11), PG, PROT_READ | PROT_WRITE));
	T("madvise GUARD_REMOVE", x_madvise(P(11), PG, MADV_GUARD_REMOVE));
	show("unguarded", 11, 12);
	T("madvise POPULATE_WRITE on R", (x_mprotect(P(11), PG, PROT_READ), x_madvise(P(11), PG, MADV_POPULATE_WRITE)));
	T("madvise POPULATE_READ on NONE", (x_mprotect(P(11), PG, PROT_NONE), x_madvise(P(11), PG, MADV_POPULATE_READ)));
}

static void cases_mlock(void)
{
	slot("mlock");
	map(1, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	map(4, 1, PROT_READ, MAP_PRIVATE);
	map(6, 1, PROT_NONE, MAP_PRIVATE);
	T("mlock unaligned (rounds)", x_mlock(P(1) + 100, 10));
	show("after", 1, 3);
	T("mlock len 0", x_mlock(P(2), 0));
	T("mlock len 0 unmapped", x_mlock(P(10), 0));
	T("mlock unmapped", x_mlock(P(10), PG));
	T("mlock len wraps", x_mlock(P(2), (size_t)0 - P(2)));
	T("mlock len SIZE_MAX", x_mlock(P(2), SIZE_MAX));
	T("mlock PROT_NONE", x_mlock(P(6), PG));
	show("after", 0, 8);
	T("mprotect R on locked NONE", x_mprotect(P(6), PG, PROT_READ));
	show("not populated", 6, 7);
	T("mlock again on locked R", x_mlock(P(6), PG));
	show("populated", 6, 7);
	/* The only madvise that empties locked pages; mlock fills them again. */
	T("madvise DONTNEED_LOCKED on locked", x_madvise(P(1), PG, MADV_DONTNEED_LOCKED));
	show("emptied", 1, 2);
	T("mlock again after DONTNEED_LOCKED", x_mlock(P(1), PG));
	show("refilled", 1, 2);
	T("mlock over hole [map hole map]", x_mlock(P(2), 3 * PG));
	show("after", 0, 8);
	T("munlock p2 after failed mlock", x_munlock(P(2), PG));
	show("after", 0, 8);
	T("mlock p2 again", x_mlock(P(2), PG));
	T("munlock over hole", x_munlock(P(1), 4 * PG));
	show("after", 0, 8);
	T("munlock unaligned", x_munlock(P(1) + 1, PG));
	T("munlock unmapped", x_munlock(P(10), PG));
	T("munlock never locked", x_munlock(P(4), PG));
	T("munlock len wraps", x_munlock(P(2), (size_t)0 - P(2)));
	T("mlock2 flags 2", x_mlock2(P(1), PG, 2));
	T("mlock2 flags 0xffffffff", x_mlock2(P(1), PG, 0xffffffffL));
	T("mlock2 ONFAULT", x_mlock2(P(1), PG, MLOCK_ONFAULT));
	T("mlock2 ONFAULT|2", x_mlock2(P(1), PG, MLOCK_ONFAULT | 2));
	T("mlock2 ONFAULT unmapped", x_mlock2(P(10), PG, MLOCK_ONFAULT));
	T("mlock2 0 (same as mlock)", x_mlock2(P(1), PG, 0));
	T("mlock2 ONFAULT unaligned", x_mlock2(P(1) + 5, PG, MLOCK_ONFAULT));
	show("after", 0, 8);
	T("mlockall 0", x_mlockall(0));
	T("mlockall ONFAULT alone", x_mlockall(MCL_ONFAULT));
	T("mlockall 0x100", x_mlockall(0x100));
	T("mlockall FUTURE|0x100", x_mlockall(MCL_FUTURE | 0x100));
	T("munlockall", x_munlockall());
	show("after munlockall", 0, 8);
	T("mlockall FUTURE|ONFAULT", x_mlockall(MCL_FUTURE | MCL_ONFAULT));
	map(12, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	T("mlock2 ONFAULT on MCL_FUTURE mapping", x_mlock2(P(12), PG, MLOCK_ONFAULT));
	show("MCL_FUTURE mapping", 12, 13);
	T("munlock MCL_FUTURE mapping", x_munlock(P(12), PG));
	show("after munlock", 12, 13);
	T("munlockall", x_munlockall());
	map(13, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	T("munlock after munlockall", x_munlock(P(13), PG));
	show("after", 12, 14);
}

static void cases_mremap(void)
{
	slot("mremap: argument checks");
	map(1, 1, PROT_READ, MAP_PRIVATE);
	map(2, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	map(3, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	map(5, 1, PROT_READ, MAP_SHARED);
	fill(2, 3);
	TP("mremap unaligned old", x_mremap(P(2) + 1, PG, PG, 0, 0));
	TP("mremap new_len 0", x_mremap(P(2), PG, 0, 0, 0));
	TP("mremap new_len SIZE_MAX", x_mremap(P(2), PG, SIZE_MAX, 0, 0));
	TP("mremap old_len SIZE_MAX", x_mremap(P(2), SIZE_MAX, PG, 0, 0));
	TP("mremap old unmapped", x_mremap(P(10), PG, PG, 0, 0));
	TP("mremap old unmapped grow", x_mremap(P(10), PG, 2 * PG, 0, 0));
	TP("mremap old unmapped move", x_mremap(P(10), PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, P(12)));
	TP("mremap across two VMAs grow", x_mremap(P(1), 2 * PG, 3 * PG, 0, 0));
	TP("mremap across two VMAs same size", x_mremap(P(1), 2 * PG, 2 * PG, 0, 0));
	TP("mremap grow blocked in place", x_mremap(P(3), 2 * PG, 3 * PG, 0, 0));
	TP("mremap FIXED without MAYMOVE", x_mremap(P(2), PG, PG, MREMAP_FIXED, P(8)));
	TP("mremap flag 0x80", x_mremap(P(2), PG, PG, 0x80, 0));
	TP("mremap DONTUNMAP len mismatch", x_mremap(P(2), PG, 2 * PG, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, 0));
	TP("mremap DONTUNMAP without MAYMOVE", x_mremap(P(2), PG, PG, MREMAP_DONTUNMAP, 0));
	TP("mremap DONTUNMAP shared", x_mremap(P(5), PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, P(12)));
	TP("mremap old_len 0 private", x_mremap(P(2), 0, PG, MREMAP_MAYMOVE | MREMAP_FIXED, P(10)));
	TP("mremap same size no flags", x_mremap(P(3), 2 * PG, 2 * PG, 0, 0));
	TP("mremap unaligned new_len (rounds)", x_mremap(P(3), 2 * PG, 2 * PG - 5, 0, 0));
	TP("mremap FIXED overlapping", x_mremap(P(3), 2 * PG, 2 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, P(4)));
	TP("mremap FIXED unaligned new", x_mremap(P(3), PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, P(9) + 3));
	/* Since Linux 6.17 a move may span several VMAs. */
	TP("mremap across two VMAs move", x_mremap(P(1), 2 * PG, 2 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, P(10)));
	show("after", 0, 14);

	slot("mremap: shrink and move");
	map(1, 1, PROT_READ, MAP_PRIVATE);
	map(2, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	map(3, 3, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	fill(2, 4);
	TP("mremap shrink (twice)", x_mremap(P(3), 3 * PG, PG, 0, 0));
	show("after", 0, 7);
	TP("mremap shrink across two VMAs", x_mremap(P(1), 2 * PG, PG, 0, 0));
	show("after", 0, 7);
	map(2, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	fill(2, 1);
	TP("mremap move FIXED", x_mremap(P(3), PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, P(8)));
	show("after", 0, 10);
	TP("mremap DONTUNMAP", x_mremap(P(8), PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, P(10)));
	show("after", 7, 12);

	slot("mremap: locked");
	map(1, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	fill(1, 2);
	T("mlock", x_mlock(P(1), 2 * PG));
	TP("mremap DONTUNMAP locked", x_mremap(P(1), PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, P(5)));
	show("after", 0, 7);
	TP("mremap grow locked in place", x_mremap(P(5), PG, 3 * PG, 0, 0));
	show("after", 0, 9);
	T("mlock again after grow", x_mlock(P(5), 3 * PG));
	show("after", 4, 10);
	TP("mremap grow locked in place", x_mremap(P(5), 3 * PG, 4 * PG, 0, 0));
	show("after", 4, 10);
}

static void cases_mseal(void)
{
	slot("mseal: argument checks");
	map(1, 2, PROT_READ, MAP_PRIVATE);
	T("mseal unaligned", x_mseal(P(1) + 1, PG, 0));
	T("mseal len 0", x_mseal(P(1), 0, 0));
	T("mseal len 0 unmapped", x_mseal(P(9), 0, 0));
	T("mseal unmapped", x_mseal(P(9), PG, 0));
	T("mseal flags 1", x_mseal(P(1), PG, 1));
	T("mseal len wraps", x_mseal(P(1), (size_t)0 - P(1), 0));
	T("mseal len SIZE_MAX", x_mseal(P(1), SIZE_MAX, 0));
	T("mseal over hole", x_mseal(P(1), 4 * PG, 0));
	show("after", 0, 4);

	slot("mseal: sealed read-only anon");
	map(1, 1, PROT_READ, MAP_PRIVATE);
	map(2, 1, PROT_READ, MAP_PRIVATE);
	map(3, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	map(5, 1, PROT_READ, MAP_PRIVATE);
	fill(3, 1);
	T("mseal", x_mseal(P(2), 2 * PG, 0));
	show("sealed p2-p3", 0, 6);
	T("mprotect sealed R same", x_mprotect(P(2), PG, PROT_READ));
	T("mprotect sealed R->RW", x_mprotect(P(2), PG, PROT_READ | PROT_WRITE));
	T("mprotect sealed R->NONE", x_mprotect(P(2), PG, PROT_NONE));
	T("mprotect sealed len 0", x_mprotect(P(2), 0, PROT_NONE));
	T("pkey_mprotect(-1) sealed same", x_pkey_mprotect(P(2), PG, PROT_READ, -1));
	T("mprotect [unsealed sealed] RW", x_mprotect(P(1), 2 * PG, PROT_READ | PROT_WRITE));
	T("mprotect [sealed unsealed] ...", x_mprotect(P(3), 3 * PG, PROT_READ));
	show("after", 0, 6);
	/* EPERM, yet p1 became RW: R is not a no-op now. */
	T("mprotect R p1 after EPERM", x_mprotect(P(1), PG, PROT_READ));
	show("after", 0, 2);
	T("munmap sealed", x_munmap(P(2), PG));
	T("munmap [unsealed sealed]", x_munmap(P(1), 2 * PG));
	show("after", 0, 6);
	TP("mremap sealed same size", x_mremap(P(2), PG, PG, 0, 0));
	TP("mremap sealed shrink", x_mremap(P(2), 2 * PG, PG, 0, 0));
	TP("mremap sealed grow", x_mremap(P(3), PG, 2 * PG, 0, 0));
	TP("mremap sealed move", x_mremap(P(2), PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, P(10)));
	TP("mremap onto sealed", x_mremap(P(5), PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, P(2)));
	TP("mmap FIXED over sealed", x_mmap(P(2), PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1));
	TP("mmap NOREPLACE over sealed", x_mmap(P(2), PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1));
	static const struct { const char *n; int a; } adv[] = {
		{ "DONTNEED", MADV_DONTNEED }, { "FREE", MADV_FREE },
		{ "DONTFORK", MADV_DONTFORK }, { "DOFORK", MADV_DOFORK },
		{ "WIPEONFORK", MADV_WIPEONFORK }, { "HUGEPAGE", MADV_HUGEPAGE },
		{ "DONTDUMP", MADV_DONTDUMP }, { "GUARD_INSTALL", MADV_GUARD_INSTALL },
		{ "COLD", MADV_COLD }, { "PAGEOUT", MADV_PAGEOUT },
		{ "POPULATE_READ", MADV_POPULATE_READ }, { "WILLNEED", MADV_WILLNEED },
	};
	for (unsigned i = 0; i < sizeof adv / sizeof adv[0]; i++) {
		char n[64];
		snprintf(n, sizeof n, "madvise %s sealed R anon", adv[i].n);
		T(n, x_madvise(P(2), PG, adv[i].a));
		snprintf(n, sizeof n, "madvise %s sealed RW anon", adv[i].n);
		T(n, x_madvise(P(3), PG, adv[i].a));
	}
	T("madvise DONTNEED [unsealed sealed]", x_madvise(P(1), 2 * PG, MADV_DONTNEED));
	T("mlock sealed", x_mlock(P(2), PG));
	T("munlock sealed", x_munlock(P(2), PG));
	T("mlock2 ONFAULT sealed", x_mlock2(P(2), PG, MLOCK_ONFAULT));
	T("mseal again", x_mseal(P(2), 2 * PG, 0));
	show("after", 0, 6);

	/* Since 6.17 a move may span VMAs; it moves VMA by VMA, so one that
	 * hits a sealed VMA fails with EPERM after moving the ones before. */
	slot("mseal: mremap move stopped by a seal");
	map(1, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	fill(1, 2);
	T("mlock2 ONFAULT p1-p2", x_mlock2(P(1), 2 * PG, MLOCK_ONFAULT));
	map(3, 1, PROT_READ, MAP_PRIVATE);
	T("mseal p3", x_mseal(P(3), PG, 0));
	map(8, 3, PROT_READ | PROT_WRITE, MAP_PRIVATE); /* known, unlocked */
	TP("mremap move [locked, sealed] to p8", x_mremap(P(1), 3 * PG, 3 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, P(8)));
	show("after", 0, 12);
	T("mprotect RW at the old place", x_mprotect(P(1), 2 * PG, PROT_READ | PROT_WRITE));
	T("madvise DONTDUMP at the old place", x_madvise(P(1), 2 * PG, MADV_DONTDUMP));
	T("munlock at the new place", x_munlock(P(8), 2 * PG));
	T("mprotect NONE at the new place", x_mprotect(P(8), 2 * PG, PROT_NONE));
	show("after", 0, 12);
}

static void cases_mmap(void)
{
	slot("mmap");
	map(2, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	TP("mmap FIXED unaligned", x_mmap(P(1) + 1, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1));
	TP("mmap FIXED len 0", x_mmap(P(1), 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1));
	TP("mmap FIXED len SIZE_MAX", x_mmap(P(1), SIZE_MAX, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1));
	TP("mmap FIXED prot 0x10", x_mmap(P(1), PG, PROT_READ | 0x10, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1));
	TP("mmap FIXED prot GROWSDOWN", x_mmap(P(1), PG, PROT_READ | PROT_GROWSDOWN, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1));
	TP("mmap neither SHARED nor PRIVATE", x_mmap(P(1), PG, PROT_READ, MAP_ANONYMOUS | MAP_FIXED, -1));
	TP("mmap SHARED_VALIDATE bad flag", x_mmap(P(1), PG, PROT_READ, MAP_SHARED_VALIDATE | MAP_ANONYMOUS | MAP_FIXED | 0x800000, -1));
	TP("mmap NOREPLACE on mapped", x_mmap(P(2), PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1));
	TP("mmap NOREPLACE straddling", x_mmap(P(1), 2 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1));
	TP("mmap FIXED same prot again (zeroes)", (fill(2, 1), x_mmap(P(2), PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1)));
	show("after", 0, 4);
	TP("mmap bad fd", x_mmap(P(4), PG, PROT_READ, MAP_PRIVATE | MAP_FIXED, 999));
	TP("mmap GROWSDOWN", x_mmap(P(6), PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_GROWSDOWN, -1));
	T("mprotect R|GROWSDOWN on growsdown", x_mprotect(P(6), PG, PROT_READ | PROT_GROWSDOWN));
	T("mprotect RW|GROWSDOWN on growsdown", x_mprotect(P(6), PG, PROT_READ | PROT_WRITE | PROT_GROWSDOWN));
	show("after", 4, 8);
}

/* open and openat, which mmfold defines with the mode named (preload/io.c):
 * the mode reaches the kernel when the flags pass one, the errors are the
 * kernel's. */
static void cases_open(void)
{
	char dir[] = "/tmp/mmfold-openXXXXXX", p[64];
	if (!mkdtemp(dir)) {
		ob_printf(&out, "open: mkdtemp failed\n");
		return;
	}
	mode_t old = umask(0);
	static const struct {
		const char *name;
		int flags;
		unsigned mode;
		int at;
	} c[] = {
		{"a", O_CREAT | O_WRONLY, 0641, 0},
		{"b", O_CREAT | O_WRONLY | O_EXCL, 0603, 1},
		{"b", O_CREAT | O_WRONLY | O_EXCL, 0603, 0}, /* exists: EEXIST */
		{"c", O_WRONLY, 0777, 0},                      /* missing: ENOENT */
		{"", O_TMPFILE | O_WRONLY, 0600, 0},
		{"", O_TMPFILE | O_WRONLY, 0640, 1},
		{"d", O_CREAT | O_RDWR | O_TRUNC, 0, 1},
	};
	for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, c[i].name);
		errno = 0;
		int fd = c[i].at ? openat(AT_FDCWD, p, c[i].flags, c[i].mode)
				 : open(p, c[i].flags, c[i].mode);
		int e = errno;
		struct stat st;
		unsigned m = fd >= 0 && fstat(fd, &st) == 0 ? (unsigned)st.st_mode & 07777 : 0;
		ob_printf(&out, "open%s(%s, %#x, %04o): %s mode %04o\n", c[i].at ? "at" : "",
			  c[i].name, (unsigned)c[i].flags, c[i].mode, fd >= 0 ? "ok" : ename(e), m);
		if (fd >= 0)
			close(fd);
	}
	umask(old);
	for (const char *n = "abd"; *n; n++) {
		snprintf(p, sizeof p, "%s/%c", dir, *n);
		unlink(p);
	}
	rmdir(dir);
	ob_flush(&out, 1, "");
}

int main(void)
{
	watchdog(60);
	fg_install();
	arena = reserve_arena(NSLOTS * SLOTPG);
	if (!arena) {
		printf("cannot reserve arena\n");
		return 1;
	}
	for (via = 0; via < 2; via++) {
		ob_printf(&out, "==== via %s\n", via ? "syscall()" : "libc");
		cases_mprotect();
		cases_noexec();
		cases_pkey();
		cases_munmap();
		cases_madvise();
		cases_mlock();
		cases_mremap();
		cases_mseal();
		cases_mmap();
		ob_flush(&out, 1, "");
	}
	cases_open();
	ob_printf(&out, "matrix done\n");
	ob_flush(&out, 1, "");
	return 0;
}
