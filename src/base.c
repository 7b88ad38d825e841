/* Process-wide services at the bottom of the engine: the configuration,
 * the mode in force, the page size, the time source and logging.  Includes
 * nothing above it; every other file may call it.  See docs/DESIGN.md. */
#include "base.h"

#include <sys/syscall.h>
#include <time.h>

#include "fmt.h"
#include "sys.h"

struct mmf_config cfg MMF_DATA_ALIGN = {.v = {
#define X(id, name, type, def, min, max, choices) def,
	MMF_OPTIONS(X)
#undef X
}};
int mode = MMF_MODE_SAFE;
int init_state; /* 0 none, 1 running, 2 done, 3 failed (forward all); life.c sets it */
size_t page;

const struct mmf_config *mmf_cfg(void) { return &cfg; }

/* ---- time --------------------------------------------------------------- */

uint64_t mmf_ticks(void)
{
#if defined(__x86_64__)
	return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

uint64_t t0_ticks, t0_ns;

/* Through the vDSO: a seccomp filter may kill the process for the raw
 * system call, which programs never make (life.c's filter_in_force). */
uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t mmf_ticks_to_ns(uint64_t ticks)
{
	uint64_t dt = mmf_ticks() - t0_ticks, dn = mono_ns() - t0_ns;
	if (!dt || !t0_ns)
		return ticks;
	return (uint64_t)((__uint128_t)ticks * dn / dt);
}

/* ---- logging ------------------------------------------------------------ */

/* One line on stderr, in one write (no stdio). */
static void put_line(const char *line)
{
	char buf[600];
	MMF_BUF(b, buf);
	mmf_puts(&b, line);
	mmf_putc(&b, '\n');
	mmf_sys_write_all(2, b.p, b.len);
}

void mmf_log(int level, const char *line)
{
	if (level <= cfg.v[MMF_OPT_LOG])
		put_line(line);
}

static int warned;
void config_warn(const char *line, void *arg)
{
	(void)arg;
	if (warned++ < 16)
		put_line(line);
}

int mmf_mode(void) { return mode; }
