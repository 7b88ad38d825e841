/* The fault guard shared by the behaviour tests (the programs of
 * tests/preload/, through common.h, and those of tests/progs/): touch
 * memory and survive SIGSEGV/SIGBUS, to see what a page allows.
 * Header-only, all static.
 *
 * fg_install() installs the handler for SIGSEGV and SIGBUS.  A fault
 * outside a guarded access goes to fg_other when the program set it and
 * it returns 1 (a write barrier, say); otherwise the program dies of the
 * real signal. */
#ifndef MMFOLD_TEST_FAULT_H
#define MMFOLD_TEST_FAULT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- fault guard: touch memory, survive SIGSEGV/SIGBUS ----
 * Result codes: 0 ok, 'u' SEGV_MAPERR (nothing mapped), 'a' SEGV_ACCERR
 * (mapped, access denied), 'b' SIGBUS. */

static __thread sigjmp_buf fg_jb;
static __thread volatile sig_atomic_t fg_on;
static __thread volatile int fg_code;
/* A fault outside a guarded access: 1 when handled (set by the program). */
static int (*fg_other)(int sig, siginfo_t *si);

static void fg_handler(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (fg_on) {
		fg_on = 0;
		fg_code = sig == SIGBUS ? 'b' : si->si_code == SEGV_MAPERR ? 'u' : 'a';
		siglongjmp(fg_jb, 1);
	}
	if (fg_other && fg_other(sig, si))
		return;
	/* A fault outside a guarded access: die with the real signal. */
	signal(sig, SIG_DFL);
}

static __attribute__((unused)) void fg_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = fg_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
}

/* Read one byte into *out. */
static __attribute__((unused, noinline)) int fg_read(const volatile char *p,
						     char *out)
{
	if (sigsetjmp(fg_jb, 1))
		return fg_code;
	fg_on = 1;
	*out = *p;
	fg_on = 0;
	return 0;
}

/* Read a byte and write the same byte back: probes writability without
 * changing content. */
static __attribute__((unused, noinline)) int fg_rewrite(volatile char *p)
{
	if (sigsetjmp(fg_jb, 1))
		return fg_code;
	fg_on = 1;
	char c = *p;
	*p = c;
	fg_on = 0;
	return 0;
}

static __attribute__((unused, noinline)) int
fg_write(volatile char *p, const char *src, size_t n)
{
	if (sigsetjmp(fg_jb, 1))
		return fg_code;
	fg_on = 1;
	for (size_t i = 0; i < n; i++)
		p[i] = src[i];
	fg_on = 0;
	return 0;
}

/* FNV-1a over a (readable) page. */
static __attribute__((unused, noinline)) int fg_sum(const volatile char *p,
						    size_t n, uint32_t *out)
{
	if (sigsetjmp(fg_jb, 1))
		return fg_code;
	fg_on = 1;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 16777619u;
	fg_on = 0;
	*out = h;
	return 0;
}

/* What a page allows: 'n' no access, 'r' read only, 'w' read and write;
 * *byte gets its first byte (-1 when it cannot be read).  The write puts
 * the same byte back. */
static __attribute__((unused)) char fg_probe(volatile char *p, int *byte)
{
	char c;
	*byte = -1;
	if (fg_read(p, &c))
		return 'n';
	*byte = (unsigned char)c;
	return fg_rewrite(p) ? 'r' : 'w';
}

#endif
