/* Signal chaining (see sigchain.h).
 *
 * Records: per claimed signal a ring of slots; a new record is written
 * into a fresh slot (under the slot's sequence counter) and published by
 * swapping the chain's current pointer, which also yields the previous
 * record for the caller's oact.  Readers (the handler, queries) copy the
 * current slot and retry while its counter is odd or moved.  A slot is
 * reused only after SLOTS later updates, far more than can be in flight.
 * No lock anywhere: the program's handler may call sigaction/signal (a
 * barrier resets to SIG_DFL from its handler) while its thread was itself
 * in the middle of an update. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sigchain.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include "engine.h"
#include "sys.h"

#define SLOTS 64
/* The flag bits the kernel keeps (UAPI_SA_FLAGS); others are cleared. */
#define KEPT_FLAGS                                                             \
	((unsigned long)(SA_ONSTACK | SA_RESTART | SA_NODEFER | SA_RESETHAND | \
			 SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | 0x800 /* EXPOSE_TAGBITS */) | \
	 MMF_SA_RESTORER)
#define BIT(s) (1ULL << ((s) - 1))

struct slot {
	unsigned seq;
	struct mmf_ksa a;
};

struct chain {
	struct slot s[SLOTS];
	unsigned next;
	struct slot *cur;
};

/* SIGSEGV, SIGBUS: mapped when the signals are claimed (5 KiB the
 * library's writable segment does not carry: a conservative collector
 * scans that segment as roots). */
static struct chain *chains;
static int state;              /* 0 not claimed, 1 claiming, 2 claimed */
static mmf_fault_fn fault_fn;
static unsigned long libc_restorer;

#if defined(__x86_64__)
void mmf_sig_restore(void); /* sigrestore.S */
#define OWN_RESTORER ((unsigned long)mmf_sig_restore)
#define OWN_FLAGS MMF_SA_RESTORER
#else
#define OWN_RESTORER 0UL
#define OWN_FLAGS 0UL
#endif

static struct chain *chain_of(int sig)
{
	struct chain *c = __atomic_load_n(&chains, __ATOMIC_ACQUIRE);
	if (!c)
		return NULL;
	return sig == SIGSEGV ? &c[0] : sig == SIGBUS ? &c[1] : NULL;
}

static long rt_sigaction(int sig, const struct mmf_ksa *act, struct mmf_ksa *oact)
{
	return mmf_sys6(SYS_rt_sigaction, sig, (long)act, (long)oact, 8, 0, 0);
}

static void setmask(uint64_t m)
{
	mmf_sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&m, 0, 8, 0, 0);
}

/* ---- records -------------------------------------------------------------- */

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

static void slot_read(const struct slot *p, struct mmf_ksa *out)
{
	for (;;) {
		unsigned s1 = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);
		if (!(s1 & 1)) {
			out->handler = LD(p->a.handler);
			out->flags = LD(p->a.flags);
			out->restorer = LD(p->a.restorer);
			out->mask = LD(p->a.mask);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (LD(p->seq) == s1)
				return;
		}
		__asm__ volatile("" ::: "memory");
	}
}

static struct slot *slot_new(struct chain *c, const struct mmf_ksa *a)
{
	unsigned i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED) % SLOTS;
	struct slot *p = &c->s[i];
	unsigned s = LD(p->seq) | 1;
	ST(p->seq, s);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	ST(p->a.handler, a->handler);
	ST(p->a.flags, a->flags);
	ST(p->a.restorer, a->restorer);
	ST(p->a.mask, a->mask);
	__atomic_store_n(&p->seq, s + 1, __ATOMIC_RELEASE);
	return p;
}

/* Publishes a and returns the slot it replaced (NULL for the first). */
static struct slot *publish(struct chain *c, const struct mmf_ksa *a)
{
	return __atomic_exchange_n(&c->cur, slot_new(c, a), __ATOMIC_ACQ_REL);
}

static void current(struct chain *c, struct mmf_ksa *out)
{
	const struct slot *p = __atomic_load_n(&c->cur, __ATOMIC_ACQUIRE);
	if (p)
		slot_read(p, out);
	else
		memset(out, 0, sizeof *out); /* not reached: claims publish first */
}

/* ---- the handler ------------------------------------------------------------ */

/* The kernel's action for a fault nobody handles: restore SIG_DFL so that
 * the next delivery takes the default action (termination with a core). */
static void kernel_default(int sig)
{
	struct mmf_ksa d = {0};
	rt_sigaction(sig, &d, NULL);
}

__thread uintptr_t mmf_sigchain_sp __attribute__((tls_model("initial-exec")));

static void handler(int sig, siginfo_t *si, void *uc)
{
	mmf_fault_fn fn = __atomic_load_n(&fault_fn, __ATOMIC_ACQUIRE);
	int mine = fn ? fn(sig, si, uc) : 0;
	if (mine == 1) {
		mmf_event(MMF_E_FAULTS_CLAIMED);
		return;
	}
	if (mine == 2)
		sig = si->si_signo;
	mmf_event(MMF_E_SIGNALS_CHAINED);
	struct chain *c = chain_of(sig);
	const struct slot *p = __atomic_load_n(&c->cur, __ATOMIC_ACQUIRE);
	struct mmf_ksa a;
	slot_read(p, &a);
	/* si_code > 0: raised by the kernel for this instruction, which
	 * faults again when the handler returns; <= 0: sent (kill, tgkill,
	 * sigqueue, raise). */
	int sent = si->si_code <= 0;
	if (a.handler == (unsigned long)SIG_IGN) {
		/* The kernel ignores a sent signal but not a fault: a forced
		 * signal that is ignored resets to SIG_DFL and kills. */
		if (!sent)
			kernel_default(sig);
		return;
	}
	if (a.handler == (unsigned long)SIG_DFL) {
		kernel_default(sig);
		if (sent) {
			mmf_sys6(SYS_tgkill, mmf_sys_getpid(), mmf_sys_gettid(), sig, 0, 0, 0);
			uint64_t m = ~BIT(sig);
			setmask(m); /* the re-sent signal is delivered now */
		}
		return; /* a fault: the instruction faults again, by default */
	}
	if (a.flags & SA_RESETHAND) {
		/* As the kernel at delivery: the handler becomes SIG_DFL,
		 * flags and mask stay; a concurrent update wins. */
		struct mmf_ksa r = a;
		r.handler = (unsigned long)SIG_DFL;
		struct slot *n = slot_new(c, &r);
		struct slot *want = (struct slot *)p;
		__atomic_compare_exchange_n(&c->cur, &want, n, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED);
	}
	/* Blocked while the program's handler runs: what was blocked when
	 * the signal came, its sa_mask, and the signal itself unless
	 * SA_NODEFER.  mmfold's handler started with everything blocked. */
	uint64_t was;
	memcpy(&was, &((ucontext_t *)uc)->uc_sigmask, sizeof was);
	uint64_t m = was | a.mask;
	if (!(a.flags & SA_NODEFER))
		m |= BIT(sig);
	setmask(m & ~(BIT(SIGKILL) | BIT(SIGSTOP)));
	/* Calls made below this frame come from the program's handler (lazy
	 * mode makes them at once); one that longjmps out leaves it behind,
	 * and a frame above it is not below it. */
	uintptr_t was_sp = mmf_sigchain_sp;
	mmf_sigchain_sp = (uintptr_t)__builtin_frame_address(0);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (a.flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))a.handler)(sig, si, uc);
	else
		((void (*)(int))a.handler)(sig);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	mmf_sigchain_sp = was_sp;
	setmask(~0ULL); /* sigreturn restores uc_sigmask (as the program left it) */
}

/* ---- claims ----------------------------------------------------------------- */

static void learn_restorer(struct mmf_ksa *imported, int n)
{
#if defined(__x86_64__)
	for (int i = 0; i < n; i++)
		if ((imported[i].flags & MMF_SA_RESTORER) && imported[i].restorer) {
			libc_restorer = imported[i].restorer;
			return;
		}
	/* Any signal glibc installed a handler for carries its restorer. */
	for (int s = 1; s <= 64; s++) {
		struct mmf_ksa k;
		if (rt_sigaction(s, NULL, &k) == 0 && (k.flags & MMF_SA_RESTORER) && k.restorer &&
		    k.restorer != OWN_RESTORER) {
			libc_restorer = k.restorer;
			return;
		}
	}
#endif
	(void)imported;
	(void)n;
	libc_restorer = OWN_RESTORER;
}

unsigned long mmf_sigchain_libc_restorer(void) { return libc_restorer; }

static const struct mmf_ksa *own_action(void)
{
	static struct mmf_ksa own;
	own.handler = (unsigned long)handler;
	own.flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTART | OWN_FLAGS;
	own.restorer = OWN_RESTORER;
	own.mask = ~0ULL;
	return &own;
}

/* Installs mmfold's handler for sig and takes whatever the kernel had into
 * the record, unless that was mmfold's own. */
static long take(int sig)
{
	struct mmf_ksa old;
	long r = rt_sigaction(sig, own_action(), &old);
	if (r == 0 && old.handler != (unsigned long)handler)
		publish(chain_of(sig), &old);
	return r;
}

int mmf_sigchain_claim(mmf_fault_fn fn)
{
	__atomic_store_n(&fault_fn, fn, __ATOMIC_RELEASE);
	int s = 0;
	if (!__atomic_compare_exchange_n(&state, &s, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		while ((s = __atomic_load_n(&state, __ATOMIC_ACQUIRE)) == 1)
			mmf_sys_sched_yield();
		return s == 2 ? 0 : mmf_sigchain_claim(fn);
	}
	static const int sigs[2] = {SIGSEGV, SIGBUS};
	struct mmf_ksa old[2];
	if (!chains) { /* only the claimer gets here */
		void *m = mmf_sys_mmap(NULL, 2 * sizeof(struct chain), PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mmf_sys_err((long)m)) {
			__atomic_store_n(&state, 0, __ATOMIC_RELEASE);
			return (int)(long)m;
		}
		__atomic_store_n(&chains, (struct chain *)m, __ATOMIC_RELEASE);
	}
	/* A record must exist before the handler can run. */
	for (int i = 0; i < 2; i++) {
		long r = rt_sigaction(sigs[i], NULL, &old[i]);
		if (r < 0) {
			__atomic_store_n(&state, 0, __ATOMIC_RELEASE);
			return (int)r;
		}
		publish(chain_of(sigs[i]), &old[i]);
	}
	learn_restorer(old, 2);
	for (int i = 0; i < 2; i++) {
		long r = take(sigs[i]);
		if (r < 0) {
			if (i)
				rt_sigaction(sigs[0], &old[0], NULL);
			__atomic_store_n(&state, 0, __ATOMIC_RELEASE);
			return (int)r;
		}
	}
	__atomic_store_n(&state, 2, __ATOMIC_RELEASE);
	/* A program's call that went to the kernel during the claim. */
	for (int i = 0; i < 2; i++)
		take(sigs[i]);
	return 0;
}

static int never(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	return 0;
}

void mmf_sigchain_start(void)
{
	if (mmf_cfg()->v[MMF_OPT_SIGCHAIN] != MMF_SIGCHAIN_ON || mmf_sigchain_claimed())
		return; /* lazy mode claimed it already, with its own fn */
	int r = mmf_sigchain_claim(never);
	if (r < 0)
		mmf_log(1, "mmfold: MMFOLD_SIGCHAIN=on: cannot install the SIGSEGV/SIGBUS handler; "
			   "signals not chained");
	else
		mmf_log(2, "mmfold: MMFOLD_SIGCHAIN=on: SIGSEGV and SIGBUS chained through mmfold");
}

mmf_fault_fn mmf_sigchain_fault_fn(void) { return __atomic_load_n(&fault_fn, __ATOMIC_ACQUIRE); }

int mmf_sigchain_claimed(void) { return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == 2; }

int mmf_sigchain_owns(int sig)
{
	return (sig == SIGSEGV || sig == SIGBUS) && mmf_sigchain_claimed();
}

void mmf_sigchain_recheck(int sig)
{
	if (chain_of(sig) && mmf_sigchain_claimed())
		take(sig);
}

long mmf_sigchain_act(int sig, const struct mmf_ksa *act, struct mmf_ksa *oact)
{
	struct chain *c = chain_of(sig);
	if (!c)
		return -EINVAL;
	struct mmf_ksa o;
	if (act) {
		struct mmf_ksa n = *act;
		n.flags &= KEPT_FLAGS;
		n.mask &= ~(BIT(SIGKILL) | BIT(SIGSTOP));
		const struct slot *prev = publish(c, &n);
		if (prev)
			slot_read(prev, &o);
		else
			memset(&o, 0, sizeof o);
	} else {
		current(c, &o);
	}
	if (oact)
		*oact = o;
	return 0;
}
