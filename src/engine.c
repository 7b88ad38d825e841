/* Decisions: skip, or forward and record.  See engine.h and DESIGN.md 3-4.
 *
 * Lock order: the map's writer lock is the only lock and a leaf.  A thread
 * holds it from just before it forwards a call that changes the map until
 * the record is updated, so the map changes in the kernel's order.  A call
 * that re-enters on a thread that holds it (a signal handler, or another
 * interposer below us calling back) is forwarded and its range forgotten
 * before the lock is released. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ucontext.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>

#include "fmt.h"
#include "batch.h"
#include "lazy.h"
#include "live.h"
#include "sigchain.h"
#include "folio.h"
#include "thp.h"
#include "profile.h"
#include "shape.h"
#include "sys.h"
#include "wx.h"

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#define MADV_KEEPONFORK 19
#endif
#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#endif
#ifndef PR_SET_THP_DISABLE
#define PR_SET_THP_DISABLE 41
#define PR_GET_THP_DISABLE 42
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MAP_32BIT
#define MAP_32BIT 0 /* x86 only */
#endif
#define HUGETLBFS_MAGIC_ 0x958458f6
#define PROT_RWX (PROT_READ | PROT_WRITE | PROT_EXEC)

static struct mmf_config cfg = {.v = {
#define X(id, name, type, def, min, max, choices) def,
	MMF_OPTIONS(X)
#undef X
}};
static struct mmf_map map;
static int init_state; /* 0 none, 1 running, 2 done, 3 failed (forward all) */
static int mode = MMF_MODE_SAFE;
static int verify;
static int fini_done;
static int tracing; /* MMFOLD_LOG=3 */

/* Process facts that decide whether a skip may be trusted. */
static int mdwe;          /* PR_SET_MDWE in force: W+X requests are checked */
static int rie;           /* READ_IMPLIES_EXEC personality: never skip mprotect */
static int mlock_seen;    /* some range was ever locked */
static uint8_t future_lock = MMF_LOCK_NONE; /* mlockall(MCL_FUTURE) state */
static size_t page;

/* Large folios (folio.c): the system's settings and the policy in force. */
static struct mmf_folio_sys folio;
static int thp_active;     /* advise MADV_HUGEPAGE on large anonymous mappings */
static int thp_disabled;   /* prctl(PR_SET_THP_DISABLE) in force */
static int align_active;
static uint64_t low_water; /* lowest address an mmap returned: next guesses go below */
static uint64_t faults0[MMF_FOLIO_SIZES];

/* This thread's writer state: 0 none, 1 holds the map lock, 2 releasing.
 * Signal handlers on this thread read and change it and the pending list
 * below, so every access is volatile or atomic: the compiler must neither
 * cache them in registers nor reuse an earlier load (GCC for aarch64 did,
 * and a handler's entry was then taken twice). */
static __thread volatile int in_write __attribute__((tls_model("initial-exec")));
/* Ranges changed behind the holder's back (by re-entrant calls).  Only this
 * thread and its signal handlers touch it; entries are added by handlers
 * (which run to completion) and taken off with a compare-and-swap of n. */
#define PENDING_MAX 8
static __thread struct {
	int n, all;
	uint64_t s[PENDING_MAX], e[PENDING_MAX];
} pending __attribute__((tls_model("initial-exec")));

#define PLD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define PST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

const struct mmf_config *mmf_cfg(void) { return &cfg; }

/* ---- time --------------------------------------------------------------- */

uint64_t mmf_ticks(void)
{
#if defined(__x86_64__)
	return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

static uint64_t t0_ticks, t0_ns;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	mmf_sys6(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0, 0, 0, 0);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t mmf_ticks_to_ns(uint64_t ticks)
{
	uint64_t dt = mmf_ticks() - t0_ticks, dn = mono_ns() - t0_ns;
	if (!dt || !t0_ns)
		return ticks;
	return (uint64_t)((__uint128_t)ticks * dn / dt);
}

/* ---- logging ------------------------------------------------------------ */

void mmf_log(int level, const char *line)
{
	if (level > cfg.v[MMF_OPT_LOG])
		return;
	char buf[600];
	MMF_BUF(b, buf);
	mmf_puts(&b, line);
	mmf_putc(&b, '\n');
	mmf_sys_write_all(2, b.p, b.len);
}

static int warned;
static void config_warn(const char *line, void *arg)
{
	(void)arg;
	if (warned++ >= 16)
		return;
	char buf[600];
	MMF_BUF(b, buf);
	mmf_puts(&b, line);
	mmf_putc(&b, '\n');
	mmf_sys_write_all(2, b.p, b.len);
}

/* ---- start-up ----------------------------------------------------------- */

extern char **environ;

void mmf_early_init(void)
{
	int s = __atomic_load_n(&init_state, __ATOMIC_ACQUIRE);
	if (s >= 2)
		return;
	if (s == 1 || !__atomic_compare_exchange_n(&init_state, &s, 1, 0, __ATOMIC_ACQ_REL,
						    __ATOMIC_ACQUIRE))
		return; /* another thread is at it; callers forward meanwhile */
	page = mmf_page_size();
	t0_ticks = mmf_ticks();
	t0_ns = mono_ns();
	mmf_config_parse(&cfg, environ, config_warn, NULL);
	if (cfg.problems && cfg.v[MMF_OPT_STRICT]) {
		static const char msg[] = "mmfold: MMFOLD_STRICT=1 and the configuration has errors: stopping\n";
		mmf_sys_write_all(2, msg, sizeof msg - 1);
		mmf_sys6(SYS_exit_group, 1, 0, 0, 0, 0, 0);
	}
	mode = (int)cfg.v[MMF_OPT_MODE];
	verify = (int)cfg.v[MMF_OPT_VERIFY];
	tracing = cfg.v[MMF_OPT_LOG] >= 3;
	long pers = mmf_sys6(SYS_personality, 0xffffffff, 0, 0, 0, 0, 0);
	rie = pers >= 0 && (pers & READ_IMPLIES_EXEC);
	long md = mmf_sys6(SYS_prctl, PR_GET_MDWE, 0, 0, 0, 0, 0);
	mdwe = md > 0;
	if (mode >= MMF_MODE_SAFE &&
	    (cfg.v[MMF_OPT_THP] != MMF_THP_OFF || cfg.v[MMF_OPT_ALIGN] != MMF_ALIGN_OFF ||
	     cfg.v[MMF_OPT_SHAPE] != MMF_SHAPE_OFF)) {
		mmf_folio_probe(&folio);
		mmf_shape_init((int)cfg.v[MMF_OPT_SHAPE], &folio);
		thp_disabled = mmf_sys6(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0, 0) > 0;
		thp_active = (cfg.v[MMF_OPT_THP] == MMF_THP_AUTO && mmf_folio_advice_pays(&folio)) ||
			     (cfg.v[MMF_OPT_THP] == MMF_THP_ADVISE && folio.top != MMF_THP_NEVER);
		align_active = cfg.v[MMF_OPT_ALIGN] != MMF_ALIGN_OFF;
		if (thp_active && cfg.v[MMF_OPT_THP] == MMF_THP_AUTO)
			mmf_thp_init(&map, page, mmf_folio_advice_size(&folio), folio.max_ptes_none);
		if (cfg.v[MMF_OPT_STATS])
			mmf_folio_fault_counts(&folio, faults0);
	}
	if (cfg.v[MMF_OPT_LIVE] && mmf_live_init(mode) != 0)
		mmf_log(0, "mmfold: MMFOLD_LIVE: cannot create /dev/shm/mmfold.<pid>; no live statistics");
	if (mmf_profile_init((int)cfg.v[MMF_OPT_PROFILE], (int)cfg.v[MMF_OPT_PROFILE_DEPTH]) != 0)
		mmf_log(0, "mmfold: MMFOLD_PROFILE: cannot map memory for the call sites; not profiling");
	if (mode != MMF_MODE_OFF && mmf_map_init(&map) != 0) {
		mmf_log(0, "mmfold: cannot map memory for the shadow map; forwarding everything");
		mode = MMF_MODE_OFF;
	}
	if (mode >= MMF_MODE_SAFE && cfg.v[MMF_OPT_WX] != MMF_WX_OFF) {
		if (!folio.nsizes && cfg.v[MMF_OPT_THP] != MMF_THP_OFF)
			mmf_folio_probe(&folio);
		struct mmf_wx_env we = {&map, page, (int)cfg.v[MMF_OPT_WX], thp_active,
					&thp_disabled, &mdwe, &folio};
		mmf_wx_init(&we);
	}
	if (cfg.v[MMF_OPT_LOG] >= 2) {
		char buf[200];
		MMF_BUF(b, buf);
		static const char *const names[] = {"off", "observe", "safe", "lazy"};
		mmf_puts(&b, "mmfold: pid ");
		mmf_puti(&b, mmf_sys_getpid());
		mmf_puts(&b, ", mode ");
		mmf_puts(&b, names[mode]);
		mmf_puts(&b, verify ? ", verify on" : "");
		mmf_log(2, buf);
	}
	__atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
}

static void lazy_start(void);

void mmf_late_init(void)
{
	mmf_early_init();
	mmf_stats_late_init();
	mmf_batch_late_init();
	lazy_start();
	mmf_live_late_init();
}

/* ---- the writer section ------------------------------------------------- */

/* in_write is set before the lock is taken: a signal handler that runs in
 * between must not wait for a lock its own thread is about to hold. */
static void lazy_drop(uint64_t s, uint64_t e);

static int lazy_on; /* lazy mode, tables ready, the fault handler is ours */

/* A writer section runs with asynchronous signals blocked, for two
 * reasons.  A collector that stops the world with signals (Boehm GC, Mono)
 * parks each mutator in a handler until it restarts them, and calls
 * mprotect/munmap itself meanwhile: a mutator parked inside a section
 * would hold the lock the collector's call waits for, for ever
 * (tests/preload/stopworld.c hung in every mode before).  And in lazy
 * mode a handler that ran inside a section could touch a page whose
 * promotion waits: its fault cannot be served then (the section may be
 * rewriting the very tables that say what waits, and this thread holds the
 * lock), and passing it on would hand the program a fault the kernel would
 * not have raised.  Synchronous signals stay open (blocking them would
 * make the kernel kill the process on a fault); none is raised inside a
 * section, whose code touches only mmfold's own memory.  The mask the
 * thread had is put back when the section ends (or in a forked child).
 * Cost: two rt_sigprocmask calls per section (a call that changes the
 * map); a skipped call takes no section. */
static __thread volatile int wmasked __attribute__((tls_model("initial-exec")));
static __thread uint64_t wmask_old __attribute__((tls_model("initial-exec")));

#define SIGBIT(s) (1ull << ((s) - 1))
#define SYNC_SIGNALS \
	(SIGBIT(SIGSEGV) | SIGBIT(SIGBUS) | SIGBIT(SIGILL) | SIGBIT(SIGFPE) | SIGBIT(SIGTRAP) | \
	 SIGBIT(SIGSYS))

static void async_block(void)
{
	if (wmasked)
		return;
	uint64_t set = ~SYNC_SIGNALS;
	if (mmf_sys6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&set, (long)&wmask_old, 8, 0, 0) == 0)
		wmasked = 1;
}

static void async_restore(void)
{
	if (!wmasked)
		return;
	wmasked = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	mmf_sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&wmask_old, 0, 8, 0, 0);
}

static void wenter(void)
{
	async_block();
	in_write = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	mmf_map_wlock(&map);
}

static void drain(void)
{
	for (;;) {
		if (PLD(pending.all)) {
			PST(pending.all, 0);
			PST(pending.n, 0);
			mmf_map_forget(&map, 0, UINT64_MAX & ~(uint64_t)(page - 1));
			continue;
		}
		int n = PLD(pending.n);
		if (n <= 0)
			return;
		uint64_t s = PLD(pending.s[n - 1]), e = PLD(pending.e[n - 1]);
		/* a handler that added an entry since the load makes this fail */
		if (!__atomic_compare_exchange_n(&pending.n, &n, n - 1, 0, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
			continue;
		if (s & 1) /* the call replaced what lazy mode had pending there */
			lazy_drop(s & ~1ull, e);
		mmf_map_forget(&map, s & ~1ull, e);
	}
}

static void wleave(void)
{
	for (;;) {
		drain();
		in_write = 2;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		mmf_map_wunlock(&map);
		in_write = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (!PLD(pending.n) && !PLD(pending.all)) {
			async_restore();
			return;
		}
		wenter();
	}
}

/* Runs in a signal handler (or a nested call) while this thread holds or is
 * taking the map lock: the outer call drains the list before it unlocks. */
static void pending_add(uint64_t s, uint64_t e)
{
	if (s >= e)
		return;
	int n = PLD(pending.n);
	if (n >= PENDING_MAX) {
		PST(pending.all, 1);
		return;
	}
	PST(pending.s[n], s);
	PST(pending.e[n], e);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	PST(pending.n, n + 1);
}

/* ---- helpers ------------------------------------------------------------ */

/* [addr, addr+len) rounded up to pages; 0 when the kernel would reject it
 * before changing anything (unaligned, empty, wrapping). */
static int span(uint64_t addr, uint64_t len, uint64_t *s, uint64_t *e)
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
static void touched(const struct mmf_op *op, uint64_t *s, uint64_t *e)
{
	uint64_t a = (uint64_t)op->a[0] & ~(uint64_t)(page - 1);
	uint64_t l = (uint64_t)op->a[1] + ((uint64_t)op->a[0] - a);
	*s = a;
	*e = l ? ((a + l + page - 1) & ~(uint64_t)(page - 1)) : a;
	if (*e < a || (l && *e == a))
		*e = UINT64_MAX & ~(uint64_t)(page - 1);
}

/* Kernel time is measured for every call of the first 64 of a kind on a
 * thread, then for one call in 8, which stands for the 8: reading the clock
 * twice costs about 2% of a one-page mprotect on a virtual machine. */
#define TIME_ALL 64
#define TIME_EVERY 8

static long forward(const struct mmf_op *op, struct mmf_tstats *t, uint64_t bytes)
{
	uint64_t n = t->v[op->kind][MMF_S_CALLS];
	long r;
	if (n <= TIME_ALL || n % TIME_EVERY == 0) {
		uint64_t t0 = mmf_ticks();
		r = op->fwd(op);
		uint64_t dt = mmf_ticks() - t0;
		mmf_stat_add(t, op->kind, MMF_S_KERNEL_NS, n <= TIME_ALL ? dt : dt * TIME_EVERY);
	} else {
		r = op->fwd(op);
	}
	mmf_stat_add(t, op->kind, MMF_S_FORWARDED, 1);
	mmf_stat_add(t, op->kind, MMF_S_BYTES_KERNEL, bytes);
	if ((unsigned long)r > -4096UL)
		mmf_stat_add(t, op->kind, MMF_S_ERRORS, 1);
	return r;
}


/* May a redundant mlock be answered without the kernel?  The kernel still
 * checks the RLIMIT_MEMLOCK / CAP_IPC_LOCK permission on a no-op, and that
 * can change after the range was locked. */
static int mlock_permitted(void)
{
	struct rlimit rl;
	if (mmf_sys6(SYS_prlimit64, 0, RLIMIT_MEMLOCK, 0, (long)&rl, 0, 0) == 0 &&
	    rl.rlim_cur == RLIM_INFINITY)
		return 1;
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (mmf_sys6(SYS_capget, (long)&h, (long)d, 0, 0, 0, 0) != 0)
		return 0;
	return (d[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1;
}

/* The skip question for op, or 0 when the call must be forwarded anyway. */
static int question(const struct mmf_op *op, uint64_t *s, uint64_t *e, struct mmf_want *w)
{
	switch (op->kind) {
	case MMF_K_MPROTECT: {
		int prot = (int)op->a[2];
		if ((op->flags & MMF_OPF_PKEY) && (int)op->a[3] != -1)
			return 0; /* the kernel re-checks that the key is allocated */
		if (prot & ~PROT_RWX || rie || prot == PROT_EXEC)
			return 0; /* exec-only may pick a protection key */
		if (mdwe && (prot & PROT_WRITE) && (prot & PROT_EXEC))
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

/* ---- recording ---------------------------------------------------------- */

/* Is a new file mapping of fd one whose protection behaves plainly?  Only
 * regular files outside hugetlbfs (which needs huge-page aligned calls). */
static int plain_file(int fd)
{
	struct stat st;
	struct statfs sf;
	if (mmf_sys6(SYS_fstat, fd, (long)&st, 0, 0, 0, 0) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (mmf_sys6(SYS_fstatfs, fd, (long)&sf, 0, 0, 0, 0) != 0)
		return 0;
	return (unsigned long)sf.f_type != (unsigned long)HUGETLBFS_MAGIC_;
}

/* A call succeeded on memory mmfold has no record of (glibc's heap, the
 * stack, ...): remember what it set, as observed, so that later calls
 * there that look redundant are counted as unproven. */
static void learn(uint64_t s, uint64_t e, const struct mmf_upd *u)
{
	struct mmf_attr a = {.prot = MMF_UNKNOWN, .lock = MMF_UNKNOWN, .owned = 0,
			     .sealed = MMF_UNKNOWN, .pkey = -1, .adv_known = 0, .adv_set = 0};
	if (u->fields & MMF_F_PROT)
		a.prot = u->a.prot;
	if ((u->fields & MMF_F_LOCK) && !(u->fields & MMF_F_PROT))
		a.lock = u->a.lock;
	a.adv_known = u->adv_set_mask | u->adv_clear_mask;
	a.adv_set = u->adv_set_mask;
	mmf_map_fill(&map, s, e, &a);
}

static int range_has_nohuge(uint64_t s, uint64_t e);

static void record_mmap(const struct mmf_op *op, long r)
{
	uint64_t len = ((uint64_t)op->a[1] + page - 1) & ~(uint64_t)(page - 1);
	int prot = (int)op->a[2], flags = (int)op->a[3], fd = (int)op->a[4];
	if (mmf_is_err(r)) {
		/* A failed MAP_FIXED may already have unmapped the old range. */
		uint64_t s, e;
		if ((flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) == MAP_FIXED &&
		    span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e))
			mmf_map_forget(&map, s, e);
		return;
	}
	uint64_t s = (uint64_t)r, e = s + len;
	if (e <= s)
		return;
	int anon = (flags & MAP_ANONYMOUS) != 0;
	struct mmf_attr a = {.prot = MMF_UNKNOWN, .lock = MMF_UNKNOWN, .owned = 0,
			     .sealed = MMF_UNKNOWN, .pkey = -1, .adv_known = 0, .adv_set = 0};
	if (!(flags & (MAP_GROWSDOWN | MAP_HUGETLB)) && !(prot & ~PROT_RWX) && !rie &&
	    (anon || plain_file(fd))) {
		a.owned = 1;
		a.prot = (uint8_t)prot;
		a.sealed = 0;
		a.pkey = 0;
		a.lock = (flags & MAP_LOCKED) ? MMF_LOCK_ON : future_lock;
		/* A new anonymous VMA starts with no advice flags; a file VMA
		 * may get flags from its filesystem. */
		a.adv_known = anon ? MMF_ADV_ALL : 0;
		if (anon && (flags & MAP_TYPE) == MAP_PRIVATE) {
			a.adv_known |= MMF_ADV_ANON;
			a.adv_set |= MMF_ADV_ANON;
		}
	}
	if (flags & MAP_LOCKED)
		mlock_seen = 1;
	/* Huge-page advice (README.md, "Large folios").  A MAP_FIXED commit
	 * into a range that carries mmfold's MADV_HUGEPAGE (a JVM committing
	 * heap inside its advised reservation) loses the flag in the kernel:
	 * it gets it back.  Otherwise a mapping of at least MMFOLD_THP_MIN is
	 * advised at once under MMFOLD_THP=advise; under auto only when it is
	 * a reservation (PROT_NONE), else it is watched and advised once found
	 * densely touched (thp.c).  A range the program marked MADV_NOHUGEPAGE
	 * never is, nor a MAP_STACK mapping (the kernel marks those
	 * MADV_NOHUGEPAGE itself on recent kernels). */
	int advise = 0, watch = 0;
	if (anon && (flags & MAP_STACK))
		a.adv_known &= (uint8_t)~(MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE);
	if (thp_active && !thp_disabled && a.owned && anon && (flags & MAP_TYPE) == MAP_PRIVATE &&
	    !(flags & MAP_STACK)) {
		int big = len >= (uint64_t)cfg.v[MMF_OPT_THP_MIN];
		if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) {
			struct mmf_want w = {.what = MMF_Q_ADV, .adv_bit = MMF_ADV_OURS, .adv_val = 1};
			int v = mmf_map_check(&map, s, e, &w);
			advise = v == MMF_NOOP_PROVEN || v == MMF_NOOP_UNPROVEN;
			big = big && !range_has_nohuge(s, e);
		}
		if (!advise && big) {
			if (cfg.v[MMF_OPT_THP] == MMF_THP_ADVISE || prot == PROT_NONE)
				advise = 1;
			else
				watch = 1;
		}
	}
	if (!(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && (!low_water || s < low_water))
		low_water = s;
	mmf_map_set(&map, s, e, &a);
	if (advise && mmf_sys6(SYS_madvise, (long)s, (long)(e - s), MADV_HUGEPAGE, 0, 0, 0) == 0) {
		struct mmf_upd u;
		memset(&u, 0, sizeof u);
		u.adv_set_mask = MMF_ADV_HUGEPAGE | MMF_ADV_OURS;
		u.adv_clear_mask = MMF_ADV_NOHUGEPAGE;
		mmf_map_update(&map, s, e, &u);
		mmf_event(MMF_E_THP_ADVISED);
		mmf_event_add(MMF_E_THP_BYTES, e - s);
	}
	if (watch && mmf_thp_watch(s, e) == 0)
		mmf_event(MMF_E_THP_WATCHED);
}

/* Does any page of [s,e) carry a known MADV_NOHUGEPAGE? */
static int range_has_nohuge(uint64_t s, uint64_t e)
{
	struct mmf_rec r;
	for (uint64_t a = s; a < e;) {
		if (!mmf_map_lookup(&map, a, &r)) {
			a += page;
			continue;
		}
		if ((r.a.adv_known & MMF_ADV_NOHUGEPAGE) && (r.a.adv_set & MMF_ADV_NOHUGEPAGE))
			return 1;
		a = r.end;
	}
	return 0;
}

static void record_mremap(const struct mmf_op *op, long r)
{
	uint64_t old = (uint64_t)op->a[0];
	uint64_t oldlen = ((uint64_t)op->a[1] + page - 1) & ~(uint64_t)(page - 1);
	uint64_t newlen = ((uint64_t)op->a[2] + page - 1) & ~(uint64_t)(page - 1);
	int flags = (int)op->a[3];
	if (mmf_is_err(r)) {
		/* A failed move can have unmapped the destination or moved
		 * part of the source (a sealed VMA met midway): forget both. */
		uint64_t s, e;
		if (r == -EINVAL)
			return;
		if (!(old & (page - 1)) && old + oldlen > old)
			mmf_map_forget(&map, old, old + (oldlen ? oldlen : page));
		if ((flags & MREMAP_FIXED) && span((uint64_t)op->a[4], newlen ? newlen : page, &s, &e))
			mmf_map_forget(&map, s, e);
		return;
	}
	uint64_t nw = (uint64_t)r;
	if (oldlen == 0) { /* a second mapping of shared memory */
		mmf_map_forget(&map, nw, nw + newlen);
		return;
	}
	mmf_map_move(&map, old, oldlen, nw, newlen, (flags & MREMAP_DONTUNMAP) != 0);
	if (flags & MREMAP_DONTUNMAP)
		mmf_map_forget(&map, old, old + oldlen);
}

/* Applies u to [s,e): through the reader's hint when it still holds, else
 * by a search; a successful call on a hole leaves an observed record. */
static void upd(uint64_t s, uint64_t e, const struct mmf_upd *u, const struct mmf_hint *h, long r)
{
	if (h && h->b && h->start == s && h->end == e && mmf_map_update_hint(&map, h, u))
		return;
	if (mmf_map_update(&map, s, e, u) && r == 0)
		learn(s, e, u);
}

static void record(const struct mmf_op *op, long r, const struct mmf_hint *h)
{
	uint64_t s, e;
	struct mmf_upd u;
	memset(&u, 0, sizeof u);
	switch (op->kind) {
	case MMF_K_MMAP:
		record_mmap(op, r);
		return;
	case MMF_K_MUNMAP:
		if (!span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e))
			return;
		if (r == 0)
			mmf_map_remove(&map, s, e);
		else if (r != -EINVAL)
			mmf_map_forget(&map, s, e); /* sealed: unchanged, but be sure */
		return;
	case MMF_K_MREMAP:
		record_mremap(op, r);
		return;
	case MMF_K_MPROTECT: {
		int prot = (int)op->a[2];
		if (!span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e))
			return; /* rejected before any change */
		if (prot & (PROT_GROWSDOWN | PROT_GROWSUP)) {
			/* The change extends to the start (end) of the VMA. */
			if (prot & PROT_GROWSDOWN)
				s = 0;
			if (prot & PROT_GROWSUP)
				e = UINT64_MAX & ~(uint64_t)(page - 1);
			mmf_map_forget(&map, s, e);
			return;
		}
		if (r != 0 || (prot & ~PROT_RWX) || rie) {
			/* Failures can be partial (a hole, EACCES on a later VMA). */
			mmf_map_forget(&map, s, e);
			return;
		}
		u.fields = MMF_F_PROT;
		u.a.prot = (uint8_t)prot;
		if ((op->flags & MMF_OPF_PKEY) && (int)op->a[3] != -1) {
			u.fields |= MMF_F_PKEY;
			u.a.pkey = (int16_t)(int)op->a[3];
		} else if (prot == PROT_EXEC) {
			u.fields |= MMF_F_PKEY;
			u.a.pkey = -1;
		}
		if (mlock_seen) {
			/* Newly accessible pages of a locked range are not all
			 * populated: a later mlock would do work. */
			u.fields |= MMF_F_LOCK;
			u.a.lock = MMF_UNKNOWN;
		}
		upd(s, e, &u, h, r);
		return;
	}
	case MMF_K_MADVISE: {
		struct mmf_want w;
		if (!span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e))
			return;
		if (!question(op, &s, &e, &w)) {
			/* Advice that changes no tracked flag needs no record;
			 * an advice this version does not know may. */
			switch ((int)op->a[2]) {
			case MADV_NORMAL: case MADV_RANDOM: case MADV_SEQUENTIAL:
			case MADV_WILLNEED: case MADV_DONTNEED: case MADV_FREE:
			case MADV_REMOVE: case MADV_MERGEABLE: case MADV_UNMERGEABLE:
			case MADV_COLD: case MADV_PAGEOUT: case MADV_HWPOISON:
			case 22: case 23: case 24: case 25: case 101: case 102: case 103:
				return;
			}
			u.adv_forget = MMF_ADV_ALL | MMF_ADV_OURS;
			mmf_map_update(&map, s, e, &u);
			return;
		}
		if (r != 0) {
			/* A failure can be partial (a hole): forget the flag and
			 * the one the kernel clears with it. */
			u.adv_forget = w.adv_bit;
			if (w.adv_bit & (MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE))
				u.adv_forget = MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE | MMF_ADV_OURS;
		} else if (w.adv_val) {
			u.adv_set_mask = w.adv_bit;
			/* the program's own THP advice: the range is its call now */
			if (w.adv_bit == MMF_ADV_HUGEPAGE)
				u.adv_clear_mask = MMF_ADV_NOHUGEPAGE | MMF_ADV_OURS;
			if (w.adv_bit == MMF_ADV_NOHUGEPAGE)
				u.adv_clear_mask = MMF_ADV_HUGEPAGE | MMF_ADV_OURS;
		} else {
			u.adv_clear_mask = w.adv_bit;
		}
		upd(s, e, &u, h, r);
		return;
	}
	case MMF_K_PROCESS_MADVISE: {
		/* The target may be this process: forget the advice bits of
		 * every range named (only flag advices change them). */
		const struct iovec {
			void *base;
			size_t len;
		} *iov = (const void *)op->a[1];
		long n = op->a[2];
		if (!iov || n <= 0 || n > 1024 || r == -EFAULT)
			return; /* EFAULT: the vector was unreadable, nothing done */
		u.adv_forget = MMF_ADV_ALL | MMF_ADV_OURS;
		for (long i = 0; i < n; i++)
			if (span((uint64_t)iov[i].base, iov[i].len, &s, &e))
				mmf_map_update(&map, s, e, &u);
		return;
	}
	case MMF_K_MLOCK:
	case MMF_K_MUNLOCK: {
		struct mmf_want w;
		uint64_t a = (uint64_t)op->a[0] & ~(uint64_t)(page - 1);
		uint64_t l = (uint64_t)op->a[1] + ((uint64_t)op->a[0] - a);
		if (l < (uint64_t)op->a[1] || !span(a, l, &s, &e))
			return;
		u.fields = MMF_F_LOCK;
		if (r == 0 && question(op, &s, &e, &w))
			u.a.lock = w.lock;
		else
			u.a.lock = MMF_UNKNOWN;
		if (op->kind == MMF_K_MLOCK)
			mlock_seen = 1;
		upd(s, e, &u, h, r);
		return;
	}
	case MMF_K_MLOCKALL: {
		int fl = (int)op->a[0];
		u.fields = MMF_F_LOCK;
		mlock_seen = 1;
		if (r != 0) {
			u.a.lock = MMF_UNKNOWN;
			future_lock = MMF_UNKNOWN;
		} else {
			uint8_t l = (fl & MCL_ONFAULT) ? MMF_LOCK_ONFAULT : MMF_LOCK_ON;
			future_lock = (fl & MCL_FUTURE) ? l : MMF_LOCK_NONE;
			if (!(fl & MCL_CURRENT))
				return;
			u.a.lock = l;
		}
		mmf_map_update(&map, 0, UINT64_MAX & ~(uint64_t)(page - 1), &u);
		return;
	}
	case MMF_K_MUNLOCKALL:
		u.fields = MMF_F_LOCK;
		u.a.lock = r == 0 ? MMF_LOCK_NONE : MMF_UNKNOWN;
		future_lock = u.a.lock;
		mmf_map_update(&map, 0, UINT64_MAX & ~(uint64_t)(page - 1), &u);
		return;
	case MMF_K_MSEAL:
		if (r == 0 && span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e)) {
			u.fields = MMF_F_SEALED;
			u.a.sealed = 1;
			mmf_map_update(&map, s, e, &u);
		}
		return;
	case MMF_K_SHMAT: {
		struct shmid_ds ds;
		if (mmf_is_err(r))
			return;
		s = (uint64_t)r;
		if (mmf_sys6(SYS_shmctl, op->a[0], IPC_STAT, (long)&ds, 0, 0, 0) == 0)
			e = (s + ds.shm_segsz + page - 1) & ~(uint64_t)(page - 1);
		else
			e = UINT64_MAX & ~(uint64_t)(page - 1);
		mmf_map_forget(&map, s, e);
		mmf_map_remove(&map, s, e);
		return;
	}
	}
}

/* The range a re-entrant call may have changed, for forgetting. */
static void reentry_forget(const struct mmf_op *op, long r)
{
	uint64_t s, e;
	switch (op->kind) {
	case MMF_K_MLOCKALL:
	case MMF_K_MUNLOCKALL:
	case MMF_K_PROCESS_MADVISE:
	case MMF_K_BRK:
	case MMF_K_SHMAT:
		PST(pending.all, 1);
		return;
	case MMF_K_MMAP:
		if (!mmf_is_err(r))
			pending_add((uint64_t)r | 1, (uint64_t)r + (((uint64_t)op->a[1] + page - 1) &
								    ~(uint64_t)(page - 1)));
		if (op->a[3] & MAP_FIXED) {
			touched(op, &s, &e);
			pending_add(s | 1, e);
		}
		return;
	case MMF_K_MREMAP:
		touched(op, &s, &e);
		pending_add(s | 1, e);
		if (!mmf_is_err(r))
			pending_add((uint64_t)r | 1, (uint64_t)r + (((uint64_t)op->a[2] + page - 1) &
								    ~(uint64_t)(page - 1)));
		return;
	case MMF_K_MUNMAP:
		touched(op, &s, &e);
		pending_add(s | 1, e);
		return;
	case MMF_K_MPROTECT:
		if (op->a[2] & (PROT_GROWSDOWN | PROT_GROWSUP)) {
			PST(pending.all, 1);
			return;
		}
		touched(op, &s, &e);
		pending_add(s | 1, e); /* replaces a pending promotion there */
		return;
	default:
		touched(op, &s, &e);
		pending_add(s, e);
	}
}

/* MMFOLD_LOG=3: one line per call (debugging). */
static void trace(const struct mmf_op *op, const char *what, long r)
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

/* ---- lazy mode ---------------------------------------------------------- *
 *
 * Promotions (mprotect calls that only add permissions) on private anonymous
 * memory mmfold mapped are written in lz_prot instead of being made; a later
 * call that asks for the protection in force cancels them; the first touch
 * faults and lazy_fault (first in line for SIGSEGV, sigchain.c) makes the
 * call for the folio-sized granule touched, or for the whole range once
 * touches are dense.  munlock of locked memory waits in lz_unlock, and an
 * mlock of the same range cancels it.  Every other call that reaches a
 * pending range, fork, exit, mmfold_flush() and the buffer-taking wrappers
 * (preload/io.c) apply what is pending there first.  Both tables change
 * only under the map's writer lock. */

#define LAZY_CAP 16384
#define LAZY_GRANULE (64u << 10)
#ifndef LAZY_DENSE
#define LAZY_DENSE 4 /* faults in one range before the whole range is made */
#endif

static struct mmf_lazy lz_prot, lz_unlock;
/* MADV_DONTFORK (want 1) / MADV_DOFORK (want 0): VMA flags that matter
 * only at fork, made before it in one process_madvise per advice. */
static struct mmf_lazy lz_fork;
static void lazy_drop(uint64_t s, uint64_t e)
{
	if (!lazy_on)
		return;
	mmf_lazy_set(&lz_prot, s, e, -1);
	mmf_lazy_set(&lz_unlock, s, e, -1);
	mmf_lazy_set(&lz_fork, s, e, -1);
}

/* Writer lock held.  Makes the waiting fork advice in [s,e): per advice, the
 * ranges in process_madvise calls of up to 64, each range alone where that
 * is refused. */
static void lazy_apply_fork(uint64_t s, uint64_t e)
{
	struct mmf_pend b[64];
	struct {
		void *base;
		size_t len;
	} iov[64];
	struct mmf_tstats *t = mmf_stats_self();
	uint32_t c;
	while ((c = mmf_lazy_collect(&lz_fork, s, e, b, 64))) {
		for (int want = 0; want < 2; want++) {
			int adv = want ? MADV_DONTFORK : MADV_DOFORK, n = 0;
			uint64_t total = 0;
			for (uint32_t i = 0; i < c; i++)
				if (b[i].want == want) {
					iov[n].base = (void *)b[i].s;
					iov[n].len = b[i].e - b[i].s;
					total += iov[n++].len;
				}
			if (!n)
				continue;
			long r = -ENOSYS;
			if (n > 1) {
				r = mmf_sys6(SYS_process_madvise, -10000 /* PIDFD_SELF_THREAD */,
					     (long)iov, n, adv, 0, 0);
				mmf_stat_add(t, MMF_K_MADVISE, MMF_S_FORWARDED, 1);
				mmf_stat_add(t, MMF_K_MADVISE, MMF_S_BYTES_KERNEL, total);
			}
			for (int i = 0; i < n; i++) {
				uint64_t rs = (uint64_t)iov[i].base, re = rs + iov[i].len;
				long ri = r == (long)total ? 0
					  : mmf_sys6(SYS_madvise, (long)rs, (long)(re - rs), adv, 0, 0, 0);
				if (r != (long)total) {
					mmf_stat_add(t, MMF_K_MADVISE, MMF_S_FORWARDED, 1);
					mmf_stat_add(t, MMF_K_MADVISE, MMF_S_BYTES_KERNEL, re - rs);
				}
				struct mmf_upd u;
				memset(&u, 0, sizeof u);
				if (ri != 0)
					u.adv_forget = MMF_ADV_DONTFORK;
				else if (want)
					u.adv_set_mask = MMF_ADV_DONTFORK;
				else
					u.adv_clear_mask = MMF_ADV_DONTFORK;
				mmf_map_update(&map, rs, re, &u);
			}
			mmf_event_add(MMF_E_LAZY_APPLIED, (uint64_t)n);
		}
		for (uint32_t i = 0; i < c; i++)
			mmf_lazy_set(&lz_fork, b[i].s, b[i].e, -1);
	}
}

/* Some promotion was deferred once (the fault handler has nothing to do
 * before that); promotions made so far (lazy_fault's comment). */
static int lz_ever;
static uint64_t lz_made;
/* A deferred promotion was refused when it was made: nothing more is
 * deferred (see lazy_refused). */
static int lz_broken;

/* The access a SIGSEGV wanted (PROT_* bits), 0 when the context does not
 * say. */
static int fault_access(void *uc)
{
#if defined(__x86_64__)
	/* page-fault error code: bit 1 write, bit 4 instruction fetch */
	unsigned long err = (unsigned long)((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR];
	return (err & 16) ? PROT_EXEC : (err & 2) ? PROT_WRITE : PROT_READ;
#elif defined(__aarch64__)
	/* the ESR record in the signal frame: data abort WnR bit 6 */
	const unsigned char *p = ((ucontext_t *)uc)->uc_mcontext.__reserved;
	for (unsigned off = 0; off + 8 <= 4096;) {
		uint32_t magic, size;
		__builtin_memcpy(&magic, p + off, 4);
		__builtin_memcpy(&size, p + off + 4, 4);
		if (!magic || size < 8)
			break;
		if (magic == 0x45535201 && size >= 16) {
			uint64_t esr;
			__builtin_memcpy(&esr, p + off + 8, 8);
			unsigned ec = (unsigned)(esr >> 26) & 0x3f;
			if (ec == 0x20 || ec == 0x21)
				return PROT_EXEC;
			return (esr & (1u << 6)) ? PROT_WRITE : PROT_READ;
		}
		off += size;
	}
	return 0;
#else
	(void)uc;
	return 0;
#endif
}

/* Writer lock held.  A deferred promotion the kernel refused when it was
 * finally made (ENOMEM: a split at vm.max_map_count, or commit accounting
 * under vm.overcommit_memory=2): the program was told 0 long ago and
 * nothing can tell it now.  lazy_run avoids the known causes before it
 * defers; when one happens anyway the range is forgotten (its record is
 * not trusted), the event is counted (lazy_refused), one line is logged
 * at MMFOLD_LOG=1, and from then on nothing more is deferred: the
 * process runs as in safe mode, where the next refusal reaches the call
 * that caused it.  A fault on the page then reaches the program, as it
 * would have had the call failed. */
static void lazy_refused(uint64_t s, uint64_t e, int want, long err)
{
	mmf_map_forget(&map, s, e);
	mmf_event(MMF_E_LAZY_REFUSED);
	if (__atomic_exchange_n(&lz_broken, 1, __ATOMIC_RELAXED))
		return;
	char buf[200];
	MMF_BUF(b, buf);
	mmf_puts(&b, "mmfold: lazy mode: a deferred mprotect(");
	mmf_putx(&b, s);
	mmf_puts(&b, ", ");
	mmf_putu(&b, e - s);
	mmf_puts(&b, ", ");
	mmf_putu(&b, (uint64_t)want);
	mmf_puts(&b, ") failed when made (errno ");
	mmf_puti(&b, -err);
	mmf_puts(&b, "); nothing more is deferred");
	mmf_log(1, buf);
}

/* Writer lock held.  Makes one deferred promotion of [s,e) to want and
 * records what the kernel answered.  Returns the system call's result. */
static long lazy_make(uint64_t s, uint64_t e, int want, struct mmf_tstats *t)
{
	long r = mmf_sys6(SYS_mprotect, (long)s, (long)(e - s), want, 0, 0, 0);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_FORWARDED, 1);
	mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_BYTES_KERNEL, e - s);
	if (r == 0) {
		struct mmf_upd u;
		memset(&u, 0, sizeof u);
		u.fields = MMF_F_PROT;
		u.a.prot = (uint8_t)want;
		if (mlock_seen) {
			u.fields |= MMF_F_LOCK;
			u.a.lock = MMF_UNKNOWN;
		}
		mmf_map_update(&map, s, e, &u);
		__atomic_store_n(&lz_made, lz_made + 1, __ATOMIC_RELAXED);
	} else {
		mmf_stat_add(t, MMF_K_MPROTECT, MMF_S_ERRORS, 1);
		lazy_refused(s, e, want, r);
	}
	mmf_lazy_set(&lz_prot, s, e, -1);
	mmf_event(MMF_E_LAZY_APPLIED);
	return r;
}

/* Writer lock held.  [s,e) (one waiting entry, part of it maybe refused
 * already) made in one call.  Returns the system call's result. */
static long lazy_apply_whole(uint64_t s, uint64_t e, int want)
{
	return lazy_make(s, e, want, mmf_stats_self());
}

/* Writer lock held.  Makes the pending promotions and munlocks in [s,e).
 * Returns how many promotions the kernel refused. */
static int lazy_apply(uint64_t s, uint64_t e)
{
	struct mmf_pend b[32];
	struct mmf_tstats *t = mmf_stats_self();
	uint32_t c;
	int refused = 0;
	while ((c = mmf_lazy_collect(&lz_prot, s, e, b, 32)))
		for (uint32_t i = 0; i < c; i++)
			refused += lazy_make(b[i].s, b[i].e, b[i].want, t) != 0;
	if (mmf_lazy_count(&lz_fork))
		lazy_apply_fork(s, e);
	while ((c = mmf_lazy_collect(&lz_unlock, s, e, b, 32))) {
		for (uint32_t i = 0; i < c; i++) {
			long r = mmf_sys6(SYS_munlock, (long)b[i].s, (long)(b[i].e - b[i].s), 0, 0, 0, 0);
			mmf_stat_add(t, MMF_K_MUNLOCK, MMF_S_FORWARDED, 1);
			mmf_stat_add(t, MMF_K_MUNLOCK, MMF_S_BYTES_KERNEL, b[i].e - b[i].s);
			struct mmf_upd u;
			memset(&u, 0, sizeof u);
			u.fields = MMF_F_LOCK;
			u.a.lock = r == 0 ? MMF_LOCK_NONE : MMF_UNKNOWN;
			mmf_map_update(&map, b[i].s, b[i].e, &u);
			mmf_lazy_set(&lz_unlock, b[i].s, b[i].e, -1);
			mmf_event(MMF_E_LAZY_APPLIED);
		}
	}
	return refused;
}

/* Anything pending where op reaches is made first (no lock held). */
static void lazy_before(const struct mmf_op *op)
{
	if (!mmf_lazy_count(&lz_prot) && !mmf_lazy_count(&lz_unlock) && !mmf_lazy_count(&lz_fork))
		return;
	uint64_t s, e;
	mmf_reach(op, &s, &e);
	if (s >= e || (!mmf_lazy_overlaps(&lz_prot, s, e) && !mmf_lazy_overlaps(&lz_unlock, s, e) &&
		       !mmf_lazy_overlaps(&lz_fork, s, e)))
		return;
	wenter();
	lazy_apply(s, e);
	wleave();
}

/* Writer lock held.  1 when every page of [s,e) is recorded, owned,
 * private anonymous, unsealed, with a known protection and the default key;
 * then *promo says whether prot includes each record's protection, *same
 * whether it equals all, *locked whether all are mlocked as lock says. */
static int lazy_known(uint64_t s, uint64_t e, int prot, int lock, int *promo, int *same,
		      int *locked)
{
	*promo = *same = *locked = 1;
	struct mmf_rec r;
	for (uint64_t a = s; a < e; a = r.end) {
		if (!mmf_map_lookup(&map, a, &r) || !r.a.owned || r.a.prot == MMF_UNKNOWN ||
		    r.a.sealed != 0 || r.a.pkey != 0 || !(r.a.adv_known & r.a.adv_set & MMF_ADV_ANON))
			return 0;
		if ((r.a.prot | prot) != prot)
			*promo = 0;
		if (r.a.prot != prot)
			*same = 0;
		if (r.a.lock != lock)
			*locked = 0;
	}
	return 1;
}

/* How many bytes of [s,e) tab holds (writer lock held). */
static uint64_t lazy_covered(struct mmf_lazy *tab, uint64_t s, uint64_t e)
{
	struct mmf_pend b[32];
	uint64_t n = 0, at = s;
	uint32_t c;
	while (at < e && (c = mmf_lazy_collect(tab, at, e, b, 32))) {
		for (uint32_t i = 0; i < c; i++)
			n += b[i].e - b[i].s;
		at = b[c - 1].e;
	}
	return n;
}

/* Whether waiting pays (writer lock held for all three).  A promotion
 * that waits and is then touched costs a fault on top of the system call
 * it was to save (a collector that unprotects a block and writes into it
 * at once: Boehm GC makes tens of thousands of those); one that is
 * cancelled or never touched costs nothing.  lz_touched estimates, out of
 * 1024, the share of recent deferred promotions that ended in a first
 * touch (a moving average over the last ~16 outcomes).  Above
 * lz_touched_max (MMFOLD_LAZY_TOUCHED, 75% by default; 100 never), promotions are made at once (as in safe mode) except
 * one in 16, which still waits so that the estimate follows the program
 * when its habits change. */
static uint32_t lz_touched, lz_sample;
static uint32_t lz_touched_max = 768; /* MMFOLD_LAZY_TOUCHED percent of 1024 */

static void lazy_outcome(int touched)
{
	lz_touched = lz_touched - lz_touched / 16 + (touched ? 1024 / 16 : 0);
}

/* vm.overcommit_memory and vm.max_map_count, read when lazy mode starts. */
static int lz_overcommit;
static uint64_t lz_max_maps = 65530;

/* Writer lock held.  1 when a promotion of [s,e) to prot may wait: it must
 * not be refused when it is finally made (lazy_refused).  The kernel
 * refuses one for two reasons: commit accounting, when write permission is
 * added under strict overcommit (mode 2); and a VMA split past
 * vm.max_map_count.  Each waiting range can cost two more VMAs when a
 * granule in its middle is made, so the records mmfold knows plus two per
 * waiting range must stay well below the limit. */
static int lz_blockers; /* threads blocking SIGSEGV/SIGBUS (mmf_lazy_mask) */

static int lazy_may_defer(uint64_t s, uint64_t e, int prot)
{
	(void)s;
	(void)e;
	if (__atomic_load_n(&lz_broken, __ATOMIC_RELAXED))
		return 0;
	/* again under the lock: a thread that has just come to block SIGSEGV
	 * counted itself before it took the lock to make what waits */
	if (__atomic_load_n(&lz_blockers, __ATOMIC_SEQ_CST))
		return 0;
	if (lz_touched > lz_touched_max && (++lz_sample & 15)) {
		mmf_event(MMF_E_LAZY_EAGER);
		return 0;
	}
	if (lz_overcommit == 2 && (prot & PROT_WRITE))
		return 0;
	uint64_t maps = mmf_map_count(&map) + 2 * ((uint64_t)mmf_lazy_count(&lz_prot) + 1);
	return maps + 1024 < lz_max_maps;
}

/* The lazy decisions for mprotect, munlock and mlock.  1 when the call was
 * answered (*res), 0 when the normal path goes on. */
static int lazy_run(struct mmf_op *op, struct mmf_tstats *t, long *res)
{
	uint64_t s, e;
	struct mmf_want w;
	int k = op->kind;
	int forkadv = k == MMF_K_MADVISE &&
		      ((int)op->a[2] == MADV_DONTFORK || (int)op->a[2] == MADV_DOFORK);
	if (!(k == MMF_K_MPROTECT || k == MMF_K_MUNLOCK || k == MMF_K_MLOCK || forkadv) ||
	    !question(op, &s, &e, &w))
		return 0;
	if (k == MMF_K_MPROTECT && (op->flags || (w.prot & PROT_EXEC)))
		return 0; /* keys; code: a deferred PROT_EXEC would fault on every
			     fetch into the chain, and JITs run what they flip */
	if (k == MMF_K_MLOCK && !mmf_lazy_count(&lz_unlock))
		return 0;
	if (k == MMF_K_MPROTECT && mmf_sigchain_in_handler())
		return 0; /* asked by the program's fault handler: made at once */
	/* nothing pending here and nothing to defer: the normal path, which
	 * skips without a lock */
	int v = mmf_map_check(&map, s, e, &w);
	if (v == MMF_NOOP_PROVEN && !mmf_lazy_overlaps(&lz_prot, s, e) &&
	    !mmf_lazy_overlaps(&lz_unlock, s, e) && !mmf_lazy_overlaps(&lz_fork, s, e))
		return 0;
	int promo, same, locked, handled = 0;
	wenter();
	if (k == MMF_K_MPROTECT) {
		if (lazy_known(s, e, w.prot, MMF_LOCK_NONE, &promo, &same, &locked) && promo) {
			int had = mmf_lazy_overlaps(&lz_prot, s, e);
			if (same) {
				mmf_lazy_set(&lz_prot, s, e, -1);
				mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
				if (had) {
					mmf_event(MMF_E_LAZY_CANCELLED);
					lazy_outcome(0);
				}
				handled = 1;
			} else if (lazy_may_defer(s, e, w.prot) &&
				   mmf_lazy_set(&lz_prot, s, e, w.prot) == 0) {
				if (!lz_ever)
					__atomic_store_n(&lz_ever, 1, __ATOMIC_RELEASE);
				mmf_stat_add(t, k, MMF_S_DEFERRED, 1);
				handled = 1;
			}
		}
	} else if (forkadv) {
		/* The flag in force (the map) and what waits: a call asking
		 * for the flag in force cancels, another one waits. */
		int had = mmf_lazy_overlaps(&lz_fork, s, e);
		v = mmf_map_check(&map, s, e, &w); /* again, under the lock */
		if (lazy_known(s, e, PROT_NONE, MMF_LOCK_NONE, &promo, &same, &locked)) {
			if (v == MMF_NOOP_PROVEN) {
				mmf_lazy_set(&lz_fork, s, e, -1);
				mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
				if (had)
					mmf_event(MMF_E_LAZY_CANCELLED);
				handled = 1;
			} else if (v == MMF_CHANGE && mmf_lazy_set(&lz_fork, s, e, w.adv_val) == 0) {
				mmf_stat_add(t, k, MMF_S_DEFERRED, 1);
				handled = 1;
			}
		}
	} else if (k == MMF_K_MUNLOCK) {
		if (lazy_known(s, e, PROT_NONE, MMF_LOCK_ON, &promo, &same, &locked) && locked &&
		    mmf_lazy_set(&lz_unlock, s, e, 0) == 0) {
			mmf_stat_add(t, k, MMF_S_DEFERRED, 1);
			handled = 1;
		}
	} else if (w.lock == MMF_LOCK_ON && lazy_covered(&lz_unlock, s, e) == e - s &&
		   lazy_known(s, e, PROT_NONE, MMF_LOCK_ON, &promo, &same, &locked) && locked &&
		   mlock_permitted()) {
		/* mlock of a range whose munlock waits: both vanish */
		mmf_lazy_set(&lz_unlock, s, e, -1);
		mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
		mmf_event(MMF_E_LAZY_CANCELLED);
		handled = 1;
	}
	if (!handled) {
		/* Made now: what waits here first (and every waiting munlock
		 * before an mlock, whose limit they count against). */
		if (k == MMF_K_MLOCK)
			lazy_apply(0, UINT64_MAX);
		else
			lazy_apply(s, e);
	}
	wleave();
	if (handled) {
		if (tracing)
			trace(op, "deferred", 0);
		*res = 0;
	}
	return handled;
}

/* ---- the fault path ------------------------------------------------------
 *
 * What the state is and who changes it:
 * - lz_prot (what waits) and the shadow map change only under the writer
 *   lock, and a promotion is made (the system call) under that lock too,
 *   before its entry leaves lz_prot and its record takes the new
 *   protection.  So while a thread holds the lock, for an owned, known
 *   record: what the kernel has in force = the record, and what the
 *   program asked for = lz_prot's want where an entry covers the page,
 *   else the record.
 * - lz_made counts promotions made (under the lock).  It only grows.
 * - Asynchronous signals are blocked inside writer sections (async_block),
 *   so this handler never runs on a thread that holds the lock, except for
 *   a synchronous fault in mmfold's own code, which is not the program's.
 *
 * The rule (README, lazy mode): a fault may reach the program only when,
 * with everything that waits made, the kernel would fault too.  The fault
 * was raised at some time t0 before this handler took the lock; between
 * t0 and now another thread may have made the page's promotion (mlock and
 * fork make all that waits, a call on an overlapping range makes what is
 * there), cancelled it, split its entry, unmapped the page or mapped new
 * memory there.  So nothing is decided before the lock is taken (no
 * lock-free early exit other than "nothing was ever deferred"), and then:
 * 1. An entry covers the page: if its protection allows the access, the
 *    granule is made and the access retried; if not, the kernel would
 *    fault with it made: the fault goes to the program.
 * 2. No entry, the record is owned and known: it is the kernel's state
 *    now.  The access allowed: retried (a promotion was made since t0).
 *    Not allowed: nothing waits and the kernel faults: the program's.
 * 3. No entry and no trustworthy record (or the record allows the access
 *    but the kernel faulted: a record made stale behind mmfold's back):
 *    retried once; a second fault of the same access on this thread with
 *    no promotion made in between (lz_made unchanged) is the kernel's own
 *    and goes to the program.  If promotions keep being made in between,
 *    the third fault goes on too: a retried access that faults again
 *    after its page was made accessible means the page was made
 *    inaccessible again, by a call that left nothing waiting there, and
 *    at that moment the kernel would have faulted.
 * "Allowed" follows the architecture: on x86-64 and arm64 a page with
 * PROT_WRITE or PROT_EXEC can be read.  Retrying errs on the safe side: a
 * wrong "allowed" costs one more fault (3 above), a wrong "not allowed"
 * would be a signal the program should not see. */

static __thread struct {
	uint64_t page, made;
	int need, tries;
} lz_memo __attribute__((tls_model("initial-exec")));

static int access_allowed(int prot, int need)
{
	if (!need) /* the context did not say: anything but PROT_NONE may do */
		return prot != PROT_NONE;
	if (need & PROT_EXEC)
		return (prot & PROT_EXEC) != 0;
	if (need & PROT_WRITE)
		return (prot & PROT_WRITE) != 0;
	return (prot & PROT_RWX) != 0;
}

/* Writer lock held: case 3 above. */
static int lazy_retry_once(uint64_t a, int need)
{
	uint64_t made = __atomic_load_n(&lz_made, __ATOMIC_RELAXED);
	if (lz_memo.page == a && lz_memo.need == need) {
		if (lz_memo.made == made || ++lz_memo.tries > 2) {
			lz_memo.page = 0;
			return 0;
		}
		lz_memo.made = made;
		return 1;
	}
	lz_memo.page = a;
	lz_memo.need = need;
	lz_memo.made = made;
	lz_memo.tries = 1;
	return 1;
}

/* SIGSEGV on a page whose promotion may wait: make it and retry the
 * access, or say the fault is the program's (0). */
static int lazy_fault(int sig, siginfo_t *si, void *uc)
{
	/* MAPERR: nothing was mapped there at the fault, whatever waits */
	if (sig != SIGSEGV || si->si_code != SEGV_ACCERR ||
	    !__atomic_load_n(&lz_ever, __ATOMIC_ACQUIRE) || in_write)
		return 0;
	uint64_t a = (uint64_t)si->si_addr & ~(uint64_t)(page - 1);
	int need = fault_access(uc), retry;
	wenter();
	struct mmf_pend *q = mmf_lazy_at(&lz_prot, a);
	struct mmf_rec r;
	if (q) {
		if (!access_allowed(q->want, need)) {
			retry = 0; /* made, the page would still fault */
		} else {
			uint64_t gs = q->s, ge = q->e, g = LAZY_GRANULE, qs = q->s, qe = q->e;
			int want = q->want;
			/* huge-page backed: a granule that does not split a PMD */
			if (mmf_map_lookup(&map, a, &r) &&
			    (r.a.adv_known & r.a.adv_set & MMF_ADV_HUGEPAGE))
				g = 2u << 20;
			/* readers may load the entry: one atomic store */
			uint8_t touches = (uint8_t)(q->touches + 1);
			__atomic_store_n(&q->touches, touches, __ATOMIC_RELAXED);
			if (touches == 1)
				lazy_outcome(1);
			if (touches < LAZY_DENSE && ge - gs > 4 * g) {
				gs = a & ~(g - 1);
				ge = gs + g;
				if (gs < q->s)
					gs = q->s;
				if (ge > q->e)
					ge = q->e;
			} else if (touches >= LAZY_DENSE) {
				mmf_event(MMF_E_LAZY_DENSE);
			}
			retry = lazy_apply(gs, ge) == 0;
			if (!retry && (gs != qs || ge != qe))
				/* the granule was refused (a split at the map-count
				 * limit): the whole range, as the program asked */
				retry = lazy_apply_whole(qs, qe, want) == 0;
			mmf_event(MMF_E_LAZY_FAULTS);
		}
	} else if (mmf_map_lookup(&map, a, &r) && r.a.owned && r.a.prot != MMF_UNKNOWN &&
		   !access_allowed(r.a.prot, need)) {
		retry = 0; /* case 2: the kernel's state, and nothing waits */
	} else {
		retry = lazy_retry_once(a, need);
		if (retry)
			mmf_event(MMF_E_LAZY_RETRIED);
	}
	wleave();
	return retry;
}

/* A small decimal number from a /proc file, or dflt. */
static long read_proc_long(const char *path, long dflt)
{
	char buf[32];
	long fd = mmf_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return dflt;
	long n = mmf_sys_read((int)fd, buf, sizeof buf - 1);
	mmf_sys_close((int)fd);
	if (n <= 0 || buf[0] < '0' || buf[0] > '9')
		return dflt;
	long v = 0;
	for (long i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
		v = v * 10 + (buf[i] - '0');
	return v;
}

static void lazy_start(void)
{
	if (mode != MMF_MODE_LAZY)
		return;
	lz_touched_max = (uint32_t)(cfg.v[MMF_OPT_LAZY_TOUCHED] * 1024 / 100);
	lz_overcommit = (int)read_proc_long("/proc/sys/vm/overcommit_memory", 0);
	lz_max_maps = (uint64_t)read_proc_long("/proc/sys/vm/max_map_count", 65530);
	if (mmf_lazy_init(&lz_prot, LAZY_CAP) || mmf_lazy_init(&lz_unlock, LAZY_CAP) ||
	    mmf_lazy_init(&lz_fork, LAZY_CAP) ||
	    mmf_sigchain_claim(lazy_fault) != 0) {
		mmf_log(1, "mmfold: lazy mode: cannot install the fault handler; calls are made "
			   "as in safe mode");
		return;
	}
	__atomic_store_n(&lazy_on, 1, __ATOMIC_RELEASE);
}

/* Everything pending, made now (fork, exit, mmfold_flush). */
void mmf_lazy_flush_all(void)
{
	if (!__atomic_load_n(&lazy_on, __ATOMIC_ACQUIRE) || in_write ||
	    (!mmf_lazy_count(&lz_prot) && !mmf_lazy_count(&lz_unlock) && !mmf_lazy_count(&lz_fork)))
		return;
	wenter();
	lazy_apply(0, UINT64_MAX);
	wleave();
}

__thread int mmf_lazy_hold __attribute__((tls_model("initial-exec")));

/* Threads that block SIGSEGV or SIGBUS.  The kernel cannot hand such a
 * thread's fault on a waiting promotion to the handler: it unblocks the
 * signal, resets it to SIG_DFL and the process dies (Chromium blocks every
 * signal around fork() and thread creation, and PartitionAlloc commits and
 * touches memory in that window).  While any thread blocks them nothing new
 * waits, and what waited was made when the first one blocked them.
 * lz_mask is this thread's state: 0 not known yet (a new thread inherits
 * its creator's mask), 1 open, 2 blocks.  Masks changed without going
 * through sigprocmask/pthread_sigmask (siglongjmp, swapcontext, a signal
 * handler's sa_mask, raw system calls) are not seen: README.md. */
static int lz_blockers;
static __thread int lz_mask __attribute__((tls_model("initial-exec")));

void mmf_lazy_mask(int blocks)
{
	int was = lz_mask;
	lz_mask = blocks ? 2 : 1;
	if (blocks && was != 2) {
		__atomic_add_fetch(&lz_blockers, 1, __ATOMIC_SEQ_CST);
		/* Under the lock even when nothing seems to wait: a thread that
		 * read the count as 0 in lazy_may_defer may be about to defer;
		 * once this section has run, anything it deferred is made and
		 * every later deferral sees the count. */
		if (__atomic_load_n(&lazy_on, __ATOMIC_ACQUIRE) && !in_write) {
			wenter();
			lazy_apply(0, UINT64_MAX);
			wleave();
		}
	} else if (!blocks && was == 2) {
		__atomic_sub_fetch(&lz_blockers, 1, __ATOMIC_SEQ_CST);
	}
}

/* A thread that ends with the signals blocked no longer holds lazy mode
 * back (from the statistics' thread-exit destructor). */
void mmf_lazy_thread_exit(void)
{
	if (lz_mask == 2)
		__atomic_sub_fetch(&lz_blockers, 1, __ATOMIC_SEQ_CST);
	lz_mask = 0;
}

/* This thread's mask, asked of the kernel once (its first call). */
static void lazy_mask_probe(void)
{
	uint64_t cur = 0;
	long r = mmf_sys6(SYS_rt_sigprocmask, SIG_BLOCK, 0, (long)&cur, 8, 0, 0);
	uint64_t fault = (1ull << (SIGSEGV - 1)) | (1ull << (SIGBUS - 1));
	mmf_lazy_mask(r == 0 && (cur & fault));
}

/* No promotion may wait now (a thread blocks fault signals). */
static int lazy_blocked(void)
{
	if (__builtin_expect(!lz_mask, 0))
		lazy_mask_probe();
	return __atomic_load_n(&lz_blockers, __ATOMIC_SEQ_CST) != 0;
}

int mmf_lazy_active(void)
{
	return __atomic_load_n(&lazy_on, __ATOMIC_RELAXED);
}

/* A buffer the kernel is about to read or write (preload/io.c). */
void mmf_lazy_buffer(uint64_t p, size_t n)
{
	if (!n || !__atomic_load_n(&lazy_on, __ATOMIC_RELAXED) || !mmf_lazy_count(&lz_prot))
		return;
	uint64_t s = p & ~(uint64_t)(page - 1), e = (p + n + page - 1) & ~(uint64_t)(page - 1);
	if (e <= s || p + n < p || !mmf_lazy_overlaps(&lz_prot, s, e) || in_write)
		return;
	wenter();
	lazy_apply(s, e);
	wleave();
	mmf_event(MMF_E_LAZY_BUFFERS);
}

/* ---- the entry point ---------------------------------------------------- */

static long run_brk(struct mmf_op *op, struct mmf_tstats *t);
static uint64_t align_plan(const struct mmf_op *op);
static long mmap_aligned(const struct mmf_op *op, struct mmf_tstats *t, uint64_t A);
static int mremap_aligned(const struct mmf_op *op, struct mmf_tstats *t, long *res);
static long decide(struct mmf_op *op, struct mmf_tstats *t, uint64_t asked);

long mmf_run(struct mmf_op *op)
{
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2) {
		mmf_early_init();
		if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
			return op->fwd(op); /* another thread is initialising */
	}
	if (__builtin_expect(mmf_prof_on, 0) && !(op->flags & MMF_OPF_PROFILED))
		return mmf_profile_run(op); /* runs op through here again */
	struct mmf_tstats *t = mmf_stats_self();
	int k = op->kind;
	mmf_stat_add(t, k, MMF_S_CALLS, 1);
	/* Which argument is the length, per kind (-1: none). */
	static const signed char len_arg[MMF_K_COUNT] = {
		[MMF_K_MMAP] = 1, [MMF_K_MUNMAP] = 1, [MMF_K_MREMAP] = 2, [MMF_K_MPROTECT] = 1,
		[MMF_K_PKEY_MPROTECT] = 1, [MMF_K_MADVISE] = 1, [MMF_K_PROCESS_MADVISE] = -1,
		[MMF_K_MLOCK] = 1, [MMF_K_MUNLOCK] = 1, [MMF_K_MLOCKALL] = -1,
		[MMF_K_MUNLOCKALL] = -1, [MMF_K_MSEAL] = 1, [MMF_K_BRK] = -1, [MMF_K_SHMAT] = -1,
	};
	uint64_t asked = len_arg[k] < 0 ? 0 : (uint64_t)op->a[len_arg[k]];
	if (asked > (1ull << 47))
		asked = 0; /* a bad length (the call fails): not a size */
	mmf_stat_add(t, k, MMF_S_BYTES_ASKED, asked);

	if (mode == MMF_MODE_OFF)
		return forward(op, t, asked);

	if (in_write) {
		/* Re-entered while this thread holds the map. */
		mmf_event(MMF_E_REENTRY);
		long r = forward(op, t, asked);
		reentry_forget(op, r);
		return r;
	}

	if ((__atomic_load_n(&mmf_batch_live, __ATOMIC_RELAXED) || mmf_batch_depth) &&
	    mode >= MMF_MODE_SAFE) {
		long r;
		if (mmf_batch_intercept(op, &r))
			return r;
	}
	if (lazy_on && !mmf_lazy_hold && !lazy_blocked()) {
		long r;
		if (lazy_run(op, t, &r))
			return r;
	}
	return decide(op, t, asked);
}

/* A call made on behalf of a batch: decided and recorded like any other,
 * without being counted as a call again. */
long mmf_apply(struct mmf_op *op)
{
	struct mmf_tstats *t = mmf_stats_self();
	if (in_write) {
		long r = forward(op, t, (uint64_t)op->a[1]);
		reentry_forget(op, r);
		return r;
	}
	return decide(op, t, (uint64_t)op->a[1]);
}

long mmf_forward_counted(const struct mmf_op *op, uint64_t bytes)
{
	return forward(op, mmf_stats_self(), bytes);
}

static long decide(struct mmf_op *op, struct mmf_tstats *t, uint64_t asked)
{
	int k = op->kind;
	if (lazy_on)
		lazy_before(op);
	if (k == MMF_K_BRK)
		return run_brk(op, t);

	uint64_t s, e;
	struct mmf_want w;
	struct mmf_hint hint = {NULL, 0, 0, 0, 0};
	/* W^X (wx.c): a flip of a range relaxed to RWX is answered here;
	 * any other mprotect on it is forwarded without the skip question. */
	int wx = k == MMF_K_MPROTECT && mode >= MMF_MODE_SAFE ? mmf_wx_pre(op) : MMF_WX_NONE;
	if (wx == MMF_WX_TRY_SKIP) {
		wenter();
		int skip = mmf_wx_skip(op);
		wleave();
		if (skip) {
			mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
			if (tracing)
				trace(op, "skipped (relaxed)", 0);
			return 0;
		}
	}
	int shape = 0; /* a change on known memory: range shaping may apply */
	if (wx == MMF_WX_NONE && question(op, &s, &e, &w)) {
		int v = mmf_map_check_hint(&map, s, e, &w, &hint);
		shape = v == MMF_CHANGE && mode >= MMF_MODE_SAFE && w.what != MMF_Q_LOCK;
		/* The range is one record: nothing inside it is already at the
		 * target, and the model gives widening no credit, so auto would
		 * forward it as asked; spare the planner's lookups. */
		if (shape && hint.b && mmf_shape_policy() == MMF_SHAPE_AUTO &&
		    mmf_shape_cost_default.widen_ns == 0)
			shape = 0;
		if (v == MMF_NOOP_PROVEN && op->kind == MMF_K_MLOCK && !mlock_permitted())
			v = MMF_NOOP_UNPROVEN;
		if (v == MMF_NOOP_PROVEN && verify) {
			mmf_event(MMF_E_VERIFY_CHECKS);
			if (mmf_verify(s, e, &w) == 0) {
				mmf_event(MMF_E_VERIFY_MISMATCH);
				char buf[200];
				MMF_BUF(b, buf);
				mmf_puts(&b, "mmfold: verify: the kernel disagrees with a skip of ");
				mmf_puts(&b, mmf_kind_name(k));
				mmf_puts(&b, " at ");
				mmf_putx(&b, s);
				mmf_puts(&b, "-");
				mmf_putx(&b, e);
				mmf_log(0, buf);
				if (verify >= 2)
					mmf_sys6(SYS_kill, mmf_sys_getpid(), 6 /* SIGABRT */, 0, 0, 0, 0);
				v = MMF_CHANGE;
			}
		}
		if (v == MMF_NOOP_PROVEN) {
			mmf_stat_add(t, k, MMF_S_SKIPPED, 1);
			if (mode >= MMF_MODE_SAFE) {
				if (tracing)
					trace(op, "skipped", 0);
				return 0;
			}
		} else if (v == MMF_NOOP_UNPROVEN) {
			mmf_stat_add(t, k, MMF_S_UNPROVEN, 1);
		} else if (v == MMF_BUSY) {
			mmf_event(MMF_E_BUSY);
		}
	} else if (k == MMF_K_MADVISE &&
		   !(((int)op->a[2] == MADV_NORMAL || (int)op->a[2] == MADV_RANDOM ||
		      (int)op->a[2] == MADV_SEQUENTIAL) && mmf_wx_tracks_readahead())) {
		/* Advice that changes no tracked flag: no record, no lock
		 * (readahead advice is tracked while wx.c keeps areas apart). */
		switch ((int)op->a[2]) {
		case MADV_DONTNEED: case MADV_FREE: case MADV_WILLNEED: case MADV_COLD:
		case MADV_PAGEOUT: case MADV_NORMAL: case MADV_RANDOM: case MADV_SEQUENTIAL:
		case MADV_REMOVE: case 22: case 23: case 24: case 25: case 102: case 103:
			return forward(op, t, asked);
		}
	}

	uint64_t align = (k == MMF_K_MMAP && mode >= MMF_MODE_SAFE) ? align_plan(op) : 0;
	wenter();
	long r;
	if (mode >= MMF_MODE_SAFE)
		mmf_wx_before(op);
	if (align)
		r = mmap_aligned(op, t, align);
	else if (shape && mmf_shape_forward(&map, op, s, e, &w, t, forward, &r))
		;
	else if (!(k == MMF_K_MREMAP && mode >= MMF_MODE_SAFE && mremap_aligned(op, t, &r)))
		r = forward(op, t, asked);
	record(op, r, &hint);
	if (mode >= MMF_MODE_SAFE)
		mmf_wx_after(op, r);
	mmf_thp_tick(PLD(thp_disabled));
	wleave();
	if (tracing)
		trace(op, "forwarded", r);
	return r;
}

/* The folio alignment a new mapping should get, or 0.  Only private
 * anonymous mappings where the kernel picks the address (no MAP_FIXED, no
 * hint): a caller's address is never changed. */
static uint64_t align_plan(const struct mmf_op *op)
{
	int flags = (int)op->a[3];
	if (!align_active || op->a[0] != 0 || !(flags & MAP_ANONYMOUS) ||
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
	int advised = thp_active && !thp_disabled && len >= (uint64_t)cfg.v[MMF_OPT_THP_MIN] &&
		      !(flags & MAP_STACK) &&
		      (cfg.v[MMF_OPT_THP] == MMF_THP_ADVISE || (int)op->a[2] == PROT_NONE);
	return mmf_folio_align_for(&folio, len, cfg.v[MMF_OPT_ALIGN], cfg.v[MMF_OPT_ALIGN_MIN], advised);
}

/* Places the mapping of op at an A-aligned address.  First one call: the
 * next aligned spot below the lowest mapping seen, with MAP_FIXED_NOREPLACE
 * (EEXIST if taken).  Else map A bytes more and trim both ends.  Else the
 * caller's own call, unchanged: alignment never makes a call fail.  The
 * length and every other argument are the caller's. */
static long mmap_aligned(const struct mmf_op *op, struct mmf_tstats *t, uint64_t A)
{
	uint64_t len = ((uint64_t)op->a[1] + page - 1) & ~(uint64_t)(page - 1);
	struct mmf_op o = *op;
	uint64_t t0 = mmf_ticks();
	long r;
	if (low_water > len + A) {
		uint64_t guess = (low_water - len) & ~(A - 1);
		o.a[0] = (long)guess;
		o.a[3] = op->a[3] | MAP_FIXED_NOREPLACE;
		r = o.fwd(&o);
		if ((uint64_t)r == guess)
			goto aligned;
		if (!mmf_is_err(r)) /* a kernel that ignores MAP_FIXED_NOREPLACE */
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
	r = op->fwd(op);
	goto done;
aligned:
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
static int mremap_aligned(const struct mmf_op *op, struct mmf_tstats *t, long *res)
{
	uint64_t old = (uint64_t)op->a[0];
	uint64_t newlen = ((uint64_t)op->a[2] + page - 1) & ~(uint64_t)(page - 1);
	struct mmf_rec rec;
	uint64_t oldlen = ((uint64_t)op->a[1] + page - 1) & ~(uint64_t)(page - 1);
	/* Only a plain move of one owned, unsealed record: a resizing move of
	 * one VMA fails before it changes anything, so a failed attempt can be
	 * undone by unmapping the reserved target. */
	if (!align_active || op->a[3] != MREMAP_MAYMOVE || newlen < (uint64_t)op->a[2] ||
	    newlen > (1ull << 46) || !oldlen || newlen <= oldlen ||
	    !mmf_map_lookup(&map, old, &rec) || !rec.a.owned || rec.a.sealed != 0 ||
	    rec.start > old || rec.end < old + oldlen)
		return 0;
	int advised = (rec.a.adv_known & MMF_ADV_HUGEPAGE) && (rec.a.adv_set & MMF_ADV_HUGEPAGE);
	uint64_t A = mmf_folio_align_for(&folio, newlen, cfg.v[MMF_OPT_ALIGN],
					 cfg.v[MMF_OPT_ALIGN_MIN], advised);
	if (!A || (old & (A - 1)))
		return 0;
	struct mmf_op o = *op;
	uint64_t t0 = mmf_ticks();
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

/* brk/sbrk: the heap may shrink over ranges the map knows. */
static long run_brk(struct mmf_op *op, struct mmf_tstats *t)
{
	wenter();
	uint64_t before = (uint64_t)mmf_sys6(SYS_brk, 0, 0, 0, 0, 0, 0);
	long r = forward(op, t, 0);
	uint64_t after = (uint64_t)mmf_sys6(SYS_brk, 0, 0, 0, 0, 0, 0);
	if (after < before) {
		uint64_t s = (after + page - 1) & ~(uint64_t)(page - 1);
		uint64_t e = (before + page - 1) & ~(uint64_t)(page - 1);
		if (s < e)
			mmf_map_remove(&map, s, e);
	}
	wleave();
	return r;
}

void mmf_note_prctl(long option, long arg2, long result)
{
	if (option == PR_SET_MDWE && result == 0)
		__atomic_store_n(&mdwe, 1, __ATOMIC_RELAXED);
	if (option == PR_SET_THP_DISABLE && result == 0)
		__atomic_store_n(&thp_disabled, arg2 != 0, __ATOMIC_RELAXED);
}

void mmf_note_personality(unsigned long persona, long result)
{
	if (result != -1 && persona != 0xffffffffUL)
		__atomic_store_n(&rie, (persona & READ_IMPLIES_EXEC) != 0, __ATOMIC_RELAXED);
}

/* ---- fork --------------------------------------------------------------- */

static int fork_locked;

void mmf_atfork_prepare(void)
{
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || mode == MMF_MODE_OFF)
		return;
	if (in_write) {
		fork_locked = 0; /* fork from a handler that interrupted us */
		return;
	}
	mmf_batch_flush_all(); /* the child gets what the batches asked for */
	mmf_lazy_flush_all();  /* and what lazy mode deferred */
	wenter();
	fork_locked = 1;
}

void mmf_atfork_parent(void)
{
	if (fork_locked) {
		fork_locked = 0;
		wleave();
	}
}

void mmf_atfork_child(void)
{
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
		return;
	mmf_live_fork_child();
	mmf_stats_fork_child();
	mmf_profile_fork_child();
	mmf_event(MMF_E_FORKS);
	__atomic_store_n(&fini_done, 0, __ATOMIC_RELAXED);
	if (mode == MMF_MODE_OFF)
		return;
	map.lock = 0;
	mmf_batch_fork_child();
	if (!fork_locked) {
		/* The map may be mid-change: trust nothing. */
		map.seq &= ~1u;
		mmf_map_clear(&map);
	} else {
		mmf_map_fork_child(&map);
	}
	fork_locked = 0;
	in_write = 0;
	async_restore(); /* the parent's writer section blocked them */
	PST(pending.n, 0);
	PST(pending.all, 0);
	future_lock = MMF_LOCK_NONE; /* MCL_FUTURE is not inherited */
	/* only this thread goes on: its own mask counts */
	__atomic_store_n(&lz_blockers, lz_mask == 2, __ATOMIC_SEQ_CST);
}

/* ---- exit --------------------------------------------------------------- */

void mmf_fini(void)
{
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
		return;
	if (__atomic_exchange_n(&fini_done, 1, __ATOMIC_ACQ_REL))
		return;
	if (!in_write) {
		mmf_batch_flush_all();
		mmf_lazy_flush_all();
	}
	if (cfg.v[MMF_OPT_STATS]) {
		int c, fd = mmf_report_open(&c);
		mmf_report_as(fd, (int)cfg.v[MMF_OPT_STATS_FORMAT], MMF_REPORT_EXIT);
		if (c)
			mmf_sys_close(fd);
	}
	mmf_live_fini();
}

int mmf_mode(void) { return mode; }

void mmf_folio_report(struct mmf_buf *b, int json)
{
	uint64_t now[MMF_FOLIO_SIZES];
	static const char *const st[] = {"never", "madvise", "always"};
	long huge = mmf_folio_anon_huge();
	mmf_folio_fault_counts(&folio, now);
	if (json) {
		mmf_puts(b, ",\"folio\":{\"thp\":\"");
		mmf_puts(b, st[folio.top]);
		mmf_puts(b, "\",\"advising\":");
		mmf_putu(b, (uint64_t)(thp_active && !thp_disabled));
		mmf_puts(b, ",\"anon_huge_bytes\":");
		mmf_puti(b, huge);
		mmf_puts(b, ",\"anon_fault_alloc\":{");
		for (int i = 0; i < folio.nsizes; i++) {
			mmf_puts(b, i ? ",\"" : "\"");
			mmf_putu(b, folio.size[i] >> 10);
			mmf_puts(b, "kB\":");
			mmf_putu(b, now[i] - faults0[i]);
		}
		mmf_puts(b, "}}");
		return;
	}
	mmf_puts(b, "folios: THP ");
	mmf_puts(b, st[folio.top]);
	mmf_puts(b, thp_active && !thp_disabled ? ", advising" : ", not advising");
	mmf_puts(b, "; AnonHugePages ");
	mmf_puti(b, huge < 0 ? -1 : huge >> 10);
	mmf_puts(b, " kB; anon_fault_alloc during the run (system-wide):");
	int any = 0;
	for (int i = 0; i < folio.nsizes; i++)
		if (folio.state[i] != MMF_THP_NEVER || now[i] != faults0[i]) {
			mmf_putc(b, ' ');
			mmf_putu(b, folio.size[i] >> 10);
			mmf_puts(b, "kB ");
			mmf_putu(b, now[i] - faults0[i]);
			any = 1;
		}
	mmf_puts(b, any ? "\n" : " none enabled\n");
}
