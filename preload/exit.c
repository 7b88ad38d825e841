/* _exit: a process that leaves through it runs no exit handler, so the
 * live segment (MMFOLD_LIVE=1) is removed here, as mmfold's destructor would
 * have (shells end every child this way).  Then the next definition, or the
 * exit_group system call before the constructor found it.
 * Async-signal-safe; a vfork child, which shares its parent's memory, leaves
 * the parent's segment alone.  (C99's _Exit, rarely used, is not
 * interposed: its segment is left for mmfold top to remove.) */
#include <sys/syscall.h>

#include "next.h"

MMF_EXPORT __attribute__((noreturn)) void _exit(int status)
{
	mmf_live_forget();
	void (*next)(int) = mmf_next._exit;
	if (next)
		next(status);
	for (;;)
		mmf_sys6(SYS_exit_group, status, 0, 0, 0, 0, 0);
}
