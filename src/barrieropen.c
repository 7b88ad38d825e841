/* The write barrier's start-up: opening the userfaultfd (barrier.c). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "barrierint.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "engine.h"
#include "sys.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1u << 13)
#endif

/* Opens the userfaultfd with the features the barrier needs (into *ufd),
 * far from the descriptors a program numbers itself, and /proc/self/maps
 * for PROCMAP_QUERY (into *maps_fd, when it is -1 and the kernel has the
 * query).  0, or -1 with *why. */
long mmf_barrier_open(int *ufd, int *maps_fd, const char **why)
{
	long fd = mmf_sys6(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY, 0, 0, 0,
			   0, 0);
	if (fd == -EINVAL) /* a kernel before 5.11 */
		fd = mmf_sys6(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK, 0, 0, 0, 0, 0);
	if (fd < 0) {
		*why = fd == -EPERM ? "userfaultfd not permitted (vm.unprivileged_userfaultfd=0 "
				      "without CAP_SYS_PTRACE, or seccomp)"
		       : fd == -ENOSYS ? "no userfaultfd system call (kernel or seccomp)"
				       : "userfaultfd failed";
		return -1;
	}
	/* far from the descriptors a program numbers itself (dup2 onto 3..) */
	struct rlimit rl;
	long hi = 1000;
	if (mmf_sys6(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)&rl, 0, 0) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur - 8 < hi)
		hi = (long)rl.rlim_cur > 16 ? (long)rl.rlim_cur - 8 : 3;
	long moved = mmf_sys6(SYS_fcntl, fd, F_DUPFD_CLOEXEC, hi, 0, 0, 0);
	if (moved >= 0) {
		mmf_sys_close((int)fd);
		fd = moved;
	}
	struct uffdio_api api = {UFFD_API, UFFD_FEATURE_SIGBUS | UFFD_FEATURE_WP_UNPOPULATED, 0};
	if (mmf_sys6(SYS_ioctl, fd, (long)UFFDIO_API, (long)&api, 0, 0, 0) != 0) {
		mmf_sys_close((int)fd);
		*why = "the kernel lacks UFFD_FEATURE_SIGBUS or UFFD_FEATURE_WP_UNPOPULATED (6.4)";
		return -1;
	}
	*ufd = (int)fd;
	if (*maps_fd < 0) {
		long m = mmf_sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
		long mm = m >= 0 ? mmf_sys6(SYS_fcntl, m, F_DUPFD_CLOEXEC, hi, 0, 0, 0) : -1;
		if (mm >= 0) {
			mmf_sys_close((int)m);
			m = mm;
		}
		uint64_t vs, ve;
		/* a kernel before 6.11: the records decide what is registered */
		if (m >= 0 && mmf_vma_at((int)m, (uint64_t)&api, &vs, &ve) != 0) {
			mmf_sys_close((int)m);
			m = -1;
		}
		*maps_fd = (int)m;
	}
	return 0;
}
