/* Lazy mode seen from a program: everything it can observe must be what it
 * observes without mmfold.
 *
 *   lazy diff SEED ROUNDS   random mprotect/madvise/mlock/munlock/mmap/munmap
 *                           calls on two regions (one with a hole), each
 *                           round followed by a probe of every page (read,
 *                           write, content) through the program's own
 *                           SIGSEGV handler, the kernel reading and
 *                           writing the regions (read/readv/write/writev
 *                           on a pipe, recv/recvfrom/recvmsg and
 *                           send/sendto/sendmsg on a socket pair,
 *                           pread/pwrite on a file), a forked
 *                           child's probe, and a second thread's probe
 *   lazy loop MIB N         map MIB MiB, touch it, then N times
 *                           mprotect(PROT_READ) and mprotect(RW) with no
 *                           access between (the seeds' loop); then a write
 *                           to every page
 *   lazy touchloop MIB N    the same with one byte per 64 KiB written after
 *                           each mprotect(RW)
 *   lazy mlockloop MIB N    mlock, munlock of MIB MiB, N times
 *   lazy forkadv N LAST     MADV_DONTFORK then MADV_DOFORK N times on 1 MiB,
 *                           then MADV_DONTFORK once more if LAST is 1, fork
 *   lazy barrier            a write barrier: pages made read-only, the
 *                           program's handler makes each written page
 *                           writable and records it, while lazy mode has
 *                           promotions pending elsewhere
 *   lazy refuse             a seccomp filter makes every mprotect(RW) fail
 *                           with ENOMEM (as the kernel does at the
 *                           map-count limit) but one of a page at an
 *                           address of its own, which tells mmfold that
 *                           the filter takes mprotect(RW) (before, lazy
 *                           mode defers none: README, "Limits"); then a
 *                           promotion of 128 pages, a write into it, and
 *                           one more promotion: what a promotion the
 *                           kernel refuses late does
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../preload/fault.h"

#define PG ((unsigned long)getpagesize()) /* the system's page size */
#define NPG 64

static char *barrier_base;
static size_t barrier_len;
static volatile int barrier_hits[NPG];

/* The program's write barrier: a write to a barrier page makes it
 * writable and is counted (fault.h's guard handles the probes). */
static int barrier_fault(int sig, siginfo_t *si)
{
	(void)sig;
	char *a = si->si_addr;
	if (!barrier_base || a < barrier_base || a >= barrier_base + barrier_len)
		return 0;
	size_t i = (size_t)(a - barrier_base) / PG;
	barrier_hits[i]++;
	mprotect(barrier_base + i * PG, PG, PROT_READ | PROT_WRITE);
	return 1;
}

/* The channels through which the kernel reads and writes the regions: a
 * pipe, a socket pair and a file, each of libc's calls in turn (mmfold's
 * wrappers make what lazy mode deferred in the buffer first). */
static int pfd[2], sfd[2], ffd;

/* Whatever a failed call left in the pipe and the socket. */
static void drain(void)
{
	char junk[256];
	while (recv(sfd[0], junk, sizeof junk, MSG_DONTWAIT) > 0)
		;
	int fl = fcntl(pfd[0], F_GETFL);
	fcntl(pfd[0], F_SETFL, fl | O_NONBLOCK);
	while (read(pfd[0], junk, sizeof junk) > 0)
		;
	fcntl(pfd[0], F_SETFL, fl);
}

/* The kernel writes n bytes of buf into dst, by call sel: 0 on success. */
static int kernel_in(int sel, char *dst, const char *buf, size_t n)
{
	struct iovec v = {dst, n};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	long r;
	if (sel <= 1) {
		r = write(pfd[1], buf, n);
		if (r >= 0)
			r = sel == 0 ? read(pfd[0], dst, n) : readv(pfd[0], &v, 1);
	} else if (sel <= 4) {
		r = send(sfd[1], buf, n, 0);
		if (r >= 0)
			r = sel == 2 ? recv(sfd[0], dst, n, 0)
			    : sel == 3 ? recvfrom(sfd[0], dst, n, 0, NULL, NULL)
				       : recvmsg(sfd[0], &m, 0);
	} else {
		r = pwrite(ffd, buf, n, 0);
		if (r >= 0)
			r = pread(ffd, dst, n, 0);
	}
	int e = errno;
	drain();
	errno = e;
	return r < 0 ? -1 : 0;
}

/* The kernel reads n bytes from src, by call sel: 0 on success. */
static int kernel_out(int sel, const char *src, size_t n)
{
	struct iovec v = {(void *)src, n};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	char buf[256];
	long r;
	if (sel <= 1) {
		r = sel == 0 ? write(pfd[1], src, n) : writev(pfd[1], &v, 1);
	} else if (sel <= 4) {
		r = sel == 2 ? send(sfd[1], src, n, 0)
		    : sel == 3 ? sendto(sfd[1], src, n, 0, NULL, 0)
			       : sendmsg(sfd[1], &m, 0);
	} else {
		r = pwrite(ffd, src, n, 0);
		if (r >= 0)
			r = pread(ffd, buf, n, 0);
	}
	int e = errno;
	drain();
	errno = e;
	return r < 0 ? -1 : 0;
}

static void show(const char *tag, char *base, int n)
{
	char line[NPG + 1];
	unsigned sum = 0;
	for (int i = 0; i < n; i++) {
		int b;
		line[i] = fg_probe(base + i * PG, &b);
		sum = sum * 31 + (unsigned)(b + 1);
	}
	line[n] = 0;
	printf("%s %s %08x\n", tag, line, sum);
}

static uint64_t rnd_state;
static unsigned rnd(unsigned n)
{
	rnd_state = rnd_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)(rnd_state >> 33) % n;
}

static char *region[2];

static void *peer(void *arg)
{
	(void)arg;
	show("peer-a", region[0], NPG);
	return NULL;
}

static int diff(unsigned seed, int rounds)
{
	rnd_state = seed;
	for (int k = 0; k < 2; k++) {
		region[k] = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				 -1, 0);
		if (region[k] == MAP_FAILED)
			return 1;
		for (int i = 0; i < NPG; i++)
			region[k][i * PG] = (char)(k * 100 + i + 1);
	}
	munmap(region[1] + 40 * PG, 4 * PG);
	static const int prots[] = {PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE, PROT_READ,
				    PROT_READ | PROT_WRITE, PROT_NONE};
	if (pipe(pfd) || socketpair(AF_UNIX, SOCK_STREAM, 0, sfd))
		return 1;
	char tmpl[] = "/tmp/mmfold-lazyXXXXXX";
	ffd = mkstemp(tmpl);
	if (ffd < 0)
		return 1;
	unlink(tmpl);
	for (int round = 0; round < rounds; round++) {
		int n = 1 + rnd(10);
		printf("round %d:", round);
		for (int c = 0; c < n; c++) {
			int k = rnd(4) == 0;
			int start = rnd(NPG), len = 1 + rnd(rnd(3) ? 4 : 24);
			if (start + len > NPG)
				len = NPG - start;
			char *a = region[k] + start * PG;
			int what = rnd(20), ret;
			errno = 0;
			if (what < 12) {
				ret = mprotect(a, len * PG, prots[rnd(6)]);
			} else if (what < 14) {
				static const int advs[] = {MADV_DONTNEED, MADV_WILLNEED, MADV_DONTFORK,
							   MADV_DOFORK, MADV_DONTFORK};
				ret = madvise(a, len * PG, advs[rnd(5)]);
			} else if (what < 15) {
				ret = mlock(a, len * PG);
			} else if (what < 17) {
				ret = munlock(a, len * PG);
			} else if (what < 18 && !k) {
				/* new memory over part of the region */
				void *m = mmap(a, len * PG, prots[rnd(6)],
					       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
				ret = m == MAP_FAILED ? -1 : 0;
			} else if (what < 19) {
				/* the kernel writes into the region */
				char buf[64];
				memset(buf, 'a' + (int)rnd(26), sizeof buf);
				ret = kernel_in((int)rnd(6), a + 8, buf, sizeof buf);
			} else {
				/* the kernel reads from it */
				ret = kernel_out((int)rnd(6), a + 16, 64);
			}
			printf(" %d%s", what, ret ? strerrorname_np(errno) : "");
			if (getenv("LAZY_TRACE"))
				fprintf(stderr, "round %d: op %d on %c+%d len %d -> %d\n", round, what,
					'a' + k, start, len, ret);
		}
		printf("\n");
		show("a", region[0], NPG);
		show("b", region[1], 40);
		if (round % 7 == 3) {
			pthread_t t;
			pthread_create(&t, NULL, peer, NULL);
			pthread_join(t, NULL);
		}
		if (round % 11 == 5) {
			fflush(stdout);
			pid_t pid = fork();
			if (pid == 0) {
				show("child-a", region[0], NPG);
				fflush(stdout);
				_exit(0);
			}
			int st;
			waitpid(pid, &st, 0);
		}
		for (int w = 0; w < 8; w++) {
			int k = rnd(2), i = rnd(k ? 40 : NPG), byte;
			if (fg_probe(region[k] + i * PG, &byte) == 'w')
				region[k][i * PG] = (char)rnd(250);
		}
	}
	printf("diff ok\n");
	return 0;
}

static char *big(unsigned long mib)
{
	size_t len = mib << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	for (size_t i = 0; i < len; i += PG)
		p[i] = 1;
	return p;
}

static int loop(unsigned long mib, int n, int touch)
{
	char *p = big(mib);
	size_t len = mib << 20;
	for (int i = 0; i < n; i++) {
		if (mprotect(p, len, PROT_READ) || mprotect(p, len, PROT_READ | PROT_WRITE)) {
			perror("mprotect");
			return 1;
		}
		if (touch)
			for (size_t o = 0; o < len; o += 64 << 10)
				p[o] = (char)i;
	}
	long sum = 0;
	for (size_t o = 0; o < len; o += PG) {
		sum += p[o];
		p[o] = 2;
	}
	printf("loop ok %ld\n", sum);
	return 0;
}

/* MADV_DONTFORK / MADV_DOFORK N times each, then a fork: the child sees the
 * range gone (DONTFORK last) or there (DOFORK last). */
static int forkadv(int n, int last_dontfork)
{
	char *p = big(1);
	for (int i = 0; i < n; i++)
		if (madvise(p, 1 << 20, MADV_DONTFORK) || madvise(p, 1 << 20, MADV_DOFORK))
			return 1;
	if (last_dontfork)
		madvise(p, 1 << 20, MADV_DONTFORK);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int b;
		printf("child sees %c\n", fg_probe(p, &b));
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("forkadv ok\n");
	return 0;
}

static int mlockloop(unsigned long mib, int n)
{
	char *p = big(mib);
	size_t len = mib << 20;
	for (int i = 0; i < n; i++)
		if (mlock(p, len) || munlock(p, len)) {
			perror("mlock");
			return 1;
		}
	printf("mlockloop ok\n");
	return 0;
}

static int barrier(void)
{
	char *pend = mmap(NULL, NPG * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	barrier_len = NPG * PG;
	char *b = mmap(NULL, barrier_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pend == MAP_FAILED || b == MAP_FAILED)
		return 1;
	mprotect(pend, NPG * PG, PROT_READ | PROT_WRITE); /* pending in lazy mode */
	for (int gen = 0; gen < 20; gen++) {
		mprotect(b, barrier_len, PROT_READ);
		barrier_base = b;
		memset((void *)barrier_hits, 0, sizeof barrier_hits);
		for (int i = 0; i < NPG; i++)
			if ((i * 7 + gen) % 5 == 0)
				b[i * PG + gen] = 1;
		pend[(gen % NPG) * PG] = (char)gen;
		char seen[NPG + 1];
		for (int i = 0; i < NPG; i++)
			seen[i] = barrier_hits[i] ? (barrier_hits[i] == 1 ? 'x' : '!') : '.';
		seen[NPG] = 0;
		printf("gen %d %s\n", gen, seen);
		barrier_base = NULL;
		/* a promotion that waits, then undone, then done */
		mprotect(b, barrier_len, PROT_READ | PROT_WRITE);
	}
	show("pend", pend, NPG);
	return 0;
}

/* Every mprotect(addr, len, PROT_READ|PROT_WRITE) fails with ENOMEM. */
static int refuse_rw_mprotect(const char *ok)
{
	uint64_t k = (uintptr_t)ok;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 7),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_READ | PROT_WRITE, 0, 5),
		/* the address, low word then high word (little-endian) */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)k, 0, 2),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]) + 4),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(k >> 32), 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		return 1;
	}
	return 0;
}

static int refuse(void)
{
	size_t n = 128 * PG;
	char *a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *c = mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED || b == MAP_FAILED || c == MAP_FAILED || mprotect(a, n, PROT_READ) ||
	    mprotect(b, n, PROT_READ))
		return 1;
	if (refuse_rw_mprotect(c) || mprotect(c, PG, PROT_READ | PROT_WRITE))
		return 1;
	int r = mprotect(a, n, PROT_READ | PROT_WRITE);
	int e = r ? errno : 0;
	int byte;
	char p = fg_probe(a + 40 * PG, &byte);
	printf("first %d %s probe %c\n", r, e ? strerrorname_np(e) : "0", p);
	r = mprotect(b, n, PROT_READ | PROT_WRITE);
	e = r ? errno : 0;
	printf("second %d %s probe %c\n", r, e ? strerrorname_np(e) : "0", fg_probe(b, &byte));
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	fg_other = barrier_fault;
	fg_install();
	const char *cmd = argc > 1 ? argv[1] : "";
	unsigned long a2 = argc > 2 ? strtoul(argv[2], NULL, 0) : 1;
	int a3 = argc > 3 ? atoi(argv[3]) : 40;
	if (!strcmp(cmd, "diff"))
		return diff((unsigned)a2, a3);
	if (!strcmp(cmd, "loop"))
		return loop(a2, a3, 0);
	if (!strcmp(cmd, "touchloop"))
		return loop(a2, a3, 1);
	if (!strcmp(cmd, "mlockloop"))
		return mlockloop(a2, a3);
	if (!strcmp(cmd, "forkadv"))
		return forkadv((int)a2, a3);
	if (!strcmp(cmd, "barrier"))
		return barrier();
	if (!strcmp(cmd, "refuse"))
		return refuse();
	fprintf(stderr, "usage: lazy diff SEED ROUNDS | loop MIB N | touchloop MIB N | mlockloop MIB N | barrier | refuse\n");
	return 2;
}
