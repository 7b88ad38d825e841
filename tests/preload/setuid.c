/* setuid — run set-user-ID root by another user, with mmfold loaded through
 * /etc/ld.so.preload (run.sh's setuid test, in a private mount namespace):
 * glibc drops LD_PRELOAD but not MMFOLD_*, and mmfold must not act on them
 * (no report written as root where the caller cannot write).  Prints
 * AT_SECURE and makes a few calls mmfold would count. */
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void)
{
	printf("AT_SECURE %lu, euid %d\n", getauxval(AT_SECURE), (int)geteuid());
	char *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || mprotect(p, 4096, PROT_READ) || mprotect(p, 4096, PROT_READ))
		return 1;
	return 0;
}
