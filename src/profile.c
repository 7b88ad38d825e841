/* Call-site profile: see profile.h.
 *
 * What a call did is read from this thread's counters (stats.h) before and
 * after it runs, so the engine needs no profiling code of its own and the
 * sampled kernel time of forward() lands on the site as it is.  A signal
 * handler may make a profiled call while this thread is inside another one:
 * each level of nesting keeps what its nested calls added, so that every
 * call is counted once, at its own site. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "profile.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "engine.h"
#include "fmt.h"
#include "live.h"
#include "sys.h"

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)
#define FENCE() __atomic_signal_fence(__ATOMIC_SEQ_CST)

/* ---- the site table ------------------------------------------------------ */

/* 16384 sites of 64 bytes: 1 MiB of address space, touched as used. */
#define TAB_BITS 14
#define TAB_SIZE (1u << TAB_BITS)
#define PROBES 64
/* Frames of mmfold's own below the intercepted function (mmf_profile_run,
 * mmf_run, the wrapper; fewer when inlined): unwound on top of the depth. */
#define OWN_FRAMES 3
#define DEPTH_MAX 64

_Static_assert(MMF_K_COUNT <= 16, "a kind must fit the key's low 4 bits");

struct site {
	uint64_t key; /* address << 4 | kind; 0: free */
	uint64_t calls, fwd, skipped, bytes, ticks, insig;
	uint64_t pad;
};
_Static_assert(sizeof(struct site) == 64, "the live segment's readers take 64-byte sites");

int mmf_prof_on;
static struct site *tab;
static int top, depth;
static uint64_t nsites, lost;
static mmf_backtrace_fn backtrace_fn;

static uint32_t slot(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - TAB_BITS));
}

/* The site of key, inserted if new; NULL when the table is too full. */
static struct site *intern(uint64_t key)
{
	uint32_t i = slot(key);
	for (int p = 0; p < PROBES; p++, i = (i + 1) & (TAB_SIZE - 1)) {
		uint64_t k = __atomic_load_n(&tab[i].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return &tab[i];
		if (k == 0) {
			if (__atomic_compare_exchange_n(&tab[i].key, &k, key, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE)) {
				ADD(nsites, 1);
				return &tab[i];
			}
			if (k == key)
				return &tab[i];
		}
	}
	return NULL;
}

int mmf_profile_init(int n, int d)
{
	if (n <= 0)
		return 0;
	/* in the live segment when there is one (mmfold stat shows the sites) */
	void *p = mmf_live_profile_area(TAB_SIZE * sizeof(struct site));
	if (!p)
		p = mmf_sys_mmap(NULL, TAB_SIZE * sizeof(struct site), PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mmf_sys_err((long)p))
		return -1;
	tab = p;
	top = n;
	depth = d < 1 ? 1 : d > DEPTH_MAX ? DEPTH_MAX : d;
	__atomic_store_n(&mmf_prof_on, 1, __ATOMIC_RELEASE);
	return 0;
}

void mmf_profile_fork_child(void)
{
	if (!tab)
		return;
	memset(tab, 0, TAB_SIZE * sizeof(struct site));
	nsites = 0;
	lost = 0;
}

/* ---- where frames are ---------------------------------------------------- */

/* Executable segments of the objects a site is never in (SKIP), and of
 * those where a signal trampoline may be (TRAMP: libc's __restore_rt on
 * x86_64, the vDSO's __kernel_rt_sigreturn on arm64).  Filled once, by the
 * constructor, before the unwinder is published. */
enum { SKIP = 1, TRAMP = 2 };
#define RANGES 16
static struct range {
	uintptr_t lo, hi;
	int what;
} *ranges; /* mapped with the unwinder (kept out of the writable segment) */
static int nranges;
static uintptr_t self_base, unwinder_base, vdso_base;

static int has(const char *s, const char *part) { return s && strstr(s, part) != NULL; }

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	const char *n = info->dlpi_name;
	int what = 0;
	if (has(n, "/libc.so") || !strncmp(n ? n : "", "libc.so", 7))
		what = SKIP | TRAMP;
	else if (has(n, "libpthread.so") || has(n, "/ld-linux") || has(n, "/ld-") ||
		 (info->dlpi_addr && (info->dlpi_addr == self_base ||
				      info->dlpi_addr == unwinder_base)))
		what = SKIP;
	else if (has(n, "linux-vdso") || has(n, "linux-gate") ||
		 (vdso_base && info->dlpi_addr == vdso_base))
		what = TRAMP;
	if (!what)
		return 0;
	for (int i = 0; i < info->dlpi_phnum && nranges < RANGES; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		ranges[nranges].lo = info->dlpi_addr + ph->p_vaddr;
		ranges[nranges].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		ranges[nranges].what = what;
		nranges++;
	}
	return 0;
}

static int where(uintptr_t ip)
{
	for (int i = 0; i < nranges; i++)
		if (ip >= ranges[i].lo && ip < ranges[i].hi)
			return ranges[i].what;
	return 0;
}

/* Is ip the start of a signal-return trampoline?  Only asked for addresses
 * inside libc or the vDSO, which are readable. */
static int sigreturn_at(uintptr_t ip)
{
#if defined(__x86_64__)
	/* mov $15, %rax; syscall */
	static const unsigned char code[] = {0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05};
	const unsigned char *p = (const unsigned char *)ip;
	for (unsigned i = 0; i < sizeof code; i++)
		if (p[i] != code[i])
			return 0;
	return 1;
#elif defined(__aarch64__)
	/* mov x8, #139; svc #0.  libunwind gives every frame's address minus
	 * one on aarch64, this one too (the vDSO's __kernel_rt_sigreturn - 1,
	 * inside the nop before it): round up to the instruction. */
	const uint32_t *p = (const uint32_t *)((ip + 3) & ~(uintptr_t)3);
	return p[0] == 0xd2801168u && p[1] == 0xd4000001u;
#else
	(void)ip;
	return 0;
#endif
}

static __thread int busy __attribute__((tls_model("initial-exec")));

void mmf_profile_set_unwinder(mmf_backtrace_fn bt, const void *lib_in_unwinder)
{
	Dl_info di;
	if (!tab || !bt)
		return;
	if (dladdr((void *)mmf_profile_set_unwinder, &di))
		self_base = (uintptr_t)di.dli_fbase;
	if (lib_in_unwinder && dladdr(lib_in_unwinder, &di))
		unwinder_base = (uintptr_t)di.dli_fbase;
	vdso_base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
	if (!ranges) {
		void *m = mmf_sys_mmap(NULL, RANGES * sizeof *ranges, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mmf_sys_err((long)m))
			return; /* no unwinder: nothing is profiled */
		ranges = m;
	}
	dl_iterate_phdr(phdr_cb, NULL);
	/* libunwind maps its caches on first use; those calls are lost. */
	void *ips[DEPTH_MAX + OWN_FRAMES];
	busy = 1;
	FENCE();
	bt(ips, depth + OWN_FRAMES);
	FENCE();
	busy = 0;
	__atomic_store_n(&backtrace_fn, bt, __ATOMIC_RELEASE);
}

/* The site of this call: the first frame outside the skipped objects.  Sets
 * *insig when a signal trampoline lies above it (the call was made from a
 * signal handler).  NULL: no such frame within the depth, or table full. */
static struct site *locate(mmf_backtrace_fn bt, int kind, int *insig)
{
	void *ips[DEPTH_MAX + OWN_FRAMES];
	int n = bt(ips, depth + OWN_FRAMES);
	uintptr_t at = 0;
	*insig = 0;
	for (int i = 0; i < n; i++) {
		uintptr_t ip = (uintptr_t)ips[i];
		int w = where(ip);
		if (!(w & SKIP) && !at) {
			at = ip;
			continue;
		}
		if (at && (w & TRAMP) && sigreturn_at(ip)) {
			*insig = 1;
			break;
		}
	}
	if (!at || at >= (1ull << 60))
		return NULL;
	return intern((uint64_t)at << 4 | (uint64_t)kind);
}

/* ---- attributing a call -------------------------------------------------- */

enum { F_CALLS, F_FWD, F_SKIP, F_BYTES, F_TICKS, NF };
static const int fields[NF] = {MMF_S_CALLS, MMF_S_FORWARDED, MMF_S_SKIPPED, MMF_S_BYTES_ASKED,
			       MMF_S_KERNEL_NS};

/* Per nesting level of this thread: the kind of the call in progress and
 * what calls nested in it (signal handlers) added to that kind's counters;
 * gen changes whenever a nested call adds. */
#define NEST_MAX 8
static __thread struct {
	int n;
	int kind[NEST_MAX];
	uint32_t gen[NEST_MAX];
	uint64_t inner[NEST_MAX][NF];
} nest __attribute__((tls_model("initial-exec")));

long mmf_profile_run(struct mmf_op *op, long (*run)(struct mmf_op *))
{
	op->flags |= MMF_OPF_PROFILED;
	int d = nest.n;
	if (d >= NEST_MAX) {
		ADD(lost, 1);
		return run(op);
	}
	int k = op->kind, insig = 0;
	struct site *s = NULL;
	mmf_backtrace_fn bt = __atomic_load_n(&backtrace_fn, __ATOMIC_ACQUIRE);
	if (bt && !busy) {
		int saved = errno; /* libunwind may fail system calls on purpose */
		busy = 1;
		FENCE();
		s = locate(bt, k, &insig);
		FENCE();
		busy = 0;
		errno = saved;
	}
	struct mmf_tstats *t = mmf_stats_self();
	uint64_t v0[NF], v1[NF], in[NF];

	/* Enter level d: a handler from now on nests at d + 1.  Whatever it
	 * leaves in inner[d] before the first snapshot is cleared here. */
	nest.n = d + 1;
	FENCE();
	nest.kind[d] = k;
	for (int f = 0; f < NF; f++)
		nest.inner[d][f] = 0;
	FENCE();
	for (int f = 0; f < NF; f++)
		v0[f] = LD(t->v[k][fields[f]]);
	FENCE();
	long r = run(op);
	uint32_t g;
	do {
		g = LD(nest.gen[d]);
		FENCE();
		for (int f = 0; f < NF; f++) {
			v1[f] = LD(t->v[k][fields[f]]);
			in[f] = LD(nest.inner[d][f]);
		}
		FENCE();
	} while (g != LD(nest.gen[d]));
	nest.n = d;
	FENCE();
	if (d > 0 && nest.kind[d - 1] == k) {
		for (int f = 0; f < NF; f++)
			ST(nest.inner[d - 1][f], LD(nest.inner[d - 1][f]) + (v1[f] - v0[f]));
		FENCE();
		ST(nest.gen[d - 1], LD(nest.gen[d - 1]) + 1);
	}
	uint64_t calls = v1[F_CALLS] - v0[F_CALLS] - in[F_CALLS];
	if (!calls)
		return r; /* not counted by the engine (it was initialising) */
	if (!s) {
		ADD(lost, calls);
		return r;
	}
	ADD(s->calls, calls);
	ADD(s->fwd, v1[F_FWD] - v0[F_FWD] - in[F_FWD]);
	ADD(s->skipped, v1[F_SKIP] - v0[F_SKIP] - in[F_SKIP]);
	ADD(s->bytes, v1[F_BYTES] - v0[F_BYTES] - in[F_BYTES]);
	ADD(s->ticks, v1[F_TICKS] - v0[F_TICKS] - in[F_TICKS]);
	if (insig)
		ADD(s->insig, calls);
	return r;
}

/* ---- the report ---------------------------------------------------------- */

#define SITE_BYTES 1400 /* one site in JSON, library path included, or one text line */

size_t mmf_profile_report_size(void)
{
	if (!tab)
		return 0;
	uint64_t n = LD(nsites);
	if (n > TAB_SIZE)
		n = TAB_SIZE;
	/* each site is in at most two lists, each list at most top long */
	uint64_t lines = 2 * (n < (uint64_t)top * MMF_K_COUNT ? n : (uint64_t)top * MMF_K_COUNT);
	return (size_t)(2048 + MMF_K_COUNT * 600 + lines * SITE_BYTES);
}

/* a before b in the list? Descending by the list's value, then by the
 * other, then by address: the order does not depend on table layout. */
static int before(const struct site *a, const struct site *b, int by_time)
{
	uint64_t a1 = by_time ? a->ticks : a->calls, b1 = by_time ? b->ticks : b->calls;
	uint64_t a2 = by_time ? a->calls : a->ticks, b2 = by_time ? b->calls : b->ticks;
	if (a1 != b1)
		return a1 > b1;
	if (a2 != b2)
		return a2 > b2;
	return a->key < b->key;
}

/* Heap sort of n site copies (no libc qsort: it may call malloc). */
static void sift(struct site *v, size_t i, size_t n, int by_time)
{
	for (;;) {
		size_t c = 2 * i + 1, m = i;
		if (c < n && before(&v[m], &v[c], by_time))
			m = c;
		if (c + 1 < n && before(&v[m], &v[c + 1], by_time))
			m = c + 1;
		if (m == i)
			return;
		struct site tmp = v[i];
		v[i] = v[m];
		v[m] = tmp;
		i = m;
	}
}

/* Sorts so that v[0] is the first of the list (the heap's root is the
 * last of the list, and goes to the end first). */
static void sort(struct site *v, size_t n, int by_time)
{
	for (size_t i = n / 2; i-- > 0;)
		sift(v, i, n, by_time);
	for (size_t e = n; e-- > 1;) {
		struct site tmp = v[0];
		v[0] = v[e];
		v[e] = tmp;
		sift(v, 0, e, by_time);
	}
}

struct sym {
	const char *func, *lib;
	uint64_t func_off, lib_off;
	uint64_t elf_addr; /* addr less the load bias: an address of the ELF file */
	unsigned char id[20]; /* GNU build-id (its first 20 bytes) */
	int id_len;
};

/* The object whose PT_LOAD segment holds addr: load bias and build-id. */
struct find {
	uint64_t addr;
	struct sym *y;
	int found;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct find *f = arg;
	int in = 0;
	for (int i = 0; i < info->dlpi_phnum && !in; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t lo = info->dlpi_addr + ph->p_vaddr;
		in = ph->p_type == PT_LOAD && f->addr >= lo && f->addr < lo + ph->p_memsz;
	}
	if (!in)
		return 0;
	f->found = 1;
	f->y->elf_addr = f->addr - info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			const char *name = p + sizeof *n;
			const unsigned char *desc =
				(const unsigned char *)name + ((n->n_namesz + 3) & ~3u);
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4)) {
				int len = n->n_descsz < sizeof f->y->id ? (int)n->n_descsz
									 : (int)sizeof f->y->id;
				memcpy(f->y->id, desc, (size_t)len);
				f->y->id_len = len;
				return 1;
			}
			p = (const char *)desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 1;
}

static int main_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	/* the first object listed is the program; its lowest PT_LOAD is where
	 * dladdr's dli_fbase points */
	uint64_t lo = ~0ull;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_vaddr < lo)
			lo = info->dlpi_phdr[i].p_vaddr;
	*(uint64_t *)arg = info->dlpi_addr + (lo == ~0ull ? 0 : lo);
	return 1;
}

static uint64_t main_base(void)
{
	uint64_t b = 0;
	dl_iterate_phdr(main_cb, &b);
	return b;
}

static void symbolise(uint64_t addr, struct sym *y)
{
	Dl_info di;
	y->func = "?";
	y->lib = "?";
	y->func_off = 0;
	y->lib_off = 0;
	y->elf_addr = 0;
	y->id_len = 0;
	struct find f = {addr - 1, y, 0};
	dl_iterate_phdr(find_cb, &f);
	if (f.found)
		y->elf_addr++;
	/* addr is a return address: look up the call instruction before it */
	if (!dladdr((void *)(addr - 1), &di) || !di.dli_fname)
		return;
	y->lib = di.dli_fname[0] ? di.dli_fname : "?";
	/* the program as it was started ("./prog"): its absolute path, so that
	 * a report read elsewhere can still find the file */
	static char *exe; /* a page mapped the first time (not in .bss) */
	enum { EXE_MAX = 4096 };
	if (y->lib[0] != '/' && y->lib[0] != '?' && (uint64_t)di.dli_fbase == main_base()) {
		if (!exe) {
			void *m = mmf_sys_mmap(NULL, EXE_MAX, PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (!mmf_sys_err((long)m)) {
				long n = mmf_sys6(SYS_readlinkat, AT_FDCWD, (long)"/proc/self/exe",
						  (long)m, EXE_MAX - 1, 0, 0);
				((char *)m)[n > 0 ? n : 0] = 0;
				exe = m;
			}
		}
		if (exe && exe[0])
			y->lib = exe;
	}
	y->lib_off = addr - (uint64_t)di.dli_fbase;
	/* dladdr names the nearest symbol below the address, which is not the
	 * function when that one has no dynamic symbol (a static function of
	 * a stripped library): a symbol whose size ends before it is no name */
	const ElfW(Sym) *sym = NULL;
	if (di.dli_sname && di.dli_saddr &&
	    dladdr1((void *)(addr - 1), &di, (void **)&sym, RTLD_DL_SYMENT) && di.dli_saddr &&
	    (!sym || !sym->st_size || addr - 1 - (uint64_t)di.dli_saddr < sym->st_size)) {
		y->func = di.dli_sname;
		y->func_off = addr - (uint64_t)di.dli_saddr;
	}
}

static void json_site(struct mmf_buf *b, const struct site *s)
{
	struct sym y;
	symbolise(s->key >> 4, &y);
	mmf_puts(b, "{\"function\":\"");
	mmf_putjson(b, y.func);
	mmf_puts(b, "\",\"function_offset\":");
	mmf_putu(b, y.func_off);
	mmf_puts(b, ",\"library\":\"");
	mmf_putjson(b, y.lib);
	mmf_puts(b, "\",\"library_offset\":");
	mmf_putu(b, y.lib_off);
	mmf_puts(b, ",\"elf_address\":\"");
	mmf_putx(b, y.elf_addr);
	mmf_puts(b, "\",\"build_id\":\"");
	for (int i = 0; i < y.id_len; i++) {
		mmf_putc(b, "0123456789abcdef"[y.id[i] >> 4]);
		mmf_putc(b, "0123456789abcdef"[y.id[i] & 15]);
	}
	mmf_puts(b, "\",\"address\":\"");
	mmf_putx(b, s->key >> 4);
	mmf_puts(b, "\",\"calls\":");
	mmf_putu(b, s->calls);
	mmf_puts(b, ",\"forwarded\":");
	mmf_putu(b, s->fwd);
	mmf_puts(b, ",\"skipped\":");
	mmf_putu(b, s->skipped);
	mmf_puts(b, ",\"bytes\":");
	mmf_putu(b, s->bytes);
	mmf_puts(b, ",\"kernel_ns\":");
	mmf_putu(b, mmf_ticks_to_ns(s->ticks));
	mmf_puts(b, ",\"in_signal\":");
	mmf_putu(b, s->insig);
	mmf_putc(b, '}');
}

static void text_site(struct mmf_buf *b, const struct site *s)
{
	struct sym y;
	char ms[32];
	MMF_BUF(m, ms);
	symbolise(s->key >> 4, &y);
	mmf_putu_pad(b, s->calls, 12);
	mmf_putu_pad(b, s->fwd, 11);
	mmf_putu_pad(b, s->skipped, 11);
	mmf_putu_pad(b, s->bytes, 15);
	mmf_putmilli(&m, mmf_ticks_to_ns(s->ticks));
	mmf_putpad(b, ms, 11);
	mmf_puts(b, "  ");
	const char *base = strrchr(y.lib, '/');
	base = base ? base + 1 : y.lib;
	if (strcmp(y.func, "?")) {
		mmf_puts(b, y.func);
		mmf_puts(b, "+");
		mmf_putx(b, y.func_off);
		mmf_puts(b, " (");
		mmf_puts(b, base);
		mmf_puts(b, ")");
	} else if (strcmp(y.lib, "?")) {
		mmf_puts(b, base);
		mmf_puts(b, "+");
		mmf_putx(b, y.lib_off);
	} else {
		mmf_putx(b, s->key >> 4);
	}
	if (s->insig) {
		mmf_puts(b, " [");
		mmf_putu(b, s->insig);
		mmf_puts(b, " in signal handlers]");
	}
	mmf_putc(b, '\n');
}

void mmf_profile_report(struct mmf_buf *b, int json)
{
	if (!tab)
		return;
	int saved = errno;
	busy++; /* calls dladdr makes are not profiled */
	FENCE();
	size_t bytes = TAB_SIZE * sizeof(struct site);
	struct site *v = mmf_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mmf_sys_err((long)v))
		v = NULL;
	if (json) {
		mmf_puts(b, ",\"profile\":{\"top\":");
		mmf_putu(b, (uint64_t)top);
		mmf_puts(b, ",\"depth\":");
		mmf_putu(b, (uint64_t)depth);
		mmf_puts(b, ",\"sites\":");
		mmf_putu(b, LD(nsites));
		mmf_puts(b, ",\"lost\":");
		mmf_putu(b, LD(lost));
		mmf_puts(b, ",\"kinds\":{");
	} else {
		mmf_puts(b, "call sites (MMFOLD_PROFILE=");
		mmf_putu(b, (uint64_t)top);
		mmf_puts(b, ", depth ");
		mmf_putu(b, (uint64_t)depth);
		mmf_puts(b, ", ");
		mmf_putu(b, LD(nsites));
		mmf_puts(b, " sites, ");
		mmf_putu(b, LD(lost));
		mmf_puts(b, " lost)\n");
		if (!__atomic_load_n(&backtrace_fn, __ATOMIC_ACQUIRE))
			mmf_puts(b, "no unwinder (libunwind could not be loaded): every call is lost\n");
	}
	int kinds_out = 0;
	for (int k = 0; v && k < MMF_K_COUNT; k++) {
		size_t n = 0;
		for (uint32_t i = 0; i < TAB_SIZE; i++) {
			uint64_t key = LD(tab[i].key);
			if (!key || (int)(key & 15) != k)
				continue;
			v[n].key = key;
			v[n].calls = LD(tab[i].calls);
			v[n].fwd = LD(tab[i].fwd);
			v[n].skipped = LD(tab[i].skipped);
			v[n].bytes = LD(tab[i].bytes);
			v[n].ticks = LD(tab[i].ticks);
			v[n].insig = LD(tab[i].insig);
			if (v[n].calls)
				n++;
		}
		if (!n)
			continue;
		size_t m = n < (size_t)top ? n : (size_t)top;
		for (int by_time = 0; by_time < 2; by_time++) {
			sort(v, n, by_time);
			if (json) {
				if (!by_time) {
					if (kinds_out++)
						mmf_putc(b, ',');
					mmf_putc(b, '"');
					mmf_puts(b, mmf_kind_name(k));
					mmf_puts(b, "\":{\"by_count\":[");
				} else {
					mmf_puts(b, "],\"by_time\":[");
				}
				for (size_t i = 0; i < m; i++) {
					if (i)
						mmf_putc(b, ',');
					json_site(b, &v[i]);
				}
				if (by_time)
					mmf_puts(b, "]}");
			} else {
				mmf_puts(b, mmf_kind_name(k));
				mmf_puts(b, by_time ? " by kernel time:\n" : " by calls:\n");
				mmf_puts(b, "       calls  forwarded    skipped          bytes  kernel ms  site\n");
				for (size_t i = 0; i < m; i++)
					text_site(b, &v[i]);
			}
		}
	}
	if (json)
		mmf_puts(b, "}}");
	if (v)
		mmf_sys_munmap(v, bytes);
	FENCE();
	busy--;
	errno = saved;
}
