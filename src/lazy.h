/* Lazy mode's pending table: ranges whose change was asked for and not yet
 * made (docs/DESIGN.md 5).  A sorted array of non-overlapping ranges, each with
 * the value asked for (a protection for deferred promotions; 0 for deferred
 * munlocks).  One writer at a time (the engine holds the map's writer
 * lock); readers take no lock and validate with a sequence counter, so the
 * fault handler can ask from any thread.  Memory from raw mmap. */
#ifndef MMF_LAZY_H
#define MMF_LAZY_H

#include <stdint.h>

struct mmf_pend {
	uint64_t s, e;
	uint8_t want;
	uint8_t touches; /* faults served in this range so far */
};

struct mmf_lazy {
	uint32_t seq; /* odd while the writer changes the table */
	uint32_t n, cap;
	uint64_t lo, hi; /* bounds of all ranges (0, 0 when empty) */
	struct mmf_pend *p;
};

/* Sets up an empty table of cap ranges.  Returns 0 or -errno. */
int mmf_lazy_init(struct mmf_lazy *z, uint32_t cap);

/* Writer.  [s,e) asks for want from now on (ranges there before are cut
 * away); want < 0 removes [s,e) from the table.  Returns 0, or -1 when the
 * table is full (nothing changed). */
int mmf_lazy_set(struct mmf_lazy *z, uint64_t s, uint64_t e, int want);
/* Writer: the ranges overlapping [s,e), clipped to it, into out (at most
 * max).  Returns how many. */
uint32_t mmf_lazy_collect(const struct mmf_lazy *z, uint64_t s, uint64_t e,
			  struct mmf_pend *out, uint32_t max);
/* Writer: the range containing addr, for changing its touch count; NULL
 * when none. */
struct mmf_pend *mmf_lazy_at(struct mmf_lazy *z, uint64_t addr);

/* Readers (any thread, signal handlers).  1 when some range overlaps
 * [s,e) (or the table was changing: the caller then asks the writer). */
int mmf_lazy_overlaps(const struct mmf_lazy *z, uint64_t s, uint64_t e);
/* 1 and *out when a range contains addr, 0 when none, -1 when the table
 * kept changing (ask again under the writer lock). */
int mmf_lazy_find(const struct mmf_lazy *z, uint64_t addr, struct mmf_pend *out);

static inline uint32_t mmf_lazy_count(const struct mmf_lazy *z)
{
	return __atomic_load_n(&z->n, __ATOMIC_RELAXED);
}

#endif
