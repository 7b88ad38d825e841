/* The one file that talks to the kernel directly, and the table every
 * system call goes through (see sys.h). */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

long mmf_sys6_raw(long n, long a, long b, long c, long d, long e, long f)
{
	return mmf_sys6_asm(n, a, b, c, d, e, f);
}

struct mmf_kernel mmf_kernel MMF_DATA_ALIGN;

/* The table's raw entry, when a test set it (mmf_sys6). */
__attribute__((used, noinline, externally_visible)) long mmf_sys6_hook(long n, long a, long b,
									long c, long d, long e,
									long f)
{
	return mmf_kernel.sys(n, a, b, c, d, e, f);
}

#if defined(__x86_64__)
/* mmf_sys6's way to mmf_sys6_hook: entered from the inline system call
 * with its registers (rax the number; rdi, rsi, rdx, r10, r8, r9 the
 * arguments), below the caller's red zone; returns in rax and, like the
 * syscall instruction, changes no other general register but rcx and r11
 * (mmf_sys6's asm names the vector registers the C call may change). */
__asm__(".text\n"
	".p2align 4\n"
	".globl mmf_sys6_thunk\n"
	".hidden mmf_sys6_thunk\n"
	".type mmf_sys6_thunk, @function\n"
	"mmf_sys6_thunk:\n\t"
	"push %rbp\n\t"
	"mov %rsp, %rbp\n\t"
	"push %rdi\n\t"
	"push %rsi\n\t"
	"push %rdx\n\t"
	"push %r10\n\t"
	"push %r8\n\t"
	"push %r9\n\t"
	"and $-16, %rsp\n\t"
	"sub $8, %rsp\n\t"
	"push %r9\n\t"       /* f, on the stack */
	"mov %r8, %r9\n\t"   /* e */
	"mov %r10, %r8\n\t"  /* d */
	"mov %rdx, %rcx\n\t" /* c */
	"mov %rsi, %rdx\n\t" /* b */
	"mov %rdi, %rsi\n\t" /* a */
	"mov %rax, %rdi\n\t" /* n */
	"call mmf_sys6_hook\n\t"
	"lea -48(%rbp), %rsp\n\t"
	"pop %r9\n\t"
	"pop %r8\n\t"
	"pop %r10\n\t"
	"pop %rdx\n\t"
	"pop %rsi\n\t"
	"pop %rdi\n\t"
	"pop %rbp\n\t"
	"ret\n\t"
	".size mmf_sys6_thunk, .-mmf_sys6_thunk\n");
#endif

/* Converts a libc-style int result (-1 and errno) to the kernel's and
 * puts errno back. */
#define NEXT_CALL(call)                                                        \
	({                                                                     \
		int saved_ = errno;                                            \
		long r_ = (long)(call);                                        \
		if (r_ == -1)                                                  \
			r_ = -(long)errno;                                     \
		errno = saved_;                                                \
		r_;                                                            \
	})

long mmf_next_mprotect(uint64_t s, uint64_t len, int prot)
{
	int (*f)(void *, size_t, int) = __atomic_load_n(&mmf_next.mprotect, __ATOMIC_RELAXED);
	if (f)
		return NEXT_CALL(f((void *)s, (size_t)len, prot));
	return mmf_sys6(SYS_mprotect, (long)s, (long)len, prot, 0, 0, 0);
}

long mmf_next_munlock(uint64_t s, uint64_t len)
{
	int (*f)(const void *, size_t) = __atomic_load_n(&mmf_next.munlock, __ATOMIC_RELAXED);
	if (f)
		return NEXT_CALL(f((const void *)s, (size_t)len));
	return mmf_sys6(SYS_munlock, (long)s, (long)len, 0, 0, 0, 0);
}

long mmf_next_madvise(uint64_t s, uint64_t len, int advice)
{
	int (*f)(void *, size_t, int) = __atomic_load_n(&mmf_next.madvise, __ATOMIC_RELAXED);
	if (f)
		return NEXT_CALL(f((void *)s, (size_t)len, advice));
	return mmf_sys6(SYS_madvise, (long)s, (long)len, advice, 0, 0, 0);
}

long mmf_next_process_madvise(int pidfd, const struct iovec *iov, size_t n, int advice)
{
	ssize_t (*f)(int, const struct iovec *, size_t, int, unsigned) =
		__atomic_load_n(&mmf_next.process_madvise, __ATOMIC_RELAXED);
	if (f)
		return NEXT_CALL(f(pidfd, iov, n, advice, 0));
	return mmf_sys6(SYS_process_madvise, pidfd, (long)iov, (long)n, advice, 0, 0);
}

void *mmf_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)mmf_sys6(SYS_mmap, (long)addr, (long)len, prot, flags, fd, off);
}

long mmf_sys_munmap(void *addr, size_t len)
{
	return mmf_sys6(SYS_munmap, (long)addr, (long)len, 0, 0, 0, 0);
}

long mmf_sys_open(const char *path, int flags, int mode)
{
	return mmf_sys6(SYS_openat, AT_FDCWD, (long)path, flags | O_CLOEXEC, mode, 0, 0);
}

long mmf_sys_close(int fd) { return mmf_sys6(SYS_close, fd, 0, 0, 0, 0, 0); }

long mmf_sys_read(int fd, void *buf, size_t n)
{
	long r;
	do
		r = mmf_sys6(SYS_read, fd, (long)buf, (long)n, 0, 0, 0);
	while (r == -4 /* EINTR */);
	return r;
}

long mmf_sys_read_small(const char *path, char *buf, size_t n)
{
	long fd = mmf_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	long r = mmf_sys_read((int)fd, buf, n - 1);
	mmf_sys_close((int)fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return r;
}

long mmf_sys_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	size_t done = 0;
	while (done < n) {
		long r = mmf_sys6(SYS_write, fd, (long)(p + done), (long)(n - done), 0, 0, 0);
		if (r == -4)
			continue;
		if (r <= 0)
			return r < 0 ? r : -5;
		done += (size_t)r;
	}
	return (long)done;
}

long mmf_sys_getpid(void) { return mmf_sys6(SYS_getpid, 0, 0, 0, 0, 0, 0); }
long mmf_sys_gettid(void) { return mmf_sys6(SYS_gettid, 0, 0, 0, 0, 0, 0); }

long mmf_sys_futex_wait(uint32_t *uaddr, uint32_t val)
{
	return mmf_sys6(SYS_futex, (long)uaddr, FUTEX_WAIT_PRIVATE, val, 0, 0, 0);
}

long mmf_sys_futex_wait_until(uint32_t *uaddr, uint32_t val, uint64_t deadline_ns)
{
	struct timespec ts = {(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
	/* FUTEX_WAIT_BITSET: the timeout is absolute, on CLOCK_MONOTONIC */
	return mmf_sys6(SYS_futex, (long)uaddr, FUTEX_WAIT_BITSET_PRIVATE, val, (long)&ts, 0,
			FUTEX_BITSET_MATCH_ANY);
}

long mmf_sys_futex_wake(uint32_t *uaddr, int n)
{
	return mmf_sys6(SYS_futex, (long)uaddr, FUTEX_WAKE_PRIVATE, n, 0, 0, 0);
}

long mmf_sys_sched_yield(void) { return mmf_sys6(SYS_sched_yield, 0, 0, 0, 0, 0, 0); }

size_t mmf_page_size(void)
{
	static size_t ps;
	size_t p = __atomic_load_n(&ps, __ATOMIC_RELAXED);
	if (!p) {
		p = (size_t)getauxval(AT_PAGESZ);
		if (!p)
			p = 4096;
		__atomic_store_n(&ps, p, __ATOMIC_RELAXED);
	}
	return p;
}
