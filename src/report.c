/* The statistics report, text for people or one JSON line for tools.
 * Built in a stack buffer and written with write(2): no stdio, no malloc. */
#include "config.h"
#include "barrier.h"
#include "engine.h"
#include "fmt.h"
#include "live.h"
#include "profile.h"
#include "sys.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#include "../include/mmfold.h"

static void text(struct mmf_buf *b, const struct mmf_tstats *s, const uint64_t *ev,
		 uint32_t threads)
{
	mmf_puts(b, "mmfold " MMFOLD_VERSION ": pid ");
	mmf_puti(b, mmf_sys_getpid());
	mmf_puts(b, ", mode ");
	mmf_puts(b, mmf_mode_name(mmf_mode()));
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
	mmf_barrier_report(b, 0);
	mmf_profile_report(b, 0);
}

/* The command line, arguments separated by spaces, as JSON string content. */
static void put_command(struct mmf_buf *b)
{
	char cmd[1024];
	long fd = mmf_sys_open("/proc/self/cmdline", O_RDONLY, 0);
	long n = fd >= 0 ? mmf_sys_read((int)fd, cmd, sizeof cmd - 1) : 0;
	if (fd >= 0)
		mmf_sys_close((int)fd);
	if (n < 0)
		n = 0;
	while (n > 0 && cmd[n - 1] == 0)
		n--;
	for (long i = 0; i < n; i++)
		if (!cmd[i])
			cmd[i] = ' ';
	cmd[n] = 0;
	mmf_putjson(b, cmd);
}

static const char *const why_names[] = {"request", "exit", "periodic"};

static void json(struct mmf_buf *b, const struct mmf_tstats *s, const uint64_t *ev,
		 uint32_t threads, int why)
{
	struct timespec now;
	mmf_sys6(SYS_clock_gettime, CLOCK_REALTIME, (long)&now, 0, 0, 0, 0);
	mmf_puts(b, "{\"mmfold\":\"" MMFOLD_VERSION "\",\"pid\":");
	mmf_puti(b, mmf_sys_getpid());
	mmf_puts(b, ",\"ppid\":");
	mmf_puti(b, mmf_sys6(SYS_getppid, 0, 0, 0, 0, 0, 0));
	mmf_puts(b, ",\"command\":\"");
	put_command(b);
	mmf_puts(b, "\",\"report\":\"");
	mmf_puts(b, why_names[why]);
	mmf_puts(b, "\",\"time\":");
	mmf_putu(b, (uint64_t)now.tv_sec);
	mmf_puts(b, ",\"mode\":\"");
	mmf_puts(b, mmf_mode_name(mmf_mode()));
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
	mmf_barrier_report(b, 1);
	mmf_profile_report(b, 1);
	mmf_puts(b, "}\n");
}

void mmf_report(int fd, int format) { mmf_report_as(fd, format, MMF_REPORT_REQUEST); }

int mmf_report_open(int *close_it)
{
	const char *file = mmf_cfg()->stats_file;
	*close_it = 0;
	if (!file[0])
		return 2;
	char path[MMF_STR_MAX + 32];
	MMF_BUF(b, path);
	for (const char *p = file; *p; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			mmf_puti(&b, mmf_sys_getpid());
			p++;
		} else {
			mmf_putc(&b, *p);
		}
	}
	long f = mmf_sys_open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (f >= 0) {
		*close_it = 1;
		return (int)f;
	}
	char buf[400];
	MMF_BUF(m, buf);
	mmf_puts(&m, "mmfold: MMFOLD_STATS_FILE=");
	mmf_puts(&m, file);
	mmf_puts(&m, ": cannot open; writing the report to stderr");
	mmf_log(0, buf);
	return 2;
}

void mmf_report_as(int fd, int format, int why)
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
		json(&b, &s, ev, threads, why);
	else
		text(&b, &s, ev, threads);
	mmf_sys_write_all(fd, b.p, b.len);
	if (big)
		mmf_sys_munmap(b.p, big);
}

/* ---- periodic reports ---------------------------------------------------- */

static int interval;

static void *reporter(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "mmfold-stats", 0, 0, 0);
	struct timespec next;
	mmf_sys6(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&next, 0, 0, 0, 0);
	for (;;) {
		next.tv_sec += interval;
		while (mmf_sys6(SYS_clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, (long)&next, 0, 0,
				0) == -4 /* EINTR */)
			;
		mmf_live_calibrate();
		int close_it;
		int fd = mmf_report_open(&close_it);
		mmf_report_as(fd, MMF_FMT_JSON, MMF_REPORT_PERIODIC);
		if (close_it)
			mmf_sys_close(fd);
	}
	return NULL;
}

/* The reporting thread, with every signal blocked: the program's signals
 * go to its own threads. */
void mmf_report_start_periodic(void)
{
	interval = (int)mmf_cfg()->v[MMF_OPT_STATS_INTERVAL];
	if (interval <= 0)
		return;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t a;
	pthread_t t;
	int ok = pthread_attr_init(&a) == 0;
	if (ok) {
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 256 * 1024);
		ok = pthread_create(&t, &a, reporter, NULL) == 0;
		pthread_attr_destroy(&a);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!ok)
		mmf_log(0, "mmfold: MMFOLD_STATS_INTERVAL: cannot start the reporting thread; "
			   "no periodic reports");
}
