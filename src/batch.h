/* Batches (include/mmfold.h): per-thread queues of mprotect/madvise calls
 * applied together, merged.  See docs/DESIGN.md 5. */
#ifndef MMF_BATCH_H
#define MMF_BATCH_H

#include <stdint.h>

#include "engine.h"
#include "fast.h"

/* Queues that hold calls, process-wide, and this thread's batch depth: the
 * engine asks mmf_batch_intercept only when one of them is not zero.  The
 * count lives in the fast paths' gate word (fast.h), which it closes. */
#define mmf_batch_live (mmf_fast.f.batch_live)
extern __thread int mmf_batch_depth __attribute__((tls_model("initial-exec")));

/* Called by the engine for every intercepted call (outside the map lock)
 * while a queue holds calls or this thread is in a batch.  Applies the
 * queues the call must not overtake; queues the call when this thread is in
 * a batch and the call can wait (then returns 1 with *res = 0). */
int mmf_batch_intercept(const struct mmf_op *op, long *res);

struct mmf_batch_err {
	uint64_t s, e;
	int kind, arg, error;
	uint32_t failures;
};

/* The API.  begin returns the new depth; end and flush return 0 or -errno
 * and describe the first failure in *err (may be NULL). */
/* wlock.c: no call bypasses the map once a batch has begun. */
void mmf_bypass_refuse(void);
int mmf_batch_begin(void);
long mmf_batch_end(struct mmf_batch_err *err);
long mmf_batch_flush(struct mmf_batch_err *err);

/* Applies every queue (before fork, at exit). */
void mmf_batch_flush_all(void);
/* A forked child: queues of other threads are gone with them
 * (files_shared: the descriptor table is the parent's, close nothing). */
void mmf_batch_fork_child(int files_shared);
/* Late init: the thread-exit key (a thread that exits mid-batch has its
 * queue applied). */
void mmf_batch_late_init(void);

#endif
