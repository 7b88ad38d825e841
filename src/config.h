/* Configuration: one table of MMFOLD_* variables, parsed once from the
 * environment into a struct that is read-only afterwards. */
#ifndef MMF_CONFIG_H
#define MMF_CONFIG_H

#include <stddef.h>

/* The modes (MMFOLD_MODE), in order: the one list of their names. */
#define MMF_MODES(X) X(OFF, "off") X(OBSERVE, "observe") X(SAFE, "safe") X(LAZY, "lazy")
enum {
#define X(id, name) MMF_MODE_##id,
	MMF_MODES(X)
#undef X
	MMF_MODE_COUNT
};
/* "off|observe|safe|lazy", for MMF_OPTIONS' choices. */
#define MMF_MODE_CHOICE_(id, name) "|" name
#define MMF_MODE_CHOICES (("" MMF_MODES(MMF_MODE_CHOICE_)) + 1)
/* The name of a mode ("" when out of range). */
const char *mmf_mode_name(int mode);
enum { MMF_FMT_TEXT, MMF_FMT_JSON };
enum { MMF_THP_OFF, MMF_THP_AUTO, MMF_THP_ADVISE };
enum { MMF_SIGCHAIN_AUTO, MMF_SIGCHAIN_ON };
/* MMFOLD_SHAPE: trim and widen force that shape wherever it is allowed. */
enum { MMF_SHAPE_OFF, MMF_SHAPE_AUTO, MMF_SHAPE_TRIM, MMF_SHAPE_WIDEN };
enum { MMF_WX_KEEP, MMF_WX_RELAX, MMF_WX_OFF };
enum { MMF_BARRIER_OFF, MMF_BARRIER_UFFD };
/* MMFOLD_ALIGN: a size in bytes, or one of these. */
#define MMF_ALIGN_AUTO (-1L)
#define MMF_ALIGN_OFF 0L

/* X(id, variable, type, default, min, max, choices)
 * type: B boolean (1/yes/on/true, 0/no/off/false), I integer in [min,max],
 * E one of the '|'-separated choices (the value is its index), S string,
 * Z a size in bytes in [min,max] (suffixes K, M, G: powers of 1024),
 * A "auto", "off" or a power-of-two size in [min,max] (MMF_ALIGN_*). */
#define MMF_OPTIONS(X)                                                         \
	X(MODE, "MMFOLD_MODE", 'E', MMF_MODE_SAFE, 0, 0, MMF_MODE_CHOICES)       \
	X(STATS, "MMFOLD_STATS", 'B', 0, 0, 1, NULL)                           \
	X(STATS_FILE, "MMFOLD_STATS_FILE", 'S', 0, 0, 0, NULL)                 \
	X(STATS_FORMAT, "MMFOLD_STATS_FORMAT", 'E', MMF_FMT_TEXT, 0, 0, "text|json") \
	X(STATS_INTERVAL, "MMFOLD_STATS_INTERVAL", 'I', 0, 0, 86400, NULL)   \
	X(LIVE, "MMFOLD_LIVE", 'B', 0, 0, 1, NULL)                             \
	X(VERIFY, "MMFOLD_VERIFY", 'I', 0, 0, 2, NULL)                         \
	X(LOG, "MMFOLD_LOG", 'I', 0, 0, 3, NULL)                               \
	X(STRICT, "MMFOLD_STRICT", 'B', 0, 0, 1, NULL)                         \
	X(THP, "MMFOLD_THP", 'E', MMF_THP_AUTO, 0, 0, "off|auto|advise")       \
	X(THP_MIN, "MMFOLD_THP_MIN", 'Z', 2L << 20, 4096, 1L << 40, NULL)      \
	X(ALIGN, "MMFOLD_ALIGN", 'A', MMF_ALIGN_AUTO, 4096, 1L << 30, NULL)    \
	X(ALIGN_MIN, "MMFOLD_ALIGN_MIN", 'Z', 0, 0, 1L << 40, NULL)            \
	X(SIGCHAIN, "MMFOLD_SIGCHAIN", 'E', MMF_SIGCHAIN_AUTO, 0, 0, "auto|on") \
	X(PROFILE, "MMFOLD_PROFILE", 'I', 0, 0, 1000, NULL)                    \
	X(PROFILE_DEPTH, "MMFOLD_PROFILE_DEPTH", 'I', 16, 1, 64, NULL)         \
	X(SHAPE, "MMFOLD_SHAPE", 'E', MMF_SHAPE_AUTO, 0, 0, "off|auto|trim|widen") \
	X(WX, "MMFOLD_WX", 'E', MMF_WX_KEEP, 0, 0, "keep|relax|off")           \
	X(LAZY_TOUCHED, "MMFOLD_LAZY_TOUCHED", 'I', 75, 1, 100, NULL)           \
	X(BARRIER, "MMFOLD_BARRIER", 'E', MMF_BARRIER_OFF, 0, 0, "off|uffd")    \
	X(LIB, "MMFOLD_LIB", 'S', 0, 0, 0, NULL) /* for the tools: not used here */

enum {
#define X(id, name, type, def, min, max, choices) MMF_OPT_##id,
	MMF_OPTIONS(X)
#undef X
	MMF_OPT_COUNT
};

#define MMF_STR_MAX 256

struct mmf_config {
	long v[MMF_OPT_COUNT];
	char stats_file[MMF_STR_MAX];
	int problems; /* configuration problems found (each warned once) */
};

/* Parses envp (NULL-terminated "NAME=value" strings) into *c.  Every bad
 * value, unknown MMFOLD_* name or unavailable choice is reported as one line
 * through warn (without newline) and the default kept.  Uses no malloc and
 * no stdio.  Returns the number of problems. */
int mmf_config_parse(struct mmf_config *c, char *const *envp,
		     void (*warn)(const char *line, void *arg), void *arg);

#endif
