/* The fake kernel of the unit tests (see fake_kernel.h). */
#include "fake_kernel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "stats.h"
#include "sys.h"

#ifndef SYS_mseal
#define SYS_mseal 462
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

struct rule {
	int call, paths, err, times;
	uint64_t s, e;
};
#define RULES 16
static struct rule rules[RULES];
static int nrules;
static unsigned long counts[3][FK_COUNT]; /* [path][call] */
struct fk_mp fk_log[FK_LOG];
int fk_log_n;

void fk_fail(int call, int paths, uint64_t s, uint64_t e, int err, int times)
{
	if (nrules < RULES)
		rules[nrules++] = (struct rule){call, paths, err, times, s, e};
}

void fk_clear(void) { nrules = 0; }

unsigned long fk_count(int call, int paths)
{
	return (paths & FK_NEXT ? counts[FK_NEXT][call] : 0) +
	       (paths & FK_RAW ? counts[FK_RAW][call] : 0);
}

/* Counts the call; its injected answer (-errno, or 0 for FK_OK), or 1 to
 * go on to the kernel. */
static long enter(int call, int path, uint64_t s, uint64_t len)
{
	__atomic_add_fetch(&counts[path][call], 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (r->call != call || !(r->paths & path) || !r->times)
			continue;
		if (r->s < r->e && !(s < r->e && r->s < s + len))
			continue;
		if (r->times > 0)
			r->times--;
		return -r->err;
	}
	return 1;
}

static long libc_ret(long r)
{
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* ---- the next definitions (libc's convention) ---- */

static void *next_mmap(void *a, size_t l, int p, int f, int fd, off_t off)
{
	long r = enter(FK_MMAP, FK_NEXT, (uint64_t)a, l);
	if (r == 1)
		r = mmf_sys6_raw(SYS_mmap, (long)a, (long)l, p, f, fd, off);
	return r < 0 && r > -4096 ? (errno = (int)-r, MAP_FAILED) : (void *)r;
}

static int next_munmap(void *a, size_t l)
{
	long r = enter(FK_MUNMAP, FK_NEXT, (uint64_t)a, l);
	return (int)libc_ret(r != 1 ? r : mmf_sys6_raw(SYS_munmap, (long)a, (long)l, 0, 0, 0, 0));
}

static int next_mprotect(void *a, size_t l, int p)
{
	long r = enter(FK_MPROTECT, FK_NEXT, (uint64_t)a, l);
	if (r == 1)
		r = mmf_sys6_raw(SYS_mprotect, (long)a, (long)l, p, 0, 0, 0);
	if (fk_log_n == FK_LOG) /* keep the last FK_LOG */
		memmove(fk_log, fk_log + 1, sizeof fk_log - sizeof fk_log[0]);
	else
		fk_log_n++;
	fk_log[fk_log_n - 1] = (struct fk_mp){(uint64_t)a, l, p, r};
	return (int)libc_ret(r);
}

static int next_madvise(void *a, size_t l, int adv)
{
	long r = enter(FK_MADVISE, FK_NEXT, (uint64_t)a, l);
	return (int)libc_ret(r != 1 ? r : mmf_sys6_raw(SYS_madvise, (long)a, (long)l, adv, 0, 0, 0));
}

static ssize_t next_process_madvise(int fd, const struct iovec *iov, size_t n, int adv,
				    unsigned fl)
{
	long r = enter(FK_PMADVISE, FK_NEXT, 0, 0);
	return libc_ret(r != 1 ? r : mmf_sys6_raw(SYS_process_madvise, fd, (long)iov, (long)n, adv, fl, 0));
}

static int next_mlock(const void *a, size_t l)
{
	long r = enter(FK_MLOCK, FK_NEXT, (uint64_t)a, l);
	return (int)libc_ret(r != 1 ? r : mmf_sys6_raw(SYS_mlock, (long)a, (long)l, 0, 0, 0, 0));
}

static int next_munlock(const void *a, size_t l)
{
	long r = enter(FK_MUNLOCK, FK_NEXT, (uint64_t)a, l);
	return (int)libc_ret(r != 1 ? r : mmf_sys6_raw(SYS_munlock, (long)a, (long)l, 0, 0, 0, 0));
}

static int next_mseal(void *a, size_t l, unsigned long f)
{
	long r = enter(FK_MSEAL, FK_NEXT, (uint64_t)a, l);
	return (int)libc_ret(r != 1 ? r : mmf_sys6_raw(SYS_mseal, (long)a, (long)l, (long)f, 0, 0, 0));
}

/* ---- the raw system call ---- */

int fk_memlock;
unsigned long fk_prlimit_calls;

static long fake_sys(long n, long a, long b, long c, long d, long e, long f)
{
	int call = -1;
	if (n == SYS_prlimit64 && b == RLIMIT_MEMLOCK && !c && d) {
		fk_prlimit_calls++;
		if (fk_memlock != FK_MEMLOCK_REAL) {
			struct rlimit *rl = (struct rlimit *)d;
			rl->rlim_cur = rl->rlim_max =
				fk_memlock == FK_MEMLOCK_UNLIMITED ? RLIM_INFINITY : 64 * 4096;
			return 0;
		}
	}
	switch (n) {
	case SYS_mmap: call = FK_MMAP; break;
	case SYS_munmap: call = FK_MUNMAP; break;
	case SYS_mprotect: call = FK_MPROTECT; break;
	case SYS_madvise: call = FK_MADVISE; break;
	case SYS_process_madvise: call = FK_PMADVISE; a = b = 0; break;
	case SYS_mlock: call = FK_MLOCK; break;
	case SYS_munlock: call = FK_MUNLOCK; break;
	case SYS_mseal: call = FK_MSEAL; break;
	case SYS_read: call = FK_READ; break;
	case SYS_write: call = FK_WRITE; break;
	}
	if (call >= 0) {
		long r = enter(call, FK_RAW, (uint64_t)a, (uint64_t)b);
		if (r != 1)
			return r;
	}
	return mmf_sys6_raw(n, a, b, c, d, e, f);
}

void fk_install(void)
{
	mmf_kernel.sys = fake_sys;
	mmf_kernel.next.mmap = next_mmap;
	mmf_kernel.next.munmap = next_munmap;
	mmf_kernel.next.mprotect = next_mprotect;
	mmf_kernel.next.madvise = next_madvise;
	mmf_kernel.next.process_madvise = next_process_madvise;
	mmf_kernel.next.mlock = next_mlock;
	mmf_kernel.next.munlock = next_munlock;
	mmf_kernel.next.mseal = next_mseal;
}

void fk_start(const char *mode, const char *const *extra)
{
	extern char **environ;
	/* a clean MMFOLD_* environment: only what the test asks for */
	for (int again = 1; again;) {
		again = 0;
		for (char **e = environ; *e; e++)
			if (!strncmp(*e, "MMFOLD_", 7)) {
				char name[64];
				size_t k = strcspn(*e, "=");
				if (k >= sizeof name)
					k = sizeof name - 1;
				memcpy(name, *e, k);
				name[k] = 0;
				unsetenv(name);
				again = 1;
				break;
			}
	}
	setenv("MMFOLD_MODE", mode, 1);
	setenv("MMFOLD_THP", "off", 1);
	setenv("MMFOLD_ALIGN", "off", 1);
	setenv("MMFOLD_SHAPE", "off", 1);
	setenv("MMFOLD_WX", "off", 1);
	for (; extra && *extra; extra++) {
		char name[64];
		size_t k = strcspn(*extra, "=");
		memcpy(name, *extra, k < sizeof name ? k : sizeof name - 1);
		name[k < sizeof name ? k : sizeof name - 1] = 0;
		setenv(name, *extra + k + 1, 1);
	}
	fk_install();
	mmf_late_init();
}

/* ---- the program's calls ---- */

static long kret(long r) { return r == -1 ? -(long)errno : r; }

static long fwd_mmap(const struct mmf_op *o)
{
	void *p = mmf_next.mmap((void *)o->a[0], (size_t)o->a[1], (int)o->a[2], (int)o->a[3],
				(int)o->a[4], (off_t)o->a[5]);
	return p == MAP_FAILED ? -(long)errno : (long)p;
}
static long fwd_munmap(const struct mmf_op *o)
{
	return kret(mmf_next.munmap((void *)o->a[0], (size_t)o->a[1]));
}
static long fwd_mprotect(const struct mmf_op *o)
{
	return kret(mmf_next.mprotect((void *)o->a[0], (size_t)o->a[1], (int)o->a[2]));
}
static long fwd_madvise(const struct mmf_op *o)
{
	return kret(mmf_next.madvise((void *)o->a[0], (size_t)o->a[1], (int)o->a[2]));
}
static long fwd_mlock(const struct mmf_op *o)
{
	return kret(mmf_next.mlock((const void *)o->a[0], (size_t)o->a[1]));
}
static long fwd_munlock(const struct mmf_op *o)
{
	return kret(mmf_next.munlock((const void *)o->a[0], (size_t)o->a[1]));
}
static long fwd_mseal(const struct mmf_op *o)
{
	return kret(mmf_next.mseal((void *)o->a[0], (size_t)o->a[1], (unsigned long)o->a[2]));
}

long (*fk_fwd(int kind))(const struct mmf_op *)
{
	switch (kind) {
	case MMF_K_MMAP: return fwd_mmap;
	case MMF_K_MUNMAP: return fwd_munmap;
	case MMF_K_MPROTECT: return fwd_mprotect;
	case MMF_K_MADVISE: return fwd_madvise;
	case MMF_K_MLOCK: return fwd_mlock;
	case MMF_K_MUNLOCK: return fwd_munlock;
	case MMF_K_MSEAL: return fwd_mseal;
	}
	abort(); /* a kind the tests do not make */
}

long fk_call(int kind, long a0, long a1, long a2, long a3, long a4, long a5)
{
	struct mmf_op op = {.kind = kind, .a = {a0, a1, a2, a3, a4, a5}, .fwd = fk_fwd(kind)};
	return mmf_run(&op);
}

uint64_t fk_stat(int kind, int field)
{
	struct mmf_tstats t;
	uint64_t ev[MMF_E_COUNT];
	uint32_t threads;
	mmf_stats_snapshot(&t, ev, &threads);
	return t.v[kind][field];
}

uint64_t fk_event(int e)
{
	struct mmf_tstats t;
	uint64_t ev[MMF_E_COUNT];
	uint32_t threads;
	mmf_stats_snapshot(&t, ev, &threads);
	return ev[e];
}

long fk_mprotect(void *p, long pages, int prot)
{
	return fk_call(MMF_K_MPROTECT, (long)p, pages * (long)mmf_page_size(), prot, 0, 0, 0);
}

char *fk_map(int n, int prot)
{
	long r = fk_call(MMF_K_MMAP, 0, n * (long)mmf_page_size(), prot,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mmf_is_err(r))
		abort();
	return (char *)r;
}
