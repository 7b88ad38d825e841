#include "stats.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "engine.h"
#include "fast.h"
#include "sys.h"

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* Per-thread blocks live in chunks of raw-mmap'd memory (or of the live
 * segment), never freed; a block whose thread exited is zeroed and reused.
 * The chunks are listed in a private array, so that a forked child that
 * maps a new segment at the same address keeps finding them.  That list and
 * the process-wide totals are mapped at the first count, so that the
 * library's writable data stays small (a conservative collector scans it as
 * roots); only the block used when nothing can be mapped is static. */
#define CHUNKS_MAX 512
struct priv {
	struct mmf_totals own;
	struct mmf_block *chunkv[CHUNKS_MAX];
};
static struct priv *priv_p;
static struct mmf_totals *tot; /* priv_p->own, or the live segment's */
static uint32_t nchunkv;
static struct mmf_block *(*more_blocks)(void);
/* 8-aligned: the 32 the compiler gives a large object by default cost up
 * to 24 bytes of padding against check-footprint's 4096 */
static struct mmf_tstats spare_static __attribute__((aligned(8)));

/* The private state, mapped on first use; NULL when it cannot be. */
static struct priv *priv(void)
{
	struct priv *p = __atomic_load_n(&priv_p, __ATOMIC_ACQUIRE);
	if (__builtin_expect(p != NULL, 1))
		return p;
	void *m = mmf_sys_mmap(NULL, sizeof(struct priv), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mmf_sys_err((long)m))
		return NULL;
	struct priv *none = NULL;
	if (!__atomic_compare_exchange_n(&priv_p, &none, (struct priv *)m, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		mmf_sys_munmap(m, sizeof(struct priv)); /* another thread won */
		return none;
	}
	struct mmf_totals *t0 = NULL;
	__atomic_compare_exchange_n(&tot, &t0, &((struct priv *)m)->own, 0, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
	return (struct priv *)m;
}

/* The process-wide totals; NULL when no memory could be mapped. */
static struct mmf_totals *totals(void)
{
	struct mmf_totals *g = __atomic_load_n(&tot, __ATOMIC_ACQUIRE);
	if (__builtin_expect(g != NULL, 1) || !priv())
		return g;
	return __atomic_load_n(&tot, __ATOMIC_ACQUIRE);
}

/* This thread's block: kept with the fast paths' hint (fast.h), one
 * thread-local block for both. */
#define mmf_stats_tls (mmf_fast_tls.t)
static pthread_key_t exit_key;
static int have_key;

static const char *const kind_names[] = {
#define X(id, name, len) name,
	MMF_KINDS(X)
#undef X
};
static const char *const field_names[] = {
#define X(id, name) name,
	MMF_FIELDS(X)
#undef X
};
static const char *const event_names[] = {
#define X(id, name, ...) name,
	MMF_EVENTS(X)
#undef X
};

const char *mmf_kind_name(int k) { return kind_names[k]; }
const char *mmf_field_name(int f) { return field_names[f]; }
const char *mmf_event_name(int e) { return event_names[e]; }

void mmf_event_add(int e, uint64_t n)
{
	struct mmf_totals *g = totals();
	if (g)
		__atomic_fetch_add(&g->events[e], n, __ATOMIC_RELAXED);
}
void mmf_event(int e) { mmf_event_add(e, 1); }

void mmf_stats_publish(struct mmf_totals *t, struct mmf_block *(*more)(void))
{
	struct mmf_totals *g = totals();
	if (g)
		*t = *g;
	__atomic_store_n(&more_blocks, more, __ATOMIC_RELEASE);
	__atomic_store_n(&tot, t, __ATOMIC_RELEASE);
}

static struct mmf_block *claim(void)
{
	struct priv *p = priv();
	if (!p)
		return NULL;
	struct mmf_block **chunkv = p->chunkv;
	uint32_t n = __atomic_load_n(&nchunkv, __ATOMIC_ACQUIRE);
	for (uint32_t c = 0; c < n && c < CHUNKS_MAX; c++) {
		struct mmf_block *b = __atomic_load_n(&chunkv[c], __ATOMIC_ACQUIRE);
		for (int i = 0; b && i < MMF_CHUNK_BLOCKS; i++) {
			uint32_t z = 0;
			if (!LD(b[i].used) &&
			    __atomic_compare_exchange_n(&b[i].used, &z, 1, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
				return &b[i];
		}
	}
	uint32_t idx = __atomic_fetch_add(&nchunkv, 1, __ATOMIC_ACQ_REL);
	if (idx >= CHUNKS_MAX)
		return NULL;
	struct mmf_block *(*more)(void) = __atomic_load_n(&more_blocks, __ATOMIC_ACQUIRE);
	struct mmf_block *b = more ? more() : NULL;
	if (!b) {
		b = mmf_sys_mmap(NULL, MMF_CHUNK_BLOCKS * sizeof(struct mmf_block),
				 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mmf_sys_err((long)b))
			return NULL;
	}
	b[0].used = 1;
	__atomic_store_n(&chunkv[idx], b, __ATOMIC_RELEASE);
	return &b[0];
}

struct mmf_tstats *mmf_stats_self(void)
{
	struct mmf_tstats *t = mmf_stats_tls;
	if (t)
		return t;
	struct mmf_block *b = claim();
	struct mmf_totals *g = totals();
	if (g)
		__atomic_fetch_add(&g->threads, 1, __ATOMIC_RELAXED);
	if (!b)
		return g ? &g->spare : &spare_static;
	mmf_stats_tls = &b->t;
	/* pthread_setspecific does not allocate for the first 32 keys, and
	 * our key is created early; if it fails the counters simply stay. */
	if (__atomic_load_n(&have_key, __ATOMIC_ACQUIRE))
		pthread_setspecific(exit_key, b);
	return &b->t;
}

static void fold(struct mmf_tstats *dst, struct mmf_tstats *src, int zero)
{
	for (int k = 0; k < MMF_K_COUNT; k++)
		for (int f = 0; f < MMF_S_COUNT; f++) {
			uint64_t v = LD(src->v[k][f]);
			if (v)
				__atomic_fetch_add(&dst->v[k][f], v, __ATOMIC_RELAXED);
			if (zero)
				__atomic_store_n(&src->v[k][f], 0, __ATOMIC_RELAXED);
		}
}

void mmf_stats_thread_exit(void *p)
{
	struct mmf_block *b = p;
	mmf_lazy_thread_exit();
	struct mmf_totals *g = totals();
	fold(g ? &g->retired : &spare_static, &b->t, 1);
	if (mmf_stats_tls == &b->t) {
		/* fastrun.c's hot flip counts on the block: none without it */
		mmf_fast_tls.flip_hot = mmf_fast_tls.flip_he = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		mmf_stats_tls = NULL;
	}
	__atomic_store_n(&b->used, 0, __ATOMIC_RELEASE);
}

int mmf_stats_late_init(void)
{
	int r = pthread_key_create(&exit_key, mmf_stats_thread_exit);
	if (r == 0) {
		__atomic_store_n(&have_key, 1, __ATOMIC_RELEASE);
		if (mmf_stats_tls)
			pthread_setspecific(exit_key, (char *)mmf_stats_tls - offsetof(struct mmf_block, t));
	}
	return r;
}

void mmf_stats_fork_child(void)
{
	struct mmf_totals *g = __atomic_load_n(&tot, __ATOMIC_ACQUIRE);
	struct priv *p = __atomic_load_n(&priv_p, __ATOMIC_ACQUIRE);
	memset(&spare_static, 0, sizeof spare_static);
	if (g) {
		memset(g, 0, sizeof *g);
		g->threads = mmf_stats_tls ? 1 : 0;
	}
	uint32_t n = nchunkv < CHUNKS_MAX ? nchunkv : CHUNKS_MAX;
	for (uint32_t c = 0; p && c < n; c++)
		for (int i = 0; p->chunkv[c] && i < MMF_CHUNK_BLOCKS; i++) {
			struct mmf_block *b = &p->chunkv[c][i];
			memset(&b->t, 0, sizeof b->t);
			b->used = &b->t == mmf_stats_tls;
		}
}

void mmf_stats_snapshot(struct mmf_tstats *out, uint64_t ev[MMF_E_COUNT], uint32_t *threads)
{
	struct mmf_totals *g = __atomic_load_n(&tot, __ATOMIC_ACQUIRE);
	struct priv *p = __atomic_load_n(&priv_p, __ATOMIC_ACQUIRE);
	memset(out, 0, sizeof *out);
	fold(out, &spare_static, 0);
	if (g) {
		fold(out, &g->retired, 0);
		fold(out, &g->spare, 0);
	}
	uint32_t n = __atomic_load_n(&nchunkv, __ATOMIC_ACQUIRE);
	for (uint32_t c = 0; p && c < n && c < CHUNKS_MAX; c++) {
		struct mmf_block *b = __atomic_load_n(&p->chunkv[c], __ATOMIC_ACQUIRE);
		for (int i = 0; b && i < MMF_CHUNK_BLOCKS; i++)
			if (LD(b[i].used))
				fold(out, &b[i].t, 0);
	}
	for (int e = 0; e < MMF_E_COUNT; e++)
		ev[e] = g ? LD(g->events[e]) : 0;
	if (threads)
		*threads = g ? LD(g->threads) : 0;
}
