/* libsigctor.so — installs a SIGSEGV handler from a library constructor,
 * which runs before mmfold's (the program depends on this library; the
 * preloaded library is initialised after its dependencies).  sigchain.c
 * checks that the handler is imported and still called. */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

int sigctor_calls;
int sigctor_saw_handler = -1; /* did the kernel already catch SIGSEGV? */

void sigctor_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	sigctor_calls++;
	uintptr_t size = (uintptr_t)getpagesize();
	uintptr_t pg = (uintptr_t)si->si_addr & ~(size - 1);
	mprotect((void *)pg, size, PROT_READ | PROT_WRITE);
}

/* SigCgt of /proc/self/status, bit SIGSEGV. */
static int kernel_catches_segv(void)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strstr(buf, "SigCgt:\t");
	if (!p)
		return -1;
	unsigned long long v = 0;
	for (p += 8; *p && *p != '\n'; p++)
		v = v * 16 + (unsigned)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
	return (int)((v >> (SIGSEGV - 1)) & 1);
}

__attribute__((constructor)) static void sigctor_init(void)
{
	sigctor_saw_handler = kernel_catches_segv();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = sigctor_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR2);
	sigaction(SIGSEGV, &sa, NULL);
}
