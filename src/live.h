/* Live statistics (MMFOLD_LIVE=1).  The periodic reports
 * (MMFOLD_STATS_INTERVAL=SECONDS) are report.c's.
 *
 * With MMFOLD_LIVE=1 the process-wide totals and every thread's counter
 * block live in a shared file, /dev/shm/mmfold.<pid>, instead of private
 * memory: the counters are the same, so the hot path is unchanged, and a
 * reader (mmfold stat, mmfold top) maps the file and merges the blocks as
 * the exit report does, without stopping or signalling the process.  The
 * file is created only when asked, removed at exit; a process killed
 * without exit handlers leaves it behind, and the reader recognises it as
 * stale (the pid is gone, or runs another program: its start time differs
 * or it no longer maps the file).
 *
 * Layout, read by tools/mmfold (little-endian, native sizes; only grows):
 *   0      struct mmf_live_hdr
 *   256    names: "key=value\n" lines (version, mode, kinds, fields,
 *          events: names separated by spaces), NUL-terminated
 *   4096   struct mmf_totals (stats.h)
 *   chunks_off + i * chunk_size, i < nchunks: MMF_CHUNK_BLOCKS blocks of
 *          block_size bytes (struct mmf_block)
 *   profile_off: the call-site table, when profiling */
#ifndef MMF_LIVE_H
#define MMF_LIVE_H

#include <stddef.h>
#include <stdint.h>

#define MMF_LIVE_MAGIC "MMFOLDLV"
#define MMF_LIVE_VERSION 1

struct mmf_live_hdr {
	char magic[8];
	uint32_t version, hdr_size;
	int64_t pid;
	uint64_t start_time; /* field 22 of /proc/<pid>/stat: clock ticks after boot */
	uint64_t created_ns; /* CLOCK_REALTIME */
	uint32_t kinds, fields, events, block_size;
	uint32_t chunk_blocks, chunks_max, nchunks, mode;
	uint64_t names_off, totals_off, events_off, threads_off, chunks_off, chunk_size;
	/* kernel time: ns = ticks * tick_num / tick_den (0/0: not known yet) */
	uint64_t tick_num, tick_den;
	uint64_t hidden_chunks; /* chunks that did not fit: their threads are missing */
	/* the call-site profile's table (profile.c), when MMFOLD_PROFILE is on:
	 * profile_size bytes of 64-byte sites {address << 4 | kind, calls,
	 * forwarded, skipped, bytes, ticks, in_signal, 0}; 0 when off */
	uint64_t profile_off, profile_size;
};

/* Early init (raw system calls only): creates the segment and moves the
 * statistics into it.  Returns 0, or -1 (the statistics stay private). */
int mmf_live_init(int mode);
/* Memory for the call-site table inside the segment (bytes at most
 * MMF_LIVE_PROFILE_MAX), published in the header; NULL without a segment. */
#define MMF_LIVE_PROFILE_MAX (1u << 20)
void *mmf_live_profile_area(size_t bytes);
/* From the constructor: the time-stamp counter's rate for kernel time (on
 * x86_64 measured over 1 ms). */
void mmf_live_late_init(void);
/* In a forked child: its own segment (mapped where the parent's was, so
 * the counter blocks stay where they are). */
void mmf_live_fork_child(void);
/* At exit: removes the segment's file (the memory stays mapped). */
void mmf_live_fini(void);
/* The segment's ns-per-tick, measured now (the periodic reports). */
void mmf_live_calibrate(void);
/* The same from _exit (raw system calls only, async-signal-safe); nothing
 * in a vfork child (another pid in the same memory). */
void mmf_live_forget(void);

#endif
