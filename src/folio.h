/* Large folios: what the kernel offers (THP and mTHP sizes and their
 * settings), which alignment suits a new anonymous mapping, and the
 * kernel's own counters for the report.  Reads sysfs with raw system calls
 * only; probing runs once at start-up. */
#ifndef MMF_FOLIO_H
#define MMF_FOLIO_H

#include <stdint.h>

enum { MMF_THP_NEVER = 0, MMF_THP_MADVISE = 1, MMF_THP_ALWAYS = 2 };

#define MMF_FOLIO_SIZES 16

struct mmf_folio_sys {
	int top;             /* /sys/kernel/mm/transparent_hugepage/enabled */
	int nsizes;          /* sizes found, ascending */
	uint64_t size[MMF_FOLIO_SIZES];
	int state[MMF_FOLIO_SIZES]; /* effective: "inherit" resolved to top */
	uint64_t max_ptes_none;     /* khugepaged/max_ptes_none (511 if unreadable) */
};

/* Reads the system's settings into *f (all never when THP is absent). */
/* by_name: each possible size asked by name instead of listing the
 * directory (under a seccomp filter, which may not allow getdents64). */
void mmf_folio_probe(struct mmf_folio_sys *f, int by_name);

/* Does any folio size get used for a VMA that has MADV_HUGEPAGE?  That is
 * when advising pays: some size is "madvise" (an "always" size needs no
 * advice). */
int mmf_folio_advice_pays(const struct mmf_folio_sys *f);

/* Is THP in use at all: the top-level setting, or some size's own, not
 * "never"?  mTHP sizes have their own settings since 6.8: with the top
 * level at "never", a size at "madvise" still serves MADV_HUGEPAGE
 * (MMFOLD_THP=advise advises then). */
int mmf_folio_any(const struct mmf_folio_sys *f);

/* The largest folio size that only advice turns on ("madvise"), or 0: the
 * block whose density decides whether advice pays (thp.c). */
uint64_t mmf_folio_advice_size(const struct mmf_folio_sys *f);

/* The alignment for a new anonymous mapping of len bytes, or 0 for none.
 * cfg_align: MMF_ALIGN_AUTO, MMF_ALIGN_OFF or a size; cfg_min: the
 * smallest mapping aligned (0: the alignment itself); advised: the mapping
 * will carry MADV_HUGEPAGE.  auto picks arm64's contiguous-PTE block when
 * len holds one (mmf_folio_contpte_size), otherwise the largest size in use
 * for this mapping that len can hold. */
uint64_t mmf_folio_align_for(const struct mmf_folio_sys *f, uint64_t len, long cfg_align,
			     long cfg_min, int advised);

/* arm64's contiguous-PTE block for the system's page size (64 KiB with
 * 4 KiB pages, 2 MiB with 16 KiB and 64 KiB pages); 0 elsewhere. */
uint64_t mmf_folio_contpte_size(void);

/* anon_fault_alloc of every size (sysfs, system-wide), in f's order. */
void mmf_folio_fault_counts(const struct mmf_folio_sys *f, uint64_t out[MMF_FOLIO_SIZES]);

/* This process's AnonHugePages (PMD-mapped THP) in bytes, or -1. */
long mmf_folio_anon_huge(void);

#endif
