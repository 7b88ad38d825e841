/* madvise, process_madvise. */
#include <sys/mman.h>
#include <sys/syscall.h>

#include "next.h"

static long fwd_madvise(const struct mmf_op *o)
{
	if (mmf_next.madvise)
		return MMF_KRET(mmf_next.madvise((void *)o->a[0], (size_t)o->a[1], (int)o->a[2]));
	return mmf_sys6(SYS_madvise, o->a[0], o->a[1], o->a[2], 0, 0, 0);
}

MMF_EXPORT int madvise(void *addr, size_t len, int advice)
{
	struct mmf_op op = {.kind = MMF_K_MADVISE, .a = {(long)addr, (long)len, advice},
			    .fwd = fwd_madvise};
	return (int)mmf_libc_ret(mmf_run(&op));
}

static long fwd_process_madvise(const struct mmf_op *o)
{
	if (mmf_next.process_madvise)
		return MMF_KRET(mmf_next.process_madvise((int)o->a[0], (const struct iovec *)o->a[1],
							 (size_t)o->a[2], (int)o->a[3],
							 (unsigned)o->a[4]));
	return mmf_sys6(SYS_process_madvise, o->a[0], o->a[1], o->a[2], o->a[3], o->a[4], 0);
}

MMF_EXPORT ssize_t process_madvise(int pidfd, const struct iovec *iov, size_t n, int advice,
				   unsigned flags)
{
	struct mmf_op op = {.kind = MMF_K_PROCESS_MADVISE,
			    .a = {pidfd, (long)iov, (long)n, advice, (long)flags},
			    .fwd = fwd_process_madvise};
	return mmf_libc_ret(mmf_run(&op));
}
