#include "next.h"

#include <dlfcn.h>

static int state; /* 0 not looked up, 1 looking up, 2 done */

int mmf_next_ready(void)
{
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == 2;
}

/* Before the constructor: dlsym of a symbol every glibc defines finds it
 * without taking its error path, so it allocates nothing.  Only for calls
 * that have no raw system call to fall back on (stdio, time zones, signal
 * actions and masks, which glibc filters). */
void *mmf_next_early(const char *name) { return dlsym(RTLD_NEXT, name); }

/* dlsym of a symbol that is missing (mseal before glibc 2.41) builds an
 * error message with malloc; from inside an allocator that is initialising
 * (jemalloc calls mmap with its init lock held) that deadlocks.  So lookups
 * happen only here, from mmfold's constructor. */
void mmf_next_resolve(void)
{
	int s = 0;
	if (!__atomic_compare_exchange_n(&state, &s, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	struct mmf_next_fns n;
#define X(name, ret, args) n.name = (ret(*) args)dlsym(RTLD_NEXT, #name);
	MMF_NEXT_SYMBOLS(X)
#undef X
	/* one pointer at a time: src/sys.c's mmf_next_* read them without
	 * waiting for mmf_next_ready() */
#define X(name, ret, args) __atomic_store_n(&mmf_next.name, n.name, __ATOMIC_RELAXED);
	MMF_NEXT_SYMBOLS(X)
#undef X
	__atomic_store_n(&state, 2, __ATOMIC_RELEASE);
}
