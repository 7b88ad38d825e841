/* mmfold: skips redundant mprotect/mlock/madvise calls and records what a
 * process does to its memory protections.  Loaded with LD_PRELOAD; this
 * header is for programs that want to ask it things at run time.
 *
 * Every function here is also usable when mmfold is not loaded: declare it
 * weak and test its address, e.g.
 *     #pragma weak mmfold_stats_write
 *     if (mmfold_stats_write) mmfold_stats_write(2, MMFOLD_FORMAT_TEXT);
 */
#ifndef MMFOLD_H
#define MMFOLD_H

#ifdef __cplusplus
extern "C" {
#endif

#define MMFOLD_VERSION "0.1.0"
#define MMFOLD_VERSION_MAJOR 0
#define MMFOLD_VERSION_MINOR 1
#define MMFOLD_VERSION_PATCH 0

#define MMFOLD_FORMAT_TEXT 0
#define MMFOLD_FORMAT_JSON 1

/* The library's version string, e.g. "0.1.0". */
const char *mmfold_version(void);

/* The mode in force: "off", "observe" or "safe". */
const char *mmfold_mode(void);

/* Writes the statistics gathered so far to fd, as the exit report would
 * (format MMFOLD_FORMAT_TEXT or MMFOLD_FORMAT_JSON).  Async-signal-safe.
 * Returns 0, or -1 with errno EINVAL for an unknown format. */
int mmfold_stats_write(int fd, int format);

#ifdef __cplusplus
}
#endif

#endif
