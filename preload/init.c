/* Start-up, exit, fork, and the public API. */
#include <pthread.h>

#include "../include/mmfold.h"
#include "next.h"

static void prepare(void) { mmf_atfork_prepare(); }
static void parent(void) { mmf_atfork_parent(); }
static void child(void) { mmf_atfork_child(); }

__attribute__((constructor(101))) static void mmf_ctor(void)
{
	mmf_next_resolve();
	mmf_late_init();
	mmf_sigchain_start();
	mmf_unwind_load();
	pthread_atfork(prepare, parent, child);
}

/* Runs after the program's own exit handlers (atexit, destructors of
 * libraries loaded later); calls after it are still served. */
__attribute__((destructor(101))) static void mmf_dtor(void) { mmf_fini(); }

MMF_EXPORT const char *mmfold_version(void) { return MMFOLD_VERSION; }

MMF_EXPORT const char *mmfold_mode(void)
{
	mmf_early_init();
	return mmf_mode_name(mmf_mode());
}

MMF_EXPORT int mmfold_stats_write(int fd, int format)
{
	if (format != MMFOLD_FORMAT_TEXT && format != MMFOLD_FORMAT_JSON) {
		errno = EINVAL;
		return -1;
	}
	mmf_early_init();
	mmf_report(fd, format == MMFOLD_FORMAT_JSON ? MMF_FMT_JSON : MMF_FMT_TEXT);
	return 0;
}
