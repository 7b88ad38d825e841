/* Live statistics: see live.h. */
#include "live.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#include "../include/mmfold.h"
#include "config.h"
#include "base.h"
#include "fmt.h"
#include "stats.h"
#include "sys.h"

#define PAGE 4096u
#define NAMES_OFF 256u
#define TOTALS_OFF PAGE
#define CHUNKS_OFF (TOTALS_OFF + ((sizeof(struct mmf_totals) + PAGE - 1) / PAGE) * PAGE)
#define CHUNK_SIZE (MMF_CHUNK_BLOCKS * sizeof(struct mmf_block))
/* 64 chunks: 4096 threads' blocks in 4 MiB of file, and 1 MiB for the
 * profile; only the pages touched take memory. */
#define CHUNKS_MAX 64u
#define PROFILE_OFF (CHUNKS_OFF + CHUNKS_MAX * CHUNK_SIZE)
#define SEG_SIZE (PROFILE_OFF + MMF_LIVE_PROFILE_MAX)

_Static_assert(sizeof(struct mmf_live_hdr) <= NAMES_OFF, "the header must fit before the names");

static struct mmf_live_hdr *seg;
/* The pid in the name of the file this process made (seg_path), 0 when
 * it made none or removed it: the name itself is made again on the stack
 * when needed (the library's writable segment stays small:
 * check-footprint). */
static long path_pid;

static void seg_path(char *out, size_t n, long pid)
{
	struct mmf_buf b = {out, 0, n};
	mmf_puts(&b, "/dev/shm/mmfold.");
	mmf_puti(&b, pid);
}

/* Removes the file this process made, if any. */
static void path_unlink(void)
{
	char path[64];
	seg_path(path, sizeof path, path_pid);
	mmf_sys6(SYS_unlinkat, AT_FDCWD, (long)path, 0, 0, 0, 0);
	path_pid = 0;
}

/* Field 22 of /proc/self/stat (start time), 0 when it cannot be read. */
static uint64_t start_time(void)
{
	char buf[1024];
	if (mmf_sys_read_small("/proc/self/stat", buf, sizeof buf) <= 0)
		return 0;
	/* the command (field 2) may hold spaces and parentheses: count from
	 * the last ')' (field 3 follows it) */
	char *p = NULL;
	for (char *q = buf; *q; q++)
		if (*q == ')')
			p = q;
	if (!p)
		return 0;
	int field = 2;
	for (p++; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	uint64_t v = 0;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (uint64_t)(*p++ - '0');
	return v;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	if (mmf_sys6(SYS_clock_gettime, CLOCK_REALTIME, (long)&ts, 0, 0, 0, 0) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put_names(struct mmf_buf *b, const char *key, const char *(*name)(int), int n)
{
	mmf_puts(b, key);
	for (int i = 0; i < n; i++) {
		mmf_putc(b, i ? ' ' : '=');
		mmf_puts(b, name(i));
	}
	mmf_putc(b, '\n');
}

/* Fills the header and the names of a zeroed segment. */
static void describe(struct mmf_live_hdr *h, int mode)
{
	h->version = MMF_LIVE_VERSION;
	h->hdr_size = sizeof *h;
	h->pid = mmf_sys_getpid();
	h->start_time = start_time();
	h->created_ns = realtime_ns();
	h->kinds = MMF_K_COUNT;
	h->fields = MMF_S_COUNT;
	h->events = MMF_E_COUNT;
	h->block_size = sizeof(struct mmf_block);
	h->chunk_blocks = MMF_CHUNK_BLOCKS;
	h->chunks_max = CHUNKS_MAX;
	h->mode = (uint32_t)mode;
	h->names_off = NAMES_OFF;
	h->totals_off = TOTALS_OFF;
	h->events_off = TOTALS_OFF + offsetof(struct mmf_totals, events);
	h->threads_off = TOTALS_OFF + offsetof(struct mmf_totals, threads);
	h->chunks_off = CHUNKS_OFF;
	h->chunk_size = CHUNK_SIZE;
	struct mmf_buf b = {(char *)h + NAMES_OFF, 0, TOTALS_OFF - NAMES_OFF - 1};
	mmf_puts(&b, "version=" MMFOLD_VERSION "\nmode=");
	mmf_puts(&b, mmf_mode_name(mode & 3));
	mmf_putc(&b, '\n');
	put_names(&b, "kinds", mmf_kind_name, MMF_K_COUNT);
	put_names(&b, "fields", mmf_field_name, MMF_S_COUNT);
	put_names(&b, "events", mmf_event_name, MMF_E_COUNT);
	/* the magic last: a reader takes the segment as valid from then on */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, MMF_LIVE_MAGIC, 8);
}

/* A new shared file of SEG_SIZE bytes for this pid, mapped at addr (or
 * anywhere); NULL when it cannot be made. */
static struct mmf_live_hdr *create(void *addr)
{
	char path[64];
	long pid = mmf_sys_getpid();
	seg_path(path, sizeof path, pid);
	/* A file of that name is a stale one of an earlier process with this
	 * pid, or of this process before an execve: removed, if it is ours
	 * (/dev/shm is sticky), and never opened, so no one else's file is
	 * written to. */
	long fd = mmf_sys_open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
	if (fd == -17 /* EEXIST */ && mmf_sys6(SYS_unlinkat, AT_FDCWD, (long)path, 0, 0, 0, 0) == 0)
		fd = mmf_sys_open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
	if (fd < 0) {
		path_pid = 0; /* a forked child's: not the parent's file either */
		return NULL;
	}
	path_pid = pid;
	void *p = (void *)-1L;
	if (mmf_sys6(SYS_ftruncate, fd, (long)SEG_SIZE, 0, 0, 0, 0) == 0)
		p = mmf_sys_mmap(addr, SEG_SIZE, PROT_READ | PROT_WRITE,
				 MAP_SHARED | (addr ? MAP_FIXED : 0), (int)fd, 0);
	mmf_sys_close((int)fd);
	if (mmf_sys_err((long)p)) {
		path_unlink();
		return NULL;
	}
	return p;
}

/* The next chunk of counter blocks, NULL when the segment is full. */
static struct mmf_block *more(void)
{
	struct mmf_live_hdr *h = seg;
	uint32_t i = __atomic_fetch_add(&h->nchunks, 1, __ATOMIC_ACQ_REL);
	if (i >= CHUNKS_MAX) {
		__atomic_store_n(&h->nchunks, CHUNKS_MAX, __ATOMIC_RELAXED);
		__atomic_fetch_add(&h->hidden_chunks, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	return (struct mmf_block *)((char *)h + CHUNKS_OFF + (size_t)i * CHUNK_SIZE);
}

int mmf_live_init(int mode)
{
	struct mmf_live_hdr *h = create(NULL);
	if (!h)
		return -1;
	seg = h;
	describe(h, mode);
	mmf_stats_publish((struct mmf_totals *)((char *)h + TOTALS_OFF), more);
	return 0;
}

void *mmf_live_profile_area(size_t bytes)
{
	if (!seg || bytes > MMF_LIVE_PROFILE_MAX)
		return NULL;
	seg->profile_off = PROFILE_OFF;
	seg->profile_size = bytes;
	return (char *)seg + PROFILE_OFF;
}

/* ns per tick as tick_num / tick_den. */
void mmf_live_calibrate(void)
{
	if (!seg)
		return;
#if defined(__aarch64__)
	uint64_t f;
	__asm__ volatile("mrs %0, cntfrq_el0" : "=r"(f));
	__atomic_store_n(&seg->tick_den, f ? f : 1, __ATOMIC_RELAXED);
	__atomic_store_n(&seg->tick_num, f ? 1000000000u : 1, __ATOMIC_RELAXED);
#else
	/* mmf_ticks_to_ns measures the rate since start-up */
	__atomic_store_n(&seg->tick_den, 1ull << 32, __ATOMIC_RELAXED);
	__atomic_store_n(&seg->tick_num, mmf_ticks_to_ns(1ull << 32), __ATOMIC_RELAXED);
#endif
}

void mmf_live_late_init(void)
{
#if defined(__x86_64__)
	if (seg) {
		struct timespec ms = {0, 1000000};
		mmf_sys6(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, (long)&ms, 0, 0, 0);
	}
#endif
	mmf_live_calibrate();
}

void mmf_live_fork_child(void)
{
	if (seg) {
		/* The parent's header, for the chunk count: the child keeps
		 * using the blocks at the same addresses. */
		struct mmf_live_hdr old = *seg;
		if (!create(seg)) {
			/* private memory in its place: the counters go on, unseen */
			void *p = mmf_sys_mmap(seg, SEG_SIZE, PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (mmf_sys_err((long)p)) {
				/* cannot happen short of address-space exhaustion;
				 * the parent's counters would take the child's adds */
				mmf_log(0, "mmfold: MMFOLD_LIVE: cannot detach from the parent's segment");
				return;
			}
		}
		seg->nchunks = old.nchunks;
		seg->hidden_chunks = old.hidden_chunks;
		seg->tick_num = old.tick_num;
		seg->tick_den = old.tick_den;
		seg->profile_off = old.profile_off;
		seg->profile_size = old.profile_size;
		describe(seg, (int)old.mode);
	}
}

void mmf_live_forget(void)
{
	if (seg && path_pid && seg->pid == mmf_sys_getpid())
		path_unlink();
}

void mmf_live_fini(void)
{
	if (seg && path_pid) {
		mmf_live_calibrate();
		mmf_live_forget();
	}
}
