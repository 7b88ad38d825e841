/* libunwind for the call-site profile (MMFOLD_PROFILE > 0), loaded by the
 * constructor and only then.  dlopen with RTLD_LOCAL: libunwind.so.8 also
 * defines _Unwind_RaiseException and the rest of the C++ unwinding ABI, so
 * linking it, or loading it into the global scope, would take exception
 * handling over from libgcc_s in every program mmfold is preloaded into. */
#include <dlfcn.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "next.h"

#define MMF_LIBUNWIND "libunwind.so.8"
#define STR_(x) #x
#define STR(x) STR_(x)

void mmf_unwind_load(void)
{
	if (!__atomic_load_n(&mmf_prof_on, __ATOMIC_ACQUIRE))
		return;
	void *h = dlopen(MMF_LIBUNWIND, RTLD_NOW | RTLD_LOCAL);
	mmf_backtrace_fn bt = h ? (mmf_backtrace_fn)dlsym(h, "unw_backtrace") : NULL;
	if (!bt) {
		mmf_log(0, "mmfold: MMFOLD_PROFILE: cannot load " MMF_LIBUNWIND
			   " (unw_backtrace); every call is counted as lost");
		return;
	}
	/* Per-thread caches: no lock shared with other threads' unwinding. */
	unw_addr_space_t *as = dlsym(h, STR(unw_local_addr_space));
	int (*policy)(unw_addr_space_t, unw_caching_policy_t) =
		(int (*)(unw_addr_space_t, unw_caching_policy_t))dlsym(h, STR(unw_set_caching_policy));
	if (as && policy)
		policy(*as, UNW_CACHE_PER_THREAD);
	mmf_profile_set_unwinder(bt, (const void *)bt);
}
