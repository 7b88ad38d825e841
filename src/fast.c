/* The fast paths' shared state (see fast.h). */
#include "fast.h"

#include <string.h>
#include <sys/mman.h>

#include "map.h"

union mmf_fast_gate mmf_fast = {.f = {MMF_FAST_INIT, 0}};
uint64_t mmf_fast_mask;
uint64_t mmf_fast_want[8];
uint64_t mmf_fast_pgmask = 4095;
uint64_t mmf_fast_cmask, mmf_fast_cwant, mmf_fast_fmask, mmf_fast_fwant;
uint32_t mmf_fast_chg_prots;
uint32_t mmf_fast_lazy;
__thread struct mmf_fast_tls mmf_fast_tls __attribute__((tls_model("initial-exec")));
/* batch.h: this thread's batch nesting; batch.c owns it, defined here so
 * that decide() and the fast paths read it without calling into batch.c. */
__thread int mmf_batch_depth __attribute__((tls_model("initial-exec")));

static uint64_t word(const struct mmf_attr *a)
{
	uint64_t v;
	memcpy(&v, a, sizeof v);
	return v;
}

void mmf_fast_set(unsigned off, int mdwe, int wx_relax, size_t page, int lazy,
		  unsigned skip_prots)
{
	__atomic_store_n(&mmf_fast_lazy, lazy != 0, __ATOMIC_RELEASE);
	/* changed in place: owned, unsealed, the protection known; in relax
	 * mode not a W^X area (wx.c answers for those) */
	struct mmf_attr cm = {.prot = 0xf8, .owned = 0xff, .sealed = 0xff,
			      .adv_set = wx_relax ? MMF_ADV_WX : 0};
	struct mmf_attr cw = {.prot = 0, .owned = 1, .sealed = 0};
	mmf_fast_cmask = word(&cm);
	mmf_fast_cwant = word(&cw);
	mmf_fast_fmask = mmf_fast_cmask | mmf_fast_prot_word(0xff);
	mmf_fast_fwant = mmf_fast_cwant | mmf_fast_prot_word(MMF_PROT_FLIP);
	uint32_t chg = 0, fwd_off = off & MMF_FAST_SHAPE;
	off &= ~(unsigned)MMF_FAST_SHAPE;
	/* compared: prot, owned, sealed; in relax mode also the W^X bit,
	 * which must be clear (wx.c answers for its areas) */
	struct mmf_attr m = {.prot = 0xff, .owned = 0xff, .sealed = 0xff,
			     .adv_set = wx_relax ? MMF_ADV_WX : 0};
	mmf_fast_mask = word(&m);
	for (int p = 0; p < 8; p++) {
		struct mmf_attr w = {.prot = (uint8_t)p, .owned = 1, .sealed = 0};
		/* exec-only may pick a protection key; W+X is checked under MDWE */
		int no = p == PROT_EXEC || (mdwe && (p & PROT_WRITE) && (p & PROT_EXEC));
		if (no)
			w.owned = 0xff; /* no record is owned 0xff */
		else
			chg |= 1u << p;
		if (!((skip_prots >> p) & 1))
			w.owned = 0xff;
		mmf_fast_want[p] = word(&w) & mmf_fast_mask;
	}
	/* shaping closes the forward path: no protection changes in place;
	 * nor does a protection that may not be skipped (a seccomp filter has
	 * not let one through yet): the general path learns it (question.c) */
	__atomic_store_n(&mmf_fast_chg_prots, fwd_off ? 0 : chg & skip_prots, __ATOMIC_RELAXED);
	mmf_fast_pgmask = page - 1;
	__atomic_store_n(&mmf_fast.f.off, off, __ATOMIC_RELEASE);
}
