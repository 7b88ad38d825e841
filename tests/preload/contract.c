/* contract — calls whose effect mmfold's records do not describe, each
 * printed so that the output must be the same with and without mmfold in
 * every mode (run.sh's differential):
 *   mlock: a repeated mlock faults the range in again (after
 *     MADV_DONTNEED_LOCKED, after a shared file shrank and grew, after a
 *     fork shared the pages copy-on-write) or fails past a file's end;
 *   rie: READ_IMPLIES_EXEC is a thread's (a thread keeps it when the thread
 *     that set it clears it; a vfork child's personality() is the parent's
 *     copy of mmfold's state);
 *   droppable: MAP_DROPPABLE memory starts wipe-on-fork and dont-dump and
 *     refuses advice that undoes them (Linux 6.11; older kernels refuse the
 *     mapping type, the same with and without mmfold);
 *   errno: a successful mmap or mremap leaves errno as it was, whatever
 *     tries a placement policy made first;
 *   gap: a reservation placed next to a MAP_GROWSDOWN area keeps out of
 *     its guard gap, so the area still grows;
 *   seccomp: under a filter that refuses mprotect with PROT_EXEC and
 *     madvise(MADV_DODUMP) with EPERM, repeated calls that would change
 *     nothing still get EPERM, and the others still succeed: the filter
 *     installed with syscall(SYS_seccomp), with prctl, and inherited
 *     through execve (mmfold starts under it);
 *   ownsys: under a filter the program installs that traps (SIGSYS,
 *     counted) the system calls it then never makes itself
 *     (madvise(MADV_HUGEPAGE or MADV_COLLAPSE), openat, ioctl, mincore,
 *     fstatfs, an mmap of its own placement), the program's calls that
 *     mmfold would follow with one (a huge reservation and a commit into
 *     it, a large mapping touched and changed many times, a MAP_FIXED
 *     mapping inside a malloc chunk, a file mapping) make none: a filter
 *     may kill a process for one.  Under a filter inherited through
 *     execve that traps ioctl and fstatfs, the last two make none either
 *     (README, "Limits": huge-page advice and placement go on there);
 *   startfilter: a program started under a filter that kills the process
 *     for personality, prctl and getdents64, which it never calls, runs
 *     (mmfold's start-up made them before it looked for a filter);
 *   foreign: a mapping placed with MAP_FIXED inside a chunk glibc's malloc
 *     mapped itself is unmapped by free() (a call mmfold does not see):
 *     calls on the range then fail with ENOMEM;
 *   mremapfail: an mremap that fails with EINVAL after it unmapped its
 *     destination (the vDSO moved to a smaller size): a call on the
 *     destination then fails with ENOMEM;
 *   batch: inside a batch (mmfold.h, weak: absent without mmfold), a call
 *     made at once between queued ones, which it applies first, one of
 *     them failing: its own errno is left as it was;
 *   dontunmap: mremap(MREMAP_DONTUNMAP) clears VM_LOCKED and
 *     VM_LOCKONFAULT on the whole source VMA, pages it did not move too:
 *     under the barrier the read-only VMA mprotect made is the kernel's
 *     whole (not split around the page moved), and mlock2(MLOCK_ONFAULT)
 *     of pages left there locks them again (not skipped as redundant);
 *   lockperm: mlock2(MLOCK_ONFAULT) of a range already so locked, in a
 *     child: after RLIMIT_MEMLOCK is lowered below it and the child enters
 *     a user namespace of its own (capget() then shows CAP_IPC_LOCK, but
 *     the kernel asks the initial namespace) it fails with ENOMEM; under a
 *     filter that kills the process for capget and prlimit64, which the
 *     program never calls, the repeated call still succeeds;
 *   lazylock: under mlockall(MCL_CURRENT | MCL_FUTURE), a PROT_NONE
 *     mapping made read-write is resident at once (the kernel populates
 *     locked memory made accessible: a promotion lazy mode deferred left
 *     it empty); a mapping made with MAP_LOCKED after an munlock, by a
 *     process without CAP_IPC_LOCK whose RLIMIT_MEMLOCK holds the one but
 *     not both, succeeds (a deferred munlock still counted), and so does
 *     any mapping under mlockall(MCL_FUTURE);
 *   lockdrop: locked pages dropped (MADV_DONTNEED_LOCKED), then munlock
 *     and mlock, which faults them back in
 *   lazyorder: personality(READ_IMPLIES_EXEC) and a seccomp filter
 *     refusing mprotect, made while lazy mode defers an earlier promotion
 *   wxdontunmap: mremap(MREMAP_DONTUNMAP) of a page of locked memory next
 *     to a code area mmfold keeps apart (MMFOLD_WX=keep): the unlock covers
 *     the code area too, as without mmfold
 *   thpjoin: an mremap across a mapping mmfold gave huge-page advice and
 *     a neighbour alike in all else, which without mmfold are one VMA:
 *     a small mapping placed next to a committed reservation and touched,
 *     and a neighbour merged at its mapping that the advice of the dense
 *     mapping next to it split off again, untouched, moved growing and
 *     moved shrinking onto a fixed address; the moves succeed and keep
 *     the data. */
#include "common.h"

#define MMFOLD_WEAK
#include "../../include/mmfold.h"

#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/auxv.h>
#include <sys/personality.h>
#include <sys/wait.h>

#ifndef MAP_DROPPABLE
#define MAP_DROPPABLE 0x08
#endif
#ifndef MADV_KEEPONFORK
#define MADV_KEEPONFORK 19
#endif

static char *arena;

static void say(const char *what, long r)
{
	printf("%-44s = %ld%s%s\n", what, r, r < 0 ? " " : "", r < 0 ? ename(errno) : "");
	fflush(stdout);
}

/* The smaps fields of [a, a + len) that the cases compare, and residency. */
static void show(const char *tag, const char *a, size_t len)
{
	size_t blen;
	char *buf = read_file("/proc/self/smaps", &blen);
	uintptr_t s = (uintptr_t)a, e = s + len;
	int in = 0;
	printf("-- %s\n", tag);
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
		uintptr_t vs, ve;
		char perm[8];
		if (sscanf(l, "%lx-%lx %7s", &vs, &ve, perm) == 3) {
			in = vs < e && ve > s;
			if (in)
				printf("  [%+ld,%+ld) %s\n", (long)(vs - s) / (long)PG,
				       (long)(ve - s) / (long)PG, perm);
		} else if (in && (!strncmp(l, "Rss:", 4) || !strncmp(l, "Locked:", 7) ||
				  !strncmp(l, "Shared_Dirty:", 13) || !strncmp(l, "Private_Dirty:", 14))) {
			printf("    %s\n", l);
		} else if (in && !strncmp(l, "VmFlags:", 8)) {
			/* the flags this test is about */
			static const char *const keep[] = {"ex", "lo", "dc", "dd", "wf", NULL};
			printf("    flags:");
			for (int i = 0; keep[i]; i++) {
				char k[8];
				snprintf(k, sizeof k, " %s", keep[i]);
				if (strstr(l + 8, k))
					printf("%s", k);
			}
			printf("\n");
		}
	}
	free(buf);
	unsigned char v[64];
	size_t n = len / PG > sizeof v ? sizeof v : len / PG;
	if (mincore((void *)a, n * PG, v) == 0) {
		printf("  mincore ");
		for (size_t i = 0; i < n; i++)
			putchar('0' + (v[i] & 1));
		putchar('\n');
	}
	fflush(stdout);
}

/* Waits for child p and prints how it ended. */
static void child_status(pid_t p)
{
	int st;
	waitpid(p, &st, 0);
	printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static char *at(size_t page, size_t n, int prot, int flags, int fd)
{
	char *p = mmap(arena + page * PG, n * PG, prot, flags | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED) {
		printf("mmap at page %zu: %s\n", page, ename(errno));
		exit(3);
	}
	return p;
}

static int tmpfile_of(size_t len)
{
	int fd = memfd_create("contract", 0);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
		printf("memfd: %s\n", ename(errno));
		exit(3);
	}
	return fd;
}

static void case_mlock(void)
{
	printf("== mlock\n");
	char *a = at(0, 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	memset(a, 1, 4 * PG);
	say("mlock", mlock(a, 4 * PG));
	say("madvise(DONTNEED_LOCKED)", madvise(a, 4 * PG, MADV_DONTNEED_LOCKED));
	say("mlock again", mlock(a, 4 * PG));
	show("anonymous, locked again", a, 4 * PG);

	int fd = tmpfile_of(4 * PG);
	char *f = at(8, 4, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
	memset(f, 2, 4 * PG);
	say("mlock shared", mlock(f, 4 * PG));
	say("ftruncate 0, then 4 pages", ftruncate(fd, 0) | ftruncate(fd, (off_t)(4 * PG)));
	say("mlock shared again", mlock(f, 4 * PG));
	show("shared, locked again", f, 4 * PG);
	say("ftruncate 1 page", ftruncate(fd, (off_t)PG));
	say("mlock past the end", mlock(f, 4 * PG));
	say("mlock2 ONFAULT past the end", mlock2(f, 4 * PG, MLOCK_ONFAULT));
	say("ftruncate 4 pages", ftruncate(fd, (off_t)(4 * PG)));
	say("mlock whole", mlock(f, 4 * PG));
	say("munlock", munlock(f, 4 * PG));
	close(fd);

	/* a child shares the pages copy-on-write: mlock breaks the sharing */
	char *c = at(16, 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	memset(c, 3, 4 * PG);
	say("mlock private", mlock(c, 4 * PG));
	int pp[2];
	if (pipe(pp) != 0)
		exit(3);
	pid_t p = fork();
	if (p == 0) {
		char x;
		if (read(pp[0], &x, 1) < 0)
			_exit(1);
		_exit(0);
	}
	say("mlock private again, child alive", mlock(c, 4 * PG));
	show("private after fork, locked again", c, 4 * PG);
	if (write(pp[1], "x", 1) != 1)
		exit(3);
	waitpid(p, NULL, 0);
	say("munlock private", munlock(c, 4 * PG));
	say("munlock anonymous", munlock(a, 4 * PG));
}

static pthread_barrier_t rie_b;

static void *rie_thread(void *x)
{
	char *a = x;
	pthread_barrier_wait(&rie_b); /* the main thread cleared its own */
	printf("thread has READ_IMPLIES_EXEC: %d\n",
	       !!(personality(0xffffffff) & READ_IMPLIES_EXEC));
	say("thread: mprotect(R) of a read-only page", mprotect(a, PG, PROT_READ));
	show("the thread's page", a, PG);
	return NULL;
}

static void case_rie(void)
{
	printf("== rie\n");
	int old = personality(0xffffffff);
	char *a = at(24, 1, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	char *b = at(26, 1, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	say("mprotect(R) (a no-op)", mprotect(a, PG, PROT_READ));
	pthread_barrier_init(&rie_b, NULL, 2);
	say("personality(+READ_IMPLIES_EXEC)", personality(old | READ_IMPLIES_EXEC) == old ? 0 : -1);
	pthread_t t;
	pthread_create(&t, NULL, rie_thread, a);
	say("personality(old)", personality(old) == (old | READ_IMPLIES_EXEC) ? 0 : -1);
	pthread_barrier_wait(&rie_b);
	pthread_join(t, NULL);

	/* a vfork child clears it in the parent's copy of mmfold */
	say("personality(+READ_IMPLIES_EXEC)", personality(old | READ_IMPLIES_EXEC) == old ? 0 : -1);
	pid_t p = vfork();
	if (p == 0) {
		personality(old);
		_exit(0);
	}
	waitpid(p, NULL, 0);
	say("mprotect(R) after a vfork child cleared it", mprotect(b, PG, PROT_READ));
	show("the parent's page", b, PG);
	personality(old);
}

static void case_droppable(void)
{
	printf("== droppable\n");
	char *d = mmap(arena + 32 * PG, 2 * PG, PROT_READ | PROT_WRITE,
		       MAP_DROPPABLE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (d == MAP_FAILED) {
		printf("MAP_DROPPABLE refused: %s\n", ename(errno));
		return;
	}
	show("droppable", d, 2 * PG);
	say("madvise(KEEPONFORK)", madvise(d, 2 * PG, MADV_KEEPONFORK));
	say("madvise(DODUMP)", madvise(d, 2 * PG, MADV_DODUMP));
	say("madvise(WIPEONFORK)", madvise(d, 2 * PG, MADV_WIPEONFORK));
	say("madvise(DONTDUMP)", madvise(d, 2 * PG, MADV_DONTDUMP));
	show("droppable after", d, 2 * PG);
}

static void case_errno(void)
{
	printf("== errno\n");
	/* reservations large enough to be aligned, between mappings glibc's
	 * malloc makes itself (unseen by an interposer) */
	for (int i = 0; i < 4; i++) {
		errno = 0;
		void *r = mmap(NULL, 2 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		printf("reservation %d: %s, errno %s\n", i, r == MAP_FAILED ? "failed" : "ok",
		       errno ? ename(errno) : "0");
		void *m = malloc(8 << 20);
		printf("malloc %d: %s\n", i, m ? "ok" : "failed");
		errno = 0;
		char *g = r == MAP_FAILED ? MAP_FAILED : mremap(r, 2 << 20, 4 << 20, MREMAP_MAYMOVE);
		printf("mremap %d: %s, errno %s\n", i, g == MAP_FAILED ? "failed" : "ok",
		       errno ? ename(errno) : "0");
	}
}

static volatile sig_atomic_t faulted;
static sigjmp_buf jb;
static void on_fault(int sig)
{
	(void)sig;
	faulted = 1;
	siglongjmp(jb, 1);
}

static void case_gap(void)
{
	printf("== gap\n");
	/* a growsdown area where the kernel's own search would not reach
	 * (a hint in free space), then a reservation with no address */
	char *hint = (char *)0x100000000000UL;
	char *g = mmap(hint, 4 * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0);
	printf("growsdown area at its hint: %d\n", g == hint);
	if (g == MAP_FAILED)
		return;
	char *r = mmap(NULL, 2 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	printf("reservation %s; in the area's guard gap: %s\n", r == MAP_FAILED ? "failed" : "ok",
	       r != MAP_FAILED && r + (2 << 20) <= g && g - (r + (2 << 20)) < (1 << 20) ? "yes" : "no");
	struct sigaction sa = {.sa_handler = on_fault}, o1, o2;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGSEGV, &sa, &o1);
	sigaction(SIGBUS, &sa, &o2);
	int grown = 0;
	for (int i = 1; i <= 64; i++) {
		faulted = 0;
		if (sigsetjmp(jb, 1) == 0)
			((volatile char *)g)[-(long)(i * PG)] = 1;
		if (faulted)
			break;
		grown = i;
	}
	sigaction(SIGSEGV, &o1, NULL);
	sigaction(SIGBUS, &o2, NULL);
	printf("the area grew by %d of 64 pages\n", grown);
}

#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#endif

/* The filters' first four steps: calls of another architecture pass; the
 * system call's number is loaded. */
#define FILTER_HEAD                                                                    \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),       \
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),                  \
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                          \
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))

/* mprotect and pkey_mprotect with PROT_EXEC, and madvise(MADV_DODUMP):
 * EPERM (args[2]'s low word, little-endian) */
static int install_filter(int how)
{
	struct sock_filter f[] = {
		FILTER_HEAD,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pkey_mprotect, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_madvise, 3, 6),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 3, 4),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_DODUMP, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	if (how == 0)
		return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* The calls, under the filter. */
static void filtered_calls(void)
{
	char *x = at(34, 1, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	char *r = at(36, 1, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	char *d = at(38, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	for (int i = 0; i < 2; i++) {
		say("mprotect(RX) of RX memory", mprotect(x, PG, PROT_READ | PROT_EXEC));
		say("pkey_mprotect(RX, -1) of RX memory",
		    syscall(SYS_pkey_mprotect, x, PG, PROT_READ | PROT_EXEC, -1));
		say("mprotect(R) of R memory", mprotect(r, PG, PROT_READ));
		say("madvise(DODUMP) of dumped memory", madvise(d, PG, MADV_DODUMP));
	}
	say("madvise(DONTDUMP)", madvise(d, PG, MADV_DONTDUMP));
	say("madvise(DONTDUMP) again", madvise(d, PG, MADV_DONTDUMP));
	say("madvise(DODUMP) of undumped memory", madvise(d, PG, MADV_DODUMP));
	show("after the filtered calls", x, 5 * PG);
}

static void case_seccomp(const char *self)
{
	printf("== seccomp\n");
	for (int how = 0; how < 3; how++) {
		fflush(stdout);
		pid_t p = fork();
		if (p == 0) {
			printf("-- filter installed %s\n",
			       how == 0 ? "with syscall(SYS_seccomp)" : how == 1 ? "with prctl" : "before execve");
			if (install_filter(how == 0 ? 0 : 1) != 0) {
				printf("cannot install the filter: %s\n", ename(errno));
				_exit(0);
			}
			if (how == 2) {
				fflush(stdout);
				execl(self, self, "seccomp-inherited", (char *)NULL);
				printf("execl: %s\n", ename(errno));
				_exit(1);
			}
			filtered_calls();
			_exit(0);
		}
		child_status(p);
	}
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#define RESERVATION (4ul << 20)

/* args[i]'s low and high words (little-endian) */
#define ARG_LO(i) (offsetof(struct seccomp_data, args[i]))
#define ARG_HI(i) (offsetof(struct seccomp_data, args[i]) + 4)

static volatile sig_atomic_t ntraps;
static volatile int trapped[8];

/* The call is not made; it returns -ENOSYS as on a kernel without it. */
static void on_sigsys(int sig, siginfo_t *si, void *uc_)
{
	(void)sig;
	ucontext_t *uc = uc_;
	if (ntraps < 8)
		trapped[ntraps] = si->si_syscall;
	ntraps++;
#if defined(__x86_64__)
	uc->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
#elif defined(__aarch64__)
	uc->uc_mcontext.regs[0] = (unsigned long)-ENOSYS;
#endif
}

static int trap_sigsys(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	return sigaction(SIGSYS, &sa, NULL);
}

/* all: the full set; else ioctl and fstatfs only (what ld.so and glibc
 * do not call when a program starts), and fstatfs alone under
 * MMFOLD_BARRIER=uffd, whose barrier (opt-in: README, "Limits") sets
 * itself up with ioctl calls at start-up */
static int install_trap_filter(int all)
{
	enum { TRAP = SECCOMP_RET_TRAP, ALLOW = SECCOMP_RET_ALLOW };
	const char *barrier = getenv("MMFOLD_BARRIER");
	unsigned ioctl_nr = barrier && !strcmp(barrier, "uffd") ? ~0u : (unsigned)SYS_ioctl;
	struct sock_filter few[] = {
		FILTER_HEAD,
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ioctl_nr, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fstatfs, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, ALLOW),
		BPF_STMT(BPF_RET | BPF_K, TRAP),
	};
	struct sock_filter f[] = {
		/* 0-3 */ FILTER_HEAD,
		/* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_madvise, 6, 0),
		/* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 10, 0),
		/* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 8, 0),
		/* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 7, 0),
		/* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mincore, 6, 0),
		/* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fstatfs, 5, 0),
		/* 10 */ BPF_STMT(BPF_RET | BPF_K, ALLOW),
		/* madvise: the two huge-page advices */
		/* 11 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
		/* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_HUGEPAGE, 2, 0),
		/* 13 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_COLLAPSE, 1, 0),
		/* 14 */ BPF_STMT(BPF_RET | BPF_K, ALLOW),
		/* 15 */ BPF_STMT(BPF_RET | BPF_K, TRAP),
		/* mmap: MAP_FIXED ones and the program's own (no address; a
		   PROT_NONE one only of the reservation's length) pass */
		/* 16 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(3)),
		/* 17 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_FIXED | MAP_FIXED_NOREPLACE, 9, 0),
		/* 18 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
		/* 19 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 8),
		/* 20 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_HI(0)),
		/* 21 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 6),
		/* 22 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
		/* 23 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_NONE, 0, 3),
		/* 24 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)),
		/* 25 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)RESERVATION, 1, 2),
		/* 26 */ BPF_STMT(BPF_RET | BPF_K, ALLOW),
		/* 27 */ BPF_STMT(BPF_RET | BPF_K, ALLOW),
		/* 28 */ BPF_STMT(BPF_RET | BPF_K, TRAP),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (!all) {
		prog.len = sizeof few / sizeof few[0];
		prog.filter = few;
	}
	if (trap_sigsys() != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* What mmfold follows with calls of its own without a filter, under one:
 * all, or the two that keep its records exact. */
static void ownsys_calls(int all, int fd)
{
	if (all) {
		char *r = mmap(NULL, RESERVATION, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		printf("reservation: %s\n", r == MAP_FAILED ? ename(errno) : "ok");
		if (r != MAP_FAILED) {
			char *c = mmap(r, RESERVATION / 2, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			printf("commit: %s\n", c == r ? "ok" : ename(errno));
			if (c == r)
				memset(c, 1, RESERVATION / 2);
		}
		size_t big = 8ul << 20;
		char *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		printf("large mapping: %s\n", m == MAP_FAILED ? ename(errno) : "ok");
		if (m != MAP_FAILED) {
			memset(m, 1, big);
			int bad = 0;
			for (int i = 0; i < 400; i++)
				bad += mprotect(m, PG, (i & 1) ? PROT_READ | PROT_WRITE : PROT_NONE) != 0;
			printf("400 changes of its first page: %d failed\n", bad);
		}
	}
	{
		char *k = malloc(1 << 20);
		char *kp = (char *)(((uintptr_t)k + PG - 1) & ~(uintptr_t)(PG - 1));
		char *f = mmap(kp, 4 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		printf("mmap(MAP_FIXED) inside a malloc chunk: %s\n", f == kp ? "ok" : ename(errno));
		char *fm = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, fd, 0);
		printf("file mapping: %s\n", fm == MAP_FAILED ? ename(errno) : "ok");
		say("mprotect(R) of the file mapping", mprotect(fm, 2 * PG, PROT_READ));
		printf("system calls the program did not make: %d", (int)ntraps);
		for (int i = 0; i < ntraps && i < 8; i++)
			printf(" %d", trapped[i]);
		printf("\n");
	}
}

static void case_ownsys(const char *self)
{
	printf("== ownsys\n");
	int fd = tmpfile_of(2 * PG);
	for (int all = 1; all >= 0; all--) {
		fflush(stdout);
		pid_t p = fork();
		if (p == 0) {
			printf("-- %s\n", all ? "installed by the program" : "inherited through execve");
			if (install_trap_filter(all) != 0) {
				printf("cannot install the filter: %s\n", ename(errno));
				_exit(0);
			}
			if (all) {
				ownsys_calls(1, fd);
				_exit(0);
			}
			char fds[16];
			snprintf(fds, sizeof fds, "%d", fd);
			fflush(stdout);
			execl(self, self, "ownsys-inherited", fds, (char *)NULL);
			printf("execl: %s\n", ename(errno));
			_exit(1);
		}
		child_status(p);
	}
	close(fd);
}

static void case_startfilter(const char *self)
{
	printf("== startfilter\n");
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		struct sock_filter f[] = {
			FILTER_HEAD,
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_personality, 2, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 1, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getdents64, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {sizeof f / sizeof f[0], f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
			printf("cannot install the filter: %s\n", ename(errno));
			_exit(0);
		}
		execl(self, self, "startfilter-exec", (char *)NULL);
		printf("execl: %s\n", ename(errno));
		_exit(1);
	}
	child_status(p);
}

/* Under startfilter's filter, after execve. */
static void startfilter_exec(void)
{
	char *a = at(50, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	say("mprotect(R)", mprotect(a, PG, PROT_READ));
	say("mprotect(R) again", mprotect(a, PG, PROT_READ));
	say("madvise(DONTDUMP)", madvise(a, 2 * PG, MADV_DONTDUMP));
	say("madvise(DONTDUMP) again", madvise(a, 2 * PG, MADV_DONTDUMP));
}

static void case_foreign(void)
{
	printf("== foreign\n");
	char *m = malloc(1 << 20); /* above M_MMAP_THRESHOLD: a mapping of its own */
	char *p = (char *)(((uintptr_t)m + PG - 1) & ~(uintptr_t)(PG - 1));
	char *f = mmap(p, 4 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	printf("mmap(MAP_FIXED) inside the chunk: %s\n", f == p ? "ok" : ename(errno));
	say("mprotect(R)", mprotect(p, 4 * PG, PROT_READ));
	free(m);
	say("after free: mprotect(R)", mprotect(p, 4 * PG, PROT_READ));
	say("after free: madvise(DOFORK)", madvise(p, 4 * PG, MADV_DOFORK));
	say("after free: munlock", munlock(p, 4 * PG));
}

static void case_mremapfail(void)
{
	printf("== mremapfail\n");
	fflush(stdout);
	pid_t p = fork(); /* the vDSO is moved only in a child, should it be */
	if (p == 0) {
		uintptr_t v = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
		char *d = at(48, 8, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1);
		say("mprotect(R) of the destination", mprotect(d, 8 * PG, PROT_READ));
		uintptr_t vs = 0, ve = 0;
		FILE *f = fopen("/proc/self/maps", "r");
		char line[256];
		while (f && fgets(line, sizeof line, f))
			if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &vs, &ve) == 2)
				break;
		if (f)
			fclose(f);
		if (!v || v != vs || ve - vs < 2 * PG) {
			printf("no vDSO of two pages or more\n");
			_exit(0);
		}
		void *r = mremap((void *)vs, ve - vs, PG, MREMAP_MAYMOVE | MREMAP_FIXED, d);
		printf("mremap(vDSO, smaller, MREMAP_FIXED onto the destination): %s\n",
		       r == MAP_FAILED ? ename(errno) : "moved");
		say("mprotect(R) of the destination", mprotect(d, 8 * PG, PROT_READ));
		_exit(0);
	}
	child_status(p);
}

static void case_batch(void)
{
	printf("== batch\n");
	char *x = at(56, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	char *z = at(58, 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	if (munmap(arena + 60 * PG, PG) != 0) /* a hole: a queued call there fails */
		exit(3);
	if (mmfold_batch_begin)
		mmfold_batch_begin();
	say("mprotect(R)", mprotect(x, PG, PROT_READ));
	int r = mprotect(arena + 60 * PG, PG, PROT_READ);
	printf("mprotect(R) of the hole: %s\n", r == 0 || errno == ENOMEM ? "0 or ENOMEM" : ename(errno));
	errno = 0;
	r = madvise(z, PG, MADV_DONTFORK);
	printf("madvise(DONTFORK) between them = %d, errno %s\n", r, errno ? ename(errno) : "0");
	if (mmfold_batch_end) {
		struct mmfold_batch_error e;
		mmfold_batch_end(&e);
	}
}

/* Each page's protection and whether it is locked, as the program sees
 * it (under the barrier, common.h translates write-protection). */
static void show_locked(const char *tag, const char *a, size_t n)
{
	struct pstate st[8];
	if (n > 8 || page_states((uintptr_t)a, n, st) != 0)
		exit(3);
	printf("-- %s:", tag);
	for (size_t i = 0; i < n; i++)
		printf(" %.3s%s", st[i].perm, strstr(st[i].flags, "lo") ? "+lo" : "");
	printf("\n");
}

static void case_dontunmap(void)
{
	printf("== dontunmap\n");
	char *a = at(40, 6, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	char *d = arena + 47 * PG; /* page 46 stays the arena's PROT_NONE */
	say("mlock2(ONFAULT) pages 0-5", mlock2(a, 6 * PG, MLOCK_ONFAULT));
	say("mprotect(R) pages 2-4", mprotect(a + 2 * PG, 3 * PG, PROT_READ));
	void *r = mremap(a + 4 * PG, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, d);
	printf("mremap(page 4, MREMAP_DONTUNMAP): %s\n", r == MAP_FAILED ? ename(errno) : "moved");
	show_locked("after the move", a, 6);
	r = mremap(a, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, d);
	printf("mremap(page 0, MREMAP_DONTUNMAP): %s\n", r == MAP_FAILED ? ename(errno) : "moved");
	say("mlock2(ONFAULT) page 1", mlock2(a + PG, PG, MLOCK_ONFAULT));
	say("mlock2(ONFAULT) pages 2-3", mlock2(a + 2 * PG, 2 * PG, MLOCK_ONFAULT));
	show_locked("locked again", a, 6);
	say("munlock pages 0-5", munlock(a, 6 * PG));
}

/* Kills the process for capget and prlimit64 (getrlimit's system call). */
static int install_kill_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_capget, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prlimit64, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* n pages of a new mapping (the arena's pages may have lost their records
 * in the cases before). */
static char *fresh(size_t n)
{
	char *a = mmap(NULL, n * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED) {
		printf("mmap: %s\n", ename(errno));
		_exit(3);
	}
	return a;
}

/* Which of n pages at a are resident. */
static void resident(const char *what, const char *a, size_t n)
{
	unsigned char v[16];
	if (n > sizeof v || mincore((void *)a, n * PG, v) != 0)
		exit(3);
	printf("%s: resident ", what);
	for (size_t i = 0; i < n; i++)
		putchar('0' + (v[i] & 1));
	putchar('\n');
}

/* Calls that change what the kernel does with a later mprotect, made
 * while lazy mode defers one the program made before them: the deferred
 * promotion must come out as it would have then.  READ_IMPLIES_EXEC would
 * make a PROT_READ one executable; a seccomp filter refusing mprotect
 * would refuse it (the write then faults).  Each in a child: both last. */
static void case_lazyorder(void)
{
	printf("== lazyorder\n");
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		char *a = fresh(2);
		memset(a, 1, 2 * PG);
		say("mprotect(NONE)", mprotect(a, 2 * PG, PROT_NONE));
		say("mprotect(R)", mprotect(a, 2 * PG, PROT_READ));
		say("personality(READ_IMPLIES_EXEC)", personality(PER_LINUX | READ_IMPLIES_EXEC) < 0 ? -1 : 0);
		show_locked("after it", a, 2);
		fflush(stdout);
		_exit(0);
	}
	child_status(p);
	p = fork();
	if (p == 0) {
		char *a = fresh(4);
		memset(a, 1, 4 * PG);
		say("mprotect(R)", mprotect(a, 4 * PG, PROT_READ));
		say("mprotect(RW)", mprotect(a, 4 * PG, PROT_READ | PROT_WRITE));
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {sizeof f / sizeof f[0], f};
		say("no_new_privs", prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
		say("filter: mprotect fails with EPERM", prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog));
		struct sigaction sa = {.sa_handler = on_fault};
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_NODEFER;
		sigaction(SIGSEGV, &sa, NULL);
		int w = 0;
		for (int i = 0; i < 4; i++) {
			faulted = 0;
			if (sigsetjmp(jb, 1) == 0)
				((volatile char *)a)[i * PG] = 2;
			w += !faulted;
		}
		printf("pages written: %d of 4\n", w);
		fflush(stdout);
		_exit(0);
	}
	child_status(p);
}

/* Locked pages dropped (MADV_DONTNEED_LOCKED), then munlock and mlock:
 * the mlock faults them back in, also where lazy mode let the munlock
 * wait (it cancels such pairs only while no locked page was dropped). */
static void case_lockdrop(void)
{
	printf("== lockdrop\n");
	char *a = fresh(8);
	memset(a, 1, 8 * PG);
	say("mlock", mlock(a, 8 * PG));
	say("madvise(DONTNEED_LOCKED)", madvise(a, 8 * PG, 24 /* MADV_DONTNEED_LOCKED */));
	say("munlock", munlock(a, 8 * PG));
	say("mlock again", mlock(a, 8 * PG));
	resident("after it", a, 8);
	say("munlock", munlock(a, 8 * PG));
	munmap(a, 8 * PG);
}

/* A code area flipped RW <-> RX, which mmfold keeps in a VMA of its own
 * (MMFOLD_WX=keep), in memory locked whole: a move of another page of it
 * with MREMAP_DONTUNMAP unlocks the whole VMA it leaves, the code area's
 * pages with it (and MADV_DONTNEED, which fails on locked pages with
 * EINVAL, then succeeds there). */
static void case_wxdontunmap(void)
{
	printf("== wxdontunmap\n");
	char *m = fresh(8);
	memset(m, 1, 8 * PG);
	for (int i = 0; i < 4; i++)
		if (mprotect(m, 4 * PG, PROT_READ | PROT_EXEC) != 0 ||
		    mprotect(m, 4 * PG, PROT_READ | PROT_WRITE) != 0)
			exit(3);
	say("mprotect(RW) pages 0-7", mprotect(m, 8 * PG, PROT_READ | PROT_WRITE));
	say("mlock pages 0-7", mlock(m, 8 * PG));
	char *d = fresh(1);
	void *r = mremap(m + 7 * PG, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, d);
	printf("mremap(page 7, MREMAP_DONTUNMAP): %s\n", r == MAP_FAILED ? ename(errno) : "moved");
	show_locked("after the move", m, 8);
	say("madvise(DONTNEED) pages 0-3", madvise(m, 4 * PG, MADV_DONTNEED));
	munlock(m, 8 * PG);
	munmap(m, 8 * PG);
	munmap(d, PG);
}

static void case_lockperm(void)
{
	printf("== lockperm\n");
	pid_t p = fork();
	if (p == 0) {
		char *a = fresh(4);
		say("mlock2(ONFAULT)", mlock2(a, 4 * PG, MLOCK_ONFAULT));
		struct rlimit rl = {PG, PG};
		say("setrlimit(MEMLOCK, 1 page)", setrlimit(RLIMIT_MEMLOCK, &rl));
		/* the answer is the same with and without mmfold where the
		 * kernel refuses user namespaces */
		printf("unshare(CLONE_NEWUSER) %s\n", unshare(CLONE_NEWUSER) == 0 ? "done" : "refused");
		say("mlock2(ONFAULT) again", mlock2(a, 4 * PG, MLOCK_ONFAULT));
		say("mlock2(ONFAULT) once more", mlock2(a, 4 * PG, MLOCK_ONFAULT));
		fflush(stdout);
		_exit(0);
	}
	child_status(p);
	p = fork();
	if (p == 0) {
		char *a = fresh(4);
		say("mlock2(ONFAULT)", mlock2(a, 4 * PG, MLOCK_ONFAULT));
		say("kill filter", install_kill_filter());
		say("mlock2(ONFAULT) under it", mlock2(a, 4 * PG, MLOCK_ONFAULT));
		say("mlock2(ONFAULT) once more", mlock2(a, 4 * PG, MLOCK_ONFAULT));
		fflush(stdout);
		_exit(0);
	}
	child_status(p);
}


static void case_lazylock(void)
{
	printf("== lazylock\n");
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		say("mlockall(CURRENT | FUTURE)", mlockall(MCL_CURRENT | MCL_FUTURE));
		char *a = mmap(NULL, 4 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		say("mprotect(RW)", mprotect(a, 4 * PG, PROT_READ | PROT_WRITE));
		resident("after it", a, 4);
		say("mprotect(R)", mprotect(a, 4 * PG, PROT_READ));
		say("mprotect(RW) again", mprotect(a, 4 * PG, PROT_READ | PROT_WRITE));
		resident("after that", a, 4);
		fflush(stdout);
		_exit(0);
	}
	child_status(p);
	p = fork();
	if (p == 0) {
		struct rlimit rl = {16 * PG, 16 * PG};
		say("setrlimit(MEMLOCK, 16 pages)", setrlimit(RLIMIT_MEMLOCK, &rl));
		struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct d[2];
		memset(d, 0, sizeof d);
		say("capset(none)", syscall(SYS_capset, &h, d));
		char *a = fresh(12);
		say("mlock 12 pages", mlock(a, 12 * PG));
		say("munlock them", munlock(a, 12 * PG));
		char *b = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_LOCKED, -1, 0);
		printf("mmap(MAP_LOCKED) 8 pages: %s\n", b == MAP_FAILED ? ename(errno) : "mapped");
		if (b != MAP_FAILED)
			munmap(b, 8 * PG);
		/* the same with every new mapping locked */
		say("mlockall(FUTURE)", mlockall(MCL_FUTURE));
		char *c = fresh(12);
		say("munlock 12 new pages", munlock(c, 12 * PG));
		b = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		printf("mmap 8 pages: %s\n", b == MAP_FAILED ? ename(errno) : "mapped");
		fflush(stdout);
		_exit(0);
	}
	child_status(p);
}

/* mremap [p, p+len) to twice its size and show what came of it. */
static void grow(const char *what, char *p, size_t len, size_t probe)
{
	errno = 12345; /* a call that succeeds leaves errno alone */
	char *m = mremap(p, len, 2 * len, MREMAP_MAYMOVE);
	if (m == MAP_FAILED) {
		printf("mremap %s: %s\n", what, ename(errno));
		return;
	}
	printf("mremap %s: moved, first byte %d, byte %zu %d, errno %s\n", what, m[0], probe, m[probe],
	       errno == 12345 ? "unchanged" : ename(errno));
	munmap(m, 2 * len);
}

/* A mapping of r bytes at p, filled, and one of n bytes right after it. */
static char *dense_pair(const char *what, char *p, size_t r, size_t n, int fill)
{
	int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
	char *c = mmap(p, r, PROT_READ | PROT_WRITE, fl, -1, 0);
	char *d = mmap(p + r, n, PROT_READ | PROT_WRITE, fl, -1, 0);
	say(what, c == p && d == p + r ? 0 : -1);
	if (c != p)
		exit(3);
	memset(c, fill, r);
	return c;
}

static void case_thpjoin(void)
{
	printf("== thpjoin\n");
	const size_t R = 4u << 20, S = 16 * PG;
	char *room = mmap(NULL, 6 * R, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (room == MAP_FAILED || munmap(room, 6 * R) != 0)
		exit(3);
	/* a reservation (advised at once), committed, touched at its end;
	 * then a small mapping right after it, touched */
	char *a = mmap(room, R, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	say("reservation", a == room ? 0 : -1);
	say("commit", mprotect(a, R, PROT_READ | PROT_WRITE));
	a[R - PG] = 1;
	char *b = mmap(a + R, S, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		       -1, 0);
	say("neighbour after it", b == a + R ? 0 : -1);
	b[0] = 2;
	grow("of its last page and the neighbour", a + R - PG, PG + S, PG);
	munmap(a, R - PG);
	/* twice: a large mapping and, mapped right after it, a small one
	 * (one VMA both ways); the large one touched whole, so that mmfold
	 * finds it dense after some forwarded calls and advises it, the small
	 * one not touched.  The second pair is moved shrinking onto a fixed
	 * address (older kernels unmap the source's tail and the destination
	 * before they look at the source's VMAs). */
	char *c = dense_pair("large and small", room + 2 * R, R, S, 3);
	char *f = dense_pair("large and small again", room + 4 * R, R, S, 4);
	char *t = fresh(1);
	for (int i = 0; i < 64; i++)
		if (mprotect(t, PG, i & 1 ? PROT_READ | PROT_WRITE : PROT_READ) != 0)
			exit(3);
	munmap(t, PG);
	grow("of the large and the small one", c, R + S, R - 1);
	char *dst = fresh(2 * S / PG); /* room for the PG + S / 2 moved */
	errno = 12345;
	char *m = mremap(f + R - PG, PG + S, PG + S / 2, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	if (m == MAP_FAILED)
		printf("mremap shrinking onto a fixed address: %s\n", ename(errno));
	else
		printf("mremap shrinking onto a fixed address: %s, first byte %d, errno %s\n",
		       m == dst ? "moved" : "elsewhere", m[0], errno == 12345 ? "unchanged" : ename(errno));
	munmap(dst, 2 * S);
	munmap(f, R + S);
}

int main(int argc, char **argv)
{
	watchdog(60);
	setvbuf(stdout, NULL, _IOLBF, 0);
	arena = (char *)reserve_arena(64);
	const char *only = argc > 1 ? argv[1] : NULL;
	/* first: the skip it tests needs a process whose records earlier
	 * cases left alone */
	if (!only || !strcmp(only, "lockperm"))
		case_lockperm();
	if (!only || !strcmp(only, "mlock"))
		case_mlock();
	if (!only || !strcmp(only, "rie"))
		case_rie();
	if (!only || !strcmp(only, "droppable"))
		case_droppable();
	if (!only || !strcmp(only, "errno"))
		case_errno();
	if (!only || !strcmp(only, "gap"))
		case_gap();
	if (!only || !strcmp(only, "seccomp"))
		case_seccomp(argv[0][0] == '/' ? argv[0] : "/proc/self/exe");
	if (!only || !strcmp(only, "ownsys"))
		case_ownsys(argv[0][0] == '/' ? argv[0] : "/proc/self/exe");
	if (!only || !strcmp(only, "startfilter"))
		case_startfilter(argv[0][0] == '/' ? argv[0] : "/proc/self/exe");
	if (!only || !strcmp(only, "foreign"))
		case_foreign();
	if (!only || !strcmp(only, "mremapfail"))
		case_mremapfail();
	if (!only || !strcmp(only, "batch"))
		case_batch();
	if (!only || !strcmp(only, "dontunmap"))
		case_dontunmap();
	if (!only || !strcmp(only, "lazylock"))
		case_lazylock();
	if (!only || !strcmp(only, "thpjoin"))
		case_thpjoin();
	if (!only || !strcmp(only, "wxdontunmap"))
		case_wxdontunmap();
	if (!only || !strcmp(only, "lazyorder"))
		case_lazyorder();
	if (!only || !strcmp(only, "lockdrop"))
		case_lockdrop();
	if (only && !strcmp(only, "startfilter-exec"))
		startfilter_exec();
	if (only && !strcmp(only, "seccomp-inherited"))
		filtered_calls();
	if (only && !strcmp(only, "ownsys-inherited") && argc > 2 && trap_sigsys() == 0)
		ownsys_calls(0, atoi(argv[2]));
	return 0;
}
