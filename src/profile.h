/* Call-site profile (MMFOLD_PROFILE=N, docs/DESIGN.md 5).  Every call mmfold
 * counts is attributed to its call site: the first frame of its backtace
 * (libunwind's unw_backtrace) outside libc, libpthread, ld.so, libunwind and
 * mmfold.  Sites are interned per call kind in a fixed open-addressing table
 * of raw-mmap'd memory (lock-free insertion by compare-and-swap, no malloc,
 * no lock); the report lists the top N per kind by calls and by kernel time,
 * symbolised at exit with dladdr. */
#ifndef MMF_PROFILE_H
#define MMF_PROFILE_H

#include <stddef.h>
#include <stdint.h>

struct mmf_op;
struct mmf_buf;

/* Nonzero while calls are profiled.  mmf_run reads it on every call: when
 * profiling is off that is one load and one predictable branch. */
extern int mmf_prof_on;

/* Early init (raw system calls only): maps the site table and turns
 * profiling on when top > 0.  Until an unwinder is set, calls are lost.
 * Returns 0, or -1 when the table cannot be mapped (profiling stays off). */
int mmf_profile_init(int top, int depth);

/* From the constructor, once libunwind is loaded (bt = unw_backtrace, or
 * NULL when it could not be: every call is then counted as lost).  Learns
 * the address ranges of libc, libpthread, ld.so, the vDSO, libunwind
 * (lib_in_unwinder: any address inside it) and mmfold, and warms the
 * unwinder up on this thread. */
typedef int (*mmf_backtrace_fn)(void **ips, int n);
void mmf_profile_set_unwinder(mmf_backtrace_fn bt, const void *lib_in_unwinder);

/* Runs op through run, the dispatcher (with MMF_OPF_PROFILED set) and adds what the
 * call did (the change of this thread's counters for its kind) to its site.
 * Async-signal-safe as far as unw_backtrace is; a call made while this
 * thread is already unwinding (a signal handler, or the unwinder's own
 * mmap) is run unprofiled and counted as lost.  errno is preserved. */
long mmf_profile_run(struct mmf_op *op, long (*run)(struct mmf_op *));

/* In a forked child: the child starts from an empty profile. */
void mmf_profile_fork_child(void);

/* Upper bound of the bytes the profile section of a report takes (0 when
 * profiling is off). */
size_t mmf_profile_report_size(void);
/* Appends the profile section: a text table, or ,"profile":{...} in JSON.
 * Nothing when profiling is off.  Symbolises with dladdr, so unlike the
 * rest of the report it is not async-signal-safe. */
void mmf_profile_report(struct mmf_buf *b, int json);

#endif
