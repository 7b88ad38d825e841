/* uffd semantics|proc|die — what a program sees of a write barrier made
 * with mprotect, for MMFOLD_BARRIER=uffd (README.md, "Write barriers").
 *
 * semantics: prints what every step does, so the output must be the same
 * with and without mmfold in every mode:
 *   - pages never touched, read once, written once, made read-only: each
 *     write faults with SIGSEGV/SEGV_ACCERR at the written address (SIGBUS
 *     never reaches the program), a read() into one fails with EFAULT, an
 *     mprotect(RW) makes the page writable again;
 *   - each other call on read-only pages (another protection, munmap,
 *     mremap, madvise, mlock, mseal, MADV_POPULATE_WRITE) answers as the
 *     kernel does for read-only pages, and what the pages do afterwards;
 *   - fork: the child's writes to the read-only pages fault as the
 *     parent's do, and a barrier the child makes works as the parent's;
 *   - children that die of the fault: no handler, a handler that resets
 *     itself (SA_RESETHAND), SIGSEGV blocked, SIGSEGV ignored.
 * proc: the /proc view of read-only pages (maps protection, smaps' uw flag,
 *   pagemap's uffd-wp bit, mincore), untranslated: run.sh compares it with
 *   the documented differences.
 * die: a write to a read-only page without a handler (the shell sees 139).
 * kernel: whether this kernel gives this process what the barrier needs
 *   (userfaultfd, UFFD_FEATURE_SIGBUS and WP_UNPOPULATED, write-protection
 *   of an anonymous page), asked without mmfold: run.sh fails the uffd
 *   tests when it does and the library still reports the barrier off.
 * deny PROG [ARGS]: runs PROG with userfaultfd refused by a seccomp filter
 *   (EPERM), as a container's profile may: mmfold must keep plain mprotect. */
#include "common.h"

#include <linux/close_range.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED /* Debian 12's headers are older than 6.4 */
#define UFFD_FEATURE_WP_UNPOPULATED (1u << 13)
#endif
#ifndef SYS_userfaultfd
#define SYS_userfaultfd 323
#endif

static int deny(char **argv)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		perror("seccomp");
		return 2;
	}
	execv(argv[0], argv);
	perror("execv");
	return 2;
}

#define NP 12

static sigjmp_buf jb;
static volatile sig_atomic_t got_sig, got_code, armed;
static volatile uintptr_t got_addr;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (!armed) {
		signal(sig, SIG_DFL);
		return;
	}
	got_sig = sig;
	got_code = si->si_code;
	got_addr = (uintptr_t)si->si_addr;
	armed = 0;
	siglongjmp(jb, 1);
}

static void handlers(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
}

/* "ok", or the signal, code and offset a write of one byte at p raised. */
static const char *try_write(char *p, char v)
{
	static char out[64];
	got_sig = 0;
	if (sigsetjmp(jb, 1) == 0) {
		armed = 1;
		*(volatile char *)p = v;
		armed = 0;
		return "ok";
	}
	snprintf(out, sizeof out, "%s code %d at %+ld", got_sig == SIGSEGV ? "SIGSEGV" : "SIGBUS",
		 (int)got_code, (long)((char *)got_addr - p));
	return out;
}

static const char *try_read(char *p)
{
	static char out[64];
	if (sigsetjmp(jb, 1) == 0) {
		armed = 1;
		char c = *(volatile char *)p;
		armed = 0;
		snprintf(out, sizeof out, "ok %d", c);
		return out;
	}
	snprintf(out, sizeof out, "%s code %d", got_sig == SIGSEGV ? "SIGSEGV" : "SIGBUS",
		 (int)got_code);
	return out;
}

static void pages(const char *tag, char *m, int n)
{
	for (int i = 0; i < n; i++) {
		const char *r = try_read(m + i * PG);
		char rd[64];
		snprintf(rd, sizeof rd, "%s", r);
		printf("%s p%d: read %s, write %s\n", tag, i, rd, rd[0] == 'o' ? try_write(m + i * PG + 7, 9) : "-");
	}
}

/* A fresh mapping of NP pages: page 0 never touched, 1 read, the rest
 * written; then all of it made read-only. */
static char *fresh(void)
{
	char *m = mmap(NULL, NP * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		printf("mmap failed\n");
		exit(1);
	}
	(void)*(volatile char *)(m + PG);
	for (int i = 2; i < NP; i++)
		m[i * PG] = (char)i;
	if (mprotect(m, NP * PG, PROT_READ) != 0)
		printf("mprotect(PROT_READ) failed: %s\n", ename(errno));
	return m;
}

static void rc(const char *what, long r)
{
	printf("%s = %ld %s\n", what, r, r < 0 ? ename(errno) : "");
}

static void child_dies(const char *what, void (*setup)(void))
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		char *m = fresh();
		setup();
		m[3 * PG] = 1;
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st))
		printf("%s: killed by signal %d\n", what, WTERMSIG(st));
	else
		printf("%s: exit %d\n", what, WEXITSTATUS(st));
}

static void no_handler(void)
{
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
}

static void resets(int sig)
{
	(void)sig;
	static const char m[] = "resetting handler ran\n";
	wr_all(1, m, sizeof m - 1);
}

static void resethand(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = resets;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGSEGV, &sa, NULL);
}

static void blocked(void)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGSEGV);
	sigprocmask(SIG_BLOCK, &s, NULL);
}

static void ignored(void)
{
	signal(SIGSEGV, SIG_IGN);
}

static void semantics(void)
{
	handlers();
	char *m = fresh();
	printf("-- writes to read-only pages (0 never touched, 1 read once)\n");
	pages("ro", m, NP);
	int p[2];
	if (pipe(p) == 0) {
		rc("write(pipe)", write(p[1], "abcdefgh", 8));
		rc("read into page 0 (never touched)", read(p[0], m + 100, 4));
		rc("read into page 4", read(p[0], m + 4 * PG, 4));
		close(p[0]);
		close(p[1]);
	}
	rc("mprotect(page 5, RW)", mprotect(m + 5 * PG, PG, PROT_READ | PROT_WRITE));
	rc("mprotect(page 0, RW)", mprotect(m, PG, PROT_READ | PROT_WRITE));
	pages("rw0,5", m, 6);
	rc("mprotect(all, PROT_READ) again", mprotect(m, NP * PG, PROT_READ));
	rc("mprotect(all, PROT_READ) redundant", mprotect(m, NP * PG, PROT_READ));
	pages("ro-again", m, 3);
	munmap(m, NP * PG);

	printf("-- other calls on read-only pages\n");
	m = fresh();
	rc("mprotect(2..4, PROT_NONE)", mprotect(m + 2 * PG, 3 * PG, PROT_NONE));
	rc("mprotect(5, PROT_READ|PROT_EXEC)", mprotect(m + 5 * PG, PG, PROT_READ | PROT_EXEC));
	rc("mprotect(6, PROT_READ|PROT_WRITE|PROT_EXEC)",
	   mprotect(m + 6 * PG, PG, PROT_READ | PROT_WRITE | PROT_EXEC));
	pages("prot", m, NP);
	munmap(m, NP * PG);

	m = fresh();
	rc("madvise(1..3, MADV_DONTNEED)", madvise(m + PG, 3 * PG, MADV_DONTNEED));
	rc("madvise(4..5, MADV_POPULATE_WRITE)", madvise(m + 4 * PG, 2 * PG, 23));
	rc("madvise(6, MADV_FREE)", madvise(m + 6 * PG, PG, MADV_FREE));
	rc("mlock(7..8)", mlock(m + 7 * PG, 2 * PG));
	rc("munlock(7..8)", munlock(m + 7 * PG, 2 * PG));
	rc("mlock2(9, ONFAULT)", syscall(SYS_mlock2, m + 9 * PG, PG, 1));
	pages("advice", m, NP);
	munmap(m, NP * PG);

	m = fresh();
	char *to = mmap(NULL, 4 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *r = mremap(m + 2 * PG, 3 * PG, 3 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	printf("mremap(2..4 -> elsewhere) = %s\n", r == to ? "moved" : ename(errno));
	pages("moved", to, 3);
	pages("left", m, 2);
	r = mremap(m, 2 * PG, 6 * PG, 0);
	printf("mremap(0..1 grow in place over the hole) = %s\n", r == m ? "grown" : ename(errno));
	rc("munmap(7)", munmap(m + 7 * PG, PG));
	pages("unmapped", m + 5 * PG, 4);
	rc("mseal(9..11)", syscall(SYS_mseal, m + 9 * PG, 3 * PG, 0));
	rc("mprotect(9..11, RW) sealed", mprotect(m + 9 * PG, 3 * PG, PROT_READ | PROT_WRITE));
	rc("munmap(9..11) sealed", munmap(m + 9 * PG, 3 * PG));
	pages("sealed", m + 9 * PG, 3);
	munmap(m, 9 * PG);
	munmap(to, 4 * PG);

	printf("-- fork\n");
	m = fresh();
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		pages("child", m, 4);
		rc("child mprotect(1, RW)", mprotect(m + PG, PG, PROT_READ | PROT_WRITE));
		pages("child", m, 2);
		/* a collector in the child: its own barrier works there */
		char *c = fresh();
		pages("child's own", c, 4);
		rc("child's own mprotect(2, RW)", mprotect(c + 2 * PG, PG, PROT_READ | PROT_WRITE));
		pages("child's own", c, 4);
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
	pages("parent", m, 4);
	munmap(m, NP * PG);

	printf("-- deaths\n");
	child_dies("no handler", no_handler);
	child_dies("SA_RESETHAND handler", resethand);
	child_dies("SIGSEGV blocked", blocked);
	child_dies("SIGSEGV ignored", ignored);

	/* A program that closes every descriptor it does not know (as
	 * daemons and process spawners do) must not close mmfold's: the
	 * kernel would drop the write-protection and writes to read-only
	 * pages would stop faulting. */
	printf("-- every descriptor from 3 closed\n");
	fflush(stdout);
	/* a flag the kernel does not know: EINVAL for every range, mmfold's
	 * descriptors' included */
	int einval = 0;
	for (unsigned fd = 3; fd < 1024; fd++)
		einval += close_range(fd, fd, 1U << 7) != 0 && errno == EINVAL;
	printf("close_range(fd, fd, unknown flag), 3..1023: %d EINVAL\n", einval);
	m = fresh(); /* made read-only before, written after */
	closefrom(3);
	pages("after closefrom", m, 3);
	munmap(m, NP * PG);
	m = fresh();
	rc("close_range(3, ~0U, 0)", close_range(3, ~0U, 0));
	pages("after close_range", m, 3);
	munmap(m, NP * PG);
	m = fresh();
	rc("close_range(3, ~0U, CLOSE_RANGE_UNSHARE)", close_range(3, ~0U, CLOSE_RANGE_UNSHARE));
	pages("after close_range(UNSHARE)", m, 3);
	munmap(m, NP * PG);
	m = fresh();
	/* through libc's syscall(), as some programs close their descriptors */
	rc("syscall(SYS_close_range, 3, ~0U, 0)", (int)syscall(SYS_close_range, 3, ~0U, 0));
	pages("after syscall(SYS_close_range)", m, 3);
	munmap(m, NP * PG);
	m = fresh();
	int failed = 0;
	for (int fd = 3; fd < 1 << 16; fd++)
		failed += syscall(SYS_close, fd) != 0 && errno == EBADF;
	printf("syscall(SYS_close, 3..65535): %d EBADF\n", failed);
	pages("after syscall(SYS_close)", m, 3);
	munmap(m, NP * PG);
	m = fresh();
	failed = 0;
	for (int fd = 3; fd < 1 << 16; fd++)
		failed += close(fd) != 0 && errno == EBADF;
	printf("close(3..65535): %d EBADF\n", failed);
	pages("after close()", m, 3);
	munmap(m, NP * PG);
}

/* One line per fact /proc gives about read-only pages. */
static void proc(void)
{
	handlers();
	char *m = fresh();
	try_write(m, 1); /* a write to the never-touched page */
	struct pstate st[NP];
	/* untranslated: the test reads /proc as any program would */
	setenv("MMFOLD_BARRIER", "off", 1);
	page_states((uintptr_t)m, NP, st);
	for (int i = 0; i < 3; i++)
		printf("p%d maps %s flags [%s] uffd-wp %d mincore %c\n", i, st[i].perm, st[i].flags,
		       uffd_wp_bit((uintptr_t)m + i * PG), st[i].mc);
	rc("munmap(3)", munmap(m + 3 * PG, PG));
	page_states((uintptr_t)m, NP, st);
	printf("after munmap: p2 maps %s uffd-wp %d\n", st[2].perm, uffd_wp_bit((uintptr_t)m + 2 * PG));
}

/* What the barrier needs of the kernel, as src/barrieropen.c asks for it
 * (run without the library). */
static int kernel_probe(void)
{
	long fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0 && errno == EINVAL)
		fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		printf("uffd-wp: no: userfaultfd: %s\n", strerror(errno));
		return 0;
	}
	struct uffdio_api api = {UFFD_API, UFFD_FEATURE_SIGBUS | UFFD_FEATURE_WP_UNPOPULATED, 0};
	if (ioctl((int)fd, UFFDIO_API, &api) != 0) {
		printf("uffd-wp: no: UFFDIO_API: %s\n", strerror(errno));
		return 0;
	}
	char *m = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct uffdio_register r = {{(uintptr_t)m, PG}, UFFDIO_REGISTER_MODE_WP, 0};
	if (m == MAP_FAILED || ioctl((int)fd, UFFDIO_REGISTER, &r) != 0 ||
	    !(r.ioctls & (1ull << _UFFDIO_WRITEPROTECT))) {
		printf("uffd-wp: no: UFFDIO_REGISTER_MODE_WP: %s\n", strerror(errno));
		return 0;
	}
	struct uffdio_writeprotect w = {{(uintptr_t)m, PG}, UFFDIO_WRITEPROTECT_MODE_WP};
	if (ioctl((int)fd, UFFDIO_WRITEPROTECT, &w) != 0) {
		printf("uffd-wp: no: UFFDIO_WRITEPROTECT: %s\n", strerror(errno));
		return 0;
	}
	printf("uffd-wp: yes\n");
	return 0;
}

int main(int argc, char **argv)
{
	watchdog(60);
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *what = argc > 1 ? argv[1] : "semantics";
	if (!strcmp(what, "semantics"))
		semantics();
	else if (!strcmp(what, "proc"))
		proc();
	else if (!strcmp(what, "probe")) /* run.sh: does the barrier start here? */
		return 0;
	else if (!strcmp(what, "kernel"))
		return kernel_probe();
	else if (!strcmp(what, "deny") && argc > 2)
		return deny(argv + 2);
	else if (!strcmp(what, "die")) {
		char *m = fresh();
		m[3 * PG] = 1;
		printf("not reached\n");
	} else {
		fprintf(stderr, "usage: uffd semantics|proc|die|probe|kernel|deny PROG...\n");
		return 2;
	}
	return 0;
}
