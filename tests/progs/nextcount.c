/* libnextcount.so: a second preloaded library, loaded after mmfold
 * (LD_PRELOAD=libmmfold.so:libnextcount.so), that counts the mprotect and
 * madvise calls reaching it and passes them on.  mmfold forwards the
 * program's calls through the next definition, so this library must see
 * every call the kernel gets, also those lazy mode made later than asked.
 * The program reads the counts with nextcount(). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

static unsigned long n_mprotect, n_madvise;

__attribute__((visibility("default"))) unsigned long nextcount(int which)
{
	return which ? __atomic_load_n(&n_madvise, __ATOMIC_RELAXED)
		     : __atomic_load_n(&n_mprotect, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) int mprotect(void *a, size_t l, int p)
{
	static int (*next)(void *, size_t, int);
	if (!next)
		next = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "mprotect");
	__atomic_add_fetch(&n_mprotect, 1, __ATOMIC_RELAXED);
	return next(a, l, p);
}

__attribute__((visibility("default"))) int madvise(void *a, size_t l, int adv)
{
	static int (*next)(void *, size_t, int);
	if (!next)
		next = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "madvise");
	__atomic_add_fetch(&n_madvise, 1, __ATOMIC_RELAXED);
	return next(a, l, adv);
}
