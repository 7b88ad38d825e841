/* mlock, mlock2, munlock, mlockall, munlockall. */
#include <sys/mman.h>
#include <sys/syscall.h>

#include "next.h"

static long fwd_mlock(const struct mmf_op *o)
{
	if (mmf_next.mlock)
		return MMF_KRET(mmf_next.mlock((const void *)o->a[0], (size_t)o->a[1]));
	return mmf_sys6(SYS_mlock, o->a[0], o->a[1], 0, 0, 0, 0);
}

MMF_EXPORT int mlock(const void *addr, size_t len)
{
	struct mmf_op op = {.kind = MMF_K_MLOCK, .a = {(long)addr, (long)len}, .fwd = fwd_mlock};
	return (int)mmf_libc_ret(mmf_run(&op));
}

static long fwd_mlock2(const struct mmf_op *o)
{
	if (mmf_next.mlock2)
		return MMF_KRET(mmf_next.mlock2((const void *)o->a[0], (size_t)o->a[1],
						(unsigned)o->a[2]));
	return mmf_sys6(SYS_mlock2, o->a[0], o->a[1], o->a[2], 0, 0, 0);
}

MMF_EXPORT int mlock2(const void *addr, size_t len, unsigned flags)
{
	struct mmf_op op = {.kind = MMF_K_MLOCK, .flags = MMF_OPF_MLOCK2,
			    .a = {(long)addr, (long)len, (long)flags}, .fwd = fwd_mlock2};
	return (int)mmf_libc_ret(mmf_run(&op));
}

static long fwd_munlock(const struct mmf_op *o)
{
	if (mmf_next.munlock)
		return MMF_KRET(mmf_next.munlock((const void *)o->a[0], (size_t)o->a[1]));
	return mmf_sys6(SYS_munlock, o->a[0], o->a[1], 0, 0, 0, 0);
}

MMF_EXPORT int munlock(const void *addr, size_t len)
{
	struct mmf_op op = {.kind = MMF_K_MUNLOCK, .a = {(long)addr, (long)len}, .fwd = fwd_munlock};
	return (int)mmf_libc_ret(mmf_run(&op));
}

static long fwd_mlockall(const struct mmf_op *o)
{
	if (mmf_next.mlockall)
		return MMF_KRET(mmf_next.mlockall((int)o->a[0]));
	return mmf_sys6(SYS_mlockall, o->a[0], 0, 0, 0, 0, 0);
}

MMF_EXPORT int mlockall(int flags)
{
	struct mmf_op op = {.kind = MMF_K_MLOCKALL, .a = {flags}, .fwd = fwd_mlockall};
	return (int)mmf_libc_ret(mmf_run(&op));
}

static long fwd_munlockall(const struct mmf_op *o)
{
	(void)o;
	if (mmf_next.munlockall)
		return MMF_KRET(mmf_next.munlockall());
	return mmf_sys6(SYS_munlockall, 0, 0, 0, 0, 0, 0);
}

MMF_EXPORT int munlockall(void)
{
	struct mmf_op op = {.kind = MMF_K_MUNLOCKALL, .fwd = fwd_munlockall};
	return (int)mmf_libc_ret(mmf_run(&op));
}
