/* The library half of forklock.c: a lock of its own that it takes in a
 * pthread_atfork prepare handler, registered from its constructor (so
 * before mmfold's, whose constructor runs after the program's libraries':
 * mmfold's prepare handler then runs first, this one after it), as an
 * allocator does with its arena locks. */
#include <pthread.h>

static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;

void forklock_lock(void) { pthread_mutex_lock(&lib_lock); }
void forklock_unlock(void) { pthread_mutex_unlock(&lib_lock); }

static void prepare(void) { pthread_mutex_lock(&lib_lock); }
static void release(void) { pthread_mutex_unlock(&lib_lock); }

__attribute__((constructor)) static void init(void) { pthread_atfork(prepare, release, release); }
