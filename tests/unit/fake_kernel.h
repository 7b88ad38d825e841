/* A fake kernel for the unit tests: it takes the place of the kernel-call
 * table (mmf_kernel, src/sys.h), so the engine's modules run linked alone,
 * without LD_PRELOAD, and meet the failures the kernel rarely gives.
 *
 * Every call through the table is counted per kind and per path (the next
 * definitions, through which the program's calls and lazy mode's deferred
 * calls go, or the raw system call, through which mmfold's own memory,
 * files, signal masks and process_madvise go).  A call that matches an
 * injected failure returns that error without reaching the kernel; every
 * other call reaches the real kernel, so the tests map real memory and the
 * shadow map and the kernel can be compared.
 *
 * Use: fk_start() in a test (each test runs in its own process: Check's
 * default fork mode), then fk_call() for the program's calls, fk_fail() to
 * inject, fk_count()/fk_stat()/fk_event() to assert. */
#ifndef MMF_FAKE_KERNEL_H
#define MMF_FAKE_KERNEL_H

#include <stdint.h>

#include "engine.h"

enum {
	FK_MMAP,
	FK_MUNMAP,
	FK_MPROTECT,
	FK_MADVISE,
	FK_PMADVISE, /* process_madvise */
	FK_MLOCK,
	FK_MUNLOCK,
	FK_MSEAL,
	FK_READ,
	FK_WRITE,
	FK_COUNT
};
enum { FK_NEXT = 1, FK_RAW = 2, FK_ANY = 3 }; /* the paths */

/* Installs the fake, sets up the environment (MMFOLD_MODE=mode, large-folio
 * advice, alignment, shaping and W^X off unless extra says otherwise:
 * NULL-terminated "NAME=VALUE" strings) and starts the engine. */
void fk_start(const char *mode, const char *const *extra);
/* Installs the fake only (modules tested without the engine). */
void fk_install(void);
/* RLIMIT_MEMLOCK as mmfold's own prlimit64 sees it: FK_MEMLOCK_REAL (the
 * default) the kernel's; FK_MEMLOCK_UNLIMITED RLIM_INFINITY; FK_MEMLOCK_CAPPED
 * 64 pages.  fk_prlimit_calls counts the calls that asked for it. */
enum { FK_MEMLOCK_REAL, FK_MEMLOCK_UNLIMITED, FK_MEMLOCK_CAPPED };
extern int fk_memlock;
extern unsigned long fk_prlimit_calls;

/* From now on, `times` calls (-1: every call) of kind `call` on path(s)
 * `paths` that overlap [s, e) (s == e: any range) fail with -err, or, with
 * err FK_OK, succeed without reaching the kernel. */
#define FK_OK 0
void fk_fail(int call, int paths, uint64_t s, uint64_t e, int err, int times);
/* Removes every injected failure. */
void fk_clear(void);
/* Calls of kind `call` seen on path(s) `paths` (failed ones included). */
unsigned long fk_count(int call, int paths);

/* The last mprotect calls through the next definitions: start, length
 * and protection, oldest first; fk_log_n of them (at most FK_LOG). */
#define FK_LOG 64
struct fk_mp {
	uint64_t s, len;
	int prot;
	long r;
};
extern struct fk_mp fk_log[FK_LOG];
extern int fk_log_n;

/* The program's call, as a preload wrapper makes it: through mmf_run with
 * a forwarder that uses the table.  The kernel's convention. */
long fk_call(int kind, long a0, long a1, long a2, long a3, long a4, long a5);
/* The forwarder fk_call gives a call of this kind. */
long (*fk_fwd(int kind))(const struct mmf_op *);

/* Merged counters (mmf_stats_snapshot). */
uint64_t fk_stat(int kind, int field);
uint64_t fk_event(int e);

/* mprotect of `pages` pages at p, through fk_call. */
long fk_mprotect(void *p, long pages, int prot);
/* n pages of private anonymous memory, mapped through mmf_run (owned). */
char *fk_map(int n, int prot);

#endif
