/* broken.so — a deliberately wrong interposer for the meta-test.
 *
 * It "skips" every mprotect(..., PROT_READ|PROT_WRITE) without asking the
 * kernel, which is what a redundancy check that trusted a stale picture of
 * memory would do.  run.sh requires walk's output under this library to
 * differ from the reference: otherwise the walk could not catch the bug. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int mprotect(void *addr, size_t len, int prot)
{
	if (prot == (PROT_READ | PROT_WRITE))
		return 0;
	return (int)syscall(SYS_mprotect, addr, len, prot);
}
