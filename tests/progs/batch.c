/* The batch API (include/mmfold.h), seen from a program.  Built against the
 * header with MMFOLD_WEAK: without mmfold the calls are made at once, so
 * the output without the library is the reference the batched runs must
 * reproduce.
 *
 *   batch diff SEED ROUNDS   random batches of mprotect/madvise on two
 *                            regions (one with a hole), then every page's
 *                            accessibility and first byte, and each batch's
 *                            error as the program sees it
 *   batch count              64 adjacent mprotects, 64 scattered
 *                            MADV_DONTNEEDs (counts checked from the stats)
 *   batch threads            another thread's call on a range whose call is
 *                            queued applies the queue first
 *   batch fork               fork inside a batch: the child sees the calls
 *   batch vec                mmfold_mprotectv / mmfold_madvisev, and errors
 *   batch barrier            a SIGSEGV write barrier inside a batch (with
 *                            MMFOLD_SIGCHAIN=on or lazy mode only)
 *   batch count-nopm         count, with process_madvise refused (ENOSYS)
 *                            by a seccomp filter: the per-range fallback
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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MMFOLD_WEAK
#include "../../include/mmfold.h"
#include "../preload/fault.h"

#define PG ((unsigned long)getpagesize()) /* the system's page size */
#define NPG 64

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

static int batched(void) { return mmfold_batch_begin != NULL; }

static uint64_t rnd_state;
static unsigned rnd(unsigned n)
{
	rnd_state = rnd_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)(rnd_state >> 33) % n;
}

static char *map_pages(int n, int prot)
{
	char *p = mmap(NULL, n * PG, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

static int diff(unsigned seed, int rounds)
{
	rnd_state = seed;
	char *r[2];
	r[0] = map_pages(NPG, PROT_READ | PROT_WRITE);
	r[1] = map_pages(NPG, PROT_READ | PROT_WRITE);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < NPG; i++)
			r[k][i * PG] = (char)(k * 100 + i + 1);
	munmap(r[1] + 40 * PG, 4 * PG); /* a hole: calls over it fail */
	static const int prots[] = {PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE, PROT_READ};
	static const int advs[] = {MADV_DONTNEED, MADV_WILLNEED, MADV_FREE, MADV_COLD,
				   MADV_NOHUGEPAGE, MADV_NORMAL};
	for (int round = 0; round < rounds; round++) {
		int n = 1 + rnd(12);
		int b = batched();
		if (b)
			mmfold_batch_begin();
		int fails = 0, first_err = 0;
		long first_off = -1, first_len = 0;
		for (int c = 0; c < n; c++) {
			int k = rnd(4) == 0;
			int start = rnd(NPG), len = 1 + rnd(rnd(3) ? 4 : 24);
			if (start + len > NPG)
				len = NPG - start;
			char *a = r[k] + start * PG;
			int ret, what = rnd(5);
			if (what < 4)
				ret = mprotect(a, len * PG, prots[rnd(4)]);
			else
				ret = madvise(a, len * PG, advs[rnd(6)]);
			if (ret) { /* made at once (no mmfold, or modes off/observe) */
				if (!fails++) {
					first_err = errno;
					first_off = (k << 16) | start;
					first_len = len;
				}
			}
		}
		if (b) {
			struct mmfold_batch_error e;
			int ret = mmfold_batch_end(&e);
			if (ret && !fails) {
				int k = (char *)e.addr >= r[1] && (char *)e.addr < r[1] + NPG * PG;
				fails = (int)e.failures;
				first_err = errno;
				first_off = (k << 16) | (long)(((char *)e.addr - r[k]) / (long)PG);
				first_len = (long)(e.len / PG);
				if (e.error != errno)
					printf("error %d but errno %d\n", e.error, errno);
			}
		}
		printf("round %d: %d failed", round, fails);
		if (fails)
			printf(", first %s at %lx+%ld", strerrorname_np(first_err), first_off, first_len);
		printf("\n");
		show("a", r[0], NPG);
		show("b", r[1], 40);
		/* some writes outside batches, where allowed */
		for (int w = 0; w < 8; w++) {
			int k = rnd(2), i = rnd(k ? 40 : NPG), byte;
			if (fg_probe(r[k] + i * PG, &byte) == 'w')
				r[k][i * PG] = (char)rnd(250);
		}
	}
	printf("diff ok\n");
	return 0;
}

static int count(void)
{
	char *a = map_pages(NPG, PROT_READ | PROT_WRITE);
	char *d = map_pages(2 * NPG, PROT_READ | PROT_WRITE);
	memset(a, 1, NPG * PG);
	memset(d, 1, 2 * NPG * PG);
	if (batched())
		mmfold_batch_begin();
	for (int i = 0; i < NPG; i++)
		mprotect(a + i * PG, PG, PROT_READ);
	if (batched() && mmfold_batch_end(NULL))
		return 1;
	if (batched())
		mmfold_batch_begin();
	for (int i = 0; i < NPG; i++)
		madvise(d + 2 * i * PG, PG, MADV_DONTNEED);
	if (batched() && mmfold_batch_end(NULL))
		return 1;
	int zeros = 0, ones = 0, b;
	for (int i = 0; i < 2 * NPG; i++) {
		zeros += d[i * PG] == 0;
		ones += d[i * PG] == 1;
	}
	show("a", a, NPG);
	printf("count: %d zero, %d kept\n", zeros, ones);
	(void)b;
	return 0;
}

static char *shared_page;
static int stage;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void wait_stage(int s)
{
	pthread_mutex_lock(&mu);
	while (stage < s)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

static void set_stage(int s)
{
	pthread_mutex_lock(&mu);
	stage = s;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void *other(void *arg)
{
	(void)arg;
	wait_stage(1);
	/* the first thread queued RW here; this call comes after it */
	if (mprotect(shared_page, PG, PROT_READ))
		perror("mprotect");
	set_stage(2);
	return NULL;
}

static int threads(void)
{
	shared_page = map_pages(4, PROT_NONE);
	pthread_t t;
	pthread_create(&t, NULL, other, NULL);
	if (batched())
		mmfold_batch_begin();
	mprotect(shared_page, PG, PROT_READ | PROT_WRITE);
	mprotect(shared_page + 2 * PG, PG, PROT_READ | PROT_WRITE); /* untouched by the other */
	set_stage(1);
	wait_stage(2);
	if (batched() && mmfold_batch_end(NULL))
		perror("batch_end");
	pthread_join(t, NULL);
	show("threads", shared_page, 4);
	return 0;
}

static int forked(void)
{
	char *a = map_pages(8, PROT_READ | PROT_WRITE);
	memset(a, 7, 8 * PG);
	if (batched())
		mmfold_batch_begin();
	mprotect(a, 4 * PG, PROT_READ);
	madvise(a + 4 * PG, 2 * PG, MADV_DONTNEED);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		show("child", a, 8);
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	if (batched())
		mmfold_batch_end(NULL);
	show("parent", a, 8);
	return 0;
}

static int vec(void)
{
	char *a = map_pages(16, PROT_READ | PROT_WRITE);
	memset(a, 3, 16 * PG);
	munmap(a + 12 * PG, PG);
	struct mmfold_prot_range pv[] = {
		{a, PG, PROT_READ}, {a + PG, PG, PROT_READ}, {a + 2 * PG, 2 * PG, PROT_NONE},
		{a + 8 * PG, 6 * PG, PROT_READ}, /* over the hole: ENOMEM */
	};
	struct mmfold_adv_range av[] = {{a + 4 * PG, PG, MADV_DONTNEED}, {a + 6 * PG, PG, MADV_DONTNEED}};
	int r1, e1 = 0, r2;
	if (mmfold_mprotectv) {
		struct mmfold_batch_error e;
		r1 = mmfold_mprotectv(pv, 4, &e);
		e1 = errno;
		printf("mprotectv %d %s at +%ld len %zu, %u failed\n", r1, r1 ? strerrorname_np(e1) : "-",
		       r1 ? (long)(((char *)e.addr - a) / (long)PG) : 0L, r1 ? e.len / PG : 0, e.failures);
		r2 = mmfold_madvisev(av, 2, NULL);
	} else {
		int fails = 0;
		long at = 0;
		size_t len = 0;
		r1 = 0;
		for (int i = 0; i < 4; i++)
			if (mprotect(pv[i].addr, pv[i].len, pv[i].prot)) {
				if (!fails++) {
					e1 = errno;
					at = ((char *)pv[i].addr - a) / (long)PG;
					len = pv[i].len / PG;
				}
				r1 = -1;
			}
		printf("mprotectv %d %s at +%ld len %zu, %d failed\n", r1, r1 ? strerrorname_np(e1) : "-",
		       r1 ? at : 0L, r1 ? len : 0, fails);
		r2 = 0;
		for (int i = 0; i < 2; i++)
			r2 |= madvise(av[i].addr, av[i].len, av[i].advice);
	}
	printf("madvisev %d\n", r2);
	show("vec", a, 12);
	/* the reference (no mmfold) prints what the library must answer */
	int bad = mmfold_batch_end ? mmfold_batch_end(NULL) == -1 && errno == EINVAL : 1;
	printf("unbalanced end: %s\n", bad ? "EINVAL" : "accepted");
	return 0;
}

/* A write barrier inside a batch: the handler's mprotect must be made at
 * once (mmfold sees it when it chains SIGSEGV), or the write faults
 * forever. */
static char *wb_page;
static volatile int wb_hits;
static void wb_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	char *a = (char *)((uintptr_t)si->si_addr & ~(PG - 1));
	if (a == wb_page && wb_hits++ < 1000)
		mprotect(a, PG, PROT_READ | PROT_WRITE);
}

static int barrier(void)
{
	wb_page = map_pages(1, PROT_READ);
	struct sigaction sa = {.sa_sigaction = wb_handler, .sa_flags = SA_SIGINFO};
	sigaction(SIGSEGV, &sa, NULL);
	if (batched())
		mmfold_batch_begin();
	wb_page[0] = 1;
	if (batched())
		mmfold_batch_end(NULL);
	printf("barrier: %d fault(s)\n", wb_hits);
	return 0;
}

/* Makes process_madvise fail with ENOSYS, as on kernels before 5.10. */
static void refuse_process_madvise(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	fg_install();
	if (argc >= 2 && !strcmp(argv[1], "diff"))
		return diff(argc > 2 ? (unsigned)atoi(argv[2]) : 1, argc > 3 ? atoi(argv[3]) : 50);
	if (argc >= 2 && !strcmp(argv[1], "count"))
		return count();
	if (argc >= 2 && !strcmp(argv[1], "count-nopm")) {
		refuse_process_madvise();
		return count();
	}
	if (argc >= 2 && !strcmp(argv[1], "threads"))
		return threads();
	if (argc >= 2 && !strcmp(argv[1], "fork"))
		return forked();
	if (argc >= 2 && !strcmp(argv[1], "barrier"))
		return barrier();
	if (argc >= 2 && !strcmp(argv[1], "vec"))
		return vec();
	fprintf(stderr, "usage: batch diff SEED ROUNDS | count | threads | fork | vec\n");
	return 2;
}
