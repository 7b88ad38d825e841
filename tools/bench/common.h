/* Shared helpers for the mmfold micro-benchmarks.  Each benchmark does one
 * workload and prints one line: "<value> <unit> <description>". */
#ifndef MMF_BENCH_COMMON_H
#define MMF_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline void die(const char *what)
{
	perror(what);
	exit(1);
}

static inline unsigned long arg_ul(int argc, char **argv, int i, unsigned long def)
{
	return argc > i ? strtoul(argv[i], NULL, 0) : def;
}

#endif
