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
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The interposed symbols whose next definitions the table holds: name,
 * return type, parameters (libc's convention: -1 and errno). */
#define MMF_NEXT_SYMBOLS(X)                                                    \
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
	X(syscall, long, (long, ...))                                          \
	X(sigaction, int, (int, const struct sigaction *, struct sigaction *)) \
	X(__sigaction, int, (int, const struct sigaction *, struct sigaction *)) \
	X(signal, sighandler_t, (int, sighandler_t))                           \
	X(bsd_signal, sighandler_t, (int, sighandler_t))                       \
	X(ssignal, sighandler_t, (int, sighandler_t))                          \
	X(sysv_signal, sighandler_t, (int, sighandler_t))                      \
	X(__sysv_signal, sighandler_t, (int, sighandler_t))                    \
	X(sigset, sighandler_t, (int, sighandler_t))                           \
	X(sigignore, int, (int))                                               \
	X(siginterrupt, int, (int, int))

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
/* Writes all of buf, retrying short writes and EINTR. */
long mmf_sys_write_all(int fd, const void *buf, size_t n);
long mmf_sys_getpid(void);
long mmf_sys_gettid(void);
long mmf_sys_futex_wait(uint32_t *uaddr, uint32_t val);
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
