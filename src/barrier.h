/* Write barriers without VMA splits (MMFOLD_BARRIER=uffd; README.md,
 * "Write barriers").
 *
 * A collector that finds dirty pages with mprotect makes its heap
 * read-only, takes one SIGSEGV per first write, and makes each written page
 * read-write again; every call splits or merges VMAs under the address
 * space's write lock.  Here, on owned private anonymous read-write memory,
 * mprotect(PROT_READ) becomes userfaultfd write-protection of the range
 * (registered once, UFFDIO_WRITEPROTECT afterwards: the VMA stays rw-p), and
 * mprotect(PROT_READ|PROT_WRITE) of write-protected pages removes it.  With
 * UFFD_FEATURE_SIGBUS a write to such a page raises SIGBUS at the address
 * (a system call writing into it fails with EFAULT, as for a read-only
 * page); mmfold's fault handler (sigchain.c) hands it to the program's
 * SIGSEGV action as the SEGV_ACCERR fault mprotect would have raised.
 * Every other call reaching such pages, and fork, first turns them into
 * what plain mprotect would have made (a read-only VMA), so the kernel
 * answers those calls itself.
 *
 * State: per page two bits, in chunks of 1 GiB allocated on demand (raw
 * mmap): wp (the program asked for PROT_READ, the kernel holds write-
 * protection) and reg (registered with mmfold's userfaultfd).  The bits
 * change only under the map's writer lock, kernel first when protection
 * is removed and bits first when it is added, so a lock-free reader (the
 * fault handler) that finds no wp bit for a faulting page knows the
 * protection was removed after the fault was raised.  The shadow map keeps
 * the kernel's view (read-write) for write-protected pages. */
#ifndef MMF_BARRIER_H
#define MMF_BARRIER_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "map.h"

/* 1 once the mode is on (userfaultfd works here and the handler is ours). */
extern int mmf_barrier_on;
/* Threads between fork's prepare and parent steps (set by life.c, kept in
 * wlock.c): nothing is deferred (lazy mode) or write-protected through
 * userfaultfd while it is not 0. */
extern int mmf_forking;

/* Late start-up (constructor), after lazy mode's: opens the userfaultfd,
 * checks write-protection of anonymous memory works (on never-touched
 * pages too), claims the fault signals.  When MMFOLD_BARRIER=uffd cannot
 * work it logs one line, keeps plain mprotect and says why in the report. */
void mmf_barrier_start(struct mmf_map *map, size_t page);

/* Before the engine's normal path, no lock held.  An mprotect the barrier
 * answers: returns 1 and *res.  Otherwise write-protected pages op reaches
 * are made plain first (mmf_barrier_before) and 0 returned.  batch: a
 * batch is open on this thread or queues hold calls (nothing is converted:
 * a queued call must not be overtaken). */
int mmf_barrier_run(const struct mmf_op *op, int batch, long *res);

/* No lock held: write-protected pages op may reach become what plain
 * mprotect(PROT_READ) would have made.  Cheap when there are none. */
void mmf_barrier_before(const struct mmf_op *op);

/* A call forwarded while this thread held the writer lock (a re-entrant
 * call): the pages it reaches are given up once the lock is free. */
void mmf_barrier_reentry(const struct mmf_op *op);

/* fork: prepare (writer lock held) makes every write-protected page plain;
 * the child drops the parent's userfaultfd and starts afresh.  A child
 * that shares its parent's descriptor table (files_shared: clone with
 * CLONE_FILES) closes nothing of the parent's and opens nothing: the
 * barrier is off there, and the parent's descriptors stay guarded. */
void mmf_barrier_fork_prepare(void);
void mmf_barrier_fork_child(int files_shared);

struct mmf_buf;
/* The barrier's line of the report (nothing when not asked for). */
void mmf_barrier_report(struct mmf_buf *b, int json);

#endif
