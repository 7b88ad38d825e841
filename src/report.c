/* The statistics report, text for people or one JSON line for tools.
 * Built in a stack buffer and written with write(2): no stdio, no malloc. */
#include "engine.h"
#include "fmt.h"
#include "profile.h"
#include "sys.h"

#include <sys/mman.h>

#include "../include/mmfold.h"

static const char *const mode_names[] = {"off", "observe", "safe", "lazy"};

static void text(struct mmf_buf *b, const struct mmf_tstats *s, const uint64_t *ev,
		 uint32_t threads)
{
	mmf_puts(b, "mmfold " MMFOLD_VERSION ": pid ");
	mmf_puti(b, mmf_sys_getpid());
	mmf_puts(b, ", mode ");
	mmf_puts(b, mode_names[mmf_mode()]);
	mmf_puts(b, ", threads ");
	mmf_putu(b, threads);
	mmf_putc(b, '\n');
	static const int w[MMF_S_COUNT] = {10, 10, 10, 9, 9, 7, 16, 16, 11};
	static const char *const head[MMF_S_COUNT] = {"calls",  "forwarded",   "skipped",
						      "deferred", "unproven", "errors",    "bytes asked",
						      "bytes kernel", "kernel ms"};
	mmf_putpad(b, "call", -16);
	for (int f = 0; f < MMF_S_COUNT; f++)
		mmf_putpad(b, head[f], w[f]);
	mmf_putc(b, '\n');
	for (int k = 0; k < MMF_K_COUNT; k++) {
		if (!s->v[k][MMF_S_CALLS])
			continue;
		mmf_putpad(b, mmf_kind_name(k), -16);
		for (int f = 0; f < MMF_S_COUNT; f++) {
			if (f == MMF_S_KERNEL_NS) {
				char tmp[32];
				MMF_BUF(t, tmp);
				mmf_putmilli(&t, mmf_ticks_to_ns(s->v[k][f]));
				mmf_putpad(b, tmp, w[f]);
			} else {
				mmf_putu_pad(b, s->v[k][f], w[f]);
			}
		}
		mmf_putc(b, '\n');
	}
	int any = 0;
	for (int e = 0; e < MMF_E_COUNT; e++)
		if (ev[e]) {
			mmf_puts(b, any ? ", " : "events: ");
			mmf_puts(b, mmf_event_name(e));
			mmf_putc(b, ' ');
			mmf_putu(b, ev[e]);
			any = 1;
		}
	if (any)
		mmf_putc(b, '\n');
	if (mmf_mode() >= MMF_MODE_SAFE)
		mmf_folio_report(b, 0);
	mmf_profile_report(b, 0);
}

static void json(struct mmf_buf *b, const struct mmf_tstats *s, const uint64_t *ev,
		 uint32_t threads)
{
	mmf_puts(b, "{\"mmfold\":\"" MMFOLD_VERSION "\",\"pid\":");
	mmf_puti(b, mmf_sys_getpid());
	mmf_puts(b, ",\"mode\":\"");
	mmf_puts(b, mode_names[mmf_mode()]);
	mmf_puts(b, "\",\"threads\":");
	mmf_putu(b, threads);
	mmf_puts(b, ",\"kinds\":{");
	for (int k = 0; k < MMF_K_COUNT; k++) {
		if (k)
			mmf_putc(b, ',');
		mmf_putc(b, '"');
		mmf_puts(b, mmf_kind_name(k));
		mmf_puts(b, "\":{");
		for (int f = 0; f < MMF_S_COUNT; f++) {
			if (f)
				mmf_putc(b, ',');
			mmf_putc(b, '"');
			mmf_puts(b, mmf_field_name(f));
			mmf_puts(b, "\":");
			mmf_putu(b, f == MMF_S_KERNEL_NS ? mmf_ticks_to_ns(s->v[k][f]) : s->v[k][f]);
		}
		mmf_putc(b, '}');
	}
	mmf_puts(b, "},\"events\":{");
	for (int e = 0; e < MMF_E_COUNT; e++) {
		if (e)
			mmf_putc(b, ',');
		mmf_putc(b, '"');
		mmf_puts(b, mmf_event_name(e));
		mmf_puts(b, "\":");
		mmf_putu(b, ev[e]);
	}
	mmf_putc(b, '}');
	if (mmf_mode() >= MMF_MODE_SAFE)
		mmf_folio_report(b, 1);
	mmf_profile_report(b, 1);
	mmf_puts(b, "}\n");
}

void mmf_report(int fd, int format)
{
	struct mmf_tstats s;
	uint64_t ev[MMF_E_COUNT];
	uint32_t threads;
	char out[4096];
	MMF_BUF(b, out);
	/* The call-site profile does not fit the stack buffer: one mapping
	 * holds the whole report, so it still leaves in one write. */
	size_t big = mmf_profile_report_size() ? sizeof out + mmf_profile_report_size() : 0;
	if (big) {
		char *m = mmf_sys_mmap(NULL, big, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (!mmf_sys_err((long)m))
			b = (struct mmf_buf){m, 0, big};
		else
			big = 0;
	}
	mmf_stats_snapshot(&s, ev, &threads);
	if (format == MMF_FMT_JSON)
		json(&b, &s, ev, threads);
	else
		text(&b, &s, ev, threads);
	mmf_sys_write_all(fd, b.p, b.len);
	if (big)
		mmf_sys_munmap(b.p, big);
}
