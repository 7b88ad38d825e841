/* libctorlib.so — memory calls from a shared library's constructor and
 * destructor, i.e. before the interposer may have initialised itself and
 * after it may have torn itself down.  ctorlib_ops() is also what the main
 * program (ctor_main.c) calls from its own early and late hooks. */
#include "common.h"

/* Runs a fixed sequence (redundant calls included) on a reserved area and
 * prints every result and the final page states via write(2). */
void ctorlib_ops(const char *tag)
{
	struct obuf o = { 0 };
	fg_install();
	uintptr_t a = reserve_arena(8);
	if (!a) {
		ob_printf(&o, "%s: cannot reserve\n", tag);
		ob_flush(&o, 1, "");
		free(o.p);
		return;
	}
	char *p = (char *)a;
	long r;
#define OP(name, expr)                                                        \
	do {                                                                  \
		errno = 0;                                                    \
		r = (long)(expr);                                             \
		ob_printf(&o, "%s: %-34s %ld %s\n", tag, name, r,              \
			  r == -1 ? ename(errno) : "");                        \
	} while (0)
	OP("mmap FIXED RW p0-p5", mmap(p, 6 * PG, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p ? 0 : -1);
	memset(p, 0x11, 6 * PG);
	OP("mprotect R p0-p1", mprotect(p, 2 * PG, PROT_READ));
	OP("mprotect R p0-p1 again", mprotect(p, 2 * PG, PROT_READ));
	OP("SYS_mprotect R p0-p1 again", syscall(SYS_mprotect, p, 2 * PG, PROT_READ));
	OP("mprotect RW p1", mprotect(p + PG, PG, PROT_READ | PROT_WRITE));
	OP("mlock p2-p3", mlock(p + 2 * PG, 2 * PG));
	OP("mlock p2-p3 again", mlock(p + 2 * PG, 2 * PG));
	OP("madvise DONTDUMP p3-p4", madvise(p + 3 * PG, 2 * PG, MADV_DONTDUMP));
	OP("madvise DONTDUMP p3-p4 again", madvise(p + 3 * PG, 2 * PG, MADV_DONTDUMP));
	OP("madvise DONTNEED p3 (locked)", madvise(p + 3 * PG, PG, MADV_DONTNEED));
	OP("madvise DONTNEED p4", madvise(p + 4 * PG, PG, MADV_DONTNEED));
	OP("madvise DONTNEED p4 again", madvise(p + 4 * PG, PG, MADV_DONTNEED));
	OP("munlock p2", munlock(p + 2 * PG, PG));
	OP("munmap p5", munmap(p + 5 * PG, PG));
	OP("mprotect R p5 (unmapped)", mprotect(p + 5 * PG, PG, PROT_READ));
	OP("mprotect R p5 (unmapped) again", mprotect(p + 5 * PG, PG, PROT_READ));
	OP("mprotect RW p4-p5 (hole)", mprotect(p + 4 * PG, 2 * PG, PROT_READ | PROT_WRITE));
	OP("pkey_mprotect(-1) R p4", pkey_mprotect(p + 4 * PG, PG, PROT_READ, -1));
	OP("mremap p4 -> p6", mremap(p + 4 * PG, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED,
				     p + 6 * PG) == p + 6 * PG ? 0 : -1);
	OP("mprotect R p6 (moved, same)", mprotect(p + 6 * PG, PG, PROT_READ));
	probe_pages(&o, tag, a, 8, NULL);
	OP("munmap all", munmap(p, 8 * PG));
	OP("munmap all again", munmap(p, 8 * PG));
	ob_flush(&o, 1, "");
	free(o.p);
}

__attribute__((constructor)) static void lib_ctor(void)
{
	ctorlib_ops("lib-ctor");
}

__attribute__((destructor)) static void lib_dtor(void)
{
	ctorlib_ops("lib-dtor");
}
