/* Raw system calls.  mmfold's own memory, files and output go through here,
 * never through libc: these work before libc is initialised, inside any
 * allocator, from signal handlers, and do not touch errno.  Each returns the
 * kernel's value: >= 0 on success, -errno on failure. */
#ifndef MMF_SYS_H
#define MMF_SYS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

long mmf_sys6(long n, long a, long b, long c, long d, long e, long f);

static inline int mmf_sys_err(long r) { return r < 0 && r > -4096; }

void *mmf_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
long mmf_sys_munmap(void *addr, size_t len);
long mmf_sys_open(const char *path, int flags, int mode);
long mmf_sys_close(int fd);
long mmf_sys_read(int fd, void *buf, size_t n);
/* Writes all of buf, retrying short writes and EINTR. */
long mmf_sys_write_all(int fd, const void *buf, size_t n);
long mmf_sys_getpid(void);
long mmf_sys_gettid(void);
long mmf_sys_futex_wait(uint32_t *uaddr, uint32_t val);
long mmf_sys_futex_wake(uint32_t *uaddr, int n);
long mmf_sys_sched_yield(void);

/* The system page size (from the auxiliary vector). */
size_t mmf_page_size(void);

#endif
