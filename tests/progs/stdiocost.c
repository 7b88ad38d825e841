/* Calls of the libc functions mmfold wraps for lazy mode, for counting the
 * wrappers' cost with callgrind (BENCHMARKS.md "Lazy mode: libc calls").
 *
 *   stdiocost CALL N   CALL: fgetc, getc, fread, fgets, getline, fscanf,
 *                      fwrite, localtime_r, sigmask (pthread_sigmask
 *                      setting the mask in force); N calls on an
 *                      in-memory stream (fmemopen), rewound when it ends */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	const char *call = argv[1];
	long n = atol(argv[2]);
	static char data[1 << 16];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = i % 16 == 15 ? '\n' : (char)('0' + i % 10);
	FILE *f = fmemopen(data, sizeof data, "r+");
	if (!f)
		return 1;
	char buf[64];
	char *line = NULL;
	size_t cap = 0;
	unsigned long s = 0;
	time_t t = 1700000000;
	struct tm tm;
	sigset_t mask;
	pthread_sigmask(SIG_BLOCK, NULL, &mask);
	for (long i = 0; i < n; i++) {
		long r;
		if (!strcmp(call, "fgetc"))
			r = fgetc(f);
		else if (!strcmp(call, "getc"))
			r = getc(f);
		else if (!strcmp(call, "fread"))
			r = (long)fread(buf, 1, 16, f);
		else if (!strcmp(call, "fgets"))
			r = fgets(buf, sizeof buf, f) ? 1 : -1;
		else if (!strcmp(call, "getline"))
			r = getline(&line, &cap, f);
		else if (!strcmp(call, "fscanf"))
			r = fscanf(f, "%63s", buf);
		else if (!strcmp(call, "fwrite"))
			r = (long)fwrite(data, 1, 16, f);
		else if (!strcmp(call, "localtime_r"))
			r = localtime_r(&t, &tm) ? tm.tm_hour : -1;
		else if (!strcmp(call, "sigmask"))
			r = pthread_sigmask(SIG_SETMASK, &mask, NULL) == 0;
		else
			return 2;
		if (r <= 0 || feof(f))
			rewind(f);
		s += (unsigned long)r;
	}
	printf("%s %ld: %lu\n", call, n, s);
	free(line);
	return 0;
}
