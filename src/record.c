/* Recording: what a forwarded call did, written into the shadow map (and
 * what a re-entrant call may have changed, for forgetting).  Runs in the
 * writer section.  See docs/DESIGN.md. */
#include "core.h"

#include <errno.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include "thp.h"


/* ---- recording ---------------------------------------------------------- */

/* Is a new file mapping of fd one whose protection behaves plainly?  Only
 * regular files outside hugetlbfs (which needs huge-page aligned calls). */
static int plain_file(int fd)
{
	struct stat st;
	struct statfs sf;
	if (mmf_filtered()) /* no call of mmfold's own (life.c's filter_in_force) */
		return 0;
	if (mmf_sys6(SYS_fstat, fd, (long)&st, 0, 0, 0, 0) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (mmf_sys6(SYS_fstatfs, fd, (long)&sf, 0, 0, 0, 0) != 0)
		return 0;
	return (unsigned long)sf.f_type != (unsigned long)HUGETLBFS_MAGIC_;
}

/* A call succeeded on memory mmfold has no record of (glibc's heap, the
 * stack, ...): remember what it set, as observed, so that later calls
 * there that look redundant are counted as unproven. */
static void learn(uint64_t s, uint64_t e, const struct mmf_upd *u)
{
	struct mmf_attr a = {.prot = MMF_UNKNOWN, .lock = MMF_UNKNOWN, .owned = 0,
			     .sealed = MMF_UNKNOWN, .pkey = -1, .adv_known = 0, .adv_set = 0};
	if (u->fields & MMF_F_PROT)
		a.prot = u->a.prot;
	if ((u->fields & MMF_F_LOCK) && !(u->fields & MMF_F_PROT))
		a.lock = u->a.lock;
	a.adv_known = u->adv_set_mask | u->adv_clear_mask;
	a.adv_set = u->adv_set_mask;
	mmf_map_fill(&map, s, e, &a);
}

#ifndef MAP_DROPPABLE
#define MAP_DROPPABLE 0x08 /* a mapping type of Linux 6.11 */
#endif

static int range_has_nohuge(uint64_t s, uint64_t e);

static void record_mmap(struct mmf_safe_state *ss, const struct mmf_op *op, long r)
{
	uint64_t len = ((uint64_t)op->a[1] + page - 1) & ~(uint64_t)(page - 1);
	int prot = (int)op->a[2], flags = (int)op->a[3], fd = (int)op->a[4];
	if (mmf_is_err(r)) {
		/* A failed MAP_FIXED may already have unmapped the old range. */
		uint64_t s, e;
		if ((flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) == MAP_FIXED &&
		    span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e))
			mmf_map_forget(&map, s, e);
		return;
	}
	uint64_t s = (uint64_t)r, e = s + len;
	if (e <= s)
		return;
	int anon = (flags & MAP_ANONYMOUS) != 0;
	struct mmf_attr a = {.prot = MMF_UNKNOWN, .lock = MMF_UNKNOWN, .owned = 0,
			     .sealed = MMF_UNKNOWN, .pkey = -1, .adv_known = 0, .adv_set = 0};
	/* MAP_DROPPABLE (6.11) memory starts wipe-on-fork and dont-dump and
	 * refuses advice that would undo either: not owned, nothing skipped */
	if (!(flags & (MAP_GROWSDOWN | MAP_HUGETLB)) && !(prot & ~PROT_RWX) && !ss->rie &&
	    (flags & MAP_TYPE) != MAP_DROPPABLE && !(op->flags & MMF_OPF_FOREIGN) &&
	    (anon || plain_file(fd))) {
		a.owned = 1;
		a.prot = (uint8_t)prot;
		a.sealed = 0;
		a.pkey = 0;
		a.lock = (flags & MAP_LOCKED) ? MMF_LOCK_ON : ss->future_lock;
		/* A new anonymous VMA starts with no advice flags; a file VMA
		 * may get flags from its filesystem. */
		a.adv_known = anon ? MMF_ADV_ALL : 0;
		if (anon && (flags & MAP_TYPE) == MAP_PRIVATE) {
			a.adv_known |= MMF_ADV_ANON;
			a.adv_set |= MMF_ADV_ANON;
		}
	}
	if (flags & MAP_LOCKED)
		ss->mlock_seen = 1;
	/* Huge-page advice (README.md, "Large folios").  A MAP_FIXED commit
	 * into a range that carries mmfold's MADV_HUGEPAGE (a JVM committing
	 * heap inside its advised reservation) loses the flag in the kernel:
	 * it gets it back.  Otherwise a mapping of at least MMFOLD_THP_MIN is
	 * advised at once under MMFOLD_THP=advise; under auto only when it is
	 * a reservation (PROT_NONE) and max_ptes_none is the kernel's default,
	 * else it is watched and advised once found densely touched (thp.c).
	 * A range the program marked MADV_NOHUGEPAGE never is, nor a MAP_STACK
	 * mapping (the kernel marks those MADV_NOHUGEPAGE itself on recent
	 * kernels). */
	int advise = 0, watch = 0, joined = 0;
	if (anon && (flags & MAP_STACK))
		a.adv_known &= (uint8_t)~(MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE);
	if (folio_policy.thp_active && !PLD(folio_policy.thp_disabled) && a.owned && anon &&
	    (flags & MAP_TYPE) == MAP_PRIVATE && !(flags & MAP_STACK)) {
		int big = len >= (uint64_t)cfg.v[MMF_OPT_THP_MIN];
		if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) {
			struct mmf_want w = {.what = MMF_Q_ADV, .adv_bit = MMF_ADV_OURS, .adv_val = 1};
			int v = mmf_map_check(&map, s, e, &w);
			advise = v == MMF_NOOP_PROVEN || v == MMF_NOOP_UNPROVEN;
			big = big && !range_has_nohuge(s, e);
		}
		if (!advise && big) {
			int d = mmf_thp_at_mmap(cfg.v[MMF_OPT_THP] == MMF_THP_ADVISE, prot == PROT_NONE);
			advise = d == MMF_THP_NOW;
			watch = d == MMF_THP_LATER;
		}
		/* A small mapping next to one mmfold advised and alike in
		 * all else: without mmfold the kernel would have made them one
		 * VMA (an mremap across both works, a move with
		 * MREMAP_DONTUNMAP unlocks both), so it gets the advice too,
		 * before a first touch gives it an anon_vma of its own (after
		 * which the two never merge).  Small: holding no huge block
		 * of its own, it costs no memory unless it ends an unaligned
		 * neighbour. */
		if (!advise && !big && mmf_thp_join_next_to(s, e, &a))
			advise = joined = 1;
	}
	/* the lowest address the kernel's own search gave: a caller's hint
	 * may lie anywhere (below it, the room a brk heap grows into) */
	if (!(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && (op->a[0] == 0 || s != (uint64_t)op->a[0]) &&
	    (!folio_policy.low_water || s < folio_policy.low_water))
		folio_policy.low_water = s;
	mmf_map_set(&map, s, e, &a);
	if (advise && mmf_sys6(SYS_madvise, (long)s, (long)(e - s), MADV_HUGEPAGE, 0, 0, 0) == 0) {
		struct mmf_upd u;
		memset(&u, 0, sizeof u);
		u.adv_set_mask = MMF_ADV_HUGEPAGE | MMF_ADV_OURS;
		u.adv_clear_mask = MMF_ADV_NOHUGEPAGE;
		mmf_map_update(&map, s, e, &u);
		mmf_event(MMF_E_THP_ADVISED);
		mmf_event_add(MMF_E_THP_BYTES, e - s);
		if (joined)
			mmf_event(MMF_E_THP_JOINED);
	}
	if (watch && mmf_thp_watch(s, e) == 0)
		mmf_event(MMF_E_THP_WATCHED);
}

/* Does any page of [s,e) carry a known MADV_NOHUGEPAGE? */
static int range_has_nohuge(uint64_t s, uint64_t e)
{
	struct mmf_rec r;
	for (uint64_t a = s; a < e;) {
		if (!mmf_map_lookup(&map, a, &r)) {
			a += page;
			continue;
		}
		if ((r.a.adv_known & MMF_ADV_NOHUGEPAGE) && (r.a.adv_set & MMF_ADV_NOHUGEPAGE))
			return 1;
		a = r.end;
	}
	return 0;
}

/* The destination a move with MREMAP_FIXED names, which the kernel may
 * have unmapped even when the move failed: 1 and [*s,*e), or 0. */
static int mremap_fixed_dst(const struct mmf_op *op, uint64_t *s, uint64_t *e)
{
	uint64_t newlen = ((uint64_t)op->a[2] + page - 1) & ~(uint64_t)(page - 1);
	return (op->a[3] & MREMAP_FIXED) && span((uint64_t)op->a[4], newlen ? newlen : page, s, e);
}

static void record_mremap(const struct mmf_op *op, long r)
{
	uint64_t old = (uint64_t)op->a[0];
	uint64_t oldlen = ((uint64_t)op->a[1] + page - 1) & ~(uint64_t)(page - 1);
	uint64_t newlen = ((uint64_t)op->a[2] + page - 1) & ~(uint64_t)(page - 1);
	int flags = (int)op->a[3];
	if (mmf_is_err(r)) {
		/* A failed move can have unmapped the destination or moved
		 * part of the source (a sealed VMA met midway): forget both.
		 * EINVAL too when the call names a destination: the kernel
		 * unmaps it before it finds a source it cannot move (a
		 * VM_DONTEXPAND mapping with MREMAP_DONTUNMAP, the vDSO). */
		uint64_t s, e;
		if (r == -EINVAL && !(flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)))
			return;
		if (!(old & (page - 1)) && old + oldlen > old)
			mmf_map_forget(&map, old, old + (oldlen ? oldlen : page));
		if (mremap_fixed_dst(op, &s, &e))
			mmf_map_forget(&map, s, e);
		return;
	}
	uint64_t nw = (uint64_t)r;
	if (oldlen == 0) { /* a second mapping of shared memory */
		mmf_map_forget(&map, nw, nw + newlen);
		return;
	}
	mmf_map_move(&map, old, oldlen, nw, newlen, (flags & MREMAP_DONTUNMAP) != 0);
	if (flags & MREMAP_DONTUNMAP) {
		mmf_map_forget(&map, old, old + oldlen);
		/* the pages of the source VMA it did not move are unlocked
		 * too: a later mlock2(MLOCK_ONFAULT) there changes them */
		mmf_map_unlock_joined(&map, old, old + oldlen);
	}
}

/* The word of the hint's record as it was before the call, back in its
 * slot when the writer made the protection unknown for the call
 * (mmf_map_prot_changing), before an update that may copy it elsewhere. */
static void unmark(struct mmf_hint *h)
{
	if (h && h->v0 && h->r.attr && __atomic_load_n(&map.seq, __ATOMIC_RELAXED) == h->r.seq)
		__atomic_store_n((uint64_t *)h->r.attr, h->v0, __ATOMIC_RELAXED);
	if (h)
		h->v0 = 0;
}

/* Applies u to [s,e): through the reader's hint when it still holds, else
 * by a search; a successful call on a hole leaves an observed record. */
static void upd(uint64_t s, uint64_t e, const struct mmf_upd *u, const struct mmf_hint *h, long r)
{
	if (h && h->b && h->start == s && h->end == e && mmf_map_update_hint(&map, h, u))
		return;
	if (mmf_map_update(&map, s, e, u) && r == 0)
		learn(s, e, u);
}

void record(const struct mmf_op *op, long r, struct mmf_hint *h)
{
	struct mmf_safe_state *ss = &safe_state;
	uint64_t s, e;
	struct mmf_upd u;
	memset(&u, 0, sizeof u);
	switch (op->kind) {
	case MMF_K_MMAP:
		record_mmap(ss, op, r);
		return;
	case MMF_K_MUNMAP:
		if (!span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e))
			return;
		if (r == 0)
			mmf_map_remove(&map, s, e);
		else if (r != -EINVAL)
			mmf_map_forget(&map, s, e); /* sealed: unchanged, but be sure */
		return;
	case MMF_K_MREMAP:
		record_mremap(op, r);
		return;
	case MMF_K_MPROTECT: {
		int prot = (int)op->a[2];
		if (!span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e))
			return; /* rejected before any change */
		if (prot & (PROT_GROWSDOWN | PROT_GROWSUP)) {
			/* The change extends to the start (end) of the VMA. */
			if (prot & PROT_GROWSDOWN)
				s = 0;
			if (prot & PROT_GROWSUP)
				e = UINT64_MAX & ~(uint64_t)(page - 1);
			unmark(h);
			mmf_map_forget(&map, s, e);
			return;
		}
		if (r != 0 || (prot & ~PROT_RWX) || ss->rie) {
			/* Failures can be partial (a hole, EACCES on a later VMA). */
			unmark(h);
			mmf_map_forget(&map, s, e);
			return;
		}
		u.fields = MMF_F_PROT;
		u.a.prot = (uint8_t)prot;
		if ((op->flags & MMF_OPF_PKEY) && (int)op->a[3] != -1) {
			u.fields |= MMF_F_PKEY;
			u.a.pkey = (int16_t)(int)op->a[3];
		} else if (prot == PROT_EXEC) {
			u.fields |= MMF_F_PKEY;
			u.a.pkey = -1;
		}
		if (ss->mlock_seen) /* a locked range's state: unknown */
			u.fields |= MMF_F_LOCK_HELD;
		/* inside the record the reader found: split or merged in its
		 * block, and the hint names the record that holds [s,e) now */
		if (h && !(u.fields & MMF_F_PKEY)) {
			struct mmf_slotref nr;
			uint64_t v = h->v0 ? h->v0 : h->r.attr ? __atomic_load_n(h->r.attr, __ATOMIC_RELAXED) : 0;
			int d = h->r.attr ? mmf_map_reprot(&map, &h->r, s, e, (uint8_t)prot, ss->mlock_seen, v, &nr)
					  : 0;
			if (d == MMF_REPROT_MOVED) {
				h->b = NULL;
				h->r = nr;
			}
			if (d) {
				h->v0 = 0;
				return;
			}
		}
		unmark(h);
		upd(s, e, &u, h, r);
		return;
	}
	case MMF_K_MADVISE: {
		struct mmf_want w;
		if (!span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e))
			return;
		if (!question(op, &s, &e, &w)) {
			/* Advice that changes no tracked flag needs no record;
			 * an advice this version does not know may. */
			switch ((int)op->a[2]) {
			case MADV_NORMAL: case MADV_RANDOM: case MADV_SEQUENTIAL:
			case MADV_WILLNEED: case MADV_DONTNEED: case MADV_FREE:
			case MADV_REMOVE: case MADV_MERGEABLE: case MADV_UNMERGEABLE:
			case MADV_COLD: case MADV_PAGEOUT: case MADV_HWPOISON:
			case 22: case 23: case 24: case 25: case 101: case 102: case 103:
				return;
			}
			u.adv_forget = MMF_ADV_ALL | MMF_ADV_OURS;
			mmf_map_update(&map, s, e, &u);
			return;
		}
		if (r != 0) {
			/* A failure can be partial (a hole): forget the flag and
			 * the one the kernel clears with it. */
			u.adv_forget = w.adv_bit;
			if (w.adv_bit & (MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE))
				u.adv_forget = MMF_ADV_HUGEPAGE | MMF_ADV_NOHUGEPAGE | MMF_ADV_OURS;
		} else if (w.adv_val) {
			u.adv_set_mask = w.adv_bit;
			/* the program's own THP advice: the range is its call now */
			if (w.adv_bit == MMF_ADV_HUGEPAGE)
				u.adv_clear_mask = MMF_ADV_NOHUGEPAGE | MMF_ADV_OURS;
			if (w.adv_bit == MMF_ADV_NOHUGEPAGE)
				u.adv_clear_mask = MMF_ADV_HUGEPAGE | MMF_ADV_OURS;
		} else {
			u.adv_clear_mask = w.adv_bit;
		}
		upd(s, e, &u, h, r);
		return;
	}
	case MMF_K_PROCESS_MADVISE: {
		/* The target may be this process: forget the advice bits of
		 * every range named (only flag advices change them). */
		const struct iovec {
			void *base;
			size_t len;
		} *iov = (const void *)op->a[1];
		long n = op->a[2];
		if (!iov || n <= 0 || n > 1024 || r == -EFAULT)
			return; /* EFAULT: the vector was unreadable, nothing done */
		u.adv_forget = MMF_ADV_ALL | MMF_ADV_OURS;
		for (long i = 0; i < n; i++)
			if (span((uint64_t)iov[i].base, iov[i].len, &s, &e))
				mmf_map_update(&map, s, e, &u);
		return;
	}
	case MMF_K_MLOCK:
	case MMF_K_MUNLOCK: {
		struct mmf_want w;
		uint64_t a = (uint64_t)op->a[0] & ~(uint64_t)(page - 1);
		uint64_t l = (uint64_t)op->a[1] + ((uint64_t)op->a[0] - a);
		if (l < (uint64_t)op->a[1] || !span(a, l, &s, &e))
			return;
		u.fields = MMF_F_LOCK;
		if (r == 0 && question(op, &s, &e, &w))
			u.a.lock = w.lock;
		else
			u.a.lock = MMF_UNKNOWN;
		if (op->kind == MMF_K_MLOCK)
			ss->mlock_seen = 1;
		upd(s, e, &u, h, r);
		return;
	}
	case MMF_K_MLOCKALL: {
		int fl = (int)op->a[0];
		u.fields = MMF_F_LOCK;
		ss->mlock_seen = 1;
		if (r != 0) {
			u.a.lock = MMF_UNKNOWN;
			ss->future_lock = MMF_UNKNOWN;
		} else {
			uint8_t l = (fl & MCL_ONFAULT) ? MMF_LOCK_ONFAULT : MMF_LOCK_ON;
			ss->future_lock = (fl & MCL_FUTURE) ? l : MMF_LOCK_NONE;
			if (!(fl & MCL_CURRENT))
				return;
			u.a.lock = l;
		}
		mmf_map_update(&map, 0, UINT64_MAX & ~(uint64_t)(page - 1), &u);
		return;
	}
	case MMF_K_MUNLOCKALL:
		u.fields = MMF_F_LOCK;
		u.a.lock = r == 0 ? MMF_LOCK_NONE : MMF_UNKNOWN;
		ss->future_lock = u.a.lock;
		mmf_map_update(&map, 0, UINT64_MAX & ~(uint64_t)(page - 1), &u);
		return;
	case MMF_K_MSEAL:
		if (r == 0 && span((uint64_t)op->a[0], (uint64_t)op->a[1], &s, &e)) {
			u.fields = MMF_F_SEALED;
			u.a.sealed = 1;
			mmf_map_update(&map, s, e, &u);
		}
		return;
	case MMF_K_SHMAT: {
		struct shmid_ds ds;
		if (mmf_is_err(r))
			return;
		s = (uint64_t)r;
		if (!mmf_filtered() && mmf_sys6(SYS_shmctl, op->a[0], IPC_STAT, (long)&ds, 0, 0, 0) == 0)
			e = (s + ds.shm_segsz + page - 1) & ~(uint64_t)(page - 1);
		else
			e = UINT64_MAX & ~(uint64_t)(page - 1);
		mmf_map_forget(&map, s, e);
		mmf_map_remove(&map, s, e);
		return;
	}
	}
}

/* Where a re-entrant or bypassing call's ranges go: this thread's pending
 * list, or (stale) the list of bypassing calls (wlock.c). */
static void forget_range(int stale, uint64_t s, uint64_t e, int prot_only)
{
	if (stale)
		stale_add(s & ~3ull, e, prot_only);
	else
		pending_add(s, e);
}

static void forget_all(int stale)
{
	if (stale)
		stale_add_all();
	else
		PST(pending.all, 1);
}

/* The range a re-entrant (or bypassing) call may have changed, for
 * forgetting. */
void reentry_forget(const struct mmf_op *op, long r, int stale)
{
	uint64_t s, e;
	/* what record() notes in the safe state (mlock_seen, future_lock) */
	if (op->kind == MMF_K_MLOCK || (op->kind == MMF_K_MMAP && (op->a[3] & MAP_LOCKED)))
		lock_state_changed(0);
	else if (op->kind == MMF_K_MLOCKALL || op->kind == MMF_K_MUNLOCKALL)
		lock_state_changed(1);
	switch (op->kind) {
	case MMF_K_MLOCKALL:
	case MMF_K_MUNLOCKALL:
	case MMF_K_PROCESS_MADVISE:
	case MMF_K_BRK:
	case MMF_K_SHMAT:
		forget_all(stale);
		return;
	case MMF_K_MMAP:
		if (!mmf_is_err(r))
			forget_range(stale, (uint64_t)r | 1, (uint64_t)r + (((uint64_t)op->a[1] + page - 1) &
								    ~(uint64_t)(page - 1)), 0);
		if (op->a[3] & MAP_FIXED) {
			touched(op, &s, &e);
			forget_range(stale, s | 1, e, 0);
		}
		return;
	case MMF_K_MREMAP: {
		uint64_t newlen = ((uint64_t)op->a[2] + page - 1) & ~(uint64_t)(page - 1);
		touched(op, &s, &e);
		/* a move with MREMAP_DONTUNMAP unlocked the rest of the
		 * source VMA too (record_mremap) */
		if (!mmf_is_err(r) && (op->a[3] & MREMAP_DONTUNMAP))
			forget_range(stale, s | 3, e, 2);
		else
			forget_range(stale, s | 1, e, 0);
		if (!mmf_is_err(r))
			forget_range(stale, (uint64_t)r | 1, (uint64_t)r + newlen, 0);
		/* a failed move may have unmapped its destination (record_mremap) */
		else if (mremap_fixed_dst(op, &s, &e))
			forget_range(stale, s | 1, e, 0);
		return;
	}
	case MMF_K_MUNMAP:
		touched(op, &s, &e);
		forget_range(stale, s | 1, e, 0);
		return;
	case MMF_K_MPROTECT:
		if (op->a[2] & (PROT_GROWSDOWN | PROT_GROWSUP)) {
			forget_all(stale);
			return;
		}
		touched(op, &s, &e);
		forget_range(stale, s | 1, e, 1); /* replaces a pending promotion there */
		return;
	default:
		touched(op, &s, &e);
		forget_range(stale, s, e, 0);
	}
}
