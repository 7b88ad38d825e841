/* What the W^X test programs (wxflip.c, yjitflip.c) share: a function
 * written as machine code, access probes caught by a SIGSEGV handler, the
 * VMAs over a range, and the address file a sampler waits for.  Header
 * only: each program is one compilation unit. */
#ifndef JITCODE_H
#define JITCODE_H

#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sigjmp_buf jit_jb;

static void jit_on_fault(int sig)
{
	siglongjmp(jit_jb, sig == SIGILL ? 2 : 1);
}

/* SIGSEGV (and SIGTRAP: int3 filler) jump back to the probe that ran;
 * SIGILL too: on arm64 zeroed memory is an undefined instruction, so a
 * fetch the protection allowed raises SIGILL (shown as 'i'). */
static void jit_catch_faults(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = jit_on_fault;
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGTRAP, &sa, NULL);
	sigaction(SIGILL, &sa, NULL);
}

/* Writes a function returning v at p (p's page is writable). */
static void jit_emit(unsigned char *p, uint32_t v)
{
#if defined(__x86_64__)
	p[0] = 0xb8; /* mov eax, imm32 */
	memcpy(p + 1, &v, 4);
	p[5] = 0xc3; /* ret */
#elif defined(__aarch64__)
	uint32_t ins[2] = {0x52800000u | ((v & 0xffffu) << 5), 0xd65f03c0u}; /* movz w0; ret */
	memcpy(p, ins, sizeof ins);
	__builtin___clear_cache((char *)p, (char *)p + sizeof ins);
#else
#error "x86_64 or aarch64 only"
#endif
}

static int jit_call(const void *f) { return ((int (*)(void))(uintptr_t)f)(); }

/* Tries to read the byte at p, write it back, and (when run is set: p
 * holds a function jit_emit wrote) call p.  res gets "rwx" with '-' for
 * each access that faulted; returns what the call returned, or -1. */
static long jit_access(volatile unsigned char *p, int run, char res[4])
{
	volatile unsigned char v = 0;
	volatile long got = -1;
	memcpy(res, "---", 4);
	if (!sigsetjmp(jit_jb, 1)) {
		v = p[0];
		res[0] = 'r';
	}
	if (!sigsetjmp(jit_jb, 1)) {
		p[0] = v;
		res[1] = 'w';
	}
	if (run) {
		switch (sigsetjmp(jit_jb, 1)) {
		case 0:
			got = jit_call((const void *)p);
			res[2] = 'x';
			break;
		case 2:
			res[2] = 'i';
			break;
		}
	}
	return got;
}

/* The /proc/self/maps lines over [lo,hi) ("vma" lines: clipped, offsets in
 * KiB) and their number ("vma count"). */
static void jit_vmas(uintptr_t lo, uintptr_t hi)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;
	while (f && fgets(line, sizeof line, f)) {
		uintptr_t s, e;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) != 3 || e <= lo || s >= hi)
			continue;
		s = s < lo ? lo : s;
		e = e > hi ? hi : e;
		printf("vma %lu %lu %s\n", (unsigned long)(s - lo) >> 10, (unsigned long)(e - lo) >> 10,
		       perms);
		n++;
	}
	if (f)
		fclose(f);
	printf("vma count %d\n", n);
}

/* The readahead VmFlags of the VMA holding addr (/proc/self/smaps): "sr",
 * "rr", "-" (neither) or "?" (no such VMA). */
static const char *jit_ra_flags(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	const char *ra = "?";
	while (f && fgets(line, sizeof line, f)) {
		uintptr_t s, e;
		if (sscanf(line, "%lx-%lx ", &s, &e) == 2) {
			in = s <= addr && addr < e;
			continue;
		}
		if (in && !strncmp(line, "VmFlags:", 8))
			ra = strstr(line, " sr") ? "sr" : strstr(line, " rr") ? "rr" : "-";
	}
	if (f)
		fclose(f);
	return ra;
}

/* WXFLIP_BASE_FILE=path: "lo hi" in hex, for a sampler of /proc/PID/maps. */
static void jit_base_file(uintptr_t lo, uintptr_t hi)
{
	const char *bf = getenv("WXFLIP_BASE_FILE");
	FILE *f = bf ? fopen(bf, "w") : NULL;
	if (f) {
		fprintf(f, "%lx %lx\n", (unsigned long)lo, (unsigned long)hi);
		fclose(f);
	}
}

#endif
