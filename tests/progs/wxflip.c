/* A JIT's W^X flips in miniature (tests/unit/check_wx.c, tools/bench_wx.sh).
 *
 *   wxflip AREAS ITERS [advice] [hold=MS]
 *
 * Maps AREAS adjacent 64 KiB code areas between two PROT_NONE guards.  ITERS
 * times, for each area: mprotect RW, write a function returning a value that
 * depends on the iteration, mprotect RX, call it.  Then, with every area RX,
 * prints the VMAs over the areas ("vma" lines), probes every area (read,
 * write, execute, each caught by a SIGSEGV handler; "i" where the execute
 * probe ran into an invalid instruction, SIGILL: the fetch was allowed, as
 * on arm64 where a page of zeros is "udf #0") and its contents; makes
 * the even areas RW and probes again.
 *   advice: the program gives its own readahead advice first
 *           (MADV_SEQUENTIAL on area 0) and halfway (MADV_NORMAL on area 1),
 *           and prints the readahead VmFlags of both at the end ("ra" lines).
 *   end:    instead of the probes above, calls that end a relaxation (or
 *           undo keep's advice), each followed by probes ("end" lines):
 *           mremap of areas 2-3 (one VMA without mmfold), munmap of them,
 *           mprotect of area 0 to R, of half of area 1 to RW, then X, RWX,
 *           RX.  Needs 4 areas.
 *   interleave: the areas alternate: all are made RW one after another,
 *           written, then all made RX one after another, then run.
 *   hold=MS: sleep MS milliseconds before exiting (for a sampler).
 *   deny_rwx: first install a seccomp filter that fails mprotect and
 *           pkey_mprotect to PROT_READ|PROT_WRITE|PROT_EXEC with EACCES, as
 *           SELinux does without execmem.
 * WXFLIP_BASE_FILE=path: the areas' start address is written there (hex)
 * before the first flip.
 * Output is the same with and without mmfold except the "vma" lines. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
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
#include <time.h>
#include <unistd.h>

#include "jitcode.h"

#define AREA (64 * 1024)

static char *base;
static int nareas;
/* Writes a function returning v at p (the area is RW). */
static void emit(unsigned char *p, uint32_t v) { jit_emit(p, v); }

static void flip(char *a, int prot)
{
	if (mprotect(a, AREA, prot) != 0) {
		perror("mprotect");
		exit(2);
	}
}

/* "r", "w", "x" or "-" for each access to the first byte at p, and a
 * checksum of the 32 KiB there when readable. */
static void probe_at(const char *label, char *at, int len)
{
	volatile unsigned char *p = (volatile unsigned char *)at;
	char res[4];
	jit_access(p, 1, res);
	unsigned long sum = 0;
	if (res[0] == 'r')
		for (int k = 0; k < len; k++)
			sum = sum * 31 + p[k];
	printf("probe %s %c%c%c %lx\n", label, res[0], res[1], res[2], sum);
}

static void probe(int i)
{
	char label[16];
	snprintf(label, sizeof label, "%d", i);
	probe_at(label, base + (size_t)i * AREA, AREA);
}

/* After the flips (every area RX): calls that must end a relaxation or
 * undo keep's advice, each followed by probes.  Needs 4 areas. */
static void end_ops(void)
{
	char *dest = mmap(NULL, 2 * AREA, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *r = mremap(base + 2 * AREA, 2 * AREA, 2 * AREA, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
	printf("end mremap of areas 2-3 %s\n", r == dest ? "ok" : strerror(errno));
	probe_at("moved2", dest, AREA);
	probe_at("moved3", dest + AREA, AREA);
	printf("end munmap %d\n", munmap(dest, 2 * AREA));
	printf("end mprotect 0 R %d\n", mprotect(base, AREA, PROT_READ));
	probe_at("0", base, AREA);
	printf("end mprotect 1 half RW %d\n", mprotect(base + AREA, AREA / 2, PROT_READ | PROT_WRITE));
	probe_at("1a", base + AREA, AREA / 2);
	probe_at("1b", base + AREA + AREA / 2, AREA / 2);
	printf("end mprotect 1b X %d\n", mprotect(base + AREA + AREA / 2, AREA / 2, PROT_EXEC));
	probe_at("1b", base + AREA + AREA / 2, 0);
	printf("end mprotect 1a RWX %d\n",
	       mprotect(base + AREA, AREA / 2, PROT_READ | PROT_WRITE | PROT_EXEC));
	printf("end mprotect 1a RX %d\n", mprotect(base + AREA, AREA / 2, PROT_READ | PROT_EXEC));
	probe_at("1a", base + AREA, AREA / 2);
}

static void vmas(void)
{
	jit_vmas((uintptr_t)base, (uintptr_t)base + (uintptr_t)nareas * AREA);
}

static void ra_flags(int i)
{
	printf("ra %d %s\n", i, jit_ra_flags((uintptr_t)base + (uintptr_t)i * AREA));
}

/* mprotect/pkey_mprotect(..., RWX) -> EACCES, everything else allowed. */
static int deny_rwx(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pkey_mprotect, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_READ | PROT_WRITE | PROT_EXEC, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 13 /* EACCES */),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: wxflip AREAS ITERS [advice] [hold=MS]\n");
		return 2;
	}
	nareas = atoi(argv[1]);
	long iters = atol(argv[2]);
	int advice = 0, hold = 0, end = 0, interleave = 0;
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "advice"))
			advice = 1;
		else if (!strcmp(argv[i], "end"))
			end = 1;
		else if (!strcmp(argv[i], "interleave"))
			interleave = 1;
		else if (!strncmp(argv[i], "hold=", 5))
			hold = atoi(argv[i] + 5);
		else if (!strcmp(argv[i], "deny_rwx") && deny_rwx() != 0) {
			perror("seccomp");
			return 3;
		}
	}
	if (nareas < 1 || nareas > 64 || iters < 1)
		return 2;
	char *g = mmap(NULL, (size_t)(nareas + 2) * AREA, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g == MAP_FAILED)
		return 2;
	base = g + AREA;
	if (mprotect(base, (size_t)nareas * AREA, PROT_READ | PROT_WRITE) != 0)
		return 2;
	jit_base_file((uintptr_t)base, (uintptr_t)base + (uintptr_t)nareas * AREA);
	jit_catch_faults();
	if (advice)
		madvise(base, AREA, MADV_SEQUENTIAL);

	unsigned long sum = 0;
	for (long it = 0; it < iters; it++) {
		if (advice && nareas > 1 && it == iters / 2)
			madvise(base + AREA, AREA, MADV_NORMAL);
		for (int a = 0; interleave && a < nareas; a++)
			flip(base + (size_t)a * AREA, PROT_READ | PROT_WRITE);
		for (int a = 0; interleave && a < nareas; a++)
			emit((unsigned char *)base + (size_t)a * AREA + (it % 64) * 64,
			     (uint32_t)((it * 31 + a) & 0x7fff));
		for (int a = 0; interleave && a < nareas; a++)
			flip(base + (size_t)a * AREA, PROT_READ | PROT_EXEC);
		for (int a = 0; interleave && a < nareas; a++) {
			int (*fn)(void) = (int (*)(void))(uintptr_t)(base + (size_t)a * AREA + (it % 64) * 64);
			sum += (unsigned)fn();
		}
		for (int a = 0; !interleave && a < nareas; a++) {
			char *p = base + (size_t)a * AREA;
			flip(p, PROT_READ | PROT_WRITE);
			emit((unsigned char *)p + (it % 64) * 64, (uint32_t)((it * 31 + a) & 0x7fff));
			flip(p, PROT_READ | PROT_EXEC);
			int (*fn)(void) = (int (*)(void))(uintptr_t)(p + (it % 64) * 64);
			sum += (unsigned)fn();
		}
	}
	printf("flips %ld sum %lu\n", iters * nareas * 2, sum);
	if (end && nareas == 4) {
		end_ops();
		vmas();
		return 0;
	}
	vmas();
	for (int a = 0; a < nareas; a++)
		probe(a);
	for (int a = 0; a < nareas; a += 2)
		flip(base + (size_t)a * AREA, PROT_READ | PROT_WRITE);
	for (int a = 0; a < nareas; a++)
		probe(a);
	if (advice) {
		ra_flags(0);
		if (nareas > 1)
			ra_flags(1);
	}
	fflush(stdout);
	if (hold) {
		struct timespec ts = {hold / 1000, (hold % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	return 0;
}
