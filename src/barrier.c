/* Write barriers through userfaultfd write-protection.  See barrier.h for
 * the contract and the state; README.md ("Write barriers") for what a
 * program can notice.
 *
 * Locking: everything that changes the bits, the shadow map or the
 * kernel's protection runs inside the engine's writer section
 * (mmf_writer_enter/leave); the fault handler reads the bits without a
 * lock.  No malloc, no stdio; system calls are raw. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "barrier.h"
#include "barrierint.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include "config.h"
#include "fmt.h"
#include "sigchain.h"
#include "stats.h"
#include "sys.h"

#ifndef MREMAP_FIXED
#define MREMAP_FIXED 2
#endif

#define RW (PROT_READ | PROT_WRITE)
#define MAX_RUNS 8     /* separate ioctls per call before one covers all */
#define STALE_MAX 8

int mmf_barrier_on;
int mmf_barrier_fds[2] = {-1, -1};

static struct mmf_map *smap;
static uint64_t page;
static int ufd = -1;
static int maps_fd = -1;         /* /proc/self/maps, for PROCMAP_QUERY */
static mmf_fault_fn next_fn;     /* lazy mode's handler, when it runs */
static const char *why_off;      /* MMFOLD_BARRIER=uffd asked, cannot work */
static int asked;

/* What preload/fds.c keeps the program from closing (engine.h). */
static void fds_publish(void)
{
	__atomic_store_n(&mmf_barrier_fds[0], ufd, __ATOMIC_RELAXED);
	__atomic_store_n(&mmf_barrier_fds[1], maps_fd, __ATOMIC_RELAXED);
}

/* MMFOLD_LOG=3: one line per kernel call the barrier makes. */
static void trace(const char *what, uint64_t s, uint64_t e, long r)
{
	if (mmf_cfg()->v[MMF_OPT_LOG] < 3)
		return;
	char buf[160];
	MMF_BUF(b, buf);
	mmf_puts(&b, "mmfold: [");
	mmf_puti(&b, mmf_sys_gettid());
	mmf_puts(&b, "] barrier ");
	mmf_puts(&b, what);
	mmf_putc(&b, ' ');
	mmf_putx(&b, s);
	mmf_putc(&b, '-');
	mmf_putx(&b, e);
	mmf_puts(&b, " = ");
	mmf_puti(&b, r);
	mmf_log(3, buf);
}

/* Protections being made: wp bits set whose ioctl has not returned yet. */
static uint32_t protecting;

/* ---- the kernel ------------------------------------------------------- */

static long uffd_wp(uint64_t s, uint64_t e, int on)
{
	struct uffdio_writeprotect w = {{s, e - s}, on ? UFFDIO_WRITEPROTECT_MODE_WP : 0};
	long r;
	int tries = 0;
	do
		r = mmf_sys6(SYS_ioctl, ufd, (long)UFFDIO_WRITEPROTECT, (long)&w, 0, 0, 0);
	while (r == -EAGAIN && ++tries < 100);
	trace(on ? "wp" : "unwp", s, e, r);
	return r;
}

static long uffd_register(uint64_t s, uint64_t e)
{
	struct uffdio_register r = {{s, e - s}, UFFDIO_REGISTER_MODE_WP, 0};
	long rc = mmf_sys6(SYS_ioctl, ufd, (long)UFFDIO_REGISTER, (long)&r, 0, 0, 0);
	if (rc == 0 && !(r.ioctls & (1ull << _UFFDIO_WRITEPROTECT)))
		rc = -EINVAL;
	trace("register", s, e, rc);
	return rc;
}

/* Writer lock held.  [s,e) is unregistered, whatever the bits say (a
 * failed call may have cleared them): its VMAs get the kernel's flags back
 * and merge with their neighbours as they would have without mmfold. */
static void unregister(uint64_t s, uint64_t e)
{
	struct uffdio_range r = {s, e - s};
	trace("unregister", s, e, mmf_sys6(SYS_ioctl, ufd, (long)UFFDIO_UNREGISTER, (long)&r, 0, 0, 0));
	mmf_wpb_clear(REG, s, e);
}

/* ---- decisions (writer lock held) ------------------------------------- */

/* A record the barrier may write-protect: owned, private anonymous,
 * read-write as the kernel has it, unsealed, default key, not a W^X area. */
static int eligible(const struct mmf_rec *r)
{
	return r->a.owned && r->a.prot == RW && r->a.sealed == 0 && r->a.pkey == 0 &&
	       (r->a.adv_known & r->a.adv_set & MMF_ADV_ANON) &&
	       !(r->a.adv_known & r->a.adv_set & MMF_ADV_WX);
}

/* Every page of [s,e) is in eligible records. */
static int all_eligible(uint64_t s, uint64_t e)
{
	struct mmf_rec r;
	for (uint64_t a = s; a < e; a = r.end)
		if (!mmf_map_lookup(smap, a, &r) || !eligible(&r))
			return 0;
	return 1;
}

/* [s,e) registered with the userfaultfd, so that later calls inside it
 * split nothing: each VMA it overlaps as a whole (PROCMAP_QUERY), so that
 * registration adds no VMA boundary the kernel would not have had (mlock
 * and mremap answer by VMA); where the kernel cannot say, the run of
 * eligible records around it.  0 or -errno. */
static long ensure_registered(uint64_t s, uint64_t e)
{
	uint64_t rs, re, vs, ve;
	if (!mmf_wpb_next_run(REG, s, e, 0, &rs, &re))
		return 0;
	for (uint64_t a = s; maps_fd >= 0 && a < e; a = ve) {
		if (mmf_vma_at(maps_fd, a, &vs, &ve) != 0 || vs > a)
			goto records;
		if (mmf_wpb_next_run(REG, vs, ve, 0, &rs, &re)) {
			long rc = uffd_register(vs, ve);
			if (rc != 0)
				return rc;
			mmf_event(MMF_E_BARRIER_REGISTERED);
			if (mmf_wpb_set(REG, vs, ve, 1) < 0)
				return -ENOMEM;
		}
	}
	if (maps_fd >= 0)
		return 0;
records:;
	struct mmf_rec r;
	uint64_t lo = s, hi = e;
	for (int n = 0; n < 4096 && lo >= page && mmf_map_lookup(smap, lo - page, &r) &&
			eligible(&r); n++)
		lo = r.start;
	for (int n = 0; n < 4096 && mmf_map_lookup(smap, hi, &r) && eligible(&r); n++)
		hi = r.end;
	long rc = uffd_register(lo, hi);
	if (rc != 0 && (lo != s || hi != e)) {
		lo = s;
		hi = e;
		rc = uffd_register(lo, hi);
	}
	if (rc != 0)
		return rc;
	mmf_event(MMF_E_BARRIER_REGISTERED);
	return mmf_wpb_set(REG, lo, hi, 1) < 0 ? -ENOMEM : 0;
}

/* Write-protected pages of [s,e) become what mprotect(PROT_READ) would
 * have made: the VMA read-only, the write-protection removed. */
static void unwrap_part(uint64_t s, uint64_t e)
{
	uint64_t rs, re;
	while (mmf_wpb_next_run(WP, s, e, 1, &rs, &re)) {
		long r = mmf_sys6(SYS_mprotect, (long)rs, (long)(re - rs), PROT_READ, 0, 0, 0);
		trace("unwrap mprotect(PROT_READ)", rs, re, r);
		if (r != 0) {
			/* (a split at vm.max_map_count): it stays protected the
			 * uffd way; the map no longer vouches for it */
			mmf_map_forget(smap, rs, re);
			mmf_event(MMF_E_BARRIER_REFUSED);
			s = re;
			continue;
		}
		uffd_wp(rs, re, 0); /* leftover protection would outlive a later RW */
		struct mmf_upd u;
		memset(&u, 0, sizeof u);
		u.fields = MMF_F_PROT;
		u.a.prot = PROT_READ;
		mmf_map_update(smap, rs, re, &u);
		mmf_wpb_set(WP, rs, re, 0);
		mmf_event(MMF_E_BARRIER_UNWRAPPED);
		s = re;
	}
}

static void unwrap(uint64_t s, uint64_t e)
{
	uint64_t cs, ce;
	if (!LD(mmf_wpb_pages))
		return;
	for (uint32_t k = 0; k < mmf_wpb_n; k++)
		if (mmf_wpb_clip(k, s, e, &cs, &ce))
			unwrap_part(cs, ce);
}

/* ---- calls made from a signal handler while the lock was held --------- */

struct stale {
	uint64_t s, e;
	int ready;
};
static struct stale *stale; /* STALE_MAX, mapped with the mmf_wpb_chunks */
static uint32_t nstale;
static int stale_all;

/* Writer lock held.  Pages a re-entrant call reached: what the program
 * asked there is not known, so their protection is given up and the map
 * forgets them (README.md: a re-entrant call on write-protected pages). */
static void drain(void)
{
	uint32_t n;
	while ((n = __atomic_load_n(&nstale, __ATOMIC_ACQUIRE)) || LD(stale_all)) {
		int all = LD(stale_all);
		for (uint32_t i = 0; !all && i < n && i < STALE_MAX; i++) {
			if (!__atomic_load_n(&stale[i].ready, __ATOMIC_ACQUIRE)) {
				all = 1;
				break;
			}
			uint64_t cs, ce, rs, re;
			for (uint32_t k = 0; k < mmf_wpb_n; k++)
				for (int c = mmf_wpb_clip(k, stale[i].s, stale[i].e, &cs, &ce);
				     c && mmf_wpb_next_run(WP, cs, ce, 1, &rs, &re); cs = re) {
					uffd_wp(rs, re, 0);
					mmf_wpb_set(WP, rs, re, 0);
				}
			mmf_map_forget(smap, stale[i].s, stale[i].e);
			__atomic_store_n(&stale[i].ready, 0, __ATOMIC_RELAXED);
		}
		if (all || n > STALE_MAX) {
			/* more than the list holds: every page goes back to plain
			 * mprotect (the program may see a fault it did not expect
			 * where a re-entrant call made pages writable) */
			unwrap(0, UINT64_MAX);
			for (uint32_t i = 0; i < STALE_MAX; i++)
				__atomic_store_n(&stale[i].ready, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&stale_all, 0, __ATOMIC_RELEASE);
			mmf_log(1, "mmfold: MMFOLD_BARRIER: calls from signal handlers reached "
				   "write-protected pages; all of them were made read-only");
		}
		__atomic_compare_exchange_n(&nstale, &n, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	}
}

/* ---- the entry points -------------------------------------------------- */

/* The ranges op may reach, page-rounded; returns how many (2 at most).
 * reg: whether the mapping there may be replaced (its registration goes
 * with it).  The reg bits mean "may be registered": they are cleared only
 * where the VMAs are gone or unregistered. */
static int reach(const struct mmf_op *op, uint64_t s[2], uint64_t e[2], int *reg)
{
	*reg = 0;
	/* brk moves only the heap, which no mmap'd range can be part of */
	if (op->kind == MMF_K_BRK)
		return 0;
	*reg = op->kind == MMF_K_MMAP || op->kind == MMF_K_MUNMAP || op->kind == MMF_K_MREMAP ||
	       op->kind == MMF_K_SHMAT;
	if (op->kind == MMF_K_MREMAP) {
		uint64_t a = (uint64_t)op->a[0] & ~(page - 1);
		uint64_t l = (uint64_t)op->a[1] ? (uint64_t)op->a[1] : page;
		int n = 0;
		if (a + l + page > a) {
			s[n] = a;
			e[n++] = (a + l + page - 1) & ~(page - 1);
		} else {
			s[n] = 0;
			e[n++] = UINT64_MAX;
		}
		if (op->a[3] & MREMAP_FIXED) {
			uint64_t b = (uint64_t)op->a[4] & ~(page - 1), m = (uint64_t)op->a[2];
			s[n] = b;
			e[n++] = b + m + page > b ? (b + m + page - 1) & ~(page - 1) : UINT64_MAX;
		}
		return n;
	}
	mmf_reach(op, &s[0], &e[0]);
	if (s[0] == 0 && e[0] == UINT64_MAX)
		*reg = 0; /* not one range (an overflowing length fails) */
	return s[0] < e[0];
}

/* The program's SIGSEGV action would kill it (SIG_DFL, SIG_IGN, or the
 * signal blocked when the fault came): the kernel's own fault does it. */
static int segv_kills(void *uc)
{
	struct mmf_ksa a;
	uint64_t mask;
	mmf_sigchain_act(SIGSEGV, NULL, &a);
	memcpy(&mask, &((ucontext_t *)uc)->uc_sigmask, sizeof mask);
	return a.handler == (unsigned long)SIG_DFL || a.handler == (unsigned long)SIG_IGN ||
	       (mask & (1ull << (SIGSEGV - 1)));
}

/* A SIGBUS from a write to a write-protected page is the program's
 * SEGV_ACCERR fault (2: sigchain.c passes it on as SIGSEGV); one on a page
 * whose protection was removed after the fault was raised is retried (1).
 * Anything else goes to lazy mode's handler, or on (0). */
static int fault(int sig, siginfo_t *si, void *uc)
{
	if (sig == SIGBUS && si->si_code == BUS_ADRERR) {
		uint64_t a = (uint64_t)si->si_addr & ~(page - 1);
		int wp = mmf_wpb_bit(WP, a);
		if (!wp && mmf_wpb_bit(REG, a)) {
			/* Removed since (the kernel first, then the bit), or a
			 * leftover of a call mmfold did not see: decided under
			 * the lock, so that no new protection is lost. */
			if (mmf_writer_held())
				return 0;
			mmf_writer_enter();
			wp = mmf_wpb_bit(WP, a);
			if (!wp)
				uffd_wp(a, a + page, 0);
			mmf_writer_leave();
			if (!wp) {
				mmf_event(MMF_E_BARRIER_RETRIED);
				return 1;
			}
		}
		if (wp) {
			if (segv_kills(uc)) {
				/* the kernel raises the fault itself and the
				 * program dies of it as it would have */
				mmf_sys6(SYS_mprotect, (long)a, (long)page, PROT_READ, 0, 0, 0);
				return 1;
			}
			si->si_signo = SIGSEGV;
			si->si_code = SEGV_ACCERR;
			mmf_event(MMF_E_BARRIER_FAULTS);
			return 2;
		}
	}
	return next_fn ? next_fn(sig, si, uc) : 0;
}

void mmf_barrier_before(const struct mmf_op *op)
{
	uint64_t s[2], e[2];
	int reg;
	if (!__atomic_load_n(&mmf_barrier_on, __ATOMIC_RELAXED))
		return;
	int n = reach(op, s, e, &reg);
	int hit = LD(nstale) || LD(stale_all) || (op->kind == MMF_K_MREMAP && LD(mmf_wpb_n));
	for (int i = 0; i < n; i++)
		hit |= mmf_wpb_any(WP, s[i], e[i]) || (reg && mmf_wpb_any(REG, s[i], e[i]));
	if (!hit)
		return;
	mmf_writer_enter();
	drain();
	for (int i = 0; i < n; i++) {
		if (op->kind == MMF_K_MREMAP && !i && e[i] != UINT64_MAX) {
			/* mremap answers by the source's whole VMA (EFAULT
			 * across VMAs; MREMAP_DONTUNMAP clears VM_LOCKED and
			 * VM_LOCKONFAULT on all of it, inside the range or
			 * not), and a registered VMA does not merge with an
			 * unregistered one: the registered run around the
			 * source, all of it, goes back to the kernel's flags,
			 * so that the VMA there is the one the kernel would
			 * have had.  Unwrapping only the source would split
			 * the read-only VMA plain mprotect would have made. */
			s[i] = mmf_wpb_run_down(REG, s[i]);
			e[i] = mmf_wpb_run_up(REG, e[i]);
			unwrap(s[i], e[i]);
			unregister(s[i], e[i]);
			continue;
		}
		unwrap(s[i], e[i]);
		/* Elsewhere the mapping may change: registered anew when
		 * needed. */
		if (reg)
			mmf_wpb_clear(REG, s[i], e[i]);
	}
	mmf_writer_leave();
}

/* Undoes the first n runs of a protect() the kernel refused. */
static void protect_undo(const uint64_t *rs, const uint64_t *re, int n)
{
	for (int j = 0; j < n; j++) {
		uffd_wp(rs[j], re[j], 0);
		mmf_wpb_set(WP, rs[j], re[j], 0);
	}
	mmf_event(MMF_E_BARRIER_REFUSED);
}

/* mprotect(PROT_READ) of pages in eligible records (or in records that are
 * read-only already, which stay as they are): write-protect the read-write
 * ones.  1 when done. */
#define MAX_PIECES 64
static int protect(uint64_t s, uint64_t e)
{
	uint64_t ps[MAX_PIECES], pe[MAX_PIECES], rs, re;
	int np = 0;
	struct mmf_rec r;
	for (uint64_t a = s; a < e; a = r.end) {
		if (!mmf_map_lookup(smap, a, &r))
			return 0;
		if (r.a.prot == PROT_READ) {
			struct mmf_rec x = r;
			x.a.prot = RW; /* the rest of eligible() */
			if (!eligible(&x))
				return 0;
			continue;
		}
		if (!eligible(&r))
			return 0;
		uint64_t cs = a, ce = r.end < e ? r.end : e;
		if (ensure_registered(cs, ce) != 0)
			return 0;
		/* pages protected already stay so: only the others are asked */
		for (; mmf_wpb_next_run(WP, cs, ce, 0, &rs, &re); cs = re) {
			if (np == MAX_PIECES)
				return 0; /* too scattered: plain mprotect */
			ps[np] = rs;
			pe[np++] = re;
		}
	}
	__atomic_add_fetch(&protecting, 1, __ATOMIC_SEQ_CST);
	int ok = 1;
	for (int i = 0; ok && i < np; i++) {
		/* the bits first: a fault the new protection raises finds them */
		if (mmf_wpb_set(WP, ps[i], pe[i], 1) < 0 || uffd_wp(ps[i], pe[i], 1) != 0) {
			protect_undo(ps, pe, i + 1);
			ok = 0;
		}
	}
	__atomic_sub_fetch(&protecting, 1, __ATOMIC_SEQ_CST);
	if (ok)
		mmf_event(MMF_E_BARRIER_PROTECTED);
	return ok;
}

/* mprotect(PROT_READ|PROT_WRITE) of eligible pages, some write-protected:
 * remove the protection.  1 when done. */
static int unprotect(uint64_t s, uint64_t e)
{
	if (!all_eligible(s, e))
		return 0;
	uint64_t rs, re, at = s, us, ue;
	int nr = 0;
	while (mmf_wpb_next_run(WP, at, e, 1, &rs, &re)) {
		if (++nr > MAX_RUNS && !mmf_wpb_next_run(REG, s, e, 0, &us, &ue)) {
			rs = s; /* scattered and all registered: one call */
			re = e;
		}
		if (uffd_wp(rs, re, 0) != 0)
			return 0; /* made plain by the caller, then forwarded */
		mmf_wpb_set(WP, rs, re, 0);
		at = re;
	}
	mmf_event(MMF_E_BARRIER_UNPROTECTED);
	return 1;
}

int mmf_barrier_run(const struct mmf_op *op, int batch, long *res)
{
	/* while a thread forks, plain calls: a page protected now would be
	 * writable in the child (registrations are not inherited) */
	if (op->kind != MMF_K_MPROTECT || op->flags || batch ||
	    __atomic_load_n(&mmf_forking, __ATOMIC_SEQ_CST)) {
		mmf_barrier_before(op);
		return 0;
	}
	uint64_t a = (uint64_t)op->a[0], len = (uint64_t)op->a[1];
	uint64_t e = a + ((len + page - 1) & ~(page - 1));
	int prot = (int)op->a[2];
	if ((a & (page - 1)) || !len || e <= a || len > e - a || (prot != PROT_READ && prot != RW) ||
	    (prot == RW && !mmf_wpb_any(WP, a, e) && !LD(nstale))) {
		mmf_barrier_before(op);
		return 0;
	}
	/* A collector protects its whole heap each cycle while most of it is
	 * protected already: when every page is, and no protection is being
	 * made (whose bits would be set before the kernel's), the call changes
	 * nothing and is answered without the lock. */
	/* Lazy mode: a promotion waiting there is made first, so that the
	 * records say what the kernel has (a read-only record counts as
	 * read-only already, and its waiting promotion would undo the call). */
	if (prot == PROT_READ && mmf_lazy_active())
		mmf_lazy_buffer(a, e - a);
	uint64_t rs, re;
	if (prot == PROT_READ && !LD(nstale) && !LD(stale_all) && !mmf_wpb_next_run(WP, a, e, 0, &rs, &re) &&
	    !__atomic_load_n(&protecting, __ATOMIC_SEQ_CST)) {
		mmf_event(MMF_E_BARRIER_REDUNDANT);
		*res = 0;
		return 1;
	}
	mmf_writer_enter();
	drain();
	/* again under the lock: a fork's prepare step may have made every
	 * page plain since the test above */
	int done = !__atomic_load_n(&mmf_forking, __ATOMIC_SEQ_CST) &&
		   (prot == PROT_READ ? protect(a, e) : unprotect(a, e));
	if (!done)
		unwrap(a, e);
	mmf_writer_leave();
	if (done)
		*res = 0;
	return done;
}

void mmf_barrier_reentry(const struct mmf_op *op)
{
	uint64_t s[2], e[2];
	int reg;
	if (!__atomic_load_n(&mmf_barrier_on, __ATOMIC_RELAXED) || !LD(mmf_wpb_pages))
		return;
	int n = reach(op, s, e, &reg);
	for (int i = 0; i < n; i++) {
		uint32_t k = __atomic_fetch_add(&nstale, 1, __ATOMIC_ACQ_REL);
		if (k >= STALE_MAX) {
			__atomic_store_n(&stale_all, 1, __ATOMIC_RELEASE);
			continue;
		}
		stale[k].s = s[i];
		stale[k].e = e[i];
		__atomic_store_n(&stale[k].ready, 1, __ATOMIC_RELEASE);
	}
}

/* ---- fork --------------------------------------------------------------- */

void mmf_barrier_fork_prepare(void)
{
	if (!__atomic_load_n(&mmf_barrier_on, __ATOMIC_RELAXED))
		return;
	drain();
	unwrap(0, UINT64_MAX); /* the child would not inherit the protection */
}


void mmf_barrier_fork_child(int files_shared)
{
	if (!mmf_barrier_on)
		return;
	/* The parent's userfaultfd acts on the parent's memory, and its
	 * /proc/self/maps describes the parent: never use them here.  The
	 * child's VMAs are no longer registered. */
	if (!files_shared) {
		mmf_sys_close(ufd);
		if (maps_fd >= 0)
			mmf_sys_close(maps_fd);
	}
	maps_fd = -1;
	for (uint32_t i = 0; i < mmf_wpb_n; i++) {
		size_t bytes = ((size_t)1 << CHUNK_SHIFT) / page / 8;
		mmf_sys_munmap(mmf_wpb_chunks[i].bits[WP], 2 * bytes);
	}
	memset(mmf_wpb_chunks, 0, MAX_CHUNKS * sizeof *mmf_wpb_chunks);
	mmf_wpb_n = 0;
	mmf_wpb_pages = 0;
	nstale = 0;
	stale_all = 0;
	if (files_shared) {
		/* descriptors opened here would be the parent's too (and
		 * outlive this child); mmf_barrier_fds keep naming the
		 * parent's, so that the close wrappers still keep off them */
		ufd = -1;
		why_off = "a child sharing its parent's descriptor table (clone with CLONE_FILES)";
		mmf_barrier_on = 0;
		return;
	}
	const char *why;
	if (mmf_barrier_open(&ufd, &maps_fd, &why) < 0) {
		ufd = -1;
		why_off = why;
		mmf_barrier_on = 0;
	}
	fds_publish();
}

/* ---- start-up ----------------------------------------------------------- */

/* Write-protection works on anonymous memory here, never-touched pages
 * included: a scratch mapping is registered and protected. */
static int uffd_probe(const char **why)
{
	void *m = mmf_sys_mmap(NULL, 2 * page, RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mmf_sys_err((long)m)) {
		*why = "no memory for the probe";
		return -1;
	}
	uint64_t s = (uint64_t)m;
	int ok = uffd_register(s, s + 2 * page) == 0 && uffd_wp(s, s + 2 * page, 1) == 0;
	if (ok) {
		/* a write by the kernel into a protected, never-touched page
		 * must fail as into a read-only page */
		long fd = mmf_sys_open("/dev/zero", O_RDONLY | O_CLOEXEC, 0);
		if (fd >= 0) {
			ok = mmf_sys_read((int)fd, (char *)m + page, 8) == -EFAULT;
			mmf_sys_close((int)fd);
		}
		if (!ok)
			*why = "write-protection of never-touched pages does not hold";
	} else {
		*why = "write-protection of anonymous memory refused (UFFDIO_REGISTER_MODE_WP)";
	}
	mmf_sys_munmap(m, 2 * page);
	return ok ? 0 : -1;
}

void mmf_barrier_start(struct mmf_map *m, size_t pg)
{
	const struct mmf_config *cfg = mmf_cfg();
	if (cfg->v[MMF_OPT_BARRIER] != MMF_BARRIER_UFFD)
		return;
	asked = 1;
	smap = m;
	page = pg;
	mmf_wpb_page = pg;
	const char *why = NULL;
	if (mmf_mode() < MMF_MODE_SAFE) {
		why = "needs MMFOLD_MODE=safe or lazy";
	} else if (mmf_barrier_open(&ufd, &maps_fd, &why) == 0 && uffd_probe(&why) == 0) {
		/* (mapped: the library's writable segment stays small, see
		 * the Makefile's check-footprint) */
		void *c = mmf_sys_mmap(NULL, MAX_CHUNKS * sizeof(struct chunk) +
					       STALE_MAX * sizeof(struct stale), RW,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		next_fn = mmf_sigchain_fault_fn();
		if (mmf_sys_err((long)c))
			why = "no memory for its tables";
		else if (mmf_wpb_chunks = c, stale = (struct stale *)(mmf_wpb_chunks + MAX_CHUNKS),
			 mmf_sigchain_claim(fault) != 0)
			why = "cannot install the SIGSEGV/SIGBUS handler";
	}
	if (why) {
		if (ufd >= 0)
			mmf_sys_close(ufd);
		ufd = -1;
		why_off = why;
		char buf[300];
		MMF_BUF(b, buf);
		mmf_puts(&b, "mmfold: MMFOLD_BARRIER=uffd: ");
		mmf_puts(&b, why);
		mmf_puts(&b, "; write barriers stay plain mprotect");
		mmf_log(1, buf);
		return;
	}
	fds_publish();
	__atomic_store_n(&mmf_barrier_on, 1, __ATOMIC_RELEASE);
	mmf_log(2, "mmfold: MMFOLD_BARRIER=uffd: write barriers through userfaultfd");
}

void mmf_barrier_report(struct mmf_buf *b, int json)
{
	if (!asked)
		return;
	if (json) {
		mmf_puts(b, ",\"barrier\":{\"uffd\":");
		mmf_puts(b, mmf_barrier_on ? "true" : "false");
		if (why_off) {
			mmf_puts(b, ",\"why\":\"");
			mmf_putjson(b, why_off);
			mmf_putc(b, '"');
		}
		mmf_puts(b, ",\"protected_pages\":");
		mmf_putu(b, LD(mmf_wpb_pages));
		mmf_putc(b, '}');
		return;
	}
	if (mmf_barrier_on) {
		mmf_puts(b, "barrier: uffd, ");
		mmf_putu(b, LD(mmf_wpb_pages));
		mmf_puts(b, " pages write-protected now\n");
	} else {
		mmf_puts(b, "barrier: plain mprotect (MMFOLD_BARRIER=uffd: ");
		mmf_puts(b, why_off ? why_off : "off");
		mmf_puts(b, ")\n");
	}
}
