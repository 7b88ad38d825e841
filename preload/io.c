/* Buffer-taking system-call wrappers, for lazy mode: the kernel does not
 * fault on a program's buffer, it fails with EFAULT, so a deferred
 * promotion where the buffer lies is made before the call.  Outside lazy
 * mode (or with nothing deferred) each wrapper costs one load and a branch
 * before the next definition.  Calls libc makes internally (fread's read,
 * printf's write) do not come through here: see README.md. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "next.h"

/* Outside lazy mode a wrapper costs a load and a branch before the next
 * definition (fast.h's mmf_fast_lazy, inline). */
#define BUF(p, n)                                                              \
	do {                                                                   \
		if (__builtin_expect(mmf_fast_lazy, 0))                        \
			mmf_lazy_buffer(p, n);                                 \
	} while (0)

/* The buffer-taking wrappers from pread on: the usual course is a load
 * and a branch (lazy mode off, the next definition known), then the jump
 * to the next definition; lazy mode's course and the calls made before the
 * constructor (NAME_slow) are apart and cold, so the usual one needs no
 * frame. */
#define COLD __attribute__((noinline, cold))
#define FAST(ret, name, params, args)                                          \
	MMF_EXPORT ret name params                                             \
	{                                                                      \
		__typeof__(mmf_next.name) next_ = mmf_next.name;               \
		if (__builtin_expect(mmf_fast_lazy != 0 || !next_, 0))         \
			return name##_slow args;                               \
		return next_ args;                                             \
	}

static void iov(const struct iovec *v, long n)
{
	if (!mmf_fast_lazy || !v || n <= 0)
		return;
	BUF((uint64_t)(uintptr_t)(v), (size_t)n * sizeof *v);
	for (long i = 0; i < n && i < 1024; i++)
		BUF((uint64_t)(uintptr_t)(v[i].iov_base), v[i].iov_len);
}

static void msg(const struct msghdr *m)
{
	if (!mmf_fast_lazy || !m)
		return;
	BUF((uint64_t)(uintptr_t)(m), sizeof *m);
	BUF((uint64_t)(uintptr_t)(m->msg_name), m->msg_namelen);
	iov(m->msg_iov, (long)m->msg_iovlen);
	BUF((uint64_t)(uintptr_t)(m->msg_control), m->msg_controllen);
}

/* The next definition when known, else the system call (before mmfold's
 * constructor ran). */
#define NEXT(name, sysargs, ...)                                               \
	(mmf_next.name ? mmf_next.name(__VA_ARGS__) : raw sysargs)

/* Apart and cold, so that the usual course saves no registers. */
static __attribute__((noinline, cold)) long raw(long nr, long a, long b, long c, long d, long e,
						long f)
{
	return mmf_libc_ret(mmf_sys6(nr, a, b, c, d, e, f));
}

/* read and write, the most frequent: lazy mode's course apart, so that
 * the usual one saves no registers (a load, a branch, the jump on). */
static __attribute__((noinline)) ssize_t read_lazy(int fd, void *b, size_t n)
{
	mmf_lazy_buffer((uint64_t)(uintptr_t)(b), n);
	return NEXT(read, (SYS_read, fd, (long)b, (long)n, 0, 0, 0), fd, b, n);
}

MMF_EXPORT ssize_t read(int fd, void *b, size_t n)
{
	if (__builtin_expect(mmf_fast_lazy, 0))
		return read_lazy(fd, b, n);
	return NEXT(read, (SYS_read, fd, (long)b, (long)n, 0, 0, 0), fd, b, n);
}

static __attribute__((noinline)) ssize_t write_lazy(int fd, const void *b, size_t n)
{
	mmf_lazy_buffer((uint64_t)(uintptr_t)(b), n);
	return NEXT(write, (SYS_write, fd, (long)b, (long)n, 0, 0, 0), fd, b, n);
}

MMF_EXPORT ssize_t write(int fd, const void *b, size_t n)
{
	if (__builtin_expect(mmf_fast_lazy, 0))
		return write_lazy(fd, b, n);
	return NEXT(write, (SYS_write, fd, (long)b, (long)n, 0, 0, 0), fd, b, n);
}

static COLD ssize_t pread_slow(int fd, void *b, size_t n, off_t o)
{
	BUF((uint64_t)(uintptr_t)(b), n);
	return NEXT(pread, (SYS_pread64, fd, (long)b, (long)n, o, 0, 0), fd, b, n, o);
}
FAST(ssize_t, pread, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
MMF_EXPORT ssize_t pread64(int fd, void *b, size_t n, off_t o) __attribute__((alias("pread")));

static COLD ssize_t pwrite_slow(int fd, const void *b, size_t n, off_t o)
{
	BUF((uint64_t)(uintptr_t)(b), n);
	return NEXT(pwrite, (SYS_pwrite64, fd, (long)b, (long)n, o, 0, 0), fd, b, n, o);
}
FAST(ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
MMF_EXPORT ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) __attribute__((alias("pwrite")));

static COLD ssize_t readv_slow(int fd, const struct iovec *v, int n)
{
	iov(v, n);
	return NEXT(readv, (SYS_readv, fd, (long)v, n, 0, 0, 0), fd, v, n);
}
FAST(ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n))

static COLD ssize_t writev_slow(int fd, const struct iovec *v, int n)
{
	iov(v, n);
	return NEXT(writev, (SYS_writev, fd, (long)v, n, 0, 0, 0), fd, v, n);
}
FAST(ssize_t, writev, (int fd, const struct iovec *v, int n), (fd, v, n))

static COLD ssize_t preadv_slow(int fd, const struct iovec *v, int n, off_t o)
{
	iov(v, n);
	return NEXT(preadv, (SYS_preadv, fd, (long)v, n, o, 0, 0), fd, v, n, o);
}
FAST(ssize_t, preadv, (int fd, const struct iovec *v, int n, off_t o), (fd, v, n, o))
MMF_EXPORT ssize_t preadv64(int fd, const struct iovec *v, int n, off_t o)
	__attribute__((alias("preadv")));

static COLD ssize_t pwritev_slow(int fd, const struct iovec *v, int n, off_t o)
{
	iov(v, n);
	return NEXT(pwritev, (SYS_pwritev, fd, (long)v, n, o, 0, 0), fd, v, n, o);
}
FAST(ssize_t, pwritev, (int fd, const struct iovec *v, int n, off_t o), (fd, v, n, o))
MMF_EXPORT ssize_t pwritev64(int fd, const struct iovec *v, int n, off_t o)
	__attribute__((alias("pwritev")));

static COLD ssize_t preadv2_slow(int fd, const struct iovec *v, int n, off_t o, int fl)
{
	iov(v, n);
	return NEXT(preadv2, (SYS_preadv2, fd, (long)v, n, o, 0, fl), fd, v, n, o, fl);
}
FAST(ssize_t, preadv2, (int fd, const struct iovec *v, int n, off_t o, int fl), (fd, v, n, o, fl))
MMF_EXPORT ssize_t preadv64v2(int fd, const struct iovec *v, int n, off_t o, int fl)
	__attribute__((alias("preadv2")));

static COLD ssize_t pwritev2_slow(int fd, const struct iovec *v, int n, off_t o, int fl)
{
	iov(v, n);
	return NEXT(pwritev2, (SYS_pwritev2, fd, (long)v, n, o, 0, fl), fd, v, n, o, fl);
}
FAST(ssize_t, pwritev2, (int fd, const struct iovec *v, int n, off_t o, int fl), (fd, v, n, o, fl))
MMF_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *v, int n, off_t o, int fl)
	__attribute__((alias("pwritev2")));

static COLD ssize_t recv_slow(int fd, void *b, size_t n, int fl)
{
	BUF((uint64_t)(uintptr_t)(b), n);
	return NEXT(recv, (SYS_recvfrom, fd, (long)b, (long)n, fl, 0, 0), fd, b, n, fl);
}
FAST(ssize_t, recv, (int fd, void *b, size_t n, int fl), (fd, b, n, fl))

static COLD ssize_t recvfrom_slow(int fd, void *b, size_t n, int fl, struct sockaddr *a, socklen_t *al)
{
	BUF((uint64_t)(uintptr_t)(b), n);
	if (a && al) {
		BUF((uint64_t)(uintptr_t)(al), sizeof *al);
		BUF((uint64_t)(uintptr_t)(a), *al);
	}
	return NEXT(recvfrom, (SYS_recvfrom, fd, (long)b, (long)n, fl, (long)a, (long)al), fd, b, n,
		    fl, a, al);
}
FAST(ssize_t, recvfrom, (int fd, void *b, size_t n, int fl, struct sockaddr *a, socklen_t *al), (fd, b, n, fl, a, al))

static COLD ssize_t recvmsg_slow(int fd, struct msghdr *m, int fl)
{
	msg(m);
	return NEXT(recvmsg, (SYS_recvmsg, fd, (long)m, fl, 0, 0, 0), fd, m, fl);
}
FAST(ssize_t, recvmsg, (int fd, struct msghdr *m, int fl), (fd, m, fl))

static COLD int recvmmsg_slow(int fd, struct mmsghdr *v, unsigned n, int fl, struct timespec *t)
{
	BUF((uint64_t)(uintptr_t)(v), (size_t)n * sizeof *v);
	for (unsigned i = 0; v && i < n && i < 1024; i++)
		msg(&v[i].msg_hdr);
	return (int)NEXT(recvmmsg, (SYS_recvmmsg, fd, (long)v, n, fl, (long)t, 0), fd, v, n, fl, t);
}
FAST(int, recvmmsg, (int fd, struct mmsghdr *v, unsigned n, int fl, struct timespec *t), (fd, v, n, fl, t))

static COLD ssize_t send_slow(int fd, const void *b, size_t n, int fl)
{
	BUF((uint64_t)(uintptr_t)(b), n);
	return NEXT(send, (SYS_sendto, fd, (long)b, (long)n, fl, 0, 0), fd, b, n, fl);
}
FAST(ssize_t, send, (int fd, const void *b, size_t n, int fl), (fd, b, n, fl))

static COLD ssize_t sendto_slow(int fd, const void *b, size_t n, int fl, const struct sockaddr *a,
			  socklen_t al)
{
	BUF((uint64_t)(uintptr_t)(b), n);
	BUF((uint64_t)(uintptr_t)(a), al);
	return NEXT(sendto, (SYS_sendto, fd, (long)b, (long)n, fl, (long)a, al), fd, b, n, fl, a,
		    al);
}
FAST(ssize_t, sendto, (int fd, const void *b, size_t n, int fl, const struct sockaddr *a,
			  socklen_t al), (fd, b, n, fl, a, al))

static COLD ssize_t sendmsg_slow(int fd, const struct msghdr *m, int fl)
{
	msg(m);
	return NEXT(sendmsg, (SYS_sendmsg, fd, (long)m, fl, 0, 0, 0), fd, m, fl);
}
FAST(ssize_t, sendmsg, (int fd, const struct msghdr *m, int fl), (fd, m, fl))

static COLD int sendmmsg_slow(int fd, struct mmsghdr *v, unsigned n, int fl)
{
	BUF((uint64_t)(uintptr_t)(v), (size_t)n * sizeof *v);
	for (unsigned i = 0; v && i < n && i < 1024; i++)
		msg(&v[i].msg_hdr);
	return (int)NEXT(sendmmsg, (SYS_sendmmsg, fd, (long)v, n, fl, 0, 0), fd, v, n, fl);
}
FAST(int, sendmmsg, (int fd, struct mmsghdr *v, unsigned n, int fl), (fd, v, n, fl))

/* _FORTIFY_SOURCE's checked versions call libc's read internally. */
static COLD ssize_t __read_chk_slow(int fd, void *b, size_t n, size_t bl)
{
	BUF((uint64_t)(uintptr_t)(b), n < bl ? n : bl);
	return NEXT(__read_chk, (SYS_read, fd, (long)b, (long)n, 0, 0, 0), fd, b, n, bl);
}
FAST(ssize_t, __read_chk, (int fd, void *b, size_t n, size_t bl), (fd, b, n, bl))

static COLD ssize_t __pread_chk_slow(int fd, void *b, size_t n, off_t o, size_t bl)
{
	BUF((uint64_t)(uintptr_t)(b), n < bl ? n : bl);
	return NEXT(__pread_chk, (SYS_pread64, fd, (long)b, (long)n, o, 0, 0), fd, b, n, o, bl);
}
FAST(ssize_t, __pread_chk, (int fd, void *b, size_t n, off_t o, size_t bl), (fd, b, n, o, bl))
MMF_EXPORT ssize_t __pread64_chk(int fd, void *b, size_t n, off_t o, size_t bl)
	__attribute__((alias("__pread_chk")));

static COLD ssize_t __recv_chk_slow(int fd, void *b, size_t n, size_t bl, int fl)
{
	BUF((uint64_t)(uintptr_t)(b), n < bl ? n : bl);
	return NEXT(__recv_chk, (SYS_recvfrom, fd, (long)b, (long)n, fl, 0, 0), fd, b, n, bl, fl);
}
FAST(ssize_t, __recv_chk, (int fd, void *b, size_t n, size_t bl, int fl), (fd, b, n, bl, fl))

static COLD ssize_t __recvfrom_chk_slow(int fd, void *b, size_t n, size_t bl, int fl, struct sockaddr *a,
				  socklen_t *al)
{
	BUF((uint64_t)(uintptr_t)(b), n < bl ? n : bl);
	return NEXT(__recvfrom_chk, (SYS_recvfrom, fd, (long)b, (long)n, fl, (long)a, (long)al), fd,
		    b, n, bl, fl, a, al);
}
FAST(ssize_t, __recvfrom_chk, (int fd, void *b, size_t n, size_t bl, int fl, struct sockaddr *a,
				  socklen_t *al), (fd, b, n, bl, fl, a, al))

/* A program reading its own memory map sees the protections it asked for:
 * lazy mode makes what it deferred before /proc/self/maps (smaps, numa_maps,
 * pagemap) is opened. */
static __attribute__((noinline, cold)) void own_maps_lazy(const char *path)
{
	if (!path || path[0] != '/' || path[1] != 'p')
		return;
	static const char pre[] = "/proc/";
	for (int i = 0; i < 6; i++)
		if (path[i] != pre[i])
			return;
	const char *p = path + 6;
	if (!__builtin_strncmp(p, "self/", 5)) {
		p += 5;
	} else if (!__builtin_strncmp(p, "thread-self/", 12)) {
		p += 12;
	} else {
		long pid = 0;
		while (*p >= '0' && *p <= '9')
			pid = pid * 10 + (*p++ - '0');
		if (*p != '/' || pid != mmf_sys_getpid())
			return;
		p++;
		if (!__builtin_strncmp(p, "task/", 5)) { /* /proc/PID/task/TID/ */
			p += 5;
			while (*p >= '0' && *p <= '9')
				p++;
			if (*p++ != '/')
				return;
		}
	}
	if (__builtin_strstr(p, "maps") || !__builtin_strcmp(p, "pagemap"))
		mmf_lazy_flush_all();
}

/* Without lazy mode: a load and a branch. */
static inline void own_maps(const char *path)
{
	if (__builtin_expect(mmf_fast_lazy != 0, 0))
		own_maps_lazy(path);
}

/* open and openat are variadic: the mode comes only with O_CREAT or
 * O_TMPFILE.  On x86_64 and on aarch64 as Linux runs it (AAPCS64), a
 * variadic integer argument travels in the register a named one would, so
 * they are defined under other names with the mode named and exported as
 * open and openat: no variadic prologue (the register save area, 14
 * instructions) on every call.  The mode's register is read only when the
 * flags say the caller passed it, as va_arg would. */
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "open/openat: the mode's register is known for x86_64 and aarch64 only"
#endif
#define MODE_PASSED(flags) ((flags) & (O_CREAT | O_TMPFILE))

/* Lazy mode's course, and calls made before the constructor, apart: the
 * usual course needs no frame. */
static __attribute__((noinline, cold)) int openat_slow(int dfd, const char *path, int flags,
						       unsigned mode, int at)
{
	own_maps_lazy(path);
	if (at)
		return (int)NEXT(openat, (SYS_openat, dfd, (long)path, flags, mode, 0, 0), dfd,
				 path, flags, mode);
	return (int)NEXT(open, (SYS_openat, AT_FDCWD, (long)path, flags, mode, 0, 0), path, flags,
			 mode);
}

MMF_EXPORT int mmf_open(const char *path, int flags, unsigned mode) __asm__("open");
MMF_EXPORT int mmf_open(const char *path, int flags, unsigned mode)
{
	int (*next)(const char *, int, ...) = mmf_next.open;
	if (!MODE_PASSED(flags))
		mode = 0;
	if (__builtin_expect(mmf_fast_lazy != 0 || !next, 0))
		return openat_slow(AT_FDCWD, path, flags, mode, 0);
	return next(path, flags, mode);
}
MMF_EXPORT int open64(const char *path, int flags, ...) __attribute__((alias("open")));

MMF_EXPORT int mmf_openat(int dfd, const char *path, int flags, unsigned mode) __asm__("openat");
MMF_EXPORT int mmf_openat(int dfd, const char *path, int flags, unsigned mode)
{
	int (*next)(int, const char *, int, ...) = mmf_next.openat;
	if (!MODE_PASSED(flags))
		mode = 0;
	if (__builtin_expect(mmf_fast_lazy != 0 || !next, 0))
		return openat_slow(dfd, path, flags, mode, 1);
	return next(dfd, path, flags, mode);
}
MMF_EXPORT int openat64(int dfd, const char *path, int flags, ...) __attribute__((alias("openat")));

MMF_EXPORT int __open_2(const char *path, int flags)
{
	own_maps(path);
	return (int)NEXT(__open_2, (SYS_openat, AT_FDCWD, (long)path, flags, 0, 0, 0), path, flags);
}
MMF_EXPORT int __open64_2(const char *path, int flags) __attribute__((alias("__open_2")));

MMF_EXPORT int __openat_2(int dfd, const char *path, int flags)
{
	own_maps(path);
	return (int)NEXT(__openat_2, (SYS_openat, dfd, (long)path, flags, 0, 0, 0), dfd, path, flags);
}
MMF_EXPORT int __openat64_2(int dfd, const char *path, int flags) __attribute__((alias("__openat_2")));

static COLD FILE *fopen_slow(const char *path, const char *mode)
{
	own_maps(path);
	FILE *(*f)(const char *, const char *) = mmf_next.fopen;
	if (!f) /* before mmfold's constructor */
		f = (FILE * (*)(const char *, const char *)) mmf_next_early("fopen");
	return f(path, mode);
}
FAST(FILE *, fopen, (const char *path, const char *mode), (path, mode))
MMF_EXPORT FILE *fopen64(const char *path, const char *mode) __attribute__((alias("fopen")));
