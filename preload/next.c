#include "next.h"

#include <dlfcn.h>

struct mmf_next mmf_next;
static int state; /* 0 not looked up, 1 looking up, 2 done */

int mmf_next_ready(void)
{
	int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	if (s == 2)
		return 1;
	if (s == 1 || !__atomic_compare_exchange_n(&state, &s, 1, 0, __ATOMIC_ACQ_REL,
						    __ATOMIC_ACQUIRE))
		return 0;
	struct mmf_next n;
#define X(name, ret, args) n.name = (ret(*) args)dlsym(RTLD_NEXT, #name);
	MMF_NEXT_SYMBOLS(X)
#undef X
	mmf_next = n;
	__atomic_store_n(&state, 2, __ATOMIC_RELEASE);
	return 1;
}
