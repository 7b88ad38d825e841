/* stopworld [ROUNDS] — a collector that stops the world with signals.
 *
 * Boehm GC, Mono's SGen and others stop every mutator thread by sending it
 * a signal whose handler waits (sigsuspend) until the collector sends a
 * restart signal; while the world is stopped the collector itself calls
 * mprotect, mmap, munmap.  A mutator may be stopped anywhere, also in the
 * middle of an intercepted call: if the library held a lock there, the
 * collector's own call would wait for it forever.
 *
 * Three mutators flip their own page between R and RW and write to it; the
 * collector stops them ROUNDS times and flips its own page while they are
 * stopped.  A watchdog ends the process with exit status 3 when no round
 * ended in 30 seconds (a deadlock; a slow machine, such as an emulated
 * one, only takes longer).  Prints "stopworld: N rounds" when done. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NT 3
#define PG ((size_t)sysconf(_SC_PAGESIZE)) /* the system's page size */

static pthread_t th[NT];
static sem_t acked;
static volatile int stop;
static volatile int rounds_done;
static char *area;

static void on_suspend(int s)
{
	(void)s;
	sigset_t m;
	sigfillset(&m);
	sigdelset(&m, SIGUSR2);
	sem_post(&acked);
	sigsuspend(&m); /* until the restart signal */
}

static void on_resume(int s) { (void)s; }

static void *mutator(void *a)
{
	char *p = area + (long)a * 16 * PG;
	while (!stop) {
		mprotect(p, PG, PROT_READ);
		mprotect(p, PG, PROT_READ | PROT_WRITE);
		p[1]++;
	}
	return NULL;
}

static void *watchdog(void *a)
{
	(void)a;
	int seen = -1;
	while (seen != rounds_done) {
		seen = rounds_done;
		sleep(30);
	}
	static const char m[] = "stopworld: no progress in 30 s (deadlock)\n";
	if (write(1, m, sizeof m - 1) < 0) {
	}
	_exit(3);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 2000;
	area = mmap(NULL, (NT + 1) * 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		    0);
	if (area == MAP_FAILED)
		return 1;
	sem_init(&acked, 0, 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_suspend;
	sigfillset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_resume;
	sigaction(SIGUSR2, &sa, NULL);
	pthread_t wd;
	pthread_create(&wd, NULL, watchdog, NULL);
	for (long i = 0; i < NT; i++)
		pthread_create(&th[i], NULL, mutator, (void *)i);
	char *own = area + NT * 16 * PG;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < NT; i++)
			pthread_kill(th[i], SIGUSR1);
		for (int i = 0; i < NT; i++)
			while (sem_wait(&acked) != 0) {
			}
		/* the world is stopped */
		mprotect(own, PG, PROT_READ);
		mprotect(own, PG, PROT_READ | PROT_WRITE);
		own[0]++;
		for (int i = 0; i < NT; i++)
			pthread_kill(th[i], SIGUSR2);
		rounds_done = r + 1;
	}
	stop = 1;
	for (int i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	printf("stopworld: %d rounds\n", rounds);
	return 0;
}
