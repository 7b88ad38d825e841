/* The write barrier's page bits (barrier.c): per page two bits, wp (the
 * program asked for PROT_READ, the kernel holds write-protection) and reg
 * (registered with mmfold's userfaultfd), in chunks of 1 GiB of address
 * space mapped on demand (raw mmap).  Writers hold the engine's writer
 * lock; readers (the fault handler) need none.  Private to barrier.c and
 * barrierbits.c. */
#ifndef MMF_BARRIERINT_H
#define MMF_BARRIERINT_H

#include <stdint.h>

#define CHUNK_SHIFT 30 /* bits are kept per GiB of address space */
#define MAX_CHUNKS 1024
#define LD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

enum { WP, REG };

struct chunk {
	uint64_t base;
	uint64_t *bits[2]; /* WP, REG: one bit per page of the GiB */
};

extern struct chunk *mmf_wpb_chunks; /* MAX_CHUNKS, mapped at start (barrier.c) */
extern uint32_t mmf_wpb_n;           /* chunks in use */
extern uint64_t mmf_wpb_pages;       /* pages with a wp bit (a fast "none") */
extern uint64_t mmf_wpb_page;        /* the page size */

/* The chunk of a, or NULL (lock-free). */
struct chunk *mmf_wpb_chunk_of(uint64_t a);
/* Writer lock held: the chunk of a, made when missing; NULL when no memory
 * is left. */
struct chunk *mmf_wpb_chunk_make(uint64_t a);
/* Lock-free: the bit of page a (0 when no chunk holds it). */
int mmf_wpb_bit(int which, uint64_t a);
/* Writer lock held: sets (val 1) or clears the bits of [s,e); how many
 * changed, or -1 when a chunk could not be made. */
int64_t mmf_wpb_set(int which, uint64_t s, uint64_t e, int val);
/* The first run of pages in [s,e) whose bit is val: 1 and [*rs,*re), or 0. */
int mmf_wpb_next_run(int which, uint64_t s, uint64_t e, int val, uint64_t *rs, uint64_t *re);
/* Lock-free: the lowest b <= a such that every page of [b,a) has its bit
 * set (a when the page below a has not).  Whole words are skipped at once. */
uint64_t mmf_wpb_run_down(int which, uint64_t a);
/* Lock-free: the highest b >= a such that every page of [a,b) has its bit
 * set (a when page a has not). */
uint64_t mmf_wpb_run_up(int which, uint64_t a);
/* The part of [s,e) inside chunk k: 1 when it is not empty. */
int mmf_wpb_clip(uint32_t k, uint64_t s, uint64_t e, uint64_t *cs, uint64_t *ce);
/* Lock-free: some page of [s,e) has its bit set. */
int mmf_wpb_any(int which, uint64_t s, uint64_t e);
/* Writer lock held: clears the bits of [s,e), however large. */
void mmf_wpb_clear(int which, uint64_t s, uint64_t e);

/* barrieropen.c: opens the userfaultfd with the features the barrier
 * needs (into *ufd) and, when *maps_fd is -1, /proc/self/maps for
 * PROCMAP_QUERY; 0, or -1 with *why. */
long mmf_barrier_open(int *ufd, int *maps_fd, const char **why);

#endif
