/* Call sites with names for the profiler test: hot_mprotect_site makes 300
 * no-op mprotect calls, cold_mprotect_site 30, map_site a few mmaps.  Built
 * with -rdynamic and without inlining so every site is its own symbol. */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((noinline)) void hot_mprotect_site(char *p, size_t len)
{
	for (int i = 0; i < 300; i++)
		mprotect(p, len, PROT_READ | PROT_WRITE);
}

__attribute__((noinline)) void cold_mprotect_site(char *p, size_t len)
{
	for (int i = 0; i < 30; i++)
		mprotect(p, len, PROT_READ);
}

__attribute__((noinline)) char *map_site(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

int main(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	char *p = map_site(4 * pg);
	if (!p)
		return 1;
	hot_mprotect_site(p, pg);
	cold_mprotect_site(p + pg, pg);
	printf("sites ok\n");
	return 0;
}
