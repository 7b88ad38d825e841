/* Lazy mode's pending table.  See lazy.h. */
#include "lazy.h"

#include <errno.h>
#include <sys/mman.h>

#include "core.h"
#include "sys.h"

#define RLX __ATOMIC_RELAXED
#define LD(x) __atomic_load_n(&(x), RLX)
#define ST(x, v) __atomic_store_n(&(x), (v), RLX)

/* Lazy mode's state (core.h), given to the policy's functions (lazymode.c)
 * and to the writer section and thread-exit steps here.
 *
 * blockers counts the threads that block SIGSEGV or SIGBUS.  The kernel cannot hand such a
 * thread's fault on a waiting promotion to the handler: it unblocks the
 * signal, resets it to SIG_DFL and the process dies (Chromium blocks every
 * signal around fork() and thread creation, and PartitionAlloc commits and
 * touches memory in that window).  While any thread blocks them nothing new
 * waits, and what waited was made when the first one blocked them.
 * lz_mask is this thread's state: 0 not known yet (a new thread inherits
 * its creator's mask), 1 open, 2 blocks.  Masks changed without going
 * through sigprocmask/pthread_sigmask (siglongjmp, swapcontext, a signal
 * handler's sa_mask, raw system calls) are not seen: README.md. */
struct mmf_lazy_state lazy_state = {.touched_max = 768, .max_maps = 65530};
__thread int lz_mask __attribute__((tls_model("initial-exec")));

/* Writer lock held.  Nothing waits in [s,e) any more (a call replaced it). */
void lazy_drop(uint64_t s, uint64_t e)
{
	struct mmf_lazy_state *z = &lazy_state;
	if (!z->on)
		return;
	mmf_lazy_set(&z->prot, s, e, -1);
	mmf_lazy_set(&z->unlock, s, e, -1);
	mmf_lazy_set(&z->fork, s, e, -1);
}

/* A thread that ends with the signals blocked no longer holds lazy mode
 * back (from the statistics' thread-exit destructor). */
void mmf_lazy_thread_exit(void)
{
	struct mmf_lazy_state *z = &lazy_state;
	if (lz_mask == 2)
		__atomic_sub_fetch(&z->blockers, 1, __ATOMIC_SEQ_CST);
	lz_mask = 0;
}

int mmf_lazy_init(struct mmf_lazy *z, uint32_t cap)
{
	void *p = mmf_sys_mmap(NULL, (size_t)cap * sizeof(struct mmf_pend), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mmf_sys_err((long)p))
		return (int)(long)p;
	z->p = p;
	z->cap = cap;
	z->n = 0;
	z->seq = 0;
	z->lo = z->hi = 0;
	return 0;
}

static void wbegin(struct mmf_lazy *z)
{
	ST(z->seq, LD(z->seq) + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void wend(struct mmf_lazy *z)
{
	uint32_t n = LD(z->n);
	ST(z->lo, n ? LD(z->p[0].s) : 0);
	ST(z->hi, n ? LD(z->p[n - 1].e) : 0);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	ST(z->seq, LD(z->seq) + 1);
}

static void put(struct mmf_pend *d, uint64_t s, uint64_t e, uint8_t want, uint8_t touches)
{
	ST(d->s, s);
	ST(d->e, e);
	ST(d->want, want);
	ST(d->touches, touches);
}

/* First index whose range ends after s. */
static uint32_t first_after(const struct mmf_lazy *z, uint64_t s)
{
	uint32_t lo = 0, hi = LD(z->n);
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (LD(z->p[mid].e) <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int mmf_lazy_set(struct mmf_lazy *z, uint64_t s, uint64_t e, int want)
{
	if (s >= e)
		return 0;
	uint32_t n = z->n, i = first_after(z, s), j = i;
	while (j < n && z->p[j].s < e)
		j++;
	/* [i, j) overlap [s,e).  Pieces kept: the head of i, the tail of j-1. */
	int head = i < j && z->p[i].s < s, tail = i < j && z->p[j - 1].e > e;
	uint32_t add = (uint32_t)head + (uint32_t)tail + (want >= 0);
	if (n - (j - i) + add > z->cap)
		return -1;
	struct mmf_pend h = head ? z->p[i] : (struct mmf_pend){0};
	struct mmf_pend t = tail ? z->p[j - 1] : (struct mmf_pend){0};
	uint32_t newn = n - (j - i) + add;
	wbegin(z);
	/* move the entries from j on to their new place */
	if (i + add != j) {
		if (i + add < j) {
			for (uint32_t k = j; k < n; k++)
				put(&z->p[k - (j - i - add)], z->p[k].s, z->p[k].e, z->p[k].want,
				    z->p[k].touches);
		} else {
			for (uint32_t k = n; k-- > j;)
				put(&z->p[k + (i + add - j)], z->p[k].s, z->p[k].e, z->p[k].want,
				    z->p[k].touches);
		}
	}
	uint32_t k = i;
	if (head)
		put(&z->p[k++], h.s, s, h.want, h.touches);
	if (want >= 0)
		put(&z->p[k++], s, e, (uint8_t)want, 0);
	if (tail)
		put(&z->p[k++], e, t.e, t.want, t.touches);
	ST(z->n, newn);
	wend(z);
	return 0;
}

uint32_t mmf_lazy_collect(const struct mmf_lazy *z, uint64_t s, uint64_t e, struct mmf_pend *out,
			  uint32_t max)
{
	uint32_t c = 0;
	for (uint32_t i = first_after(z, s); i < z->n && z->p[i].s < e && c < max; i++) {
		out[c] = z->p[i];
		if (out[c].s < s)
			out[c].s = s;
		if (out[c].e > e)
			out[c].e = e;
		c++;
	}
	return c;
}

struct mmf_pend *mmf_lazy_at(struct mmf_lazy *z, uint64_t addr)
{
	uint32_t i = first_after(z, addr);
	return i < z->n && z->p[i].s <= addr ? &z->p[i] : 0;
}

int mmf_lazy_overlaps(const struct mmf_lazy *z, uint64_t s, uint64_t e)
{
	for (int tries = 0; tries < 64; tries++) {
		uint32_t q = __atomic_load_n(&z->seq, __ATOMIC_ACQUIRE);
		if (q & 1)
			continue;
		int r = 0;
		if (LD(z->n) && s < LD(z->hi) && LD(z->lo) < e) {
			uint32_t i = first_after(z, s);
			r = i < LD(z->n) && LD(z->p[i].s) < e;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (LD(z->seq) == q)
			return r;
	}
	return 1; /* could not tell: the writer's path decides */
}

int mmf_lazy_find(const struct mmf_lazy *z, uint64_t addr, struct mmf_pend *out)
{
	for (int tries = 0; tries < 1000; tries++) {
		uint32_t q = __atomic_load_n(&z->seq, __ATOMIC_ACQUIRE);
		if (q & 1)
			continue;
		int r = 0;
		uint32_t i = first_after(z, addr);
		if (i < LD(z->n) && LD(z->p[i].s) <= addr) {
			out->s = LD(z->p[i].s);
			out->e = LD(z->p[i].e);
			out->want = LD(z->p[i].want);
			out->touches = LD(z->p[i].touches);
			r = 1;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (LD(z->seq) == q)
			return r;
	}
	return -1; /* busy: the caller takes the writer lock and looks again */
}
