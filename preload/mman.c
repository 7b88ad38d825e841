/* mmap, munmap, mremap, mprotect, pkey_mprotect, mseal. */
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "next.h"

static long fwd_mmap(const struct mmf_op *o)
{
	if (mmf_next.mmap)
		return MMF_KRET_PTR(mmf_next.mmap((void *)o->a[0], (size_t)o->a[1], (int)o->a[2],
						  (int)o->a[3], (int)o->a[4], (off_t)o->a[5]));
	return mmf_sys6(SYS_mmap, o->a[0], o->a[1], o->a[2], o->a[3], o->a[4], o->a[5]);
}

MMF_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct mmf_op op = {.kind = MMF_K_MMAP,
			    .a = {(long)addr, (long)len, prot, flags, fd, (long)off},
			    .fwd = fwd_mmap};
	long r = mmf_run(&op);
	return (void *)mmf_libc_ret(r);
}

MMF_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__attribute__((alias("mmap")));

static long fwd_munmap(const struct mmf_op *o)
{
	if (mmf_next.munmap)
		return MMF_KRET(mmf_next.munmap((void *)o->a[0], (size_t)o->a[1]));
	return mmf_sys6(SYS_munmap, o->a[0], o->a[1], 0, 0, 0, 0);
}

MMF_EXPORT int munmap(void *addr, size_t len)
{
	struct mmf_op op = {.kind = MMF_K_MUNMAP, .a = {(long)addr, (long)len}, .fwd = fwd_munmap};
	return (int)mmf_libc_ret(mmf_run(&op));
}

static long fwd_mremap(const struct mmf_op *o)
{
	if (mmf_next.mremap)
		return MMF_KRET_PTR(mmf_next.mremap((void *)o->a[0], (size_t)o->a[1],
						    (size_t)o->a[2], (int)o->a[3], (void *)o->a[4]));
	return mmf_sys6(SYS_mremap, o->a[0], o->a[1], o->a[2], o->a[3], o->a[4], 0);
}

MMF_EXPORT void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
	void *nw = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		nw = va_arg(ap, void *);
		va_end(ap);
	}
	struct mmf_op op = {.kind = MMF_K_MREMAP,
			    .a = {(long)old, (long)oldlen, (long)newlen, flags, (long)nw},
			    .fwd = fwd_mremap};
	return (void *)mmf_libc_ret(mmf_run(&op));
}

static long fwd_mprotect(const struct mmf_op *o)
{
	if (mmf_next.mprotect)
		return MMF_KRET(mmf_next.mprotect((void *)o->a[0], (size_t)o->a[1], (int)o->a[2]));
	return mmf_sys6(SYS_mprotect, o->a[0], o->a[1], o->a[2], 0, 0, 0);
}

/* Apart, so that a skipped call (above it) saves no registers. */
static __attribute__((noinline)) int mprotect_run(void *addr, size_t len, int prot, int f,
						  uint64_t v, uint32_t g)
{
	struct mmf_op op = {.kind = MMF_K_MPROTECT, .a = {(long)addr, (long)len, prot},
			    .fwd = fwd_mprotect};
	if (f == MMF_FAST_MAYBE)
		return (int)mmf_libc_ret(mmf_run_change(&op, v, g));
	return (int)mmf_libc_ret(mmf_run(&op));
}

/* A section's call in flight (mmf_stale): the hint may answer still, when
 * the call lies apart from it. */
static __attribute__((noinline)) int mprotect_flight(void *addr, size_t len, int prot)
{
	uint64_t v = 0;
	uint32_t g = 0;
	int f = mmf_fast_mprotect_flight((uint64_t)addr, len, prot, &v, &g);
	if (f == MMF_FAST_SKIPPED)
		return 0;
	return mprotect_run(addr, len, prot, f, v, g);
}

/* Off mode (the gate holds that alone): mmf_fast_off, else mmf_run. */
static __attribute__((noinline)) int mprotect_off(void *addr, size_t len, int prot)
{
	long r = mmf_fast_off((uint64_t)addr, len, prot, mmf_next.mprotect);
	if (r != MMF_FAST_DECLINED)
		return (int)mmf_libc_ret(r);
	return mprotect_run(addr, len, prot, MMF_FAST_GENERAL, 0, 0);
}

/* mmf_fast_forward declined: the engine's course for a change. */
static __attribute__((noinline)) int mprotect_declined(void *addr, size_t len, int prot,
						       uint64_t v, uint32_t g)
{
	return mprotect_run(addr, len, prot, MMF_FAST_MAYBE, v, g);
}

/* A change the hint holds, on memory not executable before or after:
 * mmf_fast_forward, else the engine's course for it. */
static __attribute__((noinline)) int mprotect_change(void *addr, size_t len, int prot, uint64_t v,
						     uint32_t g)
{
	return mmf_fast_forward(addr, len, prot, v, g, mmf_next.mprotect, fwd_mprotect,
				mprotect_declined);
}

/* A change inside a flipping record (fast.h, mmf_fast_flipping):
 * mmf_fast_flip, else mprotect_change. */
static __attribute__((noinline)) int mprotect_flip(void *addr, size_t len, int prot, uint64_t v,
						   uint32_t g)
{
	long r = mmf_fast_flip((uint64_t)addr, len, prot, g, mmf_next.mprotect, fwd_mprotect);
	if (r != MMF_FAST_DECLINED)
		return (int)mmf_libc_ret(r);
	return mprotect_change(addr, len, prot, v, g);
}

/* After the skip test (f its answer, v and g what it read): the course
 * it chose.  MMF_FAST_OTHER (the current slot missed): the other slot's
 * test when it may hold the range by its range alone
 * (mmf_fast_other_may_hold), else the map's (mmf_fast_find_then). */
static __attribute__((noinline)) int mprotect_other_slot(void *addr, size_t len, int prot);
static __attribute__((noinline)) int mprotect_found(void *addr, size_t len, int prot, int f,
						    uint64_t v, uint32_t g);

static inline __attribute__((always_inline)) int mprotect_after(void *addr, size_t len, int prot,
								int f, uint64_t v, uint32_t g)
{
	if (f == MMF_FAST_SKIPPED)
		return 0;
	if (f == MMF_FAST_OTHER)
		return mmf_fast_other_may_hold((uint64_t)addr, len)
			       ? mprotect_other_slot(addr, len, prot)
			       : mmf_fast_find_then(addr, len, prot, mprotect_found);
	if (f == MMF_FAST_MAYBE && !((prot | mmf_fast_prot(v)) & PROT_EXEC))
		return mmf_fast_flipping(v) ? mprotect_flip(addr, len, prot, v, g)
					    : mprotect_change(addr, len, prot, v, g);
	static const union mmf_fast_gate off_only = {.f = {.off = MMF_FAST_MODE | MMF_FAST_OFF}};
	if (f == MMF_FAST_GENERAL && __atomic_load_n(&mmf_fast.all, __ATOMIC_RELAXED) == off_only.all)
		return mprotect_off(addr, len, prot);
	if (f == MMF_FAST_GENERAL && __atomic_load_n(&mmf_stale_word.h.now, __ATOMIC_RELAXED) == MMF_FLIGHT_BIT)
		return mprotect_flight(addr, len, prot);
	return mprotect_run(addr, len, prot, f, v, g);
}

/* After mmf_fast_find_then (the record neither slot held looked up in
 * the map and learned, the skip test's answer given from the word the
 * lookup read; f that answer, not a skip): MMF_FAST_OTHER
 * (the word it read could not answer) asks the skip test (the gate read
 * again too), whose MMF_FAST_OTHER then (a handler changed the hint
 * meanwhile) takes the general path; then the course chosen. */
static __attribute__((noinline)) int mprotect_found(void *addr, size_t len, int prot, int f,
						    uint64_t v, uint32_t g)
{
	if (f == MMF_FAST_OTHER) {
		f = mmf_fast_mprotect((uint64_t)addr, len, prot, &v, &g);
		if (f == MMF_FAST_OTHER)
			f = MMF_FAST_GENERAL;
	}
	return mprotect_after(addr, len, prot, f, v, g);
}

/* The current slot of the hint missed the range: the skip test asked of
 * the other one (the record found before; mmf_fast_mprotect_other), and
 * its course; MMF_FAST_OTHER from it: mmf_fast_find_then. */
static __attribute__((noinline)) int mprotect_other_slot(void *addr, size_t len, int prot)
{
	uint64_t v = 0;
	uint32_t g = 0;
	int f = mmf_fast_mprotect_other((uint64_t)addr, len, prot, &v, &g);
	if (f == MMF_FAST_OTHER)
		return mmf_fast_find_then(addr, len, prot, mprotect_found);
	return mprotect_after(addr, len, prot, f, v, g);
}

/* The gate closed: the general course (or off mode's, or a flight's). */
static __attribute__((noinline)) int mprotect_gated(void *addr, size_t len, int prot)
{
	return mprotect_after(addr, len, prot, MMF_FAST_GENERAL, 0, 0);
}

/* Any call, the gate read again (mprotect_hot declined it). */
static __attribute__((noinline)) int mprotect_cold(void *addr, size_t len, int prot)
{
	uint64_t v = 0;
	uint32_t g = 0;
	int f = mmf_fast_mprotect((uint64_t)addr, len, prot, &v, &g);
	return mprotect_after(addr, len, prot, f, v, g);
}

/* This thread's hot flip (fast.h, mmf_fast_hot_start), the gate open:
 * mmf_fast_hot, else mprotect_cold. */
static __attribute__((noinline)) int mprotect_hot(void *addr, size_t len, int prot)
{
	return mmf_fast_hot(addr, len, prot, mmf_next.mprotect, mprotect_cold);
}

/* The gate read once: closed, the general course; open, the hot flip
 * first (it skips the skip test), then the skip test. */
MMF_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	if (__builtin_expect(__atomic_load_n(&mmf_fast.all, __ATOMIC_RELAXED) != 0, 0))
		return mprotect_gated(addr, len, prot);
	if (mmf_fast_hot_start((uint64_t)addr))
		return mprotect_hot(addr, len, prot);
	uint64_t v = 0;
	uint32_t g = 0;
	int f = mmf_fast_mprotect_open((uint64_t)addr, len, prot, &v, &g);
	return mprotect_after(addr, len, prot, f, v, g);
}

static long fwd_pkey_mprotect(const struct mmf_op *o)
{
	if (mmf_next.pkey_mprotect)
		return MMF_KRET(mmf_next.pkey_mprotect((void *)o->a[0], (size_t)o->a[1],
						       (int)o->a[2], (int)o->a[3]));
	/* glibc turns key -1 into mprotect; so do the raw calls made before
	 * the next symbols are known (kernels without the call agree then) */
	if ((int)o->a[3] == -1)
		return mmf_sys6(SYS_mprotect, o->a[0], o->a[1], o->a[2], 0, 0, 0);
	return mmf_sys6(SYS_pkey_mprotect, o->a[0], o->a[1], o->a[2], o->a[3], 0, 0);
}

MMF_EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	struct mmf_op op = {.kind = MMF_K_MPROTECT, .flags = MMF_OPF_PKEY,
			    .a = {(long)addr, (long)len, prot, pkey}, .fwd = fwd_pkey_mprotect};
	return (int)mmf_libc_ret(mmf_run(&op));
}

static long fwd_mseal(const struct mmf_op *o)
{
	if (mmf_next.mseal)
		return MMF_KRET(mmf_next.mseal((void *)o->a[0], (size_t)o->a[1],
					       (unsigned long)o->a[2]));
	return mmf_sys6(SYS_mseal, o->a[0], o->a[1], o->a[2], 0, 0, 0);
}

/* glibc before 2.41 has no mseal(); programs that declare it themselves
 * get this one, which makes the system call. */
MMF_EXPORT int mseal(void *addr, size_t len, unsigned long flags)
{
	struct mmf_op op = {.kind = MMF_K_MSEAL, .a = {(long)addr, (long)len, (long)flags},
			    .fwd = fwd_mseal};
	return (int)mmf_libc_ret(mmf_run(&op));
}
