/* libc calls that hand memory to the kernel themselves, for lazy mode.
 *
 * read() and write() made inside libc do not come through preload/io.c.
 * Where libc reads into or writes from the caller's buffer (fread,
 * fwrite), or into a FILE buffer it allocated earlier, the buffer is made
 * first.  A FILE buffer libc allocates during the call itself (the first
 * read of a stream) cannot be known before; when the program's malloc put
 * it in memory whose promotion waits (Chromium's PartitionAlloc does), the
 * read fails with EFAULT before anything is consumed: the buffer is then
 * made, the error flag cleared and the call made again.  Time-zone
 * functions read the zone file through a FILE libc opens and closes inside
 * them: what waits is made first and nothing new waits during the call.
 *
 * Outside lazy mode each wrapper costs a load and a predictable branch
 * before the next definition (BENCHMARKS.md). */
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "next.h"

/* <stdio.h> may define these as macros when optimising. */
#undef fread_unlocked
#undef fwrite_unlocked
#undef fgets_unlocked
#undef getc
#undef fgetc

/* The next definition; before mmfold's constructor looked them up, found
 * now (mmf_next_early: each exists in libc). */
#define NEXT(name)                                                             \
	(__builtin_expect(mmf_next.name != NULL, 1)                            \
		 ? mmf_next.name                                               \
		 : (__typeof__(mmf_next.name))mmf_next_early(#name))

#define LAZY __builtin_expect(mmf_lazy_active(), 0)

static void make(const void *p, size_t n)
{
	mmf_lazy_buffer((uint64_t)(uintptr_t)p, n);
}

/* What a stdio call will hand to the kernel: the caller's buffer and the
 * FILE's own.  Returns 1 when the FILE has no buffer yet (libc allocates it
 * during the call) and no error is recorded: then a failure with EFAULT
 * consumed nothing and the call may be made again. */
static int before(FILE *f, const void *b, size_t n)
{
	make(b, n);
	if (!f)
		return 0;
	if (f->_IO_buf_base) {
		make(f->_IO_buf_base, (size_t)(f->_IO_buf_end - f->_IO_buf_base));
		return 0;
	}
	return !(f->_flags & _IO_ERR_SEEN);
}

/* After a call before() allowed to retry: 1 when libc's read failed with
 * EFAULT in a FILE buffer that now exists; the buffer is made, the error
 * flag cleared and errno restored, and the caller makes the call again. */
static int again(FILE *f, int err, int saved)
{
	if (err != EFAULT || !(f->_flags & _IO_ERR_SEEN) || !f->_IO_buf_base)
		return 0;
	make(f->_IO_buf_base, (size_t)(f->_IO_buf_end - f->_IO_buf_base));
	flockfile(f);
	f->_flags &= ~_IO_ERR_SEEN;
	funlockfile(f);
	errno = saved;
	mmf_event(MMF_E_LAZY_IO_RETRIED);
	return 1;
}

/* name(params): the next definition at once outside lazy mode; in lazy
 * mode name_lazy; before the constructor looked the next definitions up,
 * name_early.  Both out of line, so that the common path saves no
 * registers: two loads, two branches and a jump (BENCHMARKS.md). */
#define WRAP(type, name, params, args)                                         \
	static __attribute__((noinline)) type name##_early params              \
	{                                                                      \
		return NEXT(name) args;                                        \
	}                                                                      \
	MMF_EXPORT type name params                                            \
	{                                                                      \
		if (LAZY)                                                      \
			return name##_lazy args;                               \
		if (__builtin_expect(!mmf_next.name, 0))                       \
			return name##_early args;                              \
		return mmf_next.name args;                                     \
	}

/* A reading call on f with the caller's buffer (b, n), made again once
 * when before() and again() allow it. */
#define READ(type, name, params, args, f, b, n)                                \
	static __attribute__((noinline)) type name##_lazy params               \
	{                                                                      \
		int fresh_ = before(f, b, n), saved_ = errno;                  \
		type r_ = NEXT(name) args;                                     \
		if (fresh_ && again(f, errno, saved_))                         \
			r_ = NEXT(name) args;                                  \
		return r_;                                                     \
	}                                                                      \
	WRAP(type, name, params, args)

/* A writing call from the caller's buffer (b, n). */
#define WRITE(type, name, params, args, b, n)                                  \
	static __attribute__((noinline)) type name##_lazy params               \
	{                                                                      \
		make(b, n);                                                    \
		return NEXT(name) args;                                        \
	}                                                                      \
	WRAP(type, name, params, args)

static size_t mul(size_t a, size_t b)
{
	size_t r;
	return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

/* fread reads straight into the caller's buffer when it is at least as
 * large as the FILE's, or the FILE is unbuffered; a large fwrite writes
 * straight from it. */
READ(size_t, fread, (void *b, size_t sz, size_t n, FILE *f), (b, sz, n, f), f, b, (mul(sz, n)))
READ(size_t, fread_unlocked, (void *b, size_t sz, size_t n, FILE *f), (b, sz, n, f), f, b,
     (mul(sz, n)))
WRITE(size_t, fwrite, (const void *b, size_t sz, size_t n, FILE *f), (b, sz, n, f), b,
      (mul(sz, n)))
WRITE(size_t, fwrite_unlocked, (const void *b, size_t sz, size_t n, FILE *f), (b, sz, n, f), b,
      (mul(sz, n)))

/* The rest copy between the FILE buffer and the caller's in user space
 * (where a touch faults and is served): only the FILE buffer matters.
 * getc_unlocked() and friends are macros that call __uflow when the FILE
 * buffer is empty. */
READ(char *, fgets, (char *s, int n, FILE *f), (s, n, f), f, NULL, 0)
READ(char *, fgets_unlocked, (char *s, int n, FILE *f), (s, n, f), f, NULL, 0)
READ(int, fgetc, (FILE * f), (f), f, NULL, 0)
READ(int, getc, (FILE * f), (f), f, NULL, 0)
MMF_EXPORT int _IO_getc(FILE *f) __attribute__((alias("getc")));
READ(int, __uflow, (FILE * f), (f), f, NULL, 0)
READ(ssize_t, getdelim, (char **l, size_t *n, int d, FILE *f), (l, n, d, f), f, NULL, 0)
MMF_EXPORT ssize_t __getdelim(char **l, size_t *n, int d, FILE *f) __attribute__((alias("getdelim")));
READ(ssize_t, getline, (char **l, size_t *n, FILE *f), (l, n, f), f, NULL, 0)

/* fscanf, vfscanf and their C99 names (what <stdio.h> binds fscanf to)
 * end here, from preload/scanf.c (which cannot include <stdio.h>, whose
 * declarations rename fscanf). */
static int scan(int (*next)(FILE *, const char *, va_list), FILE *f, const char *fmt, va_list ap)
{
	if (!LAZY)
		return next(f, fmt, ap);
	int fresh = before(f, NULL, 0), saved = errno;
	va_list ap2;
	va_copy(ap2, ap);
	int r = next(f, fmt, ap);
	if (fresh && again(f, errno, saved))
		r = next(f, fmt, ap2);
	va_end(ap2);
	return r;
}

int mmf_vfscanf(FILE *f, const char *fmt, va_list ap)
{
	return scan(NEXT(vfscanf), f, fmt, ap);
}

int mmf_vfscanf_c99(FILE *f, const char *fmt, va_list ap)
{
	return scan(NEXT(__isoc99_vfscanf), f, fmt, ap);
}

/* getdents64 is a system call wrapper like those of preload/io.c. */
WRITE(ssize_t, getdents64, (int fd, void *b, size_t n), (fd, b, n), b, n)

/* The zone file is read (at the first call, or when TZ or the file
 * changed) into a FILE buffer libc allocates and frees inside the call:
 * what waits is made first, and nothing new waits during the call. */
#define HELD(type, name, params, args)                                         \
	static __attribute__((noinline)) type name##_lazy params               \
	{                                                                      \
		mmf_lazy_flush_all();                                          \
		mmf_lazy_hold++;                                               \
		type r_ = NEXT(name) args;                                     \
		mmf_lazy_hold--;                                               \
		return r_;                                                     \
	}                                                                      \
	WRAP(type, name, params, args)

MMF_EXPORT void tzset(void)
{
	if (LAZY) {
		mmf_lazy_flush_all();
		mmf_lazy_hold++;
		NEXT(tzset)();
		mmf_lazy_hold--;
		return;
	}
	NEXT(tzset)();
}

HELD(struct tm *, localtime, (const time_t *t), (t))
HELD(struct tm *, localtime_r, (const time_t *t, struct tm *tm), (t, tm))
HELD(time_t, mktime, (struct tm * tm), (tm))
MMF_EXPORT time_t timelocal(struct tm *tm) __attribute__((alias("mktime")));
HELD(char *, ctime, (const time_t *t), (t))
HELD(char *, ctime_r, (const time_t *t, char *b), (t, b))
