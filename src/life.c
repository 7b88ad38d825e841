/* The process's life cycle: start-up (early and late), fork and exit.
 * Sits on top: it sets up and tears down every other part.  See
 * docs/DESIGN.md. */
#include "core.h"

#include <sys/prctl.h>
#include <sys/personality.h>
#include <sys/syscall.h>

#include "batch.h"
#include "fmt.h"
#include "live.h"
#include "profile.h"
#include "shape.h"
#include "thp.h"
#include "wx.h"

int init_state; /* 0 none, 1 running, 2 done, 3 failed (forward all) */
static int fini_done;

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
	if (verify)
		mmf_verify_prepare();
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
			     (cfg.v[MMF_OPT_THP] == MMF_THP_ADVISE && mmf_folio_any(&folio));
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


void mmf_late_init(void)
{
	mmf_early_init();
	mmf_stats_late_init();
	mmf_batch_late_init();
	lazy_start();
	mmf_live_late_init();
	mmf_report_start_periodic();
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
	mmf_report_start_periodic();
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
