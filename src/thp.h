/* MADV_HUGEPAGE where it pays: the `auto` policy of MMFOLD_THP.
 *
 * A 2 MiB huge page is allocated whole at the first touch of any byte in
 * it, so advice costs resident memory wherever a program touches a large
 * mapping sparsely.  The rule (README.md, "Large folios"):
 *   - a reservation (a PROT_NONE mapping) is advised at once: it costs
 *     nothing until the program commits parts of it, and what it commits
 *     (mprotect, or a MAP_FIXED mapping inside it, which the engine advises
 *     again) is memory it asked for;
 *   - a mapping made readable or writable at once is only watched: at
 *     later intercepted calls its residency is read with mincore(), and it
 *     is advised when the 2 MiB blocks it touched are dense: at least one
 *     whole, and filling the partly touched ones (those khugepaged would
 *     collapse: at most max_ptes_none pages missing), all but the emptiest
 *     (the frontier of an allocator that fills the mapping in order),
 *     would add at most 1/MMF_THP_SLACK of what it holds.
 * The first needs the kernel's max_ptes_none at its default (a block
 * missing all its pages but one may become a huge page): an administrator
 * who lowered it asked that huge pages not fill sparsely touched memory,
 * so then no reservation is advised up front; its read-write commits
 * (MAP_FIXED) are watched like any read-write mapping.
 * Everything here runs under the engine's writer lock, with raw system
 * calls only (no malloc, no stdio). */
#ifndef MMF_THP_H
#define MMF_THP_H

#include <stddef.h>
#include <stdint.h>

#include "map.h"

/* Filling the touched blocks may add at most resident/MMF_THP_SLACK. */
#define MMF_THP_SLACK 16
/* Watched mappings at a time; further ones are not advised. */
#define MMF_THP_WATCH 128
/* Forwarded calls before a watched mapping's first look; the wait doubles
 * after every look that finds it sparse, up to MMF_THP_WAIT_MAX. */
#define MMF_THP_WAIT 16
#define MMF_THP_WAIT_MAX 8192

/* What mincore() found in the whole blocks of one mapping. */
struct mmf_thp_use {
	uint64_t touched; /* blocks with at least one resident page */
	uint64_t full;    /* blocks with every page resident */
	uint64_t resident; /* resident pages */
	uint64_t fill;    /* pages huge pages would add to partly touched
			     blocks with at most max_ptes_none missing */
	uint64_t fill_max; /* the largest of those, one block's */
};

/* Adds one block's residency to *u: n resident pages of per_block, with
 * the kernel's max_ptes_none.  Pure. */
void mmf_thp_count(struct mmf_thp_use *u, uint64_t n, uint64_t per_block, uint64_t max_ptes_none);

/* Does *u show a densely touched mapping (advise it)?  Pure. */
int mmf_thp_dense(const struct mmf_thp_use *u);

/* What to do with a new private anonymous mapping of at least
 * MMFOLD_THP_MIN that is not MAP_STACK: leave it, advise it now, or
 * watch it and advise it once found dense (later). */
enum { MMF_THP_LEAVE, MMF_THP_NOW, MMF_THP_LATER };

/* The rule, pure: advise_all is MMFOLD_THP=advise; reservation: the
 * mapping is PROT_NONE; per_block pages in a PMD block and the kernel's
 * max_ptes_none (scaled to that block). */
int mmf_thp_rule(int advise_all, int reservation, uint64_t per_block, uint64_t max_ptes_none);

/* mmf_thp_rule() with this process's block and max_ptes_none
 * (mmf_thp_init; before it, or with nothing to watch, the kernel's
 * default is assumed). */
int mmf_thp_at_mmap(int advise_all, int reservation);

/* Sets the shadow map, the page size, the PMD size (0: nothing to watch)
 * and the kernel's max_ptes_none. */
void mmf_thp_init(struct mmf_map *m, size_t page, uint64_t pmd, uint64_t max_ptes_none);

/* Starts watching [s,e), a new private anonymous mapping that is readable
 * or writable.  Returns 0, or -1 when it is not watched (no whole block
 * in it, or the table is full). */
int mmf_thp_watch(uint64_t s, uint64_t e);

/* Called after every forwarded call (writer lock held): looks at the
 * watched mappings that are due and advises the dense ones.  thp_off: the
 * program disabled THP (PR_SET_THP_DISABLE): stop watching. */
void mmf_thp_tick(int thp_off);

/* mremap of [s,e) failed with EFAULT (writer lock held).  Where the
 * range is memory mmfold mapped, all of it known and alike but for the
 * MADV_HUGEPAGE mmfold gave part of it (which keeps the kernel from
 * merging those VMAs with the rest: without mmfold they would be one),
 * the rest of [s,e) gets the same advice, so that the VMAs merge as they
 * would have.  Returns 1 when it advised something (try the call again),
 * else 0. */
int mmf_thp_join(uint64_t s, uint64_t e);

/* A new mapping [s,e) with attributes *a (not yet recorded): is the
 * record just before it or just after it mmfold's huge-page advice on
 * memory alike in all else (mmf_thp_join's test)?  Then without that
 * advice the kernel would have merged the two.  0 when the other side is
 * memory alike without advice: the kernel merges the new mapping with
 * that one as it is. */
int mmf_thp_join_next_to(uint64_t s, uint64_t e, const struct mmf_attr *a);

/* What mmf_thp_join asks of one record, pure: may its VMA differ from
 * its neighbours' only by mmfold's huge-page advice? */
int mmf_thp_join_fits(const struct mmf_attr *a);
/* ...and of two records of the range: alike in everything else that
 * keeps VMAs apart (protection, lock, key, the other advice). */
int mmf_thp_join_alike(const struct mmf_attr *x, const struct mmf_attr *y);

/* Watched mappings now (for tests and the report). */
int mmf_thp_watching(void);

#endif
