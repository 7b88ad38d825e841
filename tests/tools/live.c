/* A small service for the live-statistics tests: two threads make no-op
 * and changing mprotect calls until the process is killed ("run"), or for
 * a number of seconds and then exit() ("for SECONDS"); "fork" also starts a
 * child that does the same; "vfork" first makes a vfork child that leaves
 * at once through _exit (in its parent's memory).  Prints "ready" once every thread has made a
 * call, so a test can read the counters from then on. */
#include <pthread.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static char *page;
static size_t pg;

static void burst(void)
{
	for (int i = 0; i < 200; i++)
		mprotect(page, pg, PROT_READ | PROT_WRITE);
	for (int i = 0; i < 20; i++)
		mprotect(page + pg, pg, i & 1 ? PROT_READ : PROT_READ | PROT_WRITE);
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		burst();
		usleep(5000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 2 && !strcmp(argv[1], "for") ? atof(argv[2]) : -1;
	int fork_too = argc > 1 && !strcmp(argv[1], "fork");
	pg = (size_t)sysconf(_SC_PAGESIZE);
	page = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 1;
	if (fork_too && fork() == 0)
		fork_too = 0; /* the child runs like its parent */
	if (argc > 1 && !strcmp(argv[1], "vfork")) {
		pid_t c = vfork();
		if (c == 0)
			_exit(0);
		if (c < 0)
			return 1;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	burst();
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		burst();
		usleep(5000);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (secs >= 0 && (now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 > secs)
			exit(0);
	}
}
