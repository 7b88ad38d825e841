/* fork() while another thread holds a library's lock and changes
 * protections under it: the library takes that lock in its atfork prepare
 * handler (libforklockl.so, as an allocator does), which runs after
 * mmfold's.  If mmfold held its own lock from its prepare handler to its
 * parent handler, the forking thread would wait for the library's lock
 * while the other thread, holding it, waited for mmfold's in mprotect:
 * headless Chromium (PartitionAlloc) hung this way about once in a hundred
 * lazy-mode runs.
 *
 *   forklock [FORKS]   (default 300)
 *
 * Output: the forks made and how many did not finish within 20 s. */
#include "common.h"

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>

void forklock_lock(void);
void forklock_unlock(void);

static char *area;
static volatile int stop;

static void *changer(void *p)
{
	(void)p;
	while (!stop) {
		forklock_lock();
		mprotect(area, PG, PROT_READ);
		mprotect(area, PG, PROT_READ | PROT_WRITE);
		forklock_unlock();
	}
	return NULL;
}

static volatile int forked_ok;

static void *forker(void *p)
{
	int n = (int)(intptr_t)p;
	for (int i = 0; i < n; i++) {
		pid_t c = fork();
		if (c == 0)
			_exit(0);
		if (c > 0 && waitpid(c, NULL, 0) == c)
			forked_ok++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int forks = argc > 1 ? atoi(argv[1]) : 300;
	area = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return 1;
	pthread_t t[3], f;
	for (int i = 0; i < 3; i++) /* more threads than the machine's cores */
		pthread_create(&t[i], NULL, changer, NULL);
	pthread_create(&f, NULL, forker, (void *)(intptr_t)forks);
	/* the forker, bounded: a deadlock shows as forks that never finish */
	struct timespec d = {0, 10 * 1000000L};
	int waited = 0;
	while (forked_ok < forks && waited < 2000) {
		nanosleep(&d, NULL);
		waited++;
	}
	int done = forked_ok;
	printf("forks: %d, %d did not finish within 20 s\n", forks, forks - done);
	fflush(stdout);
	if (done < forks)
		_exit(0); /* the threads are stuck: leave without joining them */
	stop = 1;
	pthread_join(f, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return 0;
}
