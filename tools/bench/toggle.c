/* toggle: one page, its own mapping (PROT_NONE guard pages on both sides so
 * the kernel never merges it with a neighbour), toggled PROT_READ|PROT_WRITE
 * <-> PROT_READ.  Every call changes the protection, so mmfold must forward
 * all of them: this measures its overhead on calls it cannot skip.  Prints
 * ns per toggle (one mprotect call).  Args: [toggles (400000)] */
#include "common.h"

#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned long n = arg_ul(argc, argv, 1, 400000);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	char *g = mmap(NULL, 3 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g == MAP_FAILED)
		die("mmap");
	char *p = g + pg;
	if (mprotect(p, pg, PROT_READ | PROT_WRITE) != 0)
		die("mprotect");
	p[0] = 1;

	n &= ~1ul; /* even: end read-write */
	for (unsigned long i = 0; i < 1000; i++)
		if (mprotect(p, pg, (i & 1) ? PROT_READ | PROT_WRITE : PROT_READ) != 0)
			die("mprotect");
	double t0 = now_ns();
	for (unsigned long i = 0; i < n; i++)
		if (mprotect(p, pg, (i & 1) ? PROT_READ | PROT_WRITE : PROT_READ) != 0)
			die("mprotect");
	double t1 = now_ns();
	p[0]++; /* still writable */
	printf("%.2f ns/toggle 1-page RW<->RO mprotect, %lu toggles\n", (t1 - t0) / (double)n, n);
	return 0;
}
