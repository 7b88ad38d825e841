/* Counters: declared once here, kept per thread (no shared cache line on the
 * hot path), merged when printed.  The merged snapshot taken while other
 * threads still run may be off by the calls in flight. */
#ifndef MMF_STATS_H
#define MMF_STATS_H

#include <stdint.h>

/* X(id, name, len): the call kinds, in the reports' order; len is the
 * argument that holds the length the caller asked for (-1: none), for the
 * bytes_asked counter. */
#define MMF_KINDS(X)                                                           \
	X(MMAP, "mmap", 1) X(MUNMAP, "munmap", 1) X(MREMAP, "mremap", 2)       \
	X(MPROTECT, "mprotect", 1)                                             \
	X(MADVISE, "madvise", 1) X(PROCESS_MADVISE, "process_madvise", -1)     \
	X(MLOCK, "mlock", 1) X(MUNLOCK, "munlock", 1) X(MLOCKALL, "mlockall", -1) \
	X(MUNLOCKALL, "munlockall", -1) X(MSEAL, "mseal", 1) X(BRK, "brk", -1) \
	X(SHMAT, "shmat", -1)

/* calls: calls seen; forwarded: passed to the kernel; skipped: answered
 * without a system call (in observe mode: would have been); unproven: looked
 * redundant but concerned memory whose record could be stale; deferred:
 * queued by a batch (made later, merged, counted as forwarded then); errors:
 * failed calls; kernel_ns: time inside forwarded calls. */
#define MMF_FIELDS(X)                                                          \
	X(CALLS, "calls") X(FORWARDED, "forwarded") X(SKIPPED, "skipped")      \
	X(DEFERRED, "deferred")                                                \
	X(UNPROVEN, "unproven") X(ERRORS, "errors") X(BYTES_ASKED, "bytes_asked") \
	X(BYTES_KERNEL, "bytes_kernel") X(KERNEL_NS, "kernel_ns")

enum {
#define X(id, name, len) MMF_K_##id,
	MMF_KINDS(X)
#undef X
	MMF_K_COUNT
};
enum {
#define X(id, name) MMF_S_##id,
	MMF_FIELDS(X)
#undef X
	MMF_S_COUNT
};

/* Process-wide events (rare, shared atomics). */
#define MMF_EVENTS(X)                                                          \
	X(REENTRY, "reentered")          /* calls from a signal handler or      \
					    nested interposer while this thread \
					    held the map: forwarded, forgotten */ \
	X(BYPASSED, "bypassed")          /* calls that did not get the map's  \
					    writer lock in time: forwarded,     \
					    their ranges made unknown */        \
	X(VERIFY_CHECKS, "verify_checks") X(VERIFY_MISMATCH, "verify_mismatches") \
	X(BUSY, "map_busy")               /* reader gave up: forwarded */       \
	X(FORKS, "forks")                                                      \
	X(THP_ADVISED, "thp_advised")     /* mappings given MADV_HUGEPAGE */    \
	X(THP_BYTES, "thp_advised_bytes")                                      \
	X(THP_WATCHED, "thp_watched")     /* mappings watched for density (auto) */ \
	X(THP_LOOKS, "thp_looks")         /* residency reads of watched mappings */ \
	X(THP_DENSE, "thp_advised_dense") /* of thp_advised: found dense later */ \
	X(THP_JOINED, "thp_joined")       /* neighbours advised for an mremap */ \
	X(ALIGNED, "aligned")             /* mappings placed folio-aligned */   \
	X(ALIGNED_BYTES, "aligned_bytes")                                      \
	X(ALIGN_OVERMAP, "align_overmapped") /* took the map-and-trim path */   \
	X(ALIGN_GAVEUP, "align_gave_up")  /* placed as the kernel chose */    \
	X(FAULTS_CLAIMED, "faults_claimed") /* SIGSEGV/SIGBUS that were mmfold's */ \
	X(SIGNALS_CHAINED, "signals_chained") /* passed on to the program's action */ \
	X(BATCH_FLUSHES, "batch_flushes") /* queues applied */                \
	X(BATCH_PMADV, "batch_process_madvise") /* advice calls made as one */ \
	X(BATCH_FALLBACK, "batch_madvise_fallbacks") /* ranges retried alone */ \
	X(LAZY_CANCELLED, "lazy_cancelled") /* deferred calls undone by a later one */ \
	X(LAZY_APPLIED, "lazy_applied")   /* deferred ranges made */            \
	X(LAZY_FAULTS, "lazy_faults")     /* first touches served */            \
	X(LAZY_DENSE, "lazy_dense")       /* whole ranges made on dense touches */ \
	X(LAZY_RETRIED, "lazy_retried")   /* faults that raced with a promotion */ \
	X(LAZY_BUFFERS, "lazy_buffers")   /* made before read()/write()/... */ \
	X(LAZY_IO_RETRIED, "lazy_io_retried") /* libc's own read failed with  \
						 EFAULT in a new buffer: made \
						 and the stdio call retried */ \
	X(LAZY_REFUSED, "lazy_refused")   /* deferred promotions the kernel refused */ \
	X(LAZY_EAGER, "lazy_eager")       /* promotions made at once: most were touched */ \
	X(SHAPED_WIDENED, "shaped_widened") /* calls widened to folio bounds */ \
	X(SHAPED_WIDENED_BYTES, "shaped_widened_bytes") /* bytes added */       \
	X(SHAPED_TRIMMED, "shaped_trimmed") /* calls trimmed or split */        \
	X(SHAPED_TRIMMED_BYTES, "shaped_trimmed_bytes") /* bytes left out */    \
	X(SHAPED_PIECES, "shaped_pieces")   /* system calls the shaped calls made */ \
	X(SHAPE_FALLBACK, "shape_fallbacks") /* a shaped call failed: the      \
						caller's call was forwarded */ \
	X(WX_KEPT, "wx_kept_apart")       /* flipping areas given their own VMA */ \
	X(WX_THP, "wx_thp_advised")       /* flipping areas given MADV_HUGEPAGE */ \
	X(WX_PROGRAM, "wx_program_advice") /* left alone: the program's advice */ \
	X(WX_RELAXED, "wx_relaxed")       /* flipping areas mapped RWX once */  \
	X(WX_SKIPPED, "wx_flips_skipped") /* RW/RX flips answered on them */    \
	X(WX_ENDED, "wx_relax_ended")     /* relaxations ended by another call */ \
	X(WX_REFUSED, "wx_rwx_refused")   /* the kernel refused RWX: forwarding */ \
	X(WX_REGIONS, "wx_window_regions") /* regions found flipping a window */ \
	X(WX_WIN_FLIPS, "wx_window_flips") /* RX of such a region after a window */ \
	X(WX_WIN_KEPT, "wx_windows_kept") /* window pages given their own VMA */ \
	X(BARRIER_PROTECTED, "barrier_protected") /* mprotect(PROT_READ) made    \
						     userfaultfd protection */  \
	X(BARRIER_UNPROTECTED, "barrier_unprotected") /* mprotect(RW) removing it */ \
	X(BARRIER_REDUNDANT, "barrier_redundant") /* PROT_READ of protected pages */ \
	X(BARRIER_FAULTS, "barrier_faults") /* writes passed on as SIGSEGV */   \
	X(BARRIER_RETRIED, "barrier_retried") /* writes that raced a removal */ \
	X(BARRIER_REGISTERED, "barrier_registered") /* ranges registered */     \
	X(BARRIER_UNWRAPPED, "barrier_unwrapped") /* made plain for another call */ \
	X(BARRIER_REFUSED, "barrier_refused") /* the kernel refused: plain path */ \
	X(FLIP_BEGUN, "flip_begun")       /* records made flipping (fastrun.c) */ \
	X(FLIP_ENDED, "flip_ended")       /* flipping records given a protection \
					     again by a repeated call */

enum {
#define X(id, name, ...) MMF_E_##id,
	MMF_EVENTS(X)
#undef X
	MMF_E_COUNT
};

struct mmf_tstats {
	uint64_t v[MMF_K_COUNT][MMF_S_COUNT];
};

/* One thread's counters (used: a thread owns the block), in chunks of
 * MMF_CHUNK_BLOCKS.  The layout is also read by other processes from the
 * live segment (live.h), so it only grows at the end. */
#define MMF_CHUNK_BLOCKS 64
struct __attribute__((aligned(64))) mmf_block {
	struct mmf_tstats t;
	uint32_t used;
};

/* The process-wide part: counters of exited threads, the block shared when
 * memory runs out, the events, the number of threads seen. */
struct mmf_totals {
	struct mmf_tstats retired, spare;
	uint64_t events[MMF_E_COUNT];
	uint32_t threads;
};

/* This thread's counters (allocated on first use; never NULL: falls back to
 * a shared block when memory runs out).  Async-signal-safe. */
struct mmf_tstats *mmf_stats_self(void);

/* Only the owning thread (and its signal handlers) adds; others read.  On
 * x86-64 the add is one instruction, so a handler on this thread cannot
 * lose an increment made around it; elsewhere a relaxed load and store. */
static inline void mmf_stat_add(struct mmf_tstats *t, int kind, int field, uint64_t n)
{
	uint64_t *p = &t->v[kind][field];
#if defined(__x86_64__)
	__asm__ volatile("addq %1, %0" : "+m"(*p) : "er"(n));
#else
	__atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
#endif
}

void mmf_event(int e);
void mmf_event_add(int e, uint64_t n);

/* Thread exit: fold this thread's counters into the retired totals. */
void mmf_stats_thread_exit(void *block);
/* In a forked child: start from zero, keep only the calling thread. */
void mmf_stats_fork_child(void);
/* Sum of every thread's counters and the retired ones. */
void mmf_stats_snapshot(struct mmf_tstats *out, uint64_t ev[MMF_E_COUNT], uint32_t *threads);

/* Names for output. */
const char *mmf_kind_name(int k);
const char *mmf_field_name(int f);
const char *mmf_event_name(int e);

/* Moves the process-wide totals to *t (what they hold is copied) and takes
 * later chunks of blocks from more() while it returns one (else from
 * private memory).  Called once, at early init, by the live segment. */
void mmf_stats_publish(struct mmf_totals *t, struct mmf_block *(*more)(void));

/* Registers the pthread key used to see threads exit (call once, outside
 * any allocator).  Returns 0 or an error number. */
int mmf_stats_late_init(void);

#endif
