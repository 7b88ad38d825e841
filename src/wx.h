/* W^X flips (docs/DESIGN.md 5): JITs that flip code areas between RW and RX.
 *
 * Flips are recognised by shape, on owned memory, MMF_WX_DETECT times:
 *   an area:   mprotect turned the same range from RW to RX or back (LuaJIT;
 *              several areas may alternate, each followed on its own);
 *   a region:  mprotect made a range RX after making a smaller range inside
 *              it (a window) RW (Ruby's YJIT: a page, then the code block).
 * Then, by MMFOLD_WX:
 *   keep  (default): an area gets readahead advice (MADV_RANDOM or
 *         MADV_SEQUENTIAL) that differs from its neighbours', so the kernel
 *         keeps it in its own VMA and a flip never splits or merges VMAs;
 *         and MADV_HUGEPAGE when the THP policy lets a folio size fit it.
 *         A region's windows get that advice when made RW a second time
 *         (WIN_KEPT per region at most, least recently used gives it back).
 *         Nothing but /proc/PID/maps and smaps' VmFlags shows it.
 *   relax: the area or region is made RWX once; later RW/RX flips of
 *         exactly the area, RW of a window and RX of the region or of a
 *         part holding whole windows return 0 without the kernel (the
 *         windows the program sees RW are remembered).  Any other call on
 *         it ends the relaxation first (the protections the program last
 *         asked for are restored) and is then forwarded exactly.
 *
 * The shadow map carries the state that skips depend on (MMF_ADV_WX: known
 * and clear = no readahead advice, mmfold may act; known and set = kept or
 * relaxed by mmfold; unknown = the program's own readahead advice, hands
 * off); a small table here holds the flip counters and what each managed
 * range needs.
 *
 * Locking: every function except mmf_wx_pre runs with the map's writer
 * lock held (wlock.c's writer section), so the table needs no lock of its
 * own.  No malloc, no stdio; system calls are raw. */
#ifndef MMF_WX_H
#define MMF_WX_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "folio.h"
#include "map.h"

/* Flips between RW and RX of one range before it counts as flipping. */
#define MMF_WX_DETECT 4

struct mmf_wx_env {
	struct mmf_map *map;
	size_t page;
	int mode;                  /* MMF_WX_* (config.h) */
	int thp;                   /* the THP policy advises MADV_HUGEPAGE */
	const int *thp_disabled;   /* prctl(PR_SET_THP_DISABLE) in force */
	const int *mdwe;           /* PR_SET_MDWE in force: no RWX */
	const struct mmf_folio_sys *folio;
};

/* Start-up (safe mode only; otherwise never called and nothing happens). */
void mmf_wx_init(const struct mmf_wx_env *env);

/* Must MADV_NORMAL/RANDOM/SEQUENTIAL go through the writer section (so
 * that mmf_wx_after sees them)?  1 while keep mode is on. */
int mmf_wx_tracks_readahead(void);

/* Lock-free look at an mprotect before the skip question (relax mode). */
enum {
	MMF_WX_NONE = 0,     /* nothing to do with W^X: carry on */
	MMF_WX_TRY_SKIP = 1, /* a flip of a relaxed range: call mmf_wx_skip */
	MMF_WX_FORWARD = 2,  /* another mprotect on a relaxed range: forward */
};
int mmf_wx_pre(const struct mmf_op *op);

/* Writer lock held.  1 when the flip op was answered (return 0 to the
 * program, the range stays RWX), 0 when it must be forwarded. */
int mmf_wx_skip(const struct mmf_op *op);

/* Writer lock held, before op is forwarded: ends relaxations op touches
 * (restores the protection the program last asked for), and undoes the
 * keep advice on ranges an mremap touches. */
void mmf_wx_before(const struct mmf_op *op);

/* Writer lock held, after op was forwarded (result r) and recorded:
 * counts flips and acts on flipping ranges; notes unmaps, moves and the
 * program's readahead advice. */
void mmf_wx_after(const struct mmf_op *op, long r);
/* mmf_wx_after for a successful mprotect of [s, e) to RW. */
void mmf_wx_rw_done(uint64_t s, uint64_t e);

#endif
