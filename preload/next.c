#include "next.h"

#include <dlfcn.h>

struct mmf_next mmf_next;
static int state; /* 0 not looked up, 1 looking up, 2 done */

int mmf_next_ready(void)
{
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == 2;
}

/* dlsym of a symbol that is missing (mseal before glibc 2.41) builds an
 * error message with malloc; from inside an allocator that is initialising
 * (jemalloc calls mmap with its init lock held) that deadlocks.  So lookups
 * happen only here, from mmfold's constructor. */
void mmf_next_resolve(void)
{
	int s = 0;
	if (!__atomic_compare_exchange_n(&state, &s, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	struct mmf_next n;
#define X(name, ret, args) n.name = (ret(*) args)dlsym(RTLD_NEXT, #name);
	MMF_NEXT_SYMBOLS(X)
#undef X
	mmf_next = n;
	mmf_io_resolve();
	mmf_stdio_resolve();
	mmf_sigmask_resolve();
	__atomic_store_n(&state, 2, __ATOMIC_RELEASE);
}
