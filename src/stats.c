#include "stats.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "engine.h"
#include "sys.h"

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* Per-thread blocks live in chunks of raw-mmap'd memory, never freed; a
 * block whose thread exited is zeroed and reused. */
#define CHUNK_BLOCKS 64
struct __attribute__((aligned(64))) block {
	struct mmf_tstats t;
	uint32_t used;
};
struct chunk {
	struct chunk *next;
	struct block b[CHUNK_BLOCKS];
};

static struct chunk *chunks;
static struct mmf_tstats shared_block; /* when memory runs out */
static struct mmf_tstats retired;
static uint64_t events[MMF_E_COUNT];
static uint32_t threads_seen;
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

void mmf_event(int e) { __atomic_fetch_add(&events[e], 1, __ATOMIC_RELAXED); }
void mmf_event_add(int e, uint64_t n) { __atomic_fetch_add(&events[e], n, __ATOMIC_RELAXED); }

static struct block *claim(void)
{
	for (struct chunk *c = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE); c; c = c->next)
		for (int i = 0; i < CHUNK_BLOCKS; i++) {
			uint32_t z = 0;
			if (!LD(c->b[i].used) &&
			    __atomic_compare_exchange_n(&c->b[i].used, &z, 1, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
				return &c->b[i];
		}
	struct chunk *c = mmf_sys_mmap(NULL, sizeof(struct chunk), PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mmf_sys_err((long)c))
		return NULL;
	c->b[0].used = 1;
	struct chunk *head = __atomic_load_n(&chunks, __ATOMIC_RELAXED);
	do
		c->next = head;
	while (!__atomic_compare_exchange_n(&chunks, &head, c, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	return &c->b[0];
}

struct mmf_tstats *mmf_stats_self(void)
{
	struct mmf_tstats *t = self;
	if (t)
		return t;
	struct block *b = claim();
	__atomic_fetch_add(&threads_seen, 1, __ATOMIC_RELAXED);
	if (!b)
		return &shared_block;
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
	struct block *b = p;
	mmf_lazy_thread_exit();
	fold(&retired, &b->t, 1);
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
			pthread_setspecific(exit_key, (char *)self - offsetof(struct block, t));
	}
	return r;
}

void mmf_stats_fork_child(void)
{
	memset(&retired, 0, sizeof retired);
	memset(&shared_block, 0, sizeof shared_block);
	memset(events, 0, sizeof events);
	threads_seen = self ? 1 : 0;
	for (struct chunk *c = chunks; c; c = c->next)
		for (int i = 0; i < CHUNK_BLOCKS; i++) {
			memset(&c->b[i].t, 0, sizeof c->b[i].t);
			if (&c->b[i].t != self)
				c->b[i].used = 0;
		}
}

void mmf_stats_snapshot(struct mmf_tstats *out, uint64_t ev[MMF_E_COUNT], uint32_t *threads)
{
	memset(out, 0, sizeof *out);
	fold(out, &retired, 0);
	fold(out, &shared_block, 0);
	for (struct chunk *c = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE); c; c = c->next)
		for (int i = 0; i < CHUNK_BLOCKS; i++)
			if (LD(c->b[i].used))
				fold(out, &c->b[i].t, 0);
	for (int e = 0; e < MMF_E_COUNT; e++)
		ev[e] = LD(events[e]);
	if (threads)
		*threads = LD(threads_seen);
}
