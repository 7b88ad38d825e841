#include "stats.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "sys.h"

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* Per-thread blocks live in chunks of raw-mmap'd memory (or of the live
 * segment), never freed; a block whose thread exited is zeroed and reused.
 * The chunks are listed in a private array, so that a forked child that
 * maps a new segment at the same address keeps finding them. */
#define CHUNKS_MAX 1024
static struct mmf_block *chunkv[CHUNKS_MAX];
static uint32_t nchunkv;
static struct mmf_block *(*more_blocks)(void);

static struct mmf_totals own;
static struct mmf_totals *tot = &own;
static __thread struct mmf_tstats *self __attribute__((tls_model("initial-exec")));
static pthread_key_t exit_key;
static int have_key;

static const char *const kind_names[] = {
#define X(id, name) name,
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

void mmf_event(int e) { __atomic_fetch_add(&tot->events[e], 1, __ATOMIC_RELAXED); }
void mmf_event_add(int e, uint64_t n) { __atomic_fetch_add(&tot->events[e], n, __ATOMIC_RELAXED); }

void mmf_stats_publish(struct mmf_totals *t, struct mmf_block *(*more)(void))
{
	*t = own;
	__atomic_store_n(&more_blocks, more, __ATOMIC_RELEASE);
	__atomic_store_n(&tot, t, __ATOMIC_RELEASE);
}

static struct mmf_block *claim(void)
{
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
	struct mmf_tstats *t = self;
	if (t)
		return t;
	struct mmf_block *b = claim();
	__atomic_fetch_add(&tot->threads, 1, __ATOMIC_RELAXED);
	if (!b)
		return &tot->spare;
	self = &b->t;
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
	fold(&tot->retired, &b->t, 1);
	if (self == &b->t)
		self = NULL;
	__atomic_store_n(&b->used, 0, __ATOMIC_RELEASE);
}

int mmf_stats_late_init(void)
{
	int r = pthread_key_create(&exit_key, mmf_stats_thread_exit);
	if (r == 0) {
		__atomic_store_n(&have_key, 1, __ATOMIC_RELEASE);
		if (self)
			pthread_setspecific(exit_key, (char *)self - offsetof(struct mmf_block, t));
	}
	return r;
}

void mmf_stats_fork_child(void)
{
	memset(tot, 0, sizeof *tot);
	tot->threads = self ? 1 : 0;
	uint32_t n = nchunkv < CHUNKS_MAX ? nchunkv : CHUNKS_MAX;
	for (uint32_t c = 0; c < n; c++)
		for (int i = 0; chunkv[c] && i < MMF_CHUNK_BLOCKS; i++) {
			struct mmf_block *b = &chunkv[c][i];
			memset(&b->t, 0, sizeof b->t);
			b->used = &b->t == self;
		}
}

void mmf_stats_snapshot(struct mmf_tstats *out, uint64_t ev[MMF_E_COUNT], uint32_t *threads)
{
	struct mmf_totals *g = __atomic_load_n(&tot, __ATOMIC_ACQUIRE);
	memset(out, 0, sizeof *out);
	fold(out, &g->retired, 0);
	fold(out, &g->spare, 0);
	uint32_t n = __atomic_load_n(&nchunkv, __ATOMIC_ACQUIRE);
	for (uint32_t c = 0; c < n && c < CHUNKS_MAX; c++) {
		struct mmf_block *b = __atomic_load_n(&chunkv[c], __ATOMIC_ACQUIRE);
		for (int i = 0; b && i < MMF_CHUNK_BLOCKS; i++)
			if (LD(b[i].used))
				fold(out, &b[i].t, 0);
	}
	for (int e = 0; e < MMF_E_COUNT; e++)
		ev[e] = LD(g->events[e]);
	if (threads)
		*threads = LD(g->threads);
}
