/* brk, sbrk, shmat: calls that change mappings behind the map's back;
 * prctl, personality: calls that change what a no-op mprotect is. */
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "next.h"

/* brk and sbrk must go through glibc (it caches the break), also before
 * mmfold's constructor looked its symbols up (mmf_next_early: they exist
 * in every glibc). */
static int have_brk(void)
{
	if (mmf_next_ready())
		return mmf_next.brk && mmf_next.sbrk;
	return mmf_next_early("brk") && mmf_next_early("sbrk");
}

static long fwd_brk(const struct mmf_op *o)
{
	if (o->nr) /* through syscall(): the raw break comes back */
		return mmf_next_ready() && mmf_next.syscall
			       ? mmf_next.syscall(SYS_brk, o->a[0])
			       : mmf_sys6(SYS_brk, o->a[0], 0, 0, 0, 0, 0);
	int ready = mmf_next_ready();
	if (o->a[1]) {
		void *(*sb)(intptr_t) =
			ready ? mmf_next.sbrk : (void *(*)(intptr_t))mmf_next_early("sbrk");
		return MMF_KRET_PTR(sb((intptr_t)o->a[0]));
	}
	int (*b)(void *) = ready ? mmf_next.brk : (int (*)(void *))mmf_next_early("brk");
	return MMF_KRET(b((void *)o->a[0]));
}

MMF_EXPORT int brk(void *addr)
{
	if (!have_brk()) {
		errno = ENOMEM; /* no brk in this libc */
		return -1;
	}
	struct mmf_op op = {.kind = MMF_K_BRK, .a = {(long)addr, 0}, .fwd = fwd_brk};
	return (int)mmf_libc_ret(mmf_run(&op));
}

MMF_EXPORT void *sbrk(intptr_t inc)
{
	if (!have_brk()) {
		errno = ENOMEM;
		return (void *)-1;
	}
	struct mmf_op op = {.kind = MMF_K_BRK, .a = {(long)inc, 1}, .fwd = fwd_brk};
	return (void *)mmf_libc_ret(mmf_run(&op));
}

static long fwd_shmat(const struct mmf_op *o)
{
	if (mmf_next.shmat)
		return MMF_KRET_PTR(mmf_next.shmat((int)o->a[0], (const void *)o->a[1], (int)o->a[2]));
	return mmf_sys6(SYS_shmat, o->a[0], o->a[1], o->a[2], 0, 0, 0);
}

MMF_EXPORT void *shmat(int id, const void *addr, int flags)
{
	struct mmf_op op = {.kind = MMF_K_SHMAT, .a = {id, (long)addr, flags}, .fwd = fwd_shmat};
	return (void *)mmf_libc_ret(mmf_run(&op));
}

MMF_EXPORT int prctl(int option, ...)
{
	va_list ap;
	unsigned long a[4];
	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	mmf_note_before(SYS_prctl, option);
	long r;
	if (mmf_next.prctl)
		r = mmf_next.prctl(option, a[0], a[1], a[2], a[3]);
	else
		r = mmf_libc_ret(mmf_sys6(SYS_prctl, option, (long)a[0], (long)a[1], (long)a[2],
					  (long)a[3], 0));
	mmf_note_prctl(option, (long)a[0], r);
	return (int)r;
}

MMF_EXPORT int personality(unsigned long persona)
{
	mmf_note_before(SYS_personality, (long)persona);
	long r;
	if (mmf_next.personality)
		r = mmf_next.personality(persona);
	else
		r = mmf_libc_ret(mmf_sys6(SYS_personality, (long)persona, 0, 0, 0, 0, 0));
	mmf_note_personality(persona, r);
	return (int)r;
}
