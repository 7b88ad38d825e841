/* The one file that talks to the kernel directly (see sys.h). */
#include "sys.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>

long mmf_sys6(long n, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
#else
#error "mmfold: raw system calls are written for x86_64 and aarch64 only"
#endif
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
