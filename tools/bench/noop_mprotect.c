/* noop_mprotect: mmap a range, touch every page, then call
 * mprotect(range, PROT_READ|PROT_WRITE) -- the protection it already has --
 * N times.  Prints ns per call.  Args: [bytes (65536)] [calls (1000000)] */
#include "common.h"

#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t len = arg_ul(argc, argv, 1, 65536);
	unsigned long n = arg_ul(argc, argv, 2, 1000000);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	len = (len + pg - 1) / pg * pg;

	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	for (size_t i = 0; i < len; i += pg)
		p[i] = (char)i;

	/* warm-up */
	for (unsigned long i = 0; i < n / 100 + 1; i++)
		if (mprotect(p, len, PROT_READ | PROT_WRITE) != 0)
			die("mprotect");
	double t0 = now_ns();
	for (unsigned long i = 0; i < n; i++)
		if (mprotect(p, len, PROT_READ | PROT_WRITE) != 0)
			die("mprotect");
	double t1 = now_ns();
	printf("%.2f ns/call no-op mprotect of %zu KiB, %lu calls\n", (t1 - t0) / (double)n,
	       len / 1024, n);
	return 0;
}
