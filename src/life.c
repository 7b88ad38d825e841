/* The process's life cycle: start-up (early and late), fork and exit.
 * Sits on top: it sets up and tears down every other part.  See
 * docs/DESIGN.md. */
#include "core.h"

#include <linux/seccomp.h>
#include <sched.h>
#include <sys/auxv.h>
#include <string.h>

#include <sys/prctl.h>
#include <sys/personality.h>
#include <sys/syscall.h>

#include "barrier.h"
#include "batch.h"
#include "fast.h"
#include "fmt.h"
#include "live.h"
#include "profile.h"
#include "shape.h"
#include "thp.h"
#include "wx.h"

static int fini_done;

/* ---- start-up ----------------------------------------------------------- */

extern char **environ;

/* A field of /proc/self/status: its first character after the blanks,
 * or 0. */
static char status_field(const char *buf, const char *name)
{
	const char *p = strstr(buf, name);
	if (!p)
		return 0;
	for (p += strlen(name); *p == ' ' || *p == '\t'; p++)
		;
	return *p;
}

/* A seccomp filter is in force ("Seccomp:\t2" in /proc/self/status: one
 * inherited from a service manager or a container runtime, or one the
 * program installed before mmfold started); *thp_off: THP_enabled is 0
 * (PR_SET_THP_DISABLE, inherited). */
static int seccomp_filtered(int *thp_off)
{
	char buf[2048]; /* the lines are at about byte 900 */
	*thp_off = 0;
	if (mmf_sys_read_small("/proc/self/status", buf, sizeof buf) <= 0)
		return 0;
	*thp_off = status_field(buf, "\nTHP_enabled:") == '0';
	return status_field(buf, "\nSeccomp:") == '2';
}

/* The personality, from /proc/self/personality (under a filter, which
 * may not allow the personality system call): unreadable, it counts as
 * READ_IMPLIES_EXEC (mprotect never skipped). */
static long personality_read(void)
{
	char buf[32];
	long n = mmf_sys_read_small("/proc/self/personality", buf, sizeof buf);
	if (n <= 0)
		return READ_IMPLIES_EXEC;
	long v = 0;
	for (long i = 0; i < n; i++) {
		char c = buf[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return i ? v : READ_IMPLIES_EXEC;
		v = v * 16 + d;
	}
	return v;
}

/* A seccomp filter may kill the process for a system call the program
 * never makes itself (a minijail policy may allow madvise(MADV_DONTDUMP)
 * alone; a sandbox, neither openat nor mincore).  Under any filter
 * (self 0: inherited, as from a container runtime or a service manager)
 * mmfold drops the calls that only keep its records exact: no question to
 * the kernel about memory without records (decide.c), no fstatfs of a
 * mapped file or shmctl of an attached segment (record.c): the memory is
 * then not owned.  Under a filter the program installs itself (self 1: a
 * sandbox locking itself down, whose policy lists what the program calls)
 * also no huge-page advice (thp_disabled, as under PR_SET_THP_DISABLE: the
 * watches end at the next tick; prctl keeps it set) and no placement of
 * new mappings (align_active).  The profiles containers and services run
 * under allow the calls those make (madvise, mincore, mmap, munmap), and
 * they are what mmfold is loaded for there.  Skips wait for the kernel to
 * accept each kind of call in both cases (question.c). */
static void filter_in_force(int self)
{
	mmf_filter_installed(self);
	if (!self)
		return;
	__atomic_store_n(&folio_policy.thp_disabled, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&folio_policy.align_active, 0, __ATOMIC_RELAXED);
}

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
	/* A setuid or setgid program (AT_SECURE; ld.so.preload is the only
	 * way mmfold gets into one) runs with the defaults: its caller's
	 * MMFOLD_STATS_FILE would have it write as root where the caller
	 * cannot, MMFOLD_LIVE create files, MMFOLD_LOG talk on stderr. */
	static char *const no_env[] = {NULL};
	mmf_config_parse(&cfg, getauxval(AT_SECURE) ? (char **)no_env : environ, config_warn, NULL);
	if (cfg.problems && cfg.v[MMF_OPT_STRICT]) {
		static const char msg[] = "mmfold: MMFOLD_STRICT=1 and the configuration has errors: stopping\n";
		mmf_sys_write_all(2, msg, sizeof msg - 1);
		mmf_sys6(SYS_exit_group, 1, 0, 0, 0, 0, 0);
	}
	mode = (int)cfg.v[MMF_OPT_MODE];
	struct mmf_safe_state *ss = &safe_state;
	ss->verify = (int)cfg.v[MMF_OPT_VERIFY];
	if (ss->verify)
		mmf_verify_prepare();
	ss->tracing = cfg.v[MMF_OPT_LOG] >= 3;
	/* A filter is looked for first: under one, start-up makes none of
	 * the calls the program may not make itself (personality, prctl, the
	 * huge-page probe's getdents64), which the filter may kill the
	 * process for; reading /proc (openat, read, close) is what ld.so did
	 * to load this library.  MDWE, which /proc does not show, is then
	 * taken as set (write+execute requests forwarded). */
	int thp_off;
	int filtered = seccomp_filtered(&thp_off);
	long pers = filtered ? personality_read() : mmf_sys6(SYS_personality, 0xffffffff, 0, 0, 0, 0, 0);
	ss->rie = pers >= 0 && (pers & READ_IMPLIES_EXEC);
	long md = filtered ? 1 : mmf_sys6(SYS_prctl, PR_GET_MDWE, 0, 0, 0, 0, 0);
	ss->mdwe = md > 0;
	if (mode >= MMF_MODE_SAFE &&
	    (cfg.v[MMF_OPT_THP] != MMF_THP_OFF || cfg.v[MMF_OPT_ALIGN] != MMF_ALIGN_OFF ||
	     cfg.v[MMF_OPT_SHAPE] != MMF_SHAPE_OFF)) {
		mmf_folio_probe(&folio_policy.sys, filtered);
		mmf_shape_init((int)cfg.v[MMF_OPT_SHAPE], &folio_policy.sys);
		folio_policy.thp_disabled =
			filtered ? thp_off : mmf_sys6(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0, 0) > 0;
		folio_policy.thp_active =
			(cfg.v[MMF_OPT_THP] == MMF_THP_AUTO && mmf_folio_advice_pays(&folio_policy.sys)) ||
			(cfg.v[MMF_OPT_THP] == MMF_THP_ADVISE && mmf_folio_any(&folio_policy.sys));
		folio_policy.align_active = cfg.v[MMF_OPT_ALIGN] != MMF_ALIGN_OFF;
		/* advise too: mmf_thp_join reads the map there */
		if (folio_policy.thp_active)
			mmf_thp_init(&map, page, mmf_folio_advice_size(&folio_policy.sys),
				     folio_policy.sys.max_ptes_none);
		if (cfg.v[MMF_OPT_STATS])
			mmf_folio_fault_counts(&folio_policy.sys, folio_policy.faults0);
	}
	/* after the policy above: a filter the program installed before
	 * this (from another library's constructor) stays its own */
	if (filtered)
		filter_in_force((PLD(safe_state.filter_ok) & MMF_FILTER_SELF) != 0);
	if (cfg.v[MMF_OPT_LIVE] && mmf_live_init(mode) != 0)
		mmf_log(0, "mmfold: MMFOLD_LIVE: cannot create /dev/shm/mmfold.<pid>; no live statistics");
	if (mmf_profile_init((int)cfg.v[MMF_OPT_PROFILE], (int)cfg.v[MMF_OPT_PROFILE_DEPTH]) != 0)
		mmf_log(0, "mmfold: MMFOLD_PROFILE: cannot map memory for the call sites; not profiling");
	if (mode != MMF_MODE_OFF && mmf_map_init(&map) != 0) {
		mmf_log(0, "mmfold: cannot map memory for the shadow map; forwarding everything");
		mode = MMF_MODE_OFF;
	}
	if (mode != MMF_MODE_OFF)
		(void)mmf_stale_init(); /* on failure no call bypasses the map */
	if (mode >= MMF_MODE_SAFE && cfg.v[MMF_OPT_WX] != MMF_WX_OFF) {
		if (!folio_policy.sys.nsizes && cfg.v[MMF_OPT_THP] != MMF_THP_OFF)
			mmf_folio_probe(&folio_policy.sys, filtered);
		struct mmf_wx_env we = {&map, page, (int)cfg.v[MMF_OPT_WX], folio_policy.thp_active,
					&folio_policy.thp_disabled, &safe_state.mdwe, &folio_policy.sys};
		mmf_wx_init(&we);
	}
	if (cfg.v[MMF_OPT_LOG] >= 2) {
		char buf[200];
		MMF_BUF(b, buf);
		mmf_puts(&b, "mmfold: pid ");
		mmf_puti(&b, mmf_sys_getpid());
		mmf_puts(&b, ", mode ");
		mmf_puts(&b, mmf_mode_name(mode));
		mmf_puts(&b, safe_state.verify ? ", verify on" : "");
		mmf_log(2, buf);
	}
	__atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
	fast_gate();
}


void mmf_late_init(void)
{
	mmf_early_init();
	mmf_stats_late_init();
	mmf_batch_late_init();
	lazy_start();
	mmf_barrier_start(&map, page);
	fast_gate(); /* lazy_on and the barrier are set now */
	mmf_live_late_init();
	mmf_report_start_periodic();
}

/* ---- fork --------------------------------------------------------------- */

/* Threads in fork between its prepare and parent steps.  The writer lock
 * is not held across a fork: other libraries' prepare handlers run after
 * mmfold's and take their own locks (an allocator's), which a thread may
 * hold while it waits for mmfold's in mprotect; holding ours meanwhile
 * deadlocked headless Chromium (PartitionAlloc) once in about a hundred
 * lazy-mode runs.  Instead, while this count is not 0 nothing is deferred
 * or write-protected through userfaultfd (lazy mode, the barrier), so
 * what prepare made stays made until the copy; a child that finds the
 * lock held in its copy of the map trusts none of it.  (mmf_forking is
 * kept in wlock.c, below the barrier, which reads it.) */
static __thread int fork_counted __attribute__((tls_model("initial-exec")));

void mmf_atfork_prepare(void)
{
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || mode == MMF_MODE_OFF)
		return;
	/* set before anything is made: a deferral that sees 0 happens under
	 * the lock before the flushes' sections, which then make it */
	__atomic_add_fetch(&mmf_forking, 1, __ATOMIC_SEQ_CST);
	fork_counted++; /* a fork from a handler inside another's steps nests */
	if (in_write)
		return; /* fork from a handler that interrupted us: the child forgets the map */
	mmf_batch_flush_all(); /* the child gets what the batches asked for */
	if (mmf_lazy_active()) {
		/* a section that read the count as 0 and defers ends first:
		 * then the flush sees what it deferred */
		wenter();
		wleave();
	}
	mmf_lazy_flush_all(); /* and what lazy mode deferred */
	if (__atomic_load_n(&mmf_barrier_on, __ATOMIC_RELAXED)) {
		wenter();
		mmf_barrier_fork_prepare();
		wleave();
	}
}

void mmf_atfork_parent(void)
{
	if (fork_counted) {
		fork_counted--;
		__atomic_sub_fetch(&mmf_forking, 1, __ATOMIC_SEQ_CST);
	}
}

void mmf_atfork_child(void) { mmf_atfork_child_of(0); }

void mmf_atfork_child_of(unsigned long clone_flags)
{
	int files_shared = (clone_flags & CLONE_FILES) != 0;
	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2)
		return;
	mmf_live_fork_child();
	mmf_report_start_periodic();
	mmf_stats_fork_child();
	mmf_profile_fork_child();
	mmf_event(MMF_E_FORKS);
	__atomic_store_n(&fini_done, 0, __ATOMIC_RELAXED);
	if (mode == MMF_MODE_OFF)
		return;
	/* another thread of the parent held the lock at the copy (or this
	 * one, from a handler inside its section): the map may be mid-change */
	int mid_change = map.lock != 0 || (map.seq & 1) || in_write ||
			 mmf_stale_now(__atomic_load_n(&mmf_stale, __ATOMIC_RELAXED));
	mmf_stale_fork_child();
	map.lock = 0;
	mmf_forking = 0; /* only this thread goes on */
	fork_counted = 0;
	mmf_batch_fork_child(files_shared);
	mmf_barrier_fork_child(files_shared);
	if (mid_change) {
		/* trust nothing */
		map.seq &= ~1u;
		mmf_map_clear(&map);
	} else {
		mmf_map_fork_child(&map);
	}
	in_write = 0;
	async_restore(); /* the parent's writer section blocked them */
	PST(pending.n, 0);
	PST(pending.all, 0);
	safe_state.future_lock = MMF_LOCK_NONE; /* MCL_FUTURE is not inherited */
	/* only this thread goes on: its own mask counts */
	__atomic_store_n(&lazy_state.blockers, lz_mask == 2, __ATOMIC_SEQ_CST);
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

/* Opens or closes the fast paths (fast.h) for what is in force now.  Range
 * shaping may change a one-record call when forced (trim, widen) or when
 * auto's model credits widening; off forwards as asked, as the forward
 * path does. */
void fast_gate(void)
{
	int sp = mmf_shape_policy();
	unsigned off = (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 ? MMF_FAST_INIT : 0) |
		       (mode != MMF_MODE_SAFE ? MMF_FAST_MODE : 0) |
		       (mode == MMF_MODE_OFF ? MMF_FAST_OFF : 0) |
		       (__atomic_load_n(&mmf_prof_on, __ATOMIC_ACQUIRE) ? MMF_FAST_PROFILE : 0) |
		       (safe_state.tracing ? MMF_FAST_TRACE : 0) |
		       (safe_state.verify ? MMF_FAST_VERIFY : 0) |
		       (PLD(safe_state.rie) ? MMF_FAST_RIE : 0) |
		       ((sp != MMF_SHAPE_AUTO && sp != MMF_SHAPE_OFF) ||
				(sp == MMF_SHAPE_AUTO && mmf_shape_cost_default.widen_ns) ?
			MMF_FAST_SHAPE : 0) |
		       (__atomic_load_n(&mmf_barrier_on, __ATOMIC_RELAXED) ? MMF_FAST_BARRIER : 0);
	uint64_t fok = __atomic_load_n(&safe_state.filter_ok, __ATOMIC_ACQUIRE);
	mmf_fast_set(off, PLD(safe_state.mdwe), cfg.v[MMF_OPT_WX] == MMF_WX_RELAX, page,
		     PLD(lazy_state.on),
		     (fok & MMF_FILTERED) ? (unsigned)(fok & 0xff) : 0xffu);
	/* wlock.c: what a call bypassing the map would leave out */
	int bypass = __atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2 &&
		     (mode == MMF_MODE_SAFE || mode == MMF_MODE_OBSERVE) && !PLD(lazy_state.on) &&
		     /* as configured: the barrier and lazy mode start later */
		     cfg.v[MMF_OPT_BARRIER] == MMF_BARRIER_OFF && !cfg.v[MMF_OPT_PROFILE] &&
		     !__atomic_load_n(&mmf_barrier_on, __ATOMIC_RELAXED) &&
		     !__atomic_load_n(&mmf_prof_on, __ATOMIC_ACQUIRE) &&
		     cfg.v[MMF_OPT_WX] != MMF_WX_RELAX && cfg.v[MMF_OPT_SHAPE] != MMF_SHAPE_WIDEN;
	mmf_lock_wait_ns = (uint64_t)cfg.v[MMF_OPT_LOCK_WAIT] * 1000u;
	mmf_bypass_allow(bypass);
}

/* Before prctl, seccomp or personality (engine.h). */
void mmf_note_before(long nr, long a0)
{
	int changes = 0;
	if (nr == SYS_prctl)
		changes = a0 == PR_SET_SECCOMP || a0 == PR_SET_MDWE;
	else if (nr == SYS_seccomp)
		changes = a0 == SECCOMP_SET_MODE_FILTER || a0 == SECCOMP_SET_MODE_STRICT;
	else if (nr == SYS_personality)
		changes = (unsigned long)a0 != 0xffffffffUL && (a0 & READ_IMPLIES_EXEC);
	if (!changes || __atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || in_write)
		return;
	/* a seccomp filter may refuse them, READ_IMPLIES_EXEC would make a
	 * PROT_READ one executable, PR_SET_MDWE refuse a W+X one */
	mmf_batch_flush_all();
	mmf_lazy_flush_all();
}

/* Process-wide settings another call changed (preload/misc.c). */
void mmf_note_prctl(long option, long arg2, long result)
{
	if (option == PR_SET_SECCOMP && arg2 == SECCOMP_MODE_FILTER && result == 0)
		mmf_note_seccomp(SECCOMP_SET_MODE_FILTER, 0);
	if (option == PR_SET_MDWE && result == 0)
		__atomic_store_n(&safe_state.mdwe, 1, __ATOMIC_RELAXED);
	if (option == PR_SET_THP_DISABLE && result == 0)
		__atomic_store_n(&folio_policy.thp_disabled, arg2 != 0 || (PLD(safe_state.filter_ok) & MMF_FILTER_SELF) != 0,
				 __ATOMIC_RELAXED);
	if (option == PR_SET_MDWE && result == 0 && init_state == 2)
		fast_gate();
}

/* A seccomp filter installed (syscall(SYS_seccomp), prctl): skips wait for
 * the kernel to accept each kind of call again (question.c). */
void mmf_note_seccomp(long operation, long result)
{
	if (operation != SECCOMP_SET_MODE_FILTER || result < 0)
		return;
	filter_in_force(1);
	if (init_state == 2)
		fast_gate();
}

/* READ_IMPLIES_EXEC is a thread's: threads created while one had it keep
 * it when that one clears it, and a vfork child's personality() is seen
 * by the parent's copy of mmfold.  So once set it stays set: mprotect is
 * never skipped again in this process. */
void mmf_note_personality(unsigned long persona, long result)
{
	if (result == -1 || persona == 0xffffffffUL || !(persona & READ_IMPLIES_EXEC))
		return;
	__atomic_store_n(&safe_state.rie, 1, __ATOMIC_RELAXED);
	if (init_state == 2)
		fast_gate();
}
