/* libc reading into and writing from memory whose promotion waits in lazy
 * mode.  The program brings its own malloc, as Chromium does
 * (PartitionAlloc): every block lies in its own 64 KiB slot of an area
 * mapped PROT_NONE, committed with mprotect(PROT_READ|PROT_WRITE) when the
 * block is handed out, and never touched by the allocator.  So a buffer
 * libc allocates and reads into itself (a FILE's, on the first read) is
 * memory whose promotion waits in lazy mode, and the kernel's read into it
 * fails with EFAULT unless mmfold made it first.
 *
 *   lazyio DIR   DIR: a directory for the scratch file
 *
 * Prints what each call returned and read; the output must be the same
 * without mmfold and in lazy mode. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- the allocator ---- */

#define SLOT (64UL << 10)
#define NSLOT 2048
static char *area;
static size_t used[NSLOT]; /* bytes of the block in slot i (0: free) */
static unsigned next_slot;
/* Before main() maps the area (libc and the loader allocate early). */
static char early[1 << 16] __attribute__((aligned(64)));
static size_t early_used;

void *malloc(size_t n)
{
	if (!n)
		n = 1;
	if (!area) {
		size_t a = (n + 63) & ~63UL;
		if (early_used + a > sizeof early)
			return NULL;
		void *p = early + early_used;
		early_used += a;
		return p;
	}
	size_t slots = (n + SLOT - 1) / SLOT;
	unsigned i = __atomic_fetch_add(&next_slot, (unsigned)slots, __ATOMIC_RELAXED);
	if (i + slots > NSLOT) {
		errno = ENOMEM;
		return NULL;
	}
	char *p = area + (size_t)i * SLOT;
	if (mprotect(p, (n + 4095) & ~4095UL, PROT_READ | PROT_WRITE))
		return NULL;
	used[i] = n;
	return p;
}

void free(void *p)
{
	(void)p; /* slots are not reused: every block is fresh memory */
}

void *calloc(size_t a, size_t b)
{
	size_t n;
	if (__builtin_mul_overflow(a, b, &n))
		return NULL;
	return malloc(n); /* fresh anonymous memory reads as zero */
}

static size_t size_of(void *p)
{
	char *c = p;
	if (c >= early && c < early + sizeof early)
		return (size_t)(early + sizeof early - c);
	return used[(size_t)(c - area) / SLOT];
}

void *realloc(void *p, size_t n)
{
	if (!p)
		return malloc(n);
	void *q = malloc(n);
	if (q) {
		size_t o = size_of(p);
		memcpy(q, p, o < n ? o : n);
	}
	return q;
}

void *memalign(size_t al, size_t n)
{
	return al <= SLOT ? malloc(n) : NULL;
}

int posix_memalign(void **r, size_t al, size_t n)
{
	void *p = memalign(al, n);
	if (!p)
		return ENOMEM;
	*r = p;
	return 0;
}

void *aligned_alloc(size_t al, size_t n)
{
	return memalign(al, n);
}

size_t malloc_usable_size(void *p)
{
	return p ? size_of(p) : 0;
}

/* ---- the calls ---- */

static char path[4096];

static FILE *open_data(void)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror("fopen");
		exit(1);
	}
	return f;
}

static unsigned sum(const unsigned char *p, size_t n)
{
	unsigned s = 0;
	for (size_t i = 0; i < n; i++)
		s = s * 31 + p[i];
	return s;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: lazyio DIR\n");
		return 2;
	}
	area = mmap(NULL, NSLOT * SLOT, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* The data file: 20000 numbered lines, written with write() from a
	 * stack buffer. */
	snprintf(path, sizeof path, "%s/lazyio.%d", argv[1], (int)getpid());
	FILE *w = fopen(path, "w");
	if (!w)
		return 1;
	for (int i = 0; i < 20000; i++)
		fprintf(w, "line %d %d\n", i, i * 7 % 1000);
	fclose(w);

	/* fgets: libc allocates the FILE buffer at the first read */
	FILE *f = open_data();
	char *line = malloc(256);
	unsigned s = 0;
	int lines = 0;
	while (fgets(line, 256, f)) {
		s = s * 31 + sum((unsigned char *)line, strlen(line));
		lines++;
	}
	printf("fgets: %d lines, sum %u, error %d\n", lines, s, ferror(f));
	fclose(f);

	/* fscanf, as C++'s ifstream >> int does in Chromium */
	f = open_data();
	int a = -1, b = -1, n = fscanf(f, "line %d %d", &a, &b);
	printf("fscanf: %d conversions, %d %d, error %d\n", n, a, b, ferror(f));
	fclose(f);

	/* fread into a caller's buffer larger than the FILE's: libc reads
	 * straight into it */
	f = open_data();
	size_t big = 256 << 10;
	unsigned char *buf = malloc(big);
	size_t got = fread(buf, 1, big, f);
	printf("fread: %zu bytes, sum %u, error %d\n", got, sum(buf, got), ferror(f));
	fclose(f);

	/* unbuffered fread: every read goes into the caller's buffer */
	f = open_data();
	setvbuf(f, NULL, _IONBF, 0);
	unsigned char *small = malloc(8192);
	got = fread(small, 1, 8192, f);
	printf("fread unbuffered: %zu bytes, sum %u, error %d\n", got, sum(small, got),
	       ferror(f));
	fclose(f);

	/* getline */
	f = open_data();
	char *l = NULL;
	size_t cap = 0;
	ssize_t len = getline(&l, &cap, f);
	printf("getline: %zd %.*s", len, len > 0 ? (int)len : 0, len > 0 ? l : "");
	if (len <= 0)
		printf(" error %d\n", ferror(f));
	fclose(f);

	/* getc */
	f = open_data();
	int c = getc(f);
	printf("getc: %d error %d\n", c, ferror(f));
	fclose(f);

	/* fwrite of a large untouched block goes straight to write() */
	unsigned char *zeros = malloc(big);
	w = fopen(path, "w");
	got = fwrite(zeros, 1, big, w);
	int closed = fclose(w);
	f = open_data();
	got = fread(buf, 1, big, f);
	printf("fwrite: %zu bytes back, sum %u, fclose %d\n", got, sum(buf, got), closed);
	fclose(f);

	/* the zone file: read by libc through a FILE it opens itself */
	setenv("TZ", "Europe/Paris", 1);
	time_t t = 1700000000;
	struct tm tm;
	localtime_r(&t, &tm);
	printf("localtime_r: %02d:%02d %s gmtoff %ld\n", tm.tm_hour, tm.tm_min, tm.tm_zone,
	       tm.tm_gmtoff);

	/* a directory: opendir's buffer comes from malloc */
	DIR *d = opendir(argv[1]);
	int found = 0;
	errno = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		found += !strcmp(e->d_name, strrchr(path, '/') + 1);
	printf("readdir: found %d, errno %d\n", found, errno);
	if (d)
		closedir(d);
	unlink(path);
	return 0;
}
