/* Call sites the profile must name from the ELF file itself: built without
 * -rdynamic (none of these is a dynamic symbol), then stripped with its
 * debug information in a separate file found by .gnu_debuglink
 * (tests/tools/run.sh).  alpha_protect makes 300 no-op mprotect calls,
 * beta_protect 30, Heap::seal_pages 17 madvise calls; C++ names, so the
 * report must demangle them. */
#include <cstdio>
#include <sys/mman.h>
#include <unistd.h>

namespace gc {
struct Heap {
	char *base;
	size_t page;
	__attribute__((noinline)) void seal_pages(int times);
};

__attribute__((noinline)) void Heap::seal_pages(int times)
{
	for (int i = 0; i < times; i++)
		madvise(base + 2 * page, page, MADV_DONTFORK);
}
} // namespace gc

__attribute__((noinline)) void alpha_protect(char *p, size_t len)
{
	for (int i = 0; i < 300; i++)
		mprotect(p, len, PROT_READ | PROT_WRITE);
}

__attribute__((noinline)) void beta_protect(char *p, size_t len)
{
	for (int i = 0; i < 30; i++)
		mprotect(p, len, PROT_READ);
}

int main()
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	void *m = mmap(nullptr, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	char *p = static_cast<char *>(m);
	alpha_protect(p, pg);
	beta_protect(p + pg, pg);
	gc::Heap h{p, pg};
	h.seal_pages(17);
	std::printf("named ok\n");
	return 0;
}
