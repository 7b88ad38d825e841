/* The batch API of include/mmfold.h. */
#include <sys/mman.h>

#include "../include/mmfold.h"
#include "next.h"

static int done(long r, const struct mmf_batch_err *x, struct mmfold_batch_error *err)
{
	if (err) {
		err->addr = (void *)x->s;
		err->len = (size_t)(x->e - x->s);
		err->call = !x->failures ? 0
			    : x->kind == MMF_K_MPROTECT ? MMFOLD_CALL_MPROTECT : MMFOLD_CALL_MADVISE;
		err->arg = x->arg;
		err->error = x->error;
		err->failures = x->failures;
	}
	return (int)mmf_libc_ret(r);
}

MMF_EXPORT int mmfold_batch_begin(void)
{
	mmf_early_init();
	return mmf_batch_begin();
}

MMF_EXPORT int mmfold_batch_end(struct mmfold_batch_error *err)
{
	struct mmf_batch_err x;
	long r = mmf_batch_end(&x);
	return done(r, &x, err);
}

MMF_EXPORT int mmfold_flush(void)
{
	struct mmf_batch_err x;
	long r = mmf_batch_flush(&x);
	mmf_lazy_flush_all();
	return (int)mmf_libc_ret(r);
}

/* Calls made at once (modes off and observe, or arguments the kernel
 * rejects on their own) fail at once: their errors join the batch's. */
struct now {
	struct mmf_batch_err e;
};

static void now_failed(struct now *n, void *addr, size_t len, int kind, int arg)
{
	if (!n->e.failures++) {
		n->e.s = (uint64_t)addr;
		n->e.e = (uint64_t)addr + len;
		n->e.kind = kind;
		n->e.arg = arg;
		n->e.error = errno;
	}
}

static int vec_end(struct now *n, struct mmfold_batch_error *err)
{
	struct mmf_batch_err x;
	long r = mmf_batch_end(&x);
	if (n->e.failures) {
		n->e.failures += x.failures;
		x = n->e;
		r = -x.error;
	}
	return done(r, &x, err);
}

MMF_EXPORT int mmfold_mprotectv(const struct mmfold_prot_range *v, size_t n,
				struct mmfold_batch_error *err)
{
	struct now now = {0};
	mmf_early_init();
	mmf_batch_begin();
	for (size_t i = 0; i < n; i++)
		if (mprotect(v[i].addr, v[i].len, v[i].prot))
			now_failed(&now, v[i].addr, v[i].len, MMF_K_MPROTECT, v[i].prot);
	return vec_end(&now, err);
}

MMF_EXPORT int mmfold_madvisev(const struct mmfold_adv_range *v, size_t n,
			       struct mmfold_batch_error *err)
{
	struct now now = {0};
	mmf_early_init();
	mmf_batch_begin();
	for (size_t i = 0; i < n; i++)
		if (madvise(v[i].addr, v[i].len, v[i].advice))
			now_failed(&now, v[i].addr, v[i].len, MMF_K_MADVISE, v[i].advice);
	return vec_end(&now, err);
}
