/* The kernel-call table and the raw system calls.
 *
 * Every system call mmfold makes goes through one table, mmf_kernel (in the
 * spirit of sqlite's os_unix.c aSyscall[]), so that unit tests can replace
 * an entry with a fake and inject the failures the kernel rarely gives
 * (tests/unit/fake_kernel.h):
 * - mmf_kernel.sys: the raw system call (NULL: the instruction itself,
 *   mmf_sys6_raw).  mmfold's own memory, files and
 *   output go through it (mmf_sys6 and the mmf_sys_* helpers below), never
 *   through libc: these work before libc is initialised, inside any
 *   allocator, from signal handlers, and do not touch errno.  Each returns
 *   the kernel's value: >= 0 on success, -errno on failure.
 * - mmf_kernel.next: the next definitions of the interposed symbols (libc's,
 *   or another preloaded library's), found once with dlsym(RTLD_NEXT) by
 *   preload/next.c; NULL until then.  The program's calls are forwarded
 *   through them (the preload wrappers read mmf_next, which names this
 *   member), and so are the calls lazy mode makes on the program's behalf
 *   (mmf_next_mprotect and its siblings), so another preloaded library sees
 *   every call the program asked for.
 * Entries are read once per call; tests change them only while no other
 * thread runs. */
#ifndef MMF_SYS_H
#define MMF_SYS_H

#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* On a large variable of mmfold's writable segment: the ABI's alignment,
 * not the 32 bytes GCC gives large objects by default (an alignment the
 * program asked for is kept as is): the segment stays within the 4 KiB
 * that make check-footprint allows (a conservative collector scans it). */
#define MMF_DATA_ALIGN __attribute__((aligned(8)))

/* FILE, without <stdio.h> (preload/scanf.c cannot include it). */
struct _IO_FILE;

/* The interposed symbols whose next definitions the table holds: name,
 * return type, parameters (libc's convention: -1 and errno).  All of them
 * are looked up once, by preload/next.c's mmf_next_resolve. */
#define MMF_NEXT_SYMBOLS(X)                                                    \
	MMF_NEXT_MEMORY(X)                                                     \
	MMF_NEXT_SIGNAL(X)                                                     \
	MMF_NEXT_IO(X)                                                         \
	MMF_NEXT_STDIO(X)                                                      \
	MMF_NEXT_PROCESS(X)

/* The calls that change memory (preload/mman.c, mlock.c, syscall.c). */
#define MMF_NEXT_MEMORY(X)                                                     \
	X(mmap, void *, (void *, size_t, int, int, int, off_t))                \
	X(munmap, int, (void *, size_t))                                       \
	X(mremap, void *, (void *, size_t, size_t, int, ...))                  \
	X(mprotect, int, (void *, size_t, int))                                \
	X(pkey_mprotect, int, (void *, size_t, int, int))                      \
	X(madvise, int, (void *, size_t, int))                                 \
	X(process_madvise, ssize_t, (int, const struct iovec *, size_t, int, unsigned)) \
	X(mlock, int, (const void *, size_t))                                  \
	X(mlock2, int, (const void *, size_t, unsigned))                       \
	X(munlock, int, (const void *, size_t))                                \
	X(mlockall, int, (int))                                                \
	X(munlockall, int, (void))                                             \
	X(mseal, int, (void *, size_t, unsigned long))                         \
	X(brk, int, (void *))                                                  \
	X(sbrk, void *, (intptr_t))                                            \
	X(shmat, void *, (int, const void *, int))                             \
	X(prctl, int, (int, ...))                                              \
	X(personality, int, (unsigned long))                                   \
	X(syscall, long, (long, ...))

/* Signal actions (preload/signal.c) and masks (preload/sigmask.c). */
#define MMF_NEXT_SIGNAL(X)                                                     \
	X(sigaction, int, (int, const struct sigaction *, struct sigaction *)) \
	X(__sigaction, int, (int, const struct sigaction *, struct sigaction *)) \
	X(signal, sighandler_t, (int, sighandler_t))                           \
	X(bsd_signal, sighandler_t, (int, sighandler_t))                       \
	X(ssignal, sighandler_t, (int, sighandler_t))                          \
	X(sysv_signal, sighandler_t, (int, sighandler_t))                      \
	X(__sysv_signal, sighandler_t, (int, sighandler_t))                    \
	X(sigset, sighandler_t, (int, sighandler_t))                           \
	X(sigignore, int, (int))                                               \
	X(siginterrupt, int, (int, int))                                       \
	X(sigprocmask, int, (int, const sigset_t *, sigset_t *))               \
	X(pthread_sigmask, int, (int, const sigset_t *, sigset_t *))

/* System calls that take a buffer, for lazy mode (preload/io.c). */
#define MMF_NEXT_IO(X)                                                         \
	X(read, ssize_t, (int, void *, size_t))                                \
	X(write, ssize_t, (int, const void *, size_t))                         \
	X(pread, ssize_t, (int, void *, size_t, off_t))                        \
	X(pwrite, ssize_t, (int, const void *, size_t, off_t))                 \
	X(readv, ssize_t, (int, const struct iovec *, int))                    \
	X(writev, ssize_t, (int, const struct iovec *, int))                   \
	X(preadv, ssize_t, (int, const struct iovec *, int, off_t))            \
	X(pwritev, ssize_t, (int, const struct iovec *, int, off_t))           \
	X(preadv2, ssize_t, (int, const struct iovec *, int, off_t, int))      \
	X(pwritev2, ssize_t, (int, const struct iovec *, int, off_t, int))     \
	X(recv, ssize_t, (int, void *, size_t, int))                           \
	X(recvfrom, ssize_t, (int, void *, size_t, int, struct sockaddr *, socklen_t *)) \
	X(recvmsg, ssize_t, (int, struct msghdr *, int))                       \
	X(recvmmsg, int, (int, struct mmsghdr *, unsigned, int, struct timespec *)) \
	X(send, ssize_t, (int, const void *, size_t, int))                     \
	X(sendto, ssize_t, (int, const void *, size_t, int, const struct sockaddr *, socklen_t)) \
	X(sendmsg, ssize_t, (int, const struct msghdr *, int))                 \
	X(sendmmsg, int, (int, struct mmsghdr *, unsigned, int))               \
	X(__read_chk, ssize_t, (int, void *, size_t, size_t))                  \
	X(__pread_chk, ssize_t, (int, void *, size_t, off_t, size_t))          \
	X(__recv_chk, ssize_t, (int, void *, size_t, size_t, int))             \
	X(__recvfrom_chk, ssize_t, (int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *)) \
	X(open, int, (const char *, int, ...))                                 \
	X(openat, int, (int, const char *, int, ...))                          \
	X(__open_2, int, (const char *, int))                                  \
	X(__openat_2, int, (int, const char *, int))                           \
	X(fopen, struct _IO_FILE *, (const char *, const char *))              \
	X(getdents64, ssize_t, (int, void *, size_t))

/* libc calls that hand memory to the kernel themselves, for lazy mode
 * (preload/stdio.c). */
#define MMF_NEXT_STDIO(X)                                                      \
	X(fread, size_t, (void *, size_t, size_t, struct _IO_FILE *))          \
	X(fread_unlocked, size_t, (void *, size_t, size_t, struct _IO_FILE *)) \
	X(fwrite, size_t, (const void *, size_t, size_t, struct _IO_FILE *))   \
	X(fwrite_unlocked, size_t, (const void *, size_t, size_t, struct _IO_FILE *)) \
	X(fgets, char *, (char *, int, struct _IO_FILE *))                     \
	X(fgets_unlocked, char *, (char *, int, struct _IO_FILE *))            \
	X(fgetc, int, (struct _IO_FILE *))                                     \
	X(getc, int, (struct _IO_FILE *))                                      \
	X(__uflow, int, (struct _IO_FILE *))                                   \
	X(getdelim, ssize_t, (char **, size_t *, int, struct _IO_FILE *))      \
	X(getline, ssize_t, (char **, size_t *, struct _IO_FILE *))            \
	X(vfscanf, int, (struct _IO_FILE *, const char *, va_list))            \
	X(__isoc99_vfscanf, int, (struct _IO_FILE *, const char *, va_list))   \
	X(tzset, void, (void))                                                 \
	X(localtime, struct tm *, (const time_t *))                            \
	X(localtime_r, struct tm *, (const time_t *, struct tm *))             \
	X(mktime, time_t, (struct tm *))                                       \
	X(ctime, char *, (const time_t *))                                     \
	X(ctime_r, char *, (const time_t *, char *))

/* Descriptors (preload/fds.c), the way out (preload/exit.c) and the
 * processes made without fork()'s handlers (preload/fork.c). */
#define MMF_NEXT_PROCESS(X)                                                    \
	X(close, int, (int))                                                   \
	X(close_range, int, (unsigned, unsigned, int))                         \
	X(closefrom, void, (int))                                              \
	X(_exit, void, (int))                                                  \
	X(clone, int, (int (*)(void *), void *, int, void *, ...))             \
	X(_Fork, pid_t, (void))

struct mmf_next_fns {
#define X(name, ret, args) ret(*name) args;
	MMF_NEXT_SYMBOLS(X)
#undef X
};

struct mmf_kernel {
	long (*sys)(long n, long a, long b, long c, long d, long e, long f);
	struct mmf_next_fns next;
};

extern struct mmf_kernel mmf_kernel __attribute__((visibility("hidden")));
/* The next definitions, by the name the preload wrappers use. */
#define mmf_next (mmf_kernel.next)
/* The raw system call itself (what runs while mmf_kernel.sys is NULL):
 * fakes pass the calls they do not handle on to it. */
long mmf_sys6_raw(long n, long a, long b, long c, long d, long e, long f);

/* The system call instruction. */
static inline long mmf_sys6_asm(long n, long a, long b, long c, long d, long e, long f)
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

/* A raw system call through the table: mmf_kernel.sys when a test set it
 * (through mmf_sys6_hook), else the instruction itself, inline.  The
 * writer section's two rt_sigprocmask calls are on every call that changes
 * the map, so on x86_64 the test is a compare and a branch and the way to
 * the hook is out of line, in the asm (mmf_sys6_thunk, sys.c): a call the
 * compiler sees would take the red zone away from the functions that make
 * system calls.  "asm inline": counted as one instruction when the
 * compiler weighs inlining (counted by its lines, it kept record() out of
 * decide()).  callgrind, per forwarded one-page mprotect: an indirect call
 * for each system call cost 18 instructions more, a test and a call in C
 * 5, a call the compiler may not inline 20.  The way to the hook sits in
 * a section of its own: in .text.unlikely it would follow the syscall of a
 * cold function (also in .text.unlikely) directly, and every call would
 * run into the hook (a NULL call when no test set it). */
long mmf_sys6_hook(long n, long a, long b, long c, long d, long e, long f);
static inline long mmf_sys6(long n, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile inline("cmpq $0, %[hook]\n\t"
				"jne 1f\n\t"
				"syscall\n"
				"2:\n\t"
				".pushsection .text.mmfold_sys6_hook,\"ax\",@progbits\n"
				"1:\n\t"
				"lea -128(%%rsp), %%rsp\n\t"
				"call mmf_sys6_thunk\n\t"
				"lea 128(%%rsp), %%rsp\n\t"
				"jmp 2b\n\t"
				".popsection"
				: "=a"(ret)
				: "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9),
				  [hook] "m"(mmf_kernel.sys)
				: "rcx", "r11", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3",
				  "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
				  "xmm12", "xmm13", "xmm14", "xmm15");
	return ret;
#else
	if (__builtin_expect(mmf_kernel.sys != 0, 0))
		return mmf_sys6_hook(n, a, b, c, d, e, f);
	return mmf_sys6_asm(n, a, b, c, d, e, f);
#endif
}

static inline int mmf_sys_err(long r) { return r < 0 && r > -4096; }

void *mmf_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
long mmf_sys_munmap(void *addr, size_t len);
long mmf_sys_open(const char *path, int flags, int mode);
long mmf_sys_close(int fd);
long mmf_sys_read(int fd, void *buf, size_t n);
/* The start of a file (a /proc file: one read), NUL-terminated in buf of
 * n bytes; its length, or -1. */
long mmf_sys_read_small(const char *path, char *buf, size_t n);
/* Writes all of buf, retrying short writes and EINTR. */
long mmf_sys_write_all(int fd, const void *buf, size_t n);
long mmf_sys_getpid(void);
long mmf_sys_gettid(void);
long mmf_sys_futex_wait(uint32_t *uaddr, uint32_t val);
/* Waits while *uaddr == val, until CLOCK_MONOTONIC reaches deadline_ns
 * (-ETIMEDOUT then). */
long mmf_sys_futex_wait_until(uint32_t *uaddr, uint32_t val, uint64_t deadline_ns);
long mmf_sys_futex_wake(uint32_t *uaddr, int n);
long mmf_sys_sched_yield(void);

/* Calls made on the program's behalf (lazy mode's deferred promotions,
 * munlocks and fork advice) through the next definition, or a raw system
 * call while it is not known.  The kernel's convention; errno is left as
 * it was (they also run in the SIGSEGV handler). */
long mmf_next_mprotect(uint64_t s, uint64_t len, int prot);
long mmf_next_munlock(uint64_t s, uint64_t len);
long mmf_next_madvise(uint64_t s, uint64_t len, int advice);
long mmf_next_process_madvise(int pidfd, const struct iovec *iov, size_t n, int advice);

/* The system page size (from the auxiliary vector). */
size_t mmf_page_size(void);

#endif
