/* probe: what the arm64 tests run on (printed by tests/arm64/vm-tests.sh in
 * the VM, not a test).  Page size as the program sees it, and the kernel
 * features the tests rely on (mlock, madvise, pkeys, mseal, PROCMAP_QUERY,
 * smaps VmFlags). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_mseal
#define SYS_mseal 462
#endif

static const char *en(long r) { return r == 0 ? "ok" : strerrorname_np(errno); }

int main(void)
{
	printf("AT_PAGESZ %lu, sysconf(_SC_PAGESIZE) %ld, AT_HWCAP %#lx\n", getauxval(AT_PAGESZ),
	       sysconf(_SC_PAGESIZE), getauxval(AT_HWCAP));
	long pg = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	printf("mlock %s, ", en(mlock(p, pg)));
	printf("madvise(MADV_DONTDUMP) %s, ", en(madvise(p, pg, MADV_DONTDUMP)));
	printf("madvise(advice 12345) %s, ", en(madvise(p, pg, 12345)));
	printf("pkey_alloc %s, ", en(syscall(SYS_pkey_alloc, 0, 0) < 0 ? -1 : 0));
	printf("mseal %s\n", en(syscall(SYS_mseal, p + 3 * pg, pg, 0)));
	/* PROCMAP_QUERY (_IOWR('f', 17, 104 bytes)) on /proc/self/maps */
	uint64_t q[13] = {sizeof q, 0, (uint64_t)(uintptr_t)p};
	int fd = open("/proc/self/maps", O_RDONLY);
	printf("PROCMAP_QUERY on /proc/self/maps: %s\n",
	       en(ioctl(fd, _IOWR('f', 17, uint64_t[13]), q)));
	close(fd);
	/* the smaps entry of p: which VmFlags are shown */
	char buf[1 << 16];
	fd = open("/proc/self/smaps", O_RDONLY);
	size_t n = 0;
	for (ssize_t r; fd >= 0 && n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0;)
		n += (size_t)r;
	buf[n] = 0;
	char key[32];
	snprintf(key, sizeof key, "%lx-", (unsigned long)(uintptr_t)p);
	char *e = strstr(buf, key), *f = e ? strstr(e, "VmFlags:") : NULL;
	if (f)
		*strchrnul(f, '\n') = 0;
	printf("/proc/self/smaps: %s; mlocked+DONTDUMP page: %s\n",
	       fd < 0 ? strerrorname_np(errno) : "readable", f ? f : "no VmFlags line");
	return 0;
}
