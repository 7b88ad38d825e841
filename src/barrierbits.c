/* The write barrier's page bits: see barrierint.h. */
#include "barrierint.h"

#include <stddef.h>
#include <sys/mman.h>

#include "sys.h"

#define RW (PROT_READ | PROT_WRITE)

struct chunk *mmf_wpb_chunks; /* MAX_CHUNKS, mapped at start (barrier.c) */
uint32_t mmf_wpb_n;
uint64_t mmf_wpb_pages; /* pages with a wp bit (a fast "none") */
uint64_t mmf_wpb_page; /* the mmf_wpb_page size */


struct chunk *mmf_wpb_chunk_of(uint64_t a)
{
	uint64_t base = a >> CHUNK_SHIFT << CHUNK_SHIFT;
	uint32_t n = LD(mmf_wpb_n);
	for (uint32_t i = 0; i < n; i++)
		if (__atomic_load_n(&mmf_wpb_chunks[i].base, __ATOMIC_RELAXED) == base)
			return &mmf_wpb_chunks[i];
	return NULL;
}

/* Writer lock held.  The chunk of a, made when missing; NULL when no
 * memory is left. */
struct chunk *mmf_wpb_chunk_make(uint64_t a)
{
	struct chunk *c = mmf_wpb_chunk_of(a);
	if (c || mmf_wpb_n >= MAX_CHUNKS)
		return c;
	size_t bytes = ((size_t)1 << CHUNK_SHIFT) / mmf_wpb_page / 8;
	void *m = mmf_sys_mmap(NULL, 2 * bytes, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mmf_sys_err((long)m))
		return NULL;
	c = &mmf_wpb_chunks[mmf_wpb_n];
	c->bits[WP] = m;
	c->bits[REG] = (uint64_t *)((char *)m + bytes);
	__atomic_store_n(&c->base, a >> CHUNK_SHIFT << CHUNK_SHIFT, __ATOMIC_RELAXED);
	__atomic_store_n(&mmf_wpb_n, mmf_wpb_n + 1, __ATOMIC_RELEASE);
	return c;
}

/* Lock-free: the bit of mmf_wpb_page a (0 when no chunk holds it). */
int mmf_wpb_bit(int which, uint64_t a)
{
	struct chunk *c = mmf_wpb_chunk_of(a);
	if (!c)
		return 0;
	uint64_t i = (a - c->base) / mmf_wpb_page;
	return (int)((__atomic_load_n(&c->bits[which][i / 64], __ATOMIC_ACQUIRE) >> (i % 64)) & 1);
}

/* Writer lock held.  Sets (val 1) or clears the bits of [s,e); returns
 * how many changed, or -1 when a chunk could not be made. */
int64_t mmf_wpb_set(int which, uint64_t s, uint64_t e, int val)
{
	int64_t n = 0;
	for (uint64_t a = s; a < e;) {
		struct chunk *c = val ? mmf_wpb_chunk_make(a) : mmf_wpb_chunk_of(a);
		uint64_t cend = (a >> CHUNK_SHIFT << CHUNK_SHIFT) + (1ull << CHUNK_SHIFT);
		uint64_t stop = e < cend ? e : cend;
		if (!c) {
			if (val)
				return -1;
			a = stop;
			continue;
		}
		for (; a < stop; a += mmf_wpb_page) {
			uint64_t i = (a - c->base) / mmf_wpb_page, m = 1ull << (i % 64);
			uint64_t *w = &c->bits[which][i / 64];
			if (!((*w & m) != 0) == !!val) {
				__atomic_store_n(w, val ? (*w | m) : (*w & ~m), __ATOMIC_RELEASE);
				n++;
			}
		}
	}
	if (which == WP)
		__atomic_store_n(&mmf_wpb_pages, val ? mmf_wpb_pages + (uint64_t)n : mmf_wpb_pages - (uint64_t)n,
				 __ATOMIC_RELEASE);
	return n;
}

/* The first run of pages in [s,e) whose bit is val: 1 and [*rs,*re), or
 * 0 when there is none.  Whole words are skipped at once. */
int mmf_wpb_next_run(int which, uint64_t s, uint64_t e, int val, uint64_t *rs, uint64_t *re)
{
	uint64_t a = s;
	*rs = 0;
	while (a < e) {
		struct chunk *c = mmf_wpb_chunk_of(a);
		uint64_t cend = (a >> CHUNK_SHIFT << CHUNK_SHIFT) + (1ull << CHUNK_SHIFT);
		uint64_t stop = e < cend ? e : cend;
		if (!c) { /* no chunk: every bit is 0 */
			if (val) {
				if (*rs)
					break;
			} else if (!*rs) {
				*rs = a;
			}
			a = stop;
			continue;
		}
		while (a < stop) {
			uint64_t i = (a - c->base) / mmf_wpb_page;
			uint64_t w = __atomic_load_n(&c->bits[which][i / 64], __ATOMIC_ACQUIRE);
			if (i % 64 == 0 && a + 64 * mmf_wpb_page <= stop && w == (val ? ~0ull : 0)) {
				if (!*rs)
					*rs = a;
				a += 64 * mmf_wpb_page;
				continue;
			}
			if (i % 64 == 0 && a + 64 * mmf_wpb_page <= stop && w == (val ? 0 : ~0ull)) {
				if (*rs)
					goto done;
				a += 64 * mmf_wpb_page;
				continue;
			}
			int b = (int)((w >> (i % 64)) & 1);
			if (b == val) {
				if (!*rs)
					*rs = a;
			} else if (*rs) {
				goto done;
			}
			a += mmf_wpb_page;
		}
	}
done:
	if (!*rs)
		return 0;
	*re = a < e ? a : e;
	return 1;
}

/* The lowest b <= a with every page of [b,a) set (barrierint.h). */
uint64_t mmf_wpb_run_down(int which, uint64_t a)
{
	while (a >= mmf_wpb_page) {
		struct chunk *c = mmf_wpb_chunk_of(a - mmf_wpb_page);
		if (!c)
			break;
		uint64_t i = (a - mmf_wpb_page - c->base) / mmf_wpb_page;
		uint64_t w = __atomic_load_n(&c->bits[which][i / 64], __ATOMIC_ACQUIRE);
		if (i % 64 == 63 && w == ~0ull) {
			a -= 64 * mmf_wpb_page;
			continue;
		}
		if (!((w >> (i % 64)) & 1))
			break;
		a -= mmf_wpb_page;
	}
	return a;
}

/* The highest b >= a with every page of [a,b) set (barrierint.h). */
uint64_t mmf_wpb_run_up(int which, uint64_t a)
{
	while (a + mmf_wpb_page > a) {
		struct chunk *c = mmf_wpb_chunk_of(a);
		if (!c)
			break;
		uint64_t i = (a - c->base) / mmf_wpb_page;
		uint64_t w = __atomic_load_n(&c->bits[which][i / 64], __ATOMIC_ACQUIRE);
		if (i % 64 == 0 && w == ~0ull) {
			a += 64 * mmf_wpb_page;
			continue;
		}
		if (!((w >> (i % 64)) & 1))
			break;
		a += mmf_wpb_page;
	}
	return a;
}

/* The part of [s,e) inside chunk k: 1 when it is not empty. */
int mmf_wpb_clip(uint32_t k, uint64_t s, uint64_t e, uint64_t *cs, uint64_t *ce)
{
	uint64_t b = __atomic_load_n(&mmf_wpb_chunks[k].base, __ATOMIC_RELAXED);
	uint64_t be = b + (1ull << CHUNK_SHIFT);
	*cs = s > b ? s : b;
	*ce = e < be ? e : be;
	return *cs < *ce;
}

/* Lock-free: some mmf_wpb_page of [s,e) has its bit set. */
int mmf_wpb_any(int which, uint64_t s, uint64_t e)
{
	uint64_t cs, ce, rs, re;
	if (which == WP && !LD(mmf_wpb_pages))
		return 0;
	for (uint32_t k = 0, n = LD(mmf_wpb_n); k < n; k++)
		if (mmf_wpb_clip(k, s, e, &cs, &ce) && mmf_wpb_next_run(which, cs, ce, 1, &rs, &re))
			return 1;
	return 0;
}

/* Writer lock held: clears the bits of [s,e), however large. */
void mmf_wpb_clear(int which, uint64_t s, uint64_t e)
{
	uint64_t cs, ce;
	for (uint32_t k = 0; k < mmf_wpb_n; k++)
		if (mmf_wpb_clip(k, s, e, &cs, &ce))
			mmf_wpb_set(which, cs, ce, 0);
}

