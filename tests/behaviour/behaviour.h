/* What the behaviour suites (tests/behaviour/check_*.c) share: running a
 * program with and without the library on a clean environment, reading
 * what it wrote, and reading a counter of its JSON report. */
#ifndef MMF_BEHAVIOUR_H
#define MMF_BEHAVIOUR_H

#include <stddef.h>
#include <sys/types.h>

/* Reads at most n-1 bytes of path into buf (empty when it cannot). */
void bh_slurp(const char *path, char *buf, size_t n);

/* Starts argv[0] with LD_PRELOAD=lib (unless preload is 0) and the "K=V"
 * settings of extra (NULL-terminated, may be NULL) on the environment
 * without MMFOLD_*, LD_PRELOAD and CK_* variables; its stdout goes to
 * out, its stderr to err.  Returns the child's pid. */
pid_t bh_spawn(const char *lib, int preload, const char *const *extra, char *const argv[],
	       const char *out, const char *err);

/* Waits for pid: its exit code, or 128 + the signal that ended it. */
int bh_wait(pid_t pid);

/* The value of "field" inside "kind":{...} of a JSON report (kind NULL:
 * the first "field" anywhere), or -1. */
long bh_jfield(const char *json, const char *kind, const char *field);

/* A fresh directory /tmp/mmfold-<tag>.<pid> for a test's files, into dir;
 * bh_rmdir removes it and what it holds. */
void bh_tmpdir(char *dir, size_t n, const char *tag);
void bh_rmdir(const char *dir);

#endif
