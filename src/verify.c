/* MMFOLD_VERIFY: before a skip is taken, ask the kernel whether the range
 * really is as the map says.  Protections come from the PROCMAP_QUERY ioctl
 * (Linux 6.11+), everything else (and older kernels) from /proc/self/smaps.
 * Slow by design: a debugging aid, never on by default. */
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "engine.h"
#include "sys.h"

struct procmap_query_ {
	uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size,
		vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PROCMAP_QUERY_ _IOWR('f', 17, struct procmap_query_)
#define PMQ_R 1
#define PMQ_W 2
#define PMQ_X 4
#define PMQ_COVERING_OR_NEXT 0x10

/* PROCMAP_QUERY on fd (an open /proc/self/maps) for a: 0, or -errno. */
static long query(long fd, uint64_t a, uint64_t flags, struct procmap_query_ *q)
{
	memset(q, 0, sizeof *q);
	q->size = sizeof *q;
	q->query_flags = flags;
	q->query_addr = a;
	return mmf_sys6(SYS_ioctl, fd, (long)PROCMAP_QUERY_, (long)q, 0, 0, 0);
}

/* The PROT_* bits of the VMA q found. */
static int prot_of(const struct procmap_query_ *q)
{
	return ((q->vma_flags & PMQ_R) ? PROT_READ : 0) | ((q->vma_flags & PMQ_W) ? PROT_WRITE : 0) |
	       ((q->vma_flags & PMQ_X) ? PROT_EXEC : 0);
}

long mmf_vma_at(int fd, uint64_t a, uint64_t *s, uint64_t *e)
{
	struct procmap_query_ q;
	long r = query(fd, a, 0, &q);
	if (r != 0)
		return r;
	*s = q.vma_start;
	*e = q.vma_end;
	return 0;
}

int mmf_vma_prot(uint64_t a)
{
	long fd = mmf_sys_open("/proc/self/maps", 00 | 02000000 /* O_RDONLY | O_CLOEXEC */, 0);
	if (fd < 0)
		return -1;
	struct procmap_query_ q;
	long r = query(fd, a, 0, &q);
	mmf_sys_close((int)fd);
	if (r == -2 /* ENOENT: no VMA holds a */)
		return -2;
	if (r != 0)
		return -1; /* no PROCMAP_QUERY (before 6.11), or a filter refuses it */
	return prot_of(&q);
}

int mmf_kernel_maps_any(uint64_t s, uint64_t e)
{
	long fd = mmf_sys_open("/proc/self/maps", 00 | 02000000 /* O_RDONLY | O_CLOEXEC */, 0);
	if (fd >= 0) {
		struct procmap_query_ q;
		long r = query(fd, s, PMQ_COVERING_OR_NEXT, &q);
		mmf_sys_close((int)fd);
		if (r == 0)
			return q.vma_start < e;
		if (r == -2 /* ENOENT: nothing at or after s */)
			return 0;
	}
	/* no PROCMAP_QUERY (before 6.11): mincore fails with ENOMEM on a
	 * page that is not mapped; a longer range is taken as mapped */
	if (e - s > 256 * (uint64_t)mmf_page_size())
		return 1;
	unsigned char v;
	for (uint64_t a = s; a < e; a += (uint64_t)mmf_page_size())
		if (mmf_sys6(SYS_mincore, (long)a, 1, (long)&v, 0, 0, 0) == 0)
			return 1;
	return 0;
}

/* 1 agree, 0 disagree, -1 unsupported. */
static int verify_prot(int fd, uint64_t s, uint64_t e, int prot)
{
	for (uint64_t a = s; a < e;) {
		struct procmap_query_ q;
		long r = query(fd, a, 0, &q);
		if (r == -25 /* ENOTTY */ || r == -22 /* EINVAL */ || r == -38 /* ENOSYS */)
			return -1; /* no PROCMAP_QUERY here (or a filter refuses it) */
		if (r != 0 || q.vma_start > a)
			return 0; /* a hole */
		if (prot_of(&q) != prot)
			return 0;
		a = q.vma_end;
	}
	return 1;
}

/* smaps: walk VMAs, for each one overlapping [s,e) check its VmFlags. */
static int has_flag(const char *flags, const char *two)
{
	for (const char *p = flags; p[0] && p[1]; p++)
		if ((p == flags || p[-1] == ' ') && p[0] == two[0] && p[1] == two[1] &&
		    (p[2] == ' ' || p[2] == '\n' || !p[2]))
			return 1;
	return 0;
}

static uint64_t hex(const char **p)
{
	uint64_t v = 0;
	for (;; (*p)++) {
		char c = **p;
		if (c >= '0' && c <= '9')
			v = v * 16 + (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (uint64_t)(c - 'a' + 10);
		else
			return v;
	}
}

static int flags_ok(const char *f, const struct mmf_want *w)
{
	if (w->what == MMF_Q_LOCK) {
		int lo = has_flag(f, "lo"), lf = has_flag(f, "lf");
		int st = !lo ? MMF_LOCK_NONE : lf ? MMF_LOCK_ONFAULT : MMF_LOCK_ON;
		return st == w->lock;
	}
	static const struct {
		uint8_t bit;
		const char *mn;
	} m[] = {{MMF_ADV_HUGEPAGE, "hg"}, {MMF_ADV_NOHUGEPAGE, "nh"}, {MMF_ADV_DONTFORK, "dc"},
		 {MMF_ADV_DONTDUMP, "dd"}, {MMF_ADV_WIPEONFORK, "wf"}};
	for (unsigned i = 0; i < sizeof m / sizeof m[0]; i++)
		if (m[i].bit == w->adv_bit)
			return has_flag(f, m[i].mn) == (w->adv_val != 0);
	return 0;
}

/* The smaps reader's buffer: only one verifier at a time (see below);
 * mapped, so that the library's writable segment stays small, and at
 * start-up: mapped at the first check it went wherever the kernel found
 * 64 KiB free, which can be a hole the program left between its own
 * mappings (a program whose later call over that hole must fail, as it
 * does without mmfold, then found it mapped: the batch test on a 16 KiB
 * page arm64 kernel, where its 4-page hole is 64 KiB). */
static char *buf;
enum { BUFSZ = 65536 };

void mmf_verify_prepare(void)
{
	if (buf)
		return;
	void *m = mmf_sys_mmap(NULL, BUFSZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!mmf_sys_err((long)m))
		buf = m;
}

int mmf_verify_smaps(uint64_t s, uint64_t e, const struct mmf_want *w)
{
	if (!buf)
		return -1;
	long fd = mmf_sys_open("/proc/self/smaps", 0, 0);
	if (fd < 0)
		return -1;
	char line[1024];
	size_t ll = 0;
	uint64_t vs = 0, ve = 0, covered = s;
	int ok = 1, in = 0;
	for (;;) {
		long n = mmf_sys_read((int)fd, buf, BUFSZ);
		if (n <= 0)
			break;
		for (long i = 0; i < n; i++) {
			char c = buf[i];
			if (ll < sizeof line - 1)
				line[ll++] = c;
			if (c != '\n')
				continue;
			line[ll] = 0;
			ll = 0;
			const char *p = line;
			if ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')) {
				uint64_t a = hex(&p);
				if (*p == '-') {
					p++;
					vs = a;
					ve = hex(&p);
					in = ve > s && vs < e;
					if (in && w->what == MMF_Q_PROT && *p == ' ') {
						int pr = (p[1] == 'r' ? PROT_READ : 0) |
							 (p[2] == 'w' ? PROT_WRITE : 0) |
							 (p[3] == 'x' ? PROT_EXEC : 0);
						if (pr != w->prot)
							ok = 0;
					}
					if (in) {
						if (vs > covered)
							ok = 0;
						if (ve > covered)
							covered = ve;
					}
					continue;
				}
			}
			if (in && w->what != MMF_Q_PROT && !strncmp(line, "VmFlags:", 8) &&
			    !flags_ok(line + 8, w))
				ok = 0;
		}
	}
	mmf_sys_close((int)fd);
	return ok && covered >= e;
}

static int busy;

int mmf_verify(uint64_t s, uint64_t e, const struct mmf_want *w)
{
	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return -1;
	int r = -1;
	if (w->what == MMF_Q_PROT) {
		long fd = mmf_sys_open("/proc/self/maps", 0, 0);
		if (fd >= 0) {
			r = verify_prot((int)fd, s, e, w->prot);
			mmf_sys_close((int)fd);
		}
		if (r < 0) /* no PROCMAP_QUERY (before 6.11): smaps has them too */
			r = mmf_verify_smaps(s, e, w);
	} else {
		r = mmf_verify_smaps(s, e, w);
	}
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	return r;
}
