/* mmfold: skips redundant mprotect/mlock/madvise calls and records what a
 * process does to its memory protections.  Loaded with LD_PRELOAD; this
 * header is for programs that want to ask it things at run time.
 *
 * Every function here is also usable when mmfold is not loaded: define
 * MMFOLD_WEAK before including this header (the functions are then declared
 * weak) and test an address before the call, e.g.
 *     #define MMFOLD_WEAK
 *     #include <mmfold.h>
 *     if (mmfold_batch_begin) mmfold_batch_begin();
 * A program built that way needs no -lmmfold and runs unchanged without it.
 */
#ifndef MMFOLD_H
#define MMFOLD_H

#include <stddef.h>

#ifdef MMFOLD_WEAK
#define MMFOLD_API __attribute__((weak))
#else
#define MMFOLD_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define MMFOLD_VERSION "0.1.0"
#define MMFOLD_VERSION_MAJOR 0
#define MMFOLD_VERSION_MINOR 1
#define MMFOLD_VERSION_PATCH 0

#define MMFOLD_FORMAT_TEXT 0
#define MMFOLD_FORMAT_JSON 1

/* ---- batches: coalescing calls across time (opt-in) ----------------------
 *
 * Between mmfold_batch_begin() and mmfold_batch_end() on a thread, the
 * thread's mprotect() and madvise() calls are queued instead of made: each
 * returns 0 at once (a call whose arguments the kernel would reject on their
 * own, such as an unaligned address or unknown protection bits, is still made
 * at once and fails as usual).  The end applies the queue: adjacent and
 * overlapping mprotect ranges with the same final protection become one
 * system call (where ranges overlap, the later call wins, as it would have);
 * calls that are already in force are not made; advice that sets no VMA flag
 * (MADV_DONTNEED, MADV_FREE, MADV_COLD, MADV_PAGEOUT, MADV_WILLNEED, ...)
 * goes to the kernel as one process_madvise() per advice and up to 1024
 * ranges, with one madvise() per range where the kernel refuses that.
 *
 * What the program must accept in exchange: a queued call is not in force
 * until the batch ends (or mmfold_flush() runs); touching a range whose
 * queued call would grant the access faults as it would have before the
 * call, and memory written after a queued MADV_DONTNEED/MADV_FREE and before
 * the end is discarded when the end applies the advice.  Any other
 * intercepted call of the thread (mmap, munmap, mremap, mlock, fork, ...)
 * applies the queue first; another thread's call on an overlapping range
 * applies it too.  Batches nest: only the outermost end applies.  In the
 * modes off and observe, and without mmfold, calls are made at once.
 *
 * Errors of queued calls are reported at the end: -1 with errno set to the
 * first error, and *err (when not NULL) naming the range that failed. */
#define MMFOLD_CALL_MPROTECT 1
#define MMFOLD_CALL_MADVISE 2

struct mmfold_batch_error {
	void *addr;        /* the range the failing system call was given */
	size_t len;
	int call;          /* MMFOLD_CALL_MPROTECT or MMFOLD_CALL_MADVISE */
	int arg;           /* its protection or advice */
	int error;         /* the errno value */
	unsigned failures; /* failed system calls in this batch */
};

struct mmfold_prot_range {
	void *addr;
	size_t len;
	int prot;
};

struct mmfold_adv_range {
	void *addr;
	size_t len;
	int advice;
};

/* Starts a batch on this thread (nesting).  Returns the depth (1 for the
 * outermost batch). */
MMFOLD_API int mmfold_batch_begin(void);
/* Ends a batch; the outermost end applies the queue.  Returns 0, or -1 with
 * errno (EINVAL: no batch was begun; otherwise the first queued call's
 * error, described in *err). */
MMFOLD_API int mmfold_batch_end(struct mmfold_batch_error *err);
/* Applies this thread's queue now, inside a batch or not.  Returns 0 or -1
 * with errno as mmfold_batch_end (a batch that continues reports the
 * errors of what was applied here at its end as well). */
MMFOLD_API int mmfold_flush(void);
/* n mprotect / madvise calls made as one batch: the same as
 * begin, n calls, end. */
MMFOLD_API int mmfold_mprotectv(const struct mmfold_prot_range *v, size_t n,
		     struct mmfold_batch_error *err);
MMFOLD_API int mmfold_madvisev(const struct mmfold_adv_range *v, size_t n,
		    struct mmfold_batch_error *err);

/* ---- information -------------------------------------------------------- */

/* The library's version string, e.g. "0.1.0". */
MMFOLD_API const char *mmfold_version(void);

/* The mode in force: "off", "observe", "safe" or "lazy". */
MMFOLD_API const char *mmfold_mode(void);

/* Writes the statistics gathered so far to fd, as the exit report would
 * (format MMFOLD_FORMAT_TEXT or MMFOLD_FORMAT_JSON).  Async-signal-safe.
 * Returns 0, or -1 with errno EINVAL for an unknown format. */
MMFOLD_API int mmfold_stats_write(int fd, int format);

#ifdef __cplusplus
}
#endif

#endif
