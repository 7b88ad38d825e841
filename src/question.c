/* The skip question: which range a call touches and what it asks of it,
 * for the shadow map to answer (safe mode's decisions, lazy mode's and the
 * recording use it).  See docs/DESIGN.md. */
#include "core.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fmt.h"


/* Safe mode's state (core.h). */
struct mmf_safe_state safe_state = {.future_lock = MMF_LOCK_NONE};

/* ---- helpers ------------------------------------------------------------ */

/* [addr, addr+len) rounded up to pages; 0 when the kernel would reject it
 * before changing anything (unaligned, empty, wrapping). */
int span(uint64_t addr, uint64_t len, uint64_t *s, uint64_t *e)
{
	if (addr & (page - 1) || len == 0)
		return 0;
	uint64_t l = (len + page - 1) & ~(uint64_t)(page - 1);
	if (l < len || addr + l <= addr)
		return 0;
	*s = addr;
	*e = addr + l;
	return 1;
}

/* The widest range a call with these arguments could have touched. */
void touched(const struct mmf_op *op, uint64_t *s, uint64_t *e)
{
	uint64_t a = (uint64_t)op->a[0] & ~(uint64_t)(page - 1);
	uint64_t l = (uint64_t)op->a[1] + ((uint64_t)op->a[0] - a);
	*s = a;
	*e = l ? ((a + l + page - 1) & ~(uint64_t)(page - 1)) : a;
	if (*e < a || (l && *e == a))
		*e = UINT64_MAX & ~(uint64_t)(page - 1);
}


/* May a redundant mlock be answered without the kernel?  The kernel still
 * checks the RLIMIT_MEMLOCK / CAP_IPC_LOCK permission on a no-op, and that
 * can change after the range was locked (another process may lower the
 * limit: prlimit(2)), so it is asked each time.  An unlimited
 * RLIMIT_MEMLOCK is proof: one prlimit64 (about 450 ns here).  A limit
 * once found finite is not asked again (memlock_capped): the answer only
 * allows skips, so a stale "finite" costs skips, never a wrong result
 * (and making the limit unlimited takes CAP_SYS_RESOURCE).
 *
 * CAP_IPC_LOCK is asked only when costly says the call spared is worth
 * it (lazy mode's cancelled mlock/munlock pair, which spares two calls
 * and a walk of the range's pages): capget() answers for the caller's
 * user namespace, the kernel for the initial one, and telling them apart
 * takes a stat of /proc/self/ns/user (5.2 us here).  Asked for a repeated
 * mlock2(MLOCK_ONFAULT), which costs about 0.4 us, the three calls made
 * its "skip" cost 6.4-7.5 us.
 *
 * Not under a seccomp filter: the calls asked here are mmfold's own, and
 * a filter may kill the process for them (life.c's filter_in_force). */
int mlock_permitted(int costly)
{
	if (mmf_filtered())
		return 0;
	if (!__atomic_load_n(&safe_state.memlock_capped, __ATOMIC_RELAXED)) {
		struct rlimit rl;
		if (mmf_sys6(SYS_prlimit64, 0, RLIMIT_MEMLOCK, 0, (long)&rl, 0, 0) == 0 &&
		    rl.rlim_cur == RLIM_INFINITY)
			return 1;
		__atomic_store_n(&safe_state.memlock_capped, 1, __ATOMIC_RELAXED);
	}
	if (!costly)
		return 0;
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (mmf_sys6(SYS_capget, (long)&h, (long)d, 0, 0, 0, 0) != 0 ||
	    !((d[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1))
		return 0;
	/* After unshare(CLONE_NEWUSER) capget() shows every capability while
	 * the kernel grants none.  The initial namespace's inode is fixed
	 * (PROC_USER_INIT_INO); no /proc: not proven. */
	struct stat st;
	return mmf_sys6(SYS_newfstatat, AT_FDCWD, (long)"/proc/self/ns/user", (long)&st, 0, 0, 0) == 0 &&
	       st.st_ino == 0xEFFFFFFDu;
}

/* ---- seccomp filters ---------------------------------------------------- */

/* A seccomp filter can refuse a call by its arguments (systemd's
 * MemoryDenyWriteExecute= refuses mprotect with PROT_EXEC), and would
 * refuse a repeated call that changes nothing too.  While one may be in
 * force (inherited: /proc/self/status says so at start; installed later
 * through prctl or syscall(SYS_seccomp)), a call is skipped only when the
 * kernel has accepted one of the same system call with the same arguments
 * besides the range (the protection, the advice, the lock flags) since
 * the last filter was installed: the first of each is forwarded.  Bits of
 * safe_state.filter_ok: 0-7 mprotect's protections, 8-15 pkey_mprotect's,
 * 16-25 the flag advices (MADV_DONTFORK 10 to MADV_KEEPONFORK 19),
 * 26 munlock, 27 mlock2(MLOCK_ONFAULT); the other calls are never skipped
 * or never reach this question. */
static int filter_bit(const struct mmf_op *op)
{
	long a = op->a[2];
	switch (op->kind) {
	case MMF_K_MPROTECT:
		return a >= 0 && a <= 7 ? (int)a + ((op->flags & MMF_OPF_PKEY) ? 8 : 0) : -1;
	case MMF_K_MADVISE:
		return a >= MADV_DONTFORK && a <= 19 ? 16 + (int)(a - MADV_DONTFORK) : -1;
	case MMF_K_MUNLOCK:
		return 26;
	case MMF_K_MLOCK:
		return (op->flags & MMF_OPF_MLOCK2) && a == MLOCK_ONFAULT ? 27 : -1;
	default:
		return -1;
	}
}

int mmf_filter_allows(const struct mmf_op *op)
{
	uint64_t ok = __atomic_load_n(&safe_state.filter_ok, __ATOMIC_ACQUIRE);
	int b = filter_bit(op);
	return !(ok & MMF_FILTERED) || (b >= 0 && ((ok >> b) & 1));
}

int mmf_filter_accepted(const struct mmf_op *op)
{
	int b = filter_bit(op);
	if (b < 0 || !(__atomic_load_n(&safe_state.filter_ok, __ATOMIC_ACQUIRE) & MMF_FILTERED))
		return 0;
	uint64_t was = __atomic_fetch_or(&safe_state.filter_ok, 1ull << b, __ATOMIC_ACQ_REL);
	return b < 8 && !((was >> b) & 1);
}

void mmf_filter_installed(int self)
{
	uint64_t was = __atomic_load_n(&safe_state.filter_ok, __ATOMIC_RELAXED);
	__atomic_store_n(&safe_state.filter_ok,
			 MMF_FILTERED | (self || (was & MMF_FILTER_SELF) ? MMF_FILTER_SELF : 0),
			 __ATOMIC_RELEASE);
}

/* The skip question for op, or 0 when the call must be forwarded anyway. */
int question(const struct mmf_op *op, uint64_t *s, uint64_t *e, struct mmf_want *w)
{
	const struct mmf_safe_state *ss = &safe_state;
	switch (op->kind) {
	case MMF_K_MPROTECT: {
		int prot = (int)op->a[2];
		if ((op->flags & MMF_OPF_PKEY) && (int)op->a[3] != -1)
			return 0; /* the kernel re-checks that the key is allocated */
		if (prot & ~PROT_RWX || ss->rie || prot == PROT_EXEC)
			return 0; /* exec-only may pick a protection key */
		if (ss->mdwe && (prot & PROT_WRITE) && (prot & PROT_EXEC))
			return 0;
		w->what = MMF_Q_PROT;
		w->prot = (uint8_t)prot;
		return span((uint64_t)op->a[0], (uint64_t)op->a[1], s, e);
	}
	case MMF_K_MADVISE: {
		static const struct {
			int adv;
			uint8_t bit, val;
		} flags[] = {
			{MADV_HUGEPAGE, MMF_ADV_HUGEPAGE, 1},   {MADV_NOHUGEPAGE, MMF_ADV_NOHUGEPAGE, 1},
			{MADV_DONTFORK, MMF_ADV_DONTFORK, 1},   {MADV_DOFORK, MMF_ADV_DONTFORK, 0},
			{MADV_DONTDUMP, MMF_ADV_DONTDUMP, 1},   {MADV_DODUMP, MMF_ADV_DONTDUMP, 0},
			{MADV_WIPEONFORK, MMF_ADV_WIPEONFORK, 1}, {MADV_KEEPONFORK, MMF_ADV_WIPEONFORK, 0},
		};
		for (unsigned i = 0; i < sizeof flags / sizeof flags[0]; i++)
			if (flags[i].adv == (int)op->a[2]) {
				w->what = MMF_Q_ADV;
				w->adv_bit = flags[i].bit;
				w->adv_val = flags[i].val;
				return span((uint64_t)op->a[0], (uint64_t)op->a[1], s, e);
			}
		return 0;
	}
	case MMF_K_MLOCK:
	case MMF_K_MUNLOCK: {
		int fl = (op->flags & MMF_OPF_MLOCK2) ? (int)op->a[2] : 0;
		if (fl & ~MLOCK_ONFAULT)
			return 0;
		uint64_t a = (uint64_t)op->a[0] & ~(uint64_t)(page - 1);
		uint64_t l = (uint64_t)op->a[1] + ((uint64_t)op->a[0] - a);
		if (l < (uint64_t)op->a[1])
			return 0;
		w->what = MMF_Q_LOCK;
		w->lock = op->kind == MMF_K_MUNLOCK ? MMF_LOCK_NONE
			  : fl ? MMF_LOCK_ONFAULT : MMF_LOCK_ON;
		return span(a, l, s, e);
	}
	default:
		return 0;
	}
}

/* The range a call may change or depend on (see engine.h). */
void mmf_reach(const struct mmf_op *op, uint64_t *s, uint64_t *e)
{
	*s = 0;
	*e = UINT64_MAX;
	switch (op->kind) {
	case MMF_K_MMAP:
		if (!(op->a[3] & (MAP_FIXED | MAP_FIXED_NOREPLACE))) {
			*e = 0; /* new memory: nothing queued can be there */
			return;
		}
		/* fall through */
	case MMF_K_MUNMAP: case MMF_K_MPROTECT: case MMF_K_MADVISE: case MMF_K_MLOCK:
	case MMF_K_MUNLOCK: case MMF_K_MSEAL: {
		uint64_t a = (uint64_t)op->a[0], l = (uint64_t)op->a[1];
		a &= ~(uint64_t)(page - 1);
		uint64_t end = (uint64_t)op->a[0] + l;
		if (end < a || end + page - 1 < end)
			return;
		*s = a;
		*e = (end + page - 1) & ~(uint64_t)(page - 1);
		return;
	}
	default:
		return; /* mremap (two ranges), mlockall, brk, ...: everything */
	}
}

/* MMFOLD_LOG=3: one line per call (debugging). */
void trace(const struct mmf_op *op, const char *what, long r)
{
	char buf[256];
	MMF_BUF(b, buf);
	mmf_puts(&b, "mmfold: [");
	mmf_puti(&b, mmf_sys_gettid());
	mmf_puts(&b, "] ");
	mmf_puts(&b, mmf_kind_name(op->kind));
	for (int i = 0; i < 4; i++) {
		mmf_putc(&b, i ? ',' : '(');
		mmf_putx(&b, (uint64_t)op->a[i]);
	}
	mmf_puts(&b, ") ");
	mmf_puts(&b, what);
	mmf_puts(&b, " = ");
	mmf_puti(&b, r);
	mmf_log(3, buf);
}
