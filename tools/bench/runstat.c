/* runstat: run a command, then print what the whole process tree cost.
 *
 *   runstat [-o FILE] [-i MS] [-s SMAPS] [--] command [args...]
 *
 * fork/execs the command (its stdin/stdout/stderr are left alone), waits
 * for it, and prints one line of key=value fields to FILE (appended) or,
 * without -o, to stderr:
 *
 *   wall_s      wall time from fork to exit (CLOCK_MONOTONIC)
 *   minflt      minor page faults, getrusage(RUSAGE_CHILDREN): the command
 *               and every descendant that was waited for (a JVM's threads
 *               are in it; so are node's, and children it reaped)
 *   majflt      major page faults, same
 *   user_s, sys_s  CPU time of the tree in user space and in the kernel
 *   maxrss_kb   peak resident set of the largest single process in the tree
 *   anonhuge_peak_kb  largest AnonHugePages (PMD-mapped THP) seen in the
 *               command's /proc/PID/smaps_rollup, sampled every MS
 *               milliseconds (-i, default 100; 0 = do not sample) by a
 *               thread of runstat, so the wall time stays exact
 *   thp_fault_alloc   /proc/vmstat thp_fault_alloc delta (PMD THP faults)
 *   mthp        anon_fault_alloc deltas per folio size, e.g.
 *               "64kB:1200,2048kB:30" ("-" if none); system-wide counters
 *   status      exit status (128+N when killed by signal N)
 *
 * -s SMAPS: at every sample whose Rss (smaps_rollup) is the largest seen so
 * far, copy the command's /proc/PID/smaps to SMAPS: the mappings at the
 * peak, to see where resident memory went (tools/smaps_sum.awk sums them).
 * Sampling runs every MS milliseconds (default 100 with -s).
 *
 * runstat exits with the command's status. */
#include "thp_common.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

struct sampler {
	char smaps[64];
	char full[64];       /* /proc/PID/smaps */
	const char *keep;    /* -s FILE, or NULL */
	long interval_ms;
	atomic_int done;
	unsigned long peak;
	unsigned long rss_peak;
};

/* Copies /proc/PID/smaps to s->keep (through a temporary file, so that
 * the last complete copy survives the process's exit mid-read). */
static void keep_smaps(struct sampler *s)
{
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp", s->keep);
	FILE *in = fopen(s->full, "r"), *out = in ? fopen(tmp, "w") : NULL;
	char buf[8192];
	size_t n;
	int ok = in && out;
	while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
		ok = fwrite(buf, 1, n, out) == n;
	if (in)
		ok = ok && !ferror(in);
	if (in)
		fclose(in);
	if (out && fclose(out) != 0)
		ok = 0;
	if (ok)
		rename(tmp, s->keep);
	else
		unlink(tmp);
}

static void *sample(void *arg)
{
	struct sampler *s = arg;
	struct timespec ts = { s->interval_ms / 1000, (s->interval_ms % 1000) * 1000000L };
	while (!atomic_load(&s->done)) {
		unsigned long h = read_key_file(s->smaps, "AnonHugePages");
		if (h > s->peak)
			s->peak = h;
		if (s->keep) {
			unsigned long r = read_key_file(s->smaps, "Rss");
			if (r > s->rss_peak) {
				s->rss_peak = r;
				keep_smaps(s);
			}
		}
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: runstat [-o FILE] [-i MS] [-s SMAPS] [--] command [args...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *out = NULL, *keep = NULL;
	long interval_ms = 100;
	int interval_set = 0;
	int i = 1;
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
			out = argv[++i];
		} else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
			interval_ms = strtol(argv[++i], NULL, 10);
			interval_set = 1;
		} else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
			keep = argv[++i];
		} else if (argv[i][0] == '-') {
			usage();
		} else {
			break;
		}
	}
	if (i >= argc)
		usage();

	struct thp_counters c0, c1;
	thp_read(&c0);
	double t0 = now_ns();
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		execvp(argv[i], argv + i);
		fprintf(stderr, "runstat: cannot run %s: %s\n", argv[i], strerror(errno));
		_exit(127);
	}
	/* While the command runs, ignore the terminal's interrupts (the command
	 * gets them and its status tells); timeout(1) signals the group. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);

	if (keep && (!interval_set || interval_ms <= 0))
		interval_ms = 100;
	struct sampler smp = { .interval_ms = interval_ms, .keep = keep };
	pthread_t th;
	int sampling = 0;
	snprintf(smp.smaps, sizeof smp.smaps, "/proc/%d/smaps_rollup", (int)pid);
	snprintf(smp.full, sizeof smp.full, "/proc/%d/smaps", (int)pid);
	if (interval_ms > 0)
		sampling = pthread_create(&th, NULL, sample, &smp) == 0;
	int st = 0;
	while (waitpid(pid, &st, 0) != pid) {
		if (errno != EINTR)
			die("waitpid");
	}
	double t1 = now_ns();
	atomic_store(&smp.done, 1);
	if (sampling)
		pthread_join(th, NULL);
	unsigned long huge_peak = smp.peak;
	thp_read(&c1);

	struct rusage ru;
	if (getrusage(RUSAGE_CHILDREN, &ru) != 0)
		die("getrusage");
	int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	char mthp[512];
	thp_delta_str(&c0, &c1, mthp, sizeof mthp);

	FILE *f = out ? fopen(out, "a") : stderr;
	if (!f)
		die(out);
	fprintf(f, "wall_s=%.4f user_s=%.3f sys_s=%.3f minflt=%ld majflt=%ld maxrss_kb=%ld anonhuge_peak_kb=%lu thp_fault_alloc=%lu mthp=%s status=%d\n",
		(t1 - t0) / 1e9, (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
		(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, ru.ru_minflt, ru.ru_majflt, ru.ru_maxrss, huge_peak,
		c1.pmd_fault_alloc >= c0.pmd_fault_alloc ? c1.pmd_fault_alloc - c0.pmd_fault_alloc : 0,
		mthp, status);
	if (out)
		fclose(f);
	return status;
}
