/* Memory touched by a thread that blocks every signal, as Chromium does
 * around fork() and thread creation (its allocator commits memory with
 * mprotect(RW) and touches it in that window).  The kernel cannot hand
 * such a fault to a handler: a page whose promotion waits in lazy mode
 * would kill the process.
 *
 *   lazymask    a promotion made before the signals were blocked, one made
 *               while they are blocked, and one by a thread that inherited
 *               the blocked mask, each touched with the signals blocked */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define LEN (256UL << 10)

static volatile int go;

static char *fresh(void)
{
	char *p = mmap(NULL, LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || mprotect(p, LEN, PROT_READ | PROT_WRITE))
		return NULL;
	return p;
}

static unsigned touch(char *p)
{
	unsigned s = 0;
	for (size_t i = 0; i < LEN; i += 4096) {
		p[i] = (char)(i >> 12);
		s += (unsigned char)p[i];
	}
	return s;
}

static void *child(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		;
	char *p = fresh();
	return (void *)(size_t)(p ? touch(p) : 0);
}

int main(void)
{
	sigset_t all, old;
	sigfillset(&all);
	char *before = fresh();
	if (!before)
		return 1;
	pthread_sigmask(SIG_SETMASK, &all, &old);
	unsigned a = touch(before);
	char *during = fresh();
	unsigned b = during ? touch(during) : 0;
	pthread_t t;
	pthread_create(&t, NULL, child, NULL); /* inherits the full mask */
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	void *c;
	pthread_join(t, &c);
	/* open again: promotions may wait */
	char *after = fresh();
	unsigned d = after ? touch(after) : 0;
	printf("lazymask: %u %u %u %u\n", a, b, (unsigned)(size_t)c, d);
	return 0;
}
