/* instr: the hot paths one at a time, for counting instructions per call
 * (tools/bench_instr.sh runs it under callgrind, collecting only inside
 * loop(), with and without mmfold).  Without valgrind it prints ns per call.
 *
 *   instr WORKLOAD [calls (100000)]
 *
 * Workloads (each call below is one iteration of loop()):
 *   skip      mprotect RW of a touched 64 KiB mapping that is RW: a no-op,
 *             which mmfold answers without the kernel
 *   skipsec   the same under a seccomp filter (one that allows every call,
 *             installed first): mmfold skips once the kernel took one
 *   forward   one page, its own mapping (PROT_NONE guards), toggled RW <-> R:
 *             every call changes something and is forwarded
 *   forward2  two such pages, changed in turn (A to R, B to R, A to RW, B
 *             to RW, ...): every call forwarded, no page changed twice in
 *             a row, so neither ever becomes flipping (README, "Flipping
 *             records"): the forward path's course that records each change
 *   skip2     no-op mprotect RW of one of forward2's pages, the two in turn
 *   change    forward's page, a change (RW <-> R) and then a no-op (what
 *             it has asked again) in turn: the skips keep the page from
 *             becoming flipping, so every change takes the forward course
 *             that records it; ns (and instructions) per call are the mean
 *             of a change and a skip
 *   spread    64 pages, each its own mapping between PROT_NONE guards,
 *             changed in turn (page i % 64, RW -> R one round, back the
 *             next): every call forwarded, on a record neither slot of
 *             the thread's hint holds (a collector protecting its cards
 *             one by one): the general course
 *   spreadrand spread's calls in another order (page i * 37 % 64): no call
 *             on a record just after the one before
 *   skipspread no-op mprotect RW of spread's pages, in turn: every call
 *             skipped, on a record neither slot of the hint holds
 *   toggle    one page in the middle of a 256 KiB RW mapping toggled
 *             RW <-> R (the kernel splits and merges the VMA each time)
 *   wx        a 64 KiB code area flipped RW -> (one byte written) -> RX, as
 *             LuaJIT does with its machine code (W^X)
 *   write     write(fd of /dev/null, 1 byte)
 *   read      read(fd of /dev/zero, 1 byte)
 *   open      open("/dev/null", O_RDONLY) and close() of what it returned
 *             (two interposed calls)
 *   sigaction sigaction(SIGUSR1, &act, NULL) with the same handler each time
 *   sigmask   pthread_sigmask(SIG_BLOCK, {SIGUSR2}, NULL)
 *   pread     pread(fd of /dev/zero, 1 byte, offset 0): one of the
 *             buffer-taking wrappers (pread, recv, readv, ...)
 *   onfault   mlock2(MLOCK_ONFAULT) of a 64 KiB range so locked (by the
 *             warm-up): skipped only while RLIMIT_MEMLOCK is unlimited;
 *             by wall time only (valgrind knows no mlock2)
 *   maskpair  the two raw rt_sigprocmask calls of a writer section (block
 *             all but the synchronous signals, then restore): what they
 *             cost a forwarded call, by wall time
 *
 * A few calls of the same kind run before loop() so that lazy binding and
 * mmfold's per-thread setup are not counted. */
#define _GNU_SOURCE
#include "common.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KIB 1024ul

static size_t pg;
static char *area;
static int fd;
static struct sigaction act;
static sigset_t set2;

static void on_usr1(int sig) { (void)sig; }

static void check(int ok, const char *what)
{
	if (!ok)
		die(what);
}

/* One call (two for the flips) of the workload; returns the calls made. */
static inline unsigned long one(int w, unsigned long i)
{
	switch (w) {
	case 0:
		check(mprotect(area, 64 * KIB, PROT_READ | PROT_WRITE) == 0, "mprotect");
		return 1;
	case 1:
	case 2: {
		char *p = w == 1 ? area + pg : area + 32 * pg;
		check(mprotect(p, pg, (i & 1) ? PROT_READ | PROT_WRITE : PROT_READ) == 0, "mprotect");
		return 1;
	}
	case 3:
		check(mprotect(area, 64 * KIB, PROT_READ | PROT_WRITE) == 0, "mprotect RW");
		area[i & 63] = (char)0xc3;
		check(mprotect(area, 64 * KIB, PROT_READ | PROT_EXEC) == 0, "mprotect RX");
		return 2;
	case 4:
		check(write(fd, "x", 1) == 1, "write");
		return 1;
	case 5: {
		char c;
		check(read(fd, &c, 1) == 1, "read");
		return 1;
	}
	case 6: {
		int f = open("/dev/null", O_RDONLY);
		check(f >= 0 && close(f) == 0, "open");
		return 1;
	}
	case 7:
		check(sigaction(SIGUSR1, &act, NULL) == 0, "sigaction");
		return 1;
	case 8:
		check(pthread_sigmask(SIG_BLOCK, &set2, NULL) == 0, "pthread_sigmask");
		return 1;
	case 9: {
		char c;
		check(pread(fd, &c, 1, 0) == 1, "pread");
		return 1;
	}
	case 12:
		check(mlock2(area, 64 * KIB, MLOCK_ONFAULT) == 0, "mlock2");
		return 1;
	case 14: {
		char *p = area + ((i & 1) ? 3 : 1) * pg;
		check(mprotect(p, pg, (i & 2) ? PROT_READ | PROT_WRITE : PROT_READ) == 0, "mprotect");
		return 1;
	}
	case 15:
		check(mprotect(area + ((i & 1) ? 3 : 1) * pg, pg, PROT_READ | PROT_WRITE) == 0,
		      "mprotect");
		return 1;
	case 16: {
		char *p = area + pg;
		check(mprotect(p, pg, (i & 2) ? PROT_READ | PROT_WRITE : PROT_READ) == 0, "mprotect");
		return 1;
	}
	case 17: {
		char *p = area + (2 * (i % 64) + 1) * pg;
		check(mprotect(p, pg, ((i / 64) & 1) ? PROT_READ | PROT_WRITE : PROT_READ) == 0,
		      "mprotect");
		return 1;
	}
	case 19: {
		char *p = area + (2 * (i * 37 % 64) + 1) * pg;
		check(mprotect(p, pg, ((i / 64) & 1) ? PROT_READ | PROT_WRITE : PROT_READ) == 0,
		      "mprotect");
		return 1;
	}
	case 18:
		check(mprotect(area + (2 * (i % 64) + 1) * pg, pg, PROT_READ | PROT_WRITE) == 0,
		      "mprotect");
		return 1;
	case 13: /* advice mmfold tracks, each call a change: its general course */
		check(madvise(area, pg, (i & 1) ? MADV_DOFORK : MADV_DONTFORK) == 0, "madvise");
		return 1;
	case 10: {
		unsigned long all = ~0ul, old;
		syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
		syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
		return 1;
	}
	}
	return 0;
}

/* What callgrind counts (--toggle-collect=loop). */
static __attribute__((noinline)) unsigned long loop(int w, unsigned long n)
{
	unsigned long calls = 0;
	for (unsigned long i = 0; i < n; i++)
		calls += one(w, i);
	return calls;
}

static const char *const names[] = {"skip",    "forward",   "toggle",  "wx",    "write",
				    "read",    "open",      "sigaction", "sigmask", "pread",
				    "maskpair", "skipsec",  "onfault", "advise",  "forward2",
				    "skip2",   "change",    "spread",  "skipspread", "spreadrand"};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: instr skip|skip2|forward|forward2|change|spread|spreadrand|skipspread|toggle|wx|write|read|open|sigaction|sigmask|pread|maskpair|skipsec|onfault|advise [calls]\n");
		return 2;
	}
	int w = -1;
	for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++)
		if (!strcmp(argv[1], names[k]))
			w = k;
	if (w < 0) {
		fprintf(stderr, "instr: unknown workload %s\n", argv[1]);
		return 2;
	}
	unsigned long n = arg_ul(argc, argv, 2, 100000);
	if (w == 11) {
		struct sock_filter f[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
		struct sock_fprog prog = {1, f};
		/* prctl, not seccomp(): valgrind knows only the former */
		check(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
			      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0,
		      "seccomp");
		w = 0;
	}
	pg = (size_t)sysconf(_SC_PAGESIZE);
	int two = w == 14 || w == 15; /* forward2, skip2 */
	int many = w >= 17 && w <= 19; /* spread, skipspread, spreadrand: 64 pages */
	int fw = w == 1 || w == 16; /* forward, change: one page */
	size_t len = fw ? 3 * pg : two ? 5 * pg : many ? 129 * pg : w == 2 ? 64 * pg : 64 * KIB;
	area = mmap(NULL, len, fw || two || many ? PROT_NONE : PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	check(area != MAP_FAILED, "mmap");
	/* forward, change, forward2, skip2: pages 1 (and 3) RW between
	 * PROT_NONE guards */
	for (int k = 1; k <= (many ? 127 : two ? 3 : fw ? 1 : 0); k += 2) {
		check(mprotect(area + k * pg, pg, PROT_READ | PROT_WRITE) == 0, "mprotect");
		memset(area + k * pg, 1, pg);
	}
	if (!fw && !two && !many)
		memset(area, 1, len);
	int rd = w == 5 || w == 9;
	fd = open(rd ? "/dev/zero" : "/dev/null", rd ? O_RDONLY : O_WRONLY);
	check(fd >= 0, "open");
	act.sa_handler = on_usr1;
	sigemptyset(&act.sa_mask);
	sigemptyset(&set2);
	sigaddset(&set2, SIGUSR2);

	/* warm-up: lazy binding, mmfold's thread block, the first timed calls */
	/* (spread: two whole rounds, so that the loop's first round changes
	 * every page) */
	for (unsigned long i = 0; i < (many ? 128ul : 200ul); i++)
		one(w, i);
	double t0 = now_ns();
	unsigned long calls = loop(w, n);
	double t1 = now_ns();
	printf("%.2f ns/call %s, %lu calls\n", (t1 - t0) / (double)calls, argv[1], calls);
	return 0;
}
