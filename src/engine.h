/* The engine: every intercepted call becomes an mmf_op that the engine
 * either answers from the shadow map (skip) or forwards through op->fwd and
 * records.  The preload layer supplies fwd (the next definition of the
 * symbol, or a raw system call before it is known). */
#ifndef MMF_ENGINE_H
#define MMF_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "config.h"
#include "fast.h" /* the fast paths the mprotect and buffer wrappers inline */
#include "map.h"
#include "stats.h"

struct mmf_op {
	int kind;  /* MMF_K_* */
	int flags; /* MMF_OPF_* */
	long nr;   /* system call number, when it came through syscall() */
	long a[6]; /* the caller's arguments, untouched */
	/* Performs the real call; returns the kernel's convention: a value
	 * >= 0 (or an address) on success, -errno on failure. */
	long (*fwd)(const struct mmf_op *op);
};

enum {
	MMF_OPF_PKEY = 1,  /* MMF_K_MPROTECT came as pkey_mprotect (a[3]) */
	MMF_OPF_MLOCK2 = 2, /* MMF_K_MLOCK came as mlock2 (a[2] = flags) */
	MMF_OPF_PROFILED = 4, /* the profiler (profile.c) is running it */
	MMF_OPF_FOREIGN = 8   /* MMF_K_MMAP with MAP_FIXED over memory mmfold
				 does not own (decide.c): the new mapping
				 is not owned either */
};

/* Runs an intercepted call.  Returns the kernel's convention. */
long mmf_run(struct mmf_op *op);
/* mmf_run for an mprotect that mmf_fast_mprotect (fast.h) answered with
 * MMF_FAST_MAYBE, on the same thread, just before: v is the record's
 * attribute word it read from the hint of generation g. */
long mmf_run_change(struct mmf_op *op, uint64_t v, uint32_t g);
/* mmf_run_change's shortest course (fastrun.c), taken first: the libc
 * call's result (0, or -1 with errno set), or, with nothing done,
 * declined's (called with the same arguments).  kfn: the next mprotect
 * (NULL: declined); fwd: the mmf_op forwarder the longer courses use. */
int mmf_fast_forward(void *addr, size_t len, int prot, uint64_t v0, uint32_t g,
		     int (*kfn)(void *, size_t, int), long (*fwd)(const struct mmf_op *),
		     int (*declined)(void *, size_t, int, uint64_t, uint32_t));
/* What mmf_fast_flip and mmf_fast_off return with nothing done. */
#define MMF_FAST_DECLINED 1
/* mmf_fast_forward's course for a flipping record (v, as read by
 * mmf_fast_mprotect, says so: mmf_fast_flipping), taken first: the call
 * forwarded under the lock and the map left as it is.  The same results;
 * declined also for a call that repeats this thread's last one on the
 * range (mmf_fast_forward records its protection again). */
long mmf_fast_flip(uint64_t a, uint64_t len, int prot, uint32_t g,
		   int (*kfn)(void *, size_t, int), long (*fwd)(const struct mmf_op *));
/* mmf_fast_flip's course for a call on this thread's hot flip (fast.h,
 * mmf_fast_hot_start), taken before the skip test: the same results,
 * libc style (kfn's: the next mprotect), or, with nothing done, cold's
 * (the course of any call). */
int mmf_fast_hot(void *addr, size_t len, int prot, int (*kfn)(void *, size_t, int),
		 int (*cold)(void *, size_t, int));
/* Off mode's mprotect when the gate holds nothing else (fast.h,
 * MMF_FAST_OFF): counted as mmf_run and forward() count it and made
 * through kfn (the next mprotect); the kernel's result (0 or -errno), or
 * MMF_FAST_DECLINED with nothing done (no counters on this thread yet, or
 * kfn NULL). */
long mmf_fast_off(uint64_t a, uint64_t len, int prot, int (*kfn)(void *, size_t, int));

/* A call made on behalf of a batch (batch.c): decided, forwarded and
 * recorded like any other, but not counted as a call. */
long mmf_apply(struct mmf_op *op);
/* Forwards op with this thread's counters (forwarded, bytes, kernel time). */
long mmf_forward_counted(const struct mmf_op *op, uint64_t bytes);

/* The range a call may change or depend on: [s,e) page-rounded; s >= e
 * (nothing) for a mapping the kernel places; [0, max) when it is not one
 * range (mremap, mlockall, ...). */
void mmf_reach(const struct mmf_op *op, uint64_t *s, uint64_t *e);

/* Lazy mode: makes everything deferred now (fork, exit, mmfold_flush). */
void mmf_lazy_flush_all(void);
/* Lazy mode: the kernel is about to read or write [p, p+n) for the program
 * (read(), send(), ...): deferred promotions there are made first. */
void mmf_lazy_buffer(uint64_t p, size_t n);
/* Lazy mode is on: the one test the libc wrappers of preload/stdio.c make
 * before anything else (a load and a branch).  Not "something waits": a
 * buffer libc allocates during the call may be the first thing to wait. */
int mmf_lazy_active(void);
/* While this thread's mmf_lazy_hold is non-zero its calls are made as in
 * safe mode (nothing new waits): set around libc calls that allocate memory
 * and hand it to the kernel themselves (preload/stdio.c). */
extern __thread int mmf_lazy_hold __attribute__((tls_model("initial-exec")));
/* Lazy mode: this thread's signal mask now blocks SIGSEGV or SIGBUS (1)
 * or neither (0) (preload/sigmask.c). */
void mmf_lazy_mask(int blocks);
/* The calling thread ends (stats.c's thread-exit destructor). */
void mmf_lazy_thread_exit(void);

static inline int mmf_is_err(long r) { return (unsigned long)r > -4096UL; }

/* Notes of calls that change what skips may assume. */
/* Before a call that changes what the kernel accepts or does with a later
 * mprotect (nr: SYS_prctl, SYS_seccomp or SYS_personality, a0 its first
 * argument): what batches queued and lazy mode deferred is made first, as
 * the program made it before. */
void mmf_note_before(long nr, long a0);
void mmf_note_prctl(long option, long arg2, long result);
void mmf_note_personality(unsigned long persona, long result);
/* syscall(SYS_seccomp, operation, ...) returned result. */
void mmf_note_seccomp(long operation, long result);

/* Start-up: early init reads the environment and sets up the map; it uses
 * no libc function that may allocate and runs on the first intercepted
 * call.  Late init (from the constructor) registers the fork handlers and
 * the thread-exit key. */
void mmf_early_init(void);
void mmf_late_init(void);
/* Exit: prints the report when asked.  Idempotent. */
void mmf_fini(void);

/* MMFOLD_BARRIER=uffd: the barrier's descriptors (its userfaultfd, its
 * /proc/self/maps), -1 when not open; preload/fds.c keeps the program's
 * close, close_range and closefrom off them (barrier.c). */
extern int mmf_barrier_fds[2];

/* The writer section for other files (barrier.c): not re-entrant; held
 * tells whether this thread is inside one. */
void mmf_writer_enter(void);
void mmf_writer_leave(void);
int mmf_writer_held(void);

void mmf_atfork_prepare(void);
void mmf_atfork_parent(void);
void mmf_atfork_child(void);
/* The child's step after a clone with these flags (CLONE_FILES: the child
 * shares the parent's descriptor table and must close none of mmfold's). */
void mmf_atfork_child_of(unsigned long clone_flags);

struct mmf_buf;
/* The large-folio part of the report (settings, kernel counters). */
void mmf_folio_report(struct mmf_buf *b, int json);

/* Writes the statistics report to fd (text or JSON).  Async-signal-safe
 * but for the call-site profile's names.  mmf_report_as also says why it
 * was written (the JSON's "report": "exit", "periodic" or "request"). */
enum { MMF_REPORT_REQUEST, MMF_REPORT_EXIT, MMF_REPORT_PERIODIC };
void mmf_report(int fd, int format);
void mmf_report_as(int fd, int format, int why);
/* The file of MMFOLD_STATS_FILE (%p: the pid), opened to append, or
 * stderr; *close_it tells whether the caller must close it. */
int mmf_report_open(int *close_it);
/* The periodic reports' thread when MMFOLD_STATS_INTERVAL is set (late
 * init, and again in a forked child). */
void mmf_report_start_periodic(void);

/* Debug verification against the kernel (verify.c).  Returns 1 when the
 * kernel's view agrees with a skip decision, 0 when it does not, -1 when
 * it cannot tell. */
int mmf_verify(uint64_t start, uint64_t end, const struct mmf_want *w);
/* The VMA holding addr, from the PROCMAP_QUERY ioctl (Linux 6.11+) on fd
 * (an open /proc/self/maps): 0 and [*s,*e), or -errno (-ENOENT: none). */
long mmf_vma_at(int fd, uint64_t addr, uint64_t *s, uint64_t *e);
/* The protection of the VMA holding a (PROCMAP_QUERY, Linux 6.11+): its
 * PROT_* bits, -2 when none holds it, -1 when the kernel cannot say. */
int mmf_vma_prot(uint64_t a);
/* Some VMA lies in [s,e) (PROCMAP_QUERY; before Linux 6.11, mincore on
 * each page of a range of at most 256 pages, a longer one taken as
 * mapped): 1, else 0. */
int mmf_kernel_maps_any(uint64_t s, uint64_t e);
/* The same from /proc/self/smaps only (what kernels before 6.11 get). */
int mmf_verify_smaps(uint64_t start, uint64_t end, const struct mmf_want *w);
/* Maps what verification needs, at start-up (MMFOLD_VERIFY set): never
 * later, into a hole the program left. */
void mmf_verify_prepare(void);

/* The rest of the engine's face for preload/, which includes this header
 * and no other from src/: batches (mmfold_batch_*), the signal chain
 * (sigaction and fault handlers), the call-site profile's unwinder, the
 * live segment's exit step, and the raw system calls (the fallback of
 * every wrapper before the next symbol is known). */
#include "batch.h"
#include "live.h"
#include "profile.h"
#include "sigchain.h"
#include "sys.h"

#endif
