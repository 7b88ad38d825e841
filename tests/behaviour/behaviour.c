/* The behaviour suites' shared helpers (behaviour.h). */
#include "behaviour.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void bh_slurp(const char *path, char *buf, size_t n)
{
	buf[0] = 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	size_t got = 0;
	ssize_t r;
	while (got < n - 1 && (r = read(fd, buf + got, n - 1 - got)) > 0)
		got += (size_t)r;
	buf[got] = 0;
	close(fd);
}

pid_t bh_spawn(const char *lib, int preload, const char *const *extra, char *const argv[],
	       const char *out, const char *err)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		extern char **environ;
		char *env[64], ld[600];
		int n = 0;
		for (char **e = environ; *e && n < 40; e++)
			if (strncmp(*e, "MMFOLD_", 7) && strncmp(*e, "LD_PRELOAD=", 11) &&
			    strncmp(*e, "CK_", 3))
				env[n++] = *e;
		if (preload) {
			snprintf(ld, sizeof ld, "LD_PRELOAD=%s", lib);
			env[n++] = ld;
		}
		for (; extra && *extra && n < 62; extra++)
			env[n++] = (char *)*extra;
		env[n] = NULL;
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e2 = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(o, 1);
		dup2(e2, 2);
		execve(argv[0], argv, env);
		_exit(127);
	}
	return pid;
}

int bh_wait(pid_t pid)
{
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

long bh_jfield(const char *json, const char *kind, const char *field)
{
	char key[80];
	const char *k = json;
	if (kind) {
		snprintf(key, sizeof key, "\"%s\":{", kind);
		k = strstr(json, key);
		if (!k)
			return -1;
	}
	snprintf(key, sizeof key, "\"%s\":", field);
	const char *f = strstr(k, key);
	if (!f || (kind && f > strchr(k, '}')))
		return -1;
	return atol(f + strlen(key));
}

void bh_tmpdir(char *dir, size_t n, const char *tag)
{
	snprintf(dir, n, "/tmp/mmfold-%s.%d", tag, (int)getpid());
	mkdir(dir, 0700);
}

void bh_rmdir(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}
