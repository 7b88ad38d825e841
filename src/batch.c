/* Batches: per-thread queues of mprotect/madvise calls, applied merged.
 *
 * A queue belongs to one thread, which appends to it; any thread may apply
 * it (its owner at the batch's end, another thread whose call overlaps it,
 * fork and exit).  A small per-queue lock orders the two.  A thread holds at
 * most one queue lock at a time and never waits for the map lock while
 * holding one... except through mmf_apply, which takes the map lock (a leaf)
 * and never a queue lock: applying sets bq_applying, and calls made while it
 * is set skip every queue.  A signal handler that interrupts a thread busy
 * with its own queue (bq_busy) has its calls made at once.
 *
 * No malloc: a queue is one raw mmap, kept for reuse when its thread exits. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "batch.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "sigchain.h"
#include "sys.h"

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#define PIDFD_SELF_THREAD_ (-10000) /* Linux 6.15 */
#define IOV_MAX_ 1024
#define BQ_CAP 1024

enum { CAT_PROT, CAT_ADV_SET, CAT_ADV_ORDERED };

struct ent {
	uint64_t s, e;
	long (*fwd)(const struct mmf_op *);
	int kind, arg;
};

struct bq {
	struct bq *next;
	uint32_t used; /* claimed by a live thread */
	int lock;
	uint32_t n;
	uint64_t lo, hi; /* bounds of what is queued */
	struct mmf_batch_err err;
	struct ent ent[BQ_CAP];
	/* scratch for applying */
	uint32_t idx[BQ_CAP];
	uint64_t pts[2 * BQ_CAP];
	struct iovec iov[BQ_CAP];
};

/* mmf_batch_depth is defined in fast.c, the layer below (the fast paths
 * and decide() read it). */
static struct bq *queues;
static __thread struct bq *self __attribute__((tls_model("initial-exec")));
static __thread volatile int bq_busy __attribute__((tls_model("initial-exec")));
static __thread volatile int bq_applying __attribute__((tls_model("initial-exec")));
static pthread_key_t exit_key;
static int have_key;
static int pidfd = -1; /* when PIDFD_SELF_THREAD is unknown */
static uint64_t refused; /* advice values process_madvise refused (bit n) */
#define page mmf_page_size()

#define LD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

static void qlock(struct bq *q)
{
	int z = 0;
	while (!__atomic_compare_exchange_n(&q->lock, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		z = 0;
		mmf_sys_sched_yield();
	}
}

static void qunlock(struct bq *q) { __atomic_store_n(&q->lock, 0, __ATOMIC_RELEASE); }

static struct bq *claim(void)
{
	for (struct bq *q = LD(queues); q; q = q->next) {
		uint32_t z = 0;
		if (!LD(q->used) &&
		    __atomic_compare_exchange_n(&q->used, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return q;
	}
	struct bq *q = mmf_sys_mmap(NULL, sizeof(struct bq), PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mmf_sys_err((long)q))
		return NULL;
	q->used = 1;
	struct bq *head = __atomic_load_n(&queues, __ATOMIC_RELAXED);
	do
		q->next = head;
	while (!__atomic_compare_exchange_n(&queues, &head, q, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	return q;
}

/* ---- applying ----------------------------------------------------------- */

static void failed(struct bq *q, uint64_t s, uint64_t e, int kind, int arg, long r)
{
	if (!q->err.failures++) {
		q->err.s = s;
		q->err.e = e;
		q->err.kind = kind;
		q->err.arg = arg;
		q->err.error = (int)-r;
	}
}

static void sort_idx(struct bq *q, uint32_t *idx, uint32_t n)
{
	/* Shell sort by start, ties by queue order: no libc (qsort may
	 * allocate), n <= BQ_CAP. */
	for (uint32_t gap = n / 2; gap; gap /= 2)
		for (uint32_t i = gap; i < n; i++) {
			uint32_t v = idx[i], j = i;
			while (j >= gap && (q->ent[idx[j - gap]].s > q->ent[v].s ||
					    (q->ent[idx[j - gap]].s == q->ent[v].s && idx[j - gap] > v))) {
				idx[j] = idx[j - gap];
				j -= gap;
			}
			idx[j] = v;
		}
}

static void sort_u64(uint64_t *a, uint32_t n)
{
	for (uint32_t gap = n / 2; gap; gap /= 2)
		for (uint32_t i = gap; i < n; i++) {
			uint64_t v = a[i];
			uint32_t j = i;
			while (j >= gap && a[j - gap] > v) {
				a[j] = a[j - gap];
				j -= gap;
			}
			a[j] = v;
		}
}

static void emit_call(struct bq *q, int kind, uint64_t s, uint64_t e, int arg,
		      long (*fwd)(const struct mmf_op *))
{
	struct mmf_op op = {.kind = kind, .a = {(long)s, (long)(e - s), arg}, .fwd = fwd};
	long r = mmf_apply(&op);
	if (mmf_is_err(r))
		failed(q, s, e, kind, arg, r);
}

/* mprotect calls [i, j) of the queue: the final protection of every page is
 * that of the last call covering it; runs of equal protection become one
 * call each. */
static void apply_prot(struct bq *q, uint32_t i, uint32_t j)
{
	uint32_t n = j - i, *idx = q->idx;
	for (uint32_t k = 0; k < n; k++)
		idx[k] = i + k;
	sort_idx(q, idx, n);
	int overlap = 0;
	for (uint32_t k = 1; k < n; k++)
		if (q->ent[idx[k]].s < q->ent[idx[k - 1]].e)
			overlap = 1;
	uint64_t cs = 0, ce = 0;
	int cprot = -1;
	long (*cfwd)(const struct mmf_op *) = NULL;
	uint32_t pieces = 0;
#define PIECE(s_, e_, prot_, fwd_)                                             \
	do {                                                                   \
		if (cprot == (prot_) && ce == (s_) && cfwd == (fwd_)) {        \
			ce = (e_);                                             \
		} else {                                                       \
			if (cprot >= 0)                                        \
				emit_call(q, MMF_K_MPROTECT, cs, ce, cprot, cfwd); \
			cs = (s_);                                             \
			ce = (e_);                                             \
			cprot = (prot_);                                       \
			cfwd = (fwd_);                                         \
		}                                                              \
		pieces++;                                                      \
	} while (0)
	if (!overlap) {
		for (uint32_t k = 0; k < n; k++) {
			struct ent *x = &q->ent[idx[k]];
			PIECE(x->s, x->e, x->arg, x->fwd);
		}
	} else {
		/* Elementary segments between all boundaries; each takes the
		 * last call that covers it. */
		uint32_t m = 0;
		for (uint32_t k = i; k < j; k++) {
			q->pts[m++] = q->ent[k].s;
			q->pts[m++] = q->ent[k].e;
		}
		sort_u64(q->pts, m);
		for (uint32_t a = 0; a + 1 < m; a++) {
			uint64_t s = q->pts[a], e = q->pts[a + 1];
			if (s == e)
				continue;
			for (uint32_t k = j; k-- > i;) {
				struct ent *x = &q->ent[k];
				if (x->s <= s && e <= x->e) {
					PIECE(s, e, x->arg, x->fwd);
					break;
				}
			}
		}
	}
	if (cprot >= 0)
		emit_call(q, MMF_K_MPROTECT, cs, ce, cprot, cfwd);
#undef PIECE
	(void)pieces;
}

static long pmadvise(const struct mmf_op *op)
{
	long fd = __atomic_load_n(&pidfd, __ATOMIC_RELAXED);
	if (fd < 0) {
		long r = mmf_sys6(SYS_process_madvise, PIDFD_SELF_THREAD_, op->a[0], op->a[1],
				  op->a[2], 0, 0);
		if (r != -EBADF)
			return r;
		fd = mmf_sys6(SYS_pidfd_open, mmf_sys_getpid(), 0, 0, 0, 0, 0);
		if (fd < 0)
			return fd;
		int no = -1;
		if (!__atomic_compare_exchange_n(&pidfd, &no, (int)fd, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			mmf_sys_close((int)fd);
			fd = no;
		}
	}
	return mmf_sys6(SYS_process_madvise, fd, op->a[0], op->a[1], op->a[2], 0, 0);
}

/* Advice that sets no VMA flag, calls [i, j): per advice, the union of the
 * ranges, in process_madvise calls of up to 1024 ranges. */
static void apply_adv_set(struct bq *q, uint32_t i, uint32_t j)
{
	uint32_t *idx = q->idx;
	for (uint32_t a = i; a < j; a++) {
		int adv = q->ent[a].arg;
		int first = 1;
		for (uint32_t b = i; b < a; b++)
			if (q->ent[b].arg == adv)
				first = 0;
		if (!first)
			continue;
		uint32_t n = 0;
		for (uint32_t b = a; b < j; b++)
			if (q->ent[b].arg == adv)
				idx[n++] = b;
		sort_idx(q, idx, n);
		uint32_t v = 0;
		for (uint32_t k = 0; k < n; k++) {
			struct ent *x = &q->ent[idx[k]];
			if (v && x->s <= (uint64_t)q->iov[v - 1].iov_base + q->iov[v - 1].iov_len) {
				uint64_t end = (uint64_t)q->iov[v - 1].iov_base + q->iov[v - 1].iov_len;
				if (x->e > end)
					q->iov[v - 1].iov_len += x->e - end;
				continue;
			}
			q->iov[v].iov_base = (void *)x->s;
			q->iov[v].iov_len = x->e - x->s;
			v++;
		}
		long (*fwd)(const struct mmf_op *) = q->ent[a].fwd;
		for (uint32_t c = 0; c < v; c += IOV_MAX_) {
			uint32_t cnt = v - c < IOV_MAX_ ? v - c : IOV_MAX_;
			uint64_t total = 0;
			for (uint32_t k = 0; k < cnt; k++)
				total += q->iov[c + k].iov_len;
			long r = -ENOSYS;
			uint64_t bit = adv >= 0 && adv < 64 ? 1ull << adv : 0;
			if (cnt > 1 && !(__atomic_load_n(&refused, __ATOMIC_RELAXED) & bit)) {
				struct mmf_op op = {.kind = MMF_K_MADVISE,
						    .a = {(long)&q->iov[c], cnt, adv},
						    .fwd = pmadvise};
				r = mmf_forward_counted(&op, total);
				mmf_event(MMF_E_BATCH_PMADV);
				/* kernels before 6.13 take few advice values,
				 * before 5.10 no process_madvise at all: ask once */
				if (r == -EINVAL || r == -ENOSYS || r == -EPERM || r == -EBADF)
					__atomic_fetch_or(&refused, bit, __ATOMIC_RELAXED);
			}
			if (r == (long)total)
				continue;
			/* Refused, or stopped at a range: that range and the
			 * rest one by one, so errors name their range. */
			uint64_t done = r > 0 ? (uint64_t)r : 0;
			for (uint32_t k = 0; k < cnt; k++) {
				struct iovec *iv = &q->iov[c + k];
				if (done >= iv->iov_len) {
					done -= iv->iov_len;
					continue;
				}
				done = 0;
				if (cnt > 1)
					mmf_event(MMF_E_BATCH_FALLBACK);
				emit_call(q, MMF_K_MADVISE, (uint64_t)iv->iov_base,
					  (uint64_t)iv->iov_base + iv->iov_len, adv, fwd);
			}
		}
	}
}

/* Advice whose order matters (VMA flags): in order, adjacent equal calls
 * joined. */
static void apply_ordered(struct bq *q, uint32_t i, uint32_t j)
{
	for (uint32_t a = i; a < j;) {
		struct ent *x = &q->ent[a];
		uint64_t e = x->e;
		uint32_t b = a + 1;
		while (b < j && q->ent[b].arg == x->arg && q->ent[b].s == e && q->ent[b].fwd == x->fwd)
			e = q->ent[b++].e;
		emit_call(q, x->kind, x->s, e, x->arg, x->fwd);
		a = b;
	}
}

static int category(const struct ent *x)
{
	if (x->kind == MMF_K_MPROTECT)
		return CAT_PROT;
	switch (x->arg) {
	case MADV_DONTNEED: case MADV_FREE: case MADV_WILLNEED: case MADV_COLD:
	case MADV_PAGEOUT: case MADV_REMOVE: case 22: case 23: case 24: case 25:
		return CAT_ADV_SET;
	default:
		return CAT_ADV_ORDERED;
	}
}

/* A merged call failed: the kernel stopped where the caller's own calls
 * would have failed too, but which call fails, and where, is the caller's
 * business: make the run's calls again one by one, in order, so that the
 * error names the first failing call and the pages end as they would have. */
static void replay(struct bq *q, uint32_t i, uint32_t j, struct mmf_batch_err saved)
{
	q->err = saved;
	for (uint32_t k = i; k < j; k++)
		emit_call(q, q->ent[k].kind, q->ent[k].s, q->ent[k].e, q->ent[k].arg, q->ent[k].fwd);
}

/* Applies q (locked by the caller) in queue order, each run of calls of one
 * category merged. */
static void apply(struct bq *q)
{
	uint32_t n = q->n;
	if (!n)
		return;
	int was = bq_applying;
	bq_applying = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	mmf_event(MMF_E_BATCH_FLUSHES);
	for (uint32_t i = 0; i < n;) {
		int c = category(&q->ent[i]);
		uint32_t j = i + 1;
		while (j < n && category(&q->ent[j]) == c)
			j++;
		struct mmf_batch_err saved = q->err;
		if (c == CAT_PROT)
			apply_prot(q, i, j);
		else if (c == CAT_ADV_SET)
			apply_adv_set(q, i, j);
		else
			apply_ordered(q, i, j);
		if (q->err.failures != saved.failures && c != CAT_ADV_ORDERED)
			replay(q, i, j, saved);
		i = j;
	}
	q->n = 0;
	q->lo = UINT64_MAX;
	q->hi = 0;
	__atomic_fetch_sub(&mmf_batch_live, 1, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	bq_applying = was;
}

/* Applies the queues of other threads that [s, e) overlaps. */
static void apply_others(uint64_t s, uint64_t e)
{
	for (struct bq *q = LD(queues); q; q = q->next) {
		if (q == self || !LD(q->n) || LD(q->hi) <= s || e <= LD(q->lo))
			continue;
		qlock(q);
		if (q->n && q->lo < e && s < q->hi)
			apply(q);
		qunlock(q);
	}
}

static void apply_self(void)
{
	struct bq *q = self;
	if (!q || !LD(q->n))
		return;
	bq_busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	qlock(q);
	apply(q);
	qunlock(q);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	bq_busy = 0;
}

/* ---- the engine's entry ------------------------------------------------- */

static int queueable(const struct mmf_op *op, uint64_t *s, uint64_t *e)
{
	if (op->flags || (op->kind != MMF_K_MPROTECT && op->kind != MMF_K_MADVISE))
		return 0;
	uint64_t a = (uint64_t)op->a[0], l = (uint64_t)op->a[1];
	if (a & (page - 1) || l == 0)
		return 0;
	uint64_t len = (l + page - 1) & ~(uint64_t)(page - 1);
	if (len < l || a + len <= a)
		return 0;
	if (op->kind == MMF_K_MPROTECT) {
		if (op->a[2] & ~(long)(PROT_READ | PROT_WRITE | PROT_EXEC))
			return 0;
	} else {
		switch ((int)op->a[2]) {
		case MADV_DONTNEED: case MADV_FREE: case MADV_WILLNEED: case MADV_COLD:
		case MADV_PAGEOUT: case MADV_NORMAL: case MADV_RANDOM: case MADV_SEQUENTIAL:
		case MADV_HUGEPAGE: case MADV_NOHUGEPAGE: case MADV_DONTDUMP: case MADV_DODUMP:
			break;
		default:
			return 0; /* rare, or with effects that cannot wait */
		}
	}
	*s = a;
	*e = a + len;
	return 1;
}

int mmf_batch_intercept(const struct mmf_op *op, long *res)
{
	if (bq_applying)
		return 0;
	uint64_t s, e;
	/* A call from the program's own SIGSEGV/SIGBUS handler (when mmfold
	 * chains them) is made at once: a write barrier's mprotect must be in
	 * force when the handler returns, or the access faults forever. */
	int q_ok = mmf_batch_depth > 0 && !bq_busy && !mmf_sigchain_in_handler() &&
		   queueable(op, &s, &e);
	/* what applying queued calls leaves in errno is not the caller's:
	 * their failures are reported by mmfold_batch_end */
	int err = errno;
	if (!q_ok) {
		/* A call that cannot wait: this thread's queue goes first
		 * where they meet, unless a handler interrupted the thread
		 * inside it (then the call is made at once). */
		mmf_reach(op, &s, &e);
		struct bq *q = self;
		if (!bq_busy && q && LD(q->n) && s < LD(q->hi) && LD(q->lo) < e)
			apply_self();
	}
	if (s < e && LD(mmf_batch_live))
		apply_others(s, e);
	errno = err;
	if (!q_ok)
		return 0;

	struct bq *q = self;
	if (!q) {
		q = claim();
		if (!q)
			return 0; /* no memory: made at once */
		q->lo = UINT64_MAX;
		self = q;
		if (__atomic_load_n(&have_key, __ATOMIC_ACQUIRE))
			pthread_setspecific(exit_key, q);
	}
	bq_busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	qlock(q);
	if (q->n == BQ_CAP)
		apply(q);
	struct ent *x = &q->ent[q->n];
	x->s = s;
	x->e = e;
	x->fwd = op->fwd;
	x->kind = op->kind;
	x->arg = (int)op->a[2];
	if (s < q->lo)
		__atomic_store_n(&q->lo, s, __ATOMIC_RELAXED);
	if (e > q->hi)
		__atomic_store_n(&q->hi, e, __ATOMIC_RELAXED);
	if (q->n++ == 0)
		__atomic_fetch_add(&mmf_batch_live, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&q->n, q->n, __ATOMIC_RELEASE);
	qunlock(q);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	bq_busy = 0;
	mmf_stat_add(mmf_stats_self(), op->kind, MMF_S_DEFERRED, 1);
	*res = 0;
	return 1;
}

/* ---- the API ------------------------------------------------------------ */

int mmf_batch_begin(void)
{
	mmf_fast_forget(); /* calls in a batch are queued, not answered early */
	mmf_bypass_refuse(); /* queues are applied under the lock (wlock.c) */
	return ++mmf_batch_depth;
}

static long report(struct mmf_batch_err *err)
{
	struct bq *q = self;
	if (!q || !q->err.failures) {
		if (err)
			*err = (struct mmf_batch_err){0};
		return 0;
	}
	bq_busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	qlock(q);
	struct mmf_batch_err x = q->err;
	q->err = (struct mmf_batch_err){0};
	qunlock(q);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	bq_busy = 0;
	if (err)
		*err = x;
	return -x.error;
}

long mmf_batch_flush(struct mmf_batch_err *err)
{
	apply_self();
	if (mmf_batch_depth > 0) {
		/* the batch's end reports these as well */
		struct bq *q = self;
		if (err)
			*err = q ? q->err : (struct mmf_batch_err){0};
		return q && q->err.failures ? -q->err.error : 0;
	}
	return report(err);
}

long mmf_batch_end(struct mmf_batch_err *err)
{
	if (mmf_batch_depth <= 0) {
		if (err)
			*err = (struct mmf_batch_err){0};
		return -EINVAL;
	}
	if (--mmf_batch_depth > 0) {
		if (err)
			*err = (struct mmf_batch_err){0};
		return 0;
	}
	apply_self();
	return report(err);
}

void mmf_batch_flush_all(void)
{
	if (bq_applying || bq_busy)
		return;
	for (struct bq *q = LD(queues); q; q = q->next) {
		if (!LD(q->n))
			continue;
		if (q == self)
			bq_busy = 1;
		qlock(q);
		apply(q);
		qunlock(q);
		bq_busy = 0;
	}
}

void mmf_batch_fork_child(int files_shared)
{
	/* Every queue was applied before the fork (mmf_atfork_prepare); the
	 * queues of threads that do not exist here are free again. */
	for (struct bq *q = queues; q; q = q->next) {
		q->lock = 0;
		if (q != self) {
			q->n = 0;
			q->used = 0;
		}
	}
	mmf_batch_live = self && self->n ? 1 : 0;
	bq_busy = 0;
	bq_applying = 0;
	if (pidfd >= 0 && !files_shared)
		mmf_sys_close(pidfd); /* names the parent */
	pidfd = -1;
}

static void thread_exit(void *p)
{
	struct bq *q = p;
	if (q != self)
		return;
	apply_self();
	mmf_batch_depth = 0;
	self = NULL;
	q->err = (struct mmf_batch_err){0};
	__atomic_store_n(&q->used, 0, __ATOMIC_RELEASE);
}

void mmf_batch_late_init(void)
{
	if (pthread_key_create(&exit_key, thread_exit) == 0)
		__atomic_store_n(&have_key, 1, __ATOMIC_RELEASE);
}
