/* The shadow map: what mmfold knows about every address range it has seen.
 *
 * A two-level sorted structure (a B+tree of height two): a top array of
 * block pointers ordered by address, each block a sorted array of up to
 * MMF_BLOCK_CAP non-overlapping records.  Lookups are two binary searches.
 * Memory comes from raw mmap system calls only (never malloc) and is never
 * returned, so a reader holding a stale pointer still reads valid memory.
 *
 * Concurrency: one writer at a time (mmf_map_wlock), readers take no lock
 * and validate with a sequence counter (seqlock); every shared field is read
 * and written with relaxed atomics so torn reads are retried, never trusted.
 * All functions are async-signal-safe; the writer lock is a leaf lock and
 * must not be taken by a thread that already holds it (the engine checks). */
#ifndef MMF_MAP_H
#define MMF_MAP_H

#include <stddef.h>
#include <stdint.h>

/* Field values meaning "not known". */
#define MMF_UNKNOWN 0xffu
/* A protection not followed because it changes at every call: a record
 * the forward path made "flipping" (fastrun.c).  Unknown to every reader,
 * as MMF_UNKNOWN is, but never executable: only calls without PROT_EXEC
 * keep it so, any other call through the general path makes it known. */
#define MMF_PROT_FLIP 0xf8u
/* Does a record's protection field hold a protection (not MMF_UNKNOWN,
 * not MMF_PROT_FLIP)? */
static inline int mmf_prot_known(unsigned p) { return p <= 7; }

/* mlock state of a range. */
enum { MMF_LOCK_NONE = 0, MMF_LOCK_ON = 1, MMF_LOCK_ONFAULT = 2 };

/* VMA flags set or cleared by madvise that mmfold tracks. */
enum {
	MMF_ADV_HUGEPAGE = 1u << 0,   /* MADV_HUGEPAGE   / cleared by NOHUGEPAGE */
	MMF_ADV_NOHUGEPAGE = 1u << 1, /* MADV_NOHUGEPAGE / cleared by HUGEPAGE */
	MMF_ADV_DONTFORK = 1u << 2,   /* MADV_DONTFORK   / MADV_DOFORK */
	MMF_ADV_DONTDUMP = 1u << 3,   /* MADV_DONTDUMP   / MADV_DODUMP */
	MMF_ADV_WIPEONFORK = 1u << 4, /* MADV_WIPEONFORK / MADV_KEEPONFORK */
	MMF_ADV_ALL = 0x9f, /* the above and MMF_ADV_WX: known for a new anonymous mapping */
	/* Not a VMA flag: MADV_HUGEPAGE here was mmfold's own advice (so a
	 * MAP_FIXED commit inside it gets the advice again). */
	MMF_ADV_OURS = 1u << 5,
	/* Not a VMA flag: a private anonymous mapping made through mmfold
	 * (lazy mode defers promotions only there: the kernel cannot refuse
	 * them for a file's reasons). */
	MMF_ADV_ANON = 1u << 6,
	/* Not a VMA flag: readahead advice and W^X state (wx.c).  Known and
	 * clear: nobody gave the range readahead advice (mmfold may add its
	 * own); known and set: mmfold manages it as a W^X flipping area (keep:
	 * its MADV_RANDOM/SEQUENTIAL keeps the range in a VMA of its own;
	 * relax: mmfold made it RWX); unknown: the program gave readahead
	 * advice itself, or mmfold lost track: hands off. */
	MMF_ADV_WX = 1u << 7,
};

/* What is known about one range.  prot, lock, sealed and pkey may be
 * MMF_UNKNOWN (pkey: -1).  An advice bit means something only when it is
 * set in adv_known.  owned: created through mmfold with every change since
 * seen by it; only owned records may justify skipping a call. */
struct mmf_attr {
	uint8_t prot;   /* PROT_READ|PROT_WRITE|PROT_EXEC, MMF_UNKNOWN or MMF_PROT_FLIP */
	uint8_t lock;   /* MMF_LOCK_*, or MMF_UNKNOWN */
	uint8_t owned;  /* 1 owned, 0 observed */
	uint8_t sealed; /* 0, 1, or MMF_UNKNOWN */
	int16_t pkey;   /* protection key, -1 when unknown */
	uint8_t adv_known;
	uint8_t adv_set;
};

struct mmf_rec {
	uint64_t start, end; /* [start, end), page aligned */
	struct mmf_attr a;
};

/* An update applied to the existing records of a range (holes stay holes).
 * Fields named in `fields` are replaced by the values in `a`; advice bits in
 * adv_set_mask become known and set, in adv_clear_mask known and clear, in
 * adv_forget unknown. */
enum {
	MMF_F_PROT = 1u << 0,
	MMF_F_LOCK = 1u << 1,
	MMF_F_OWNED = 1u << 2,
	MMF_F_SEALED = 1u << 3,
	MMF_F_PKEY = 1u << 4,
	/* An mprotect once anything was locked: a locked range's mlock state
	 * becomes unknown (its newly accessible pages are not all populated:
	 * a later mlock would do work), an unlocked range's stays. */
	MMF_F_LOCK_HELD = 1u << 5,
};
struct mmf_upd {
	unsigned fields;
	struct mmf_attr a;
	uint8_t adv_set_mask, adv_clear_mask, adv_forget;
};

/* A question for the read path: does [start,end) already satisfy this? */
enum { MMF_Q_PROT, MMF_Q_PROT_PKEY, MMF_Q_LOCK, MMF_Q_ADV };
struct mmf_want {
	int what;      /* MMF_Q_* */
	uint8_t prot;  /* MMF_Q_PROT, MMF_Q_PROT_PKEY */
	int16_t pkey;  /* MMF_Q_PROT_PKEY */
	uint8_t lock;  /* MMF_Q_LOCK: MMF_LOCK_* */
	uint8_t adv_bit, adv_val; /* MMF_Q_ADV: one MMF_ADV_* bit and 0/1 */
};

/* Answers of mmf_map_check, from the strongest. */
enum {
	MMF_NOOP_PROVEN = 0,  /* fully covered by owned, unsealed records that
	                          already satisfy the request */
	MMF_NOOP_UNPROVEN = 1, /* covered and satisfied, but some record is
	                          observed (could be stale) or seal unknown */
	MMF_CHANGE = 2,        /* something differs, is unknown or is a hole */
	MMF_BUSY = 3,          /* the writer kept changing the map: no answer */
};

#define MMF_BLOCK_CAP 168 /* records per block: a block fits 4 KiB */
#define MMF_TOP_CAP 16384 /* blocks: at least 688,128 records (blocks stay a quarter full) */

struct mmf_block;
struct mmf_map {
	uint32_t seq;   /* seqlock: odd while a writer changes the map */
	uint32_t lock;  /* writer lock: 0 free, 1 held, 2 held with waiters */
	uint32_t nblocks;
	uint32_t full;  /* set when capacity ran out: everything after is CHANGE */
	uint64_t nrecs;
	struct mmf_block *free_blocks;
	char *slab;             /* blocks never used yet: slab_left of them at slab */
	uint32_t slab_left;
	struct mmf_block **top; /* MMF_TOP_CAP pointers, raw-mmap'd */
};

/* Set up an empty map.  Returns 0, or -errno when memory cannot be mapped. */
int mmf_map_init(struct mmf_map *m);
/* Return all blocks of m to its free list (keeps its memory). */
void mmf_map_clear(struct mmf_map *m);

/* The writer lock.  A plain futex lock, fair enough, async-signal-safe as
 * long as the calling thread does not already hold it. */
void mmf_map_wlock(struct mmf_map *m);
void mmf_map_wunlock(struct mmf_map *m);
/* Wakes a waiter of the writer lock (mmf_map_wunlock found one). */
void mmf_map_wake(struct mmf_map *m);
int mmf_map_trywlock(struct mmf_map *m); /* 1 when taken */
/* mmf_map_wlock that gives up when CLOCK_MONOTONIC reaches deadline_ns:
 * 1 when taken, 0 when not. */
int mmf_map_wlock_until(struct mmf_map *m, uint64_t deadline_ns);

/* Writers: caller holds the writer lock.  start/end page aligned,
 * start < end.  They never fail: when blocks run out the map sets `full`
 * and forgets (drops) what it cannot store, which only loses skips. */
void mmf_map_set(struct mmf_map *m, uint64_t start, uint64_t end,
		 const struct mmf_attr *a);
void mmf_map_remove(struct mmf_map *m, uint64_t start, uint64_t end);
/* Returns 1 when part of the range had no record (a hole the update could
 * not reach), else 0. */
int mmf_map_update(struct mmf_map *m, uint64_t start, uint64_t end,
		   const struct mmf_upd *u);
/* Records a in every hole of [start,end); existing records are untouched.
 * For learning about memory mmfold did not map (a = observed). */
void mmf_map_fill(struct mmf_map *m, uint64_t start, uint64_t end,
		  const struct mmf_attr *a);
/* mremap: records of [old, old+oldlen) move to [new, new+newlen); a tail
 * beyond oldlen gets the attributes of the last old page (in-place growth
 * extends that VMA) when it was known, else nothing is recorded there.
 * The old range is removed unless keep_old (MREMAP_DONTUNMAP). */
void mmf_map_move(struct mmf_map *m, uint64_t old, uint64_t oldlen,
		  uint64_t new_, uint64_t newlen, int keep_old);
/* Mark every record in the range observed and all its fields unknown. */
void mmf_map_forget(struct mmf_map *m, uint64_t start, uint64_t end);
/* After a move with MREMAP_DONTUNMAP from [start,end): the kernel cleared
 * VM_LOCKED and VM_LOCKONFAULT on the whole source VMA (mm/mremap.c), which
 * may reach past the range on either side, where is not known here: the
 * mlock state of the range and of the records joined to it that may be
 * locked (up to a hole or a record known unlocked) becomes unknown. */
void mmf_map_unlock_joined(struct mmf_map *m, uint64_t start, uint64_t end);
/* After fork in the child: drop DONTFORK ranges, forget ranges whose
 * DONTFORK state is unknown, clear every mlock state. */
void mmf_map_fork_child(struct mmf_map *m);

/* Readers: no lock.  Safe from signal handlers and concurrent with a
 * writer on another thread. */
int mmf_map_check(const struct mmf_map *m, uint64_t start, uint64_t end,
		  const struct mmf_want *w);
/* What mmf_map_check answers for one record's attributes (a range wholly
 * inside that record): MMF_NOOP_PROVEN, MMF_NOOP_UNPROVEN or MMF_CHANGE. */
int mmf_map_judge(const struct mmf_attr *a, const struct mmf_want *w);
/* A record as a reader found it: [start,end), its attribute word and its
 * slot b->s[i], which hold while the map's sequence is seq (records move
 * only between a writer's odd and even sequence; a word alone changes in
 * place).  fast.h's per-thread hint is one. */
struct mmf_slotref {
	uint64_t start, end;
	const uint64_t *attr;
	const struct mmf_block *b;
	uint32_t seq, i;
};
/* Where a reader found that [start,end) is exactly one record, so that the
 * writer that then forwards the call can update it without searching. */
struct mmf_hint {
	const struct mmf_block *b;
	uint32_t i, seq;
	uint64_t start, end;
	/* The record that holds the whole range, when one does (else r.attr
	 * is NULL). */
	struct mmf_slotref r;
	/* Its word before the call when the writer made its protection
	 * unknown for the call (mmf_map_prot_changing), else 0. */
	uint64_t v0;
};
/* mmf_map_check that also fills *h (h->b stays NULL unless the range is
 * exactly one record; h->r.attr NULL unless one record holds it). */
int mmf_map_check_hint(const struct mmf_map *m, uint64_t start, uint64_t end,
		       const struct mmf_want *w, struct mmf_hint *h);
/* The record that holds all of [start,end) as a reader finds it (its
 * slot, at the map's sequence then: what mmf_map_check_hint gives as
 * h->r), in one try, when its attribute word v then has (v & mask) ==
 * want: 1 when found (*out written, and *word: v, a word the map held
 * while the slot held the record); 0 when no record holds it all (a
 * hole, a range across records), its word is not wanted, the map is
 * full, or a writer was busy (*out and *word untouched).  near (or NULL): a record
 * found before; the two after it in its block are looked at first, while
 * the map's sequence is the one near was taken at. */
int mmf_map_find(const struct mmf_map *m, uint64_t start, uint64_t end, uint64_t mask,
		 uint64_t want, const struct mmf_slotref *near, struct mmf_slotref *out,
		 uint64_t *word);
/* Writer lock held.  Applies u to the record h names when the map has not
 * changed shape since h was taken and the record stays distinct from its
 * neighbours: returns 1.  Otherwise changes nothing and returns 0 (the
 * caller uses mmf_map_update). */
int mmf_map_update_hint(struct mmf_map *m, const struct mmf_hint *h, const struct mmf_upd *u);
/* Writer lock held.  What a successful mprotect of [s,e) to prot (not
 * PROT_GROWS*) records, the mlock state made unknown when lock_unknown,
 * for [s,e) inside the record r (the map unchanged since r was taken),
 * whose word was v before the call (its slot may hold v with the
 * protection made unknown since: mmf_map_prot_changing):
 * the record's word changes in place, or it becomes up to three, or it
 * merges with the neighbours that now equal it, inside its block.
 * MMF_REPROT_IN_PLACE: done, no record moved (r holds still);
 * MMF_REPROT_MOVED: done, *out is the record that holds [s,e) now, at the
 * map's new sequence; 0: nothing done, the caller uses the general path
 * (the block full or left under a quarter full, a neighbour in another
 * block, the map changed). */
enum { MMF_REPROT_IN_PLACE = 1, MMF_REPROT_MOVED = 2 };
int mmf_map_reprot(struct mmf_map *m, const struct mmf_slotref *r, uint64_t s, uint64_t e,
		   uint8_t prot, int lock_unknown, uint64_t v, struct mmf_slotref *out);
/* mmf_map_reprot for all of r's record ([r->start, r->end), r->attr not
 * NULL) when no neighbour then equals it: the word stored in place (as
 * MMF_REPROT_IN_PLACE), 1.  Otherwise nothing done: 0. */
int mmf_map_reprot_whole(struct mmf_map *m, const struct mmf_slotref *r, uint8_t prot,
			 int lock_unknown, uint64_t v);
/* Writer lock held.  The protection of r's record (r->attr not NULL, v
 * its word; nothing done when the map changed since r was taken) made
 * unknown in place,
 * before a call that changes it reaches the kernel: if the section never
 * ends (a signal handler's siglongjmp out of it, asynchronous
 * cancellation), no reader skips a call on a word the kernel no longer
 * matches.  The update after the call is given v (mmf_map_reprot,
 * mmf_map_reprot_whole), or the caller stores v back first. */
static inline void mmf_map_prot_changing(const struct mmf_map *m, const struct mmf_slotref *r,
					 uint64_t v)
{
	if (__atomic_load_n(&m->seq, __ATOMIC_RELAXED) != r->seq)
		return; /* the slot may hold another record now */
	union {
		uint64_t v;
		struct mmf_attr a;
	} w = {.v = v};
	w.a.prot = MMF_UNKNOWN;
	__atomic_store_n((uint64_t *)r->attr, w.v, __ATOMIC_RELAXED);
}
/* Copy the record containing addr into *out; 1 if found, 0 if in a hole. */
int mmf_map_lookup(const struct mmf_map *m, uint64_t addr,
		   struct mmf_rec *out);
/* The record containing addr, or else the first one after it; 0: none. */
int mmf_map_lookup_next(const struct mmf_map *m, uint64_t addr, struct mmf_rec *out);

/* Debugging and tests (writer lock held or single-threaded). */
uint64_t mmf_map_count(const struct mmf_map *m);
/* Calls fn for each record in address order; stops when fn returns non-0. */
int mmf_map_walk(const struct mmf_map *m,
		 int (*fn)(const struct mmf_rec *r, void *arg), void *arg);
/* Checks the invariants (sorted, non-overlapping, non-empty, adjacent
 * equal records merged, counts consistent).  Returns 0 or a line number. */
int mmf_map_validate(const struct mmf_map *m);

#endif
