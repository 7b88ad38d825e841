/* Signal chaining: mmfold's own SIGSEGV/SIGBUS handler runs first, while
 * the program believes its own handler is installed (docs/DESIGN.md 5).
 *
 * After a claim, the kernel's action for SIGSEGV and SIGBUS is mmfold's
 * handler; the program's sigaction/signal/rt_sigaction calls for them are
 * recorded here with the kernel's semantics instead of being installed,
 * and every fault mmfold does not claim goes to the recorded action with
 * the original siginfo and ucontext.  Everything here is lock-free and
 * async-signal-safe: records are published by pointer swap and read under
 * a per-slot sequence counter. */
#ifndef MMF_SIGCHAIN_H
#define MMF_SIGCHAIN_H

#include <signal.h>
#include <stdint.h>

/* Returns 1 when the fault was mmfold's (handled: the faulting access may
 * be retried), 0 otherwise, 2 when it is the program's but as the signal
 * the function wrote into si->si_signo (barrier.c: a SIGBUS that plain
 * mprotect would have raised as SIGSEGV).  Called inside the signal
 * handler, with every signal blocked. */
typedef int (*mmf_fault_fn)(int sig, siginfo_t *si, void *uctx);

/* The function claims run now (NULL when none). */
mmf_fault_fn mmf_sigchain_fault_fn(void);

/* Installs mmfold's handler for SIGSEGV and SIGBUS (idempotent; a later
 * call replaces fn), importing whatever handler is installed now as the
 * program's.  After this, the program's sigaction/signal calls for those
 * signals are recorded, not installed.  Returns 0 or -errno. */
int mmf_sigchain_claim(mmf_fault_fn fn);

/* The frame from which mmfold's handler called the program's SIGSEGV/SIGBUS
 * handler on this thread (0: none yet). */
extern __thread uintptr_t mmf_sigchain_sp __attribute__((tls_model("initial-exec")));

/* 1 when the caller runs inside the program's SIGSEGV/SIGBUS handler
 * (called through the chain): its stack frame lies below the dispatching
 * frame, within 1 MiB.  A handler left by siglongjmp is not counted. */
static inline int mmf_sigchain_in_handler(void)
{
	uintptr_t h = mmf_sigchain_sp, sp = (uintptr_t)__builtin_frame_address(0);
	return h && sp < h && h - sp < (1u << 20);
}

/* MMFOLD_SIGCHAIN=on: claims with a fn that never claims a fault.  Called
 * from the constructor after the configuration was read. */
void mmf_sigchain_start(void);

/* The kernel's struct sigaction (rt_sigaction's layout on x86_64 and
 * aarch64). */
struct mmf_ksa {
	unsigned long handler;
	unsigned long flags;
	unsigned long restorer;
	uint64_t mask;
};

#define MMF_SA_RESTORER 0x04000000UL

/* 1 when sig is claimed: its sigaction calls must go to mmf_sigchain_act. */
int mmf_sigchain_owns(int sig);

/* rt_sigaction for a claimed signal, with the kernel's semantics: act (may
 * be NULL) becomes the program's record, oact (may be NULL) receives the
 * previous one.  act and oact may alias.  Returns 0 or -errno. */
long mmf_sigchain_act(int sig, const struct mmf_ksa *act, struct mmf_ksa *oact);

/* A call forwarded to the kernel while sig was not claimed may have landed
 * after a concurrent claim: takes the kernel's action back into the record
 * if it is not mmfold's.  Cheap when no claim happened. */
void mmf_sigchain_recheck(int sig);

/* The restorer glibc puts in its kernel_sigaction (learned at claim time;
 * mmfold's own when none was seen), so that recorded actions read back as
 * they would have from the kernel. */
unsigned long mmf_sigchain_libc_restorer(void);

/* The number of claims that took effect (0 or 1): for tests and the log. */
int mmf_sigchain_claimed(void);

#endif
