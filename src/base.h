/* Process-wide services at the bottom of the engine (base.c): the
 * configuration, the mode in force, time and logging.  Every file in src/
 * may include this; it includes nothing above it. */
#ifndef MMF_BASE_H
#define MMF_BASE_H

#include <stdint.h>

#include "config.h"

/* The current configuration (defaults until early init ran). */
const struct mmf_config *mmf_cfg(void);
/* The mode in force (MMF_MODE_*). */
int mmf_mode(void);

/* Time source for kernel time: cheap ticks, converted when reported. */
uint64_t mmf_ticks(void);
uint64_t mmf_ticks_to_ns(uint64_t ticks);

/* Logging to stderr, only as configured; one line, no newline needed. */
void mmf_log(int level, const char *line);

#endif
