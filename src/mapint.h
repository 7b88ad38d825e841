/* The shadow map's storage, shared by its writers (map.c) and its readers
 * (mapread.c): records as stored, blocks, and the packing of attributes.
 * Not for anything outside the map. */
#ifndef MMF_MAPINT_H
#define MMF_MAPINT_H

#include <string.h>

#include "map.h"

#if defined(__x86_64__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* A record as stored: three words, each read and written atomically so that
 * a reader racing a writer sees old or new words, never torn ones. */
struct slot {
	uint64_t start, end, attr;
};

struct mmf_block {
	uint32_t n;
	uint32_t pad_;
	struct mmf_block *next_free;
	struct slot s[MMF_BLOCK_CAP];
};

_Static_assert(sizeof(struct mmf_attr) == 8, "attr packs into one word");
_Static_assert(sizeof(struct mmf_block) <= 4096, "a block fits a page");

#define SLAB_BLOCKS 64

/* Advice bits that are not known carry no meaning: cleared, so that equal
 * knowledge packs to equal words and merges. */
static inline uint64_t pack(const struct mmf_attr *a)
{
	struct mmf_attr n = *a;
	uint64_t v;
	n.adv_set &= n.adv_known;
	memcpy(&v, &n, sizeof v);
	return v;
}

static inline struct mmf_attr unpack(uint64_t v)
{
	struct mmf_attr a;
	memcpy(&a, &v, sizeof a);
	return a;
}

static inline struct mmf_attr unknown_attr(void)
{
	struct mmf_attr a = {.prot = MMF_UNKNOWN, .lock = MMF_UNKNOWN, .owned = 0,
			     .sealed = MMF_UNKNOWN, .pkey = -1, .adv_known = 0, .adv_set = 0};
	return a;
}

#endif
