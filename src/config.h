/* Configuration: one table of MMFOLD_* variables, parsed once from the
 * environment into a struct that is read-only afterwards. */
#ifndef MMF_CONFIG_H
#define MMF_CONFIG_H

#include <stddef.h>

/* Each choice of an 'E' option below is named once, in a list
 * X(prefix, id, name) in value order: MMF_CHOICE_ENUM makes the enum
 * (prefix##id = 0, 1, ...), MMF_CHOICES the "a|b|c" string that the parser
 * matches and the error message prints, MMF_CHOICE_COUNT their number. */
#define MMF_CHOICE_ID_(p, id, name) p##id,
#define MMF_CHOICE_NAME_(p, id, name) "|" name
#define MMF_CHOICE_ONE_(p, id, name) +1
#define MMF_CHOICE_ENUM(list) enum { list(MMF_CHOICE_ID_) }
#define MMF_CHOICES(list) (("" list(MMF_CHOICE_NAME_)) + 1)
#define MMF_CHOICE_COUNT(list) (0 list(MMF_CHOICE_ONE_))

/* The modes (MMFOLD_MODE), in order. */
#define MMF_MODES(X)                                                           \
	X(MMF_MODE_, OFF, "off") X(MMF_MODE_, OBSERVE, "observe")              \
	X(MMF_MODE_, SAFE, "safe") X(MMF_MODE_, LAZY, "lazy")
MMF_CHOICE_ENUM(MMF_MODES);
enum { MMF_MODE_COUNT = MMF_CHOICE_COUNT(MMF_MODES) };
/* The name of a mode ("" when out of range). */
const char *mmf_mode_name(int mode);
/* MMFOLD_STATS_FORMAT */
#define MMF_FMTS(X) X(MMF_FMT_, TEXT, "text") X(MMF_FMT_, JSON, "json")
MMF_CHOICE_ENUM(MMF_FMTS);
/* MMFOLD_THP */
#define MMF_THPS(X) X(MMF_THP_, OFF, "off") X(MMF_THP_, AUTO, "auto") X(MMF_THP_, ADVISE, "advise")
MMF_CHOICE_ENUM(MMF_THPS);
/* MMFOLD_SIGCHAIN */
#define MMF_SIGCHAINS(X) X(MMF_SIGCHAIN_, AUTO, "auto") X(MMF_SIGCHAIN_, ON, "on")
MMF_CHOICE_ENUM(MMF_SIGCHAINS);
/* MMFOLD_SHAPE: trim and widen force that shape wherever it is allowed. */
#define MMF_SHAPES(X)                                                          \
	X(MMF_SHAPE_, OFF, "off") X(MMF_SHAPE_, AUTO, "auto")                  \
	X(MMF_SHAPE_, TRIM, "trim") X(MMF_SHAPE_, WIDEN, "widen")
MMF_CHOICE_ENUM(MMF_SHAPES);
/* MMFOLD_WX */
#define MMF_WXS(X) X(MMF_WX_, KEEP, "keep") X(MMF_WX_, RELAX, "relax") X(MMF_WX_, OFF, "off")
MMF_CHOICE_ENUM(MMF_WXS);
/* MMFOLD_BARRIER */
#define MMF_BARRIERS(X) X(MMF_BARRIER_, OFF, "off") X(MMF_BARRIER_, UFFD, "uffd")
MMF_CHOICE_ENUM(MMF_BARRIERS);
/* MMFOLD_ALIGN: a size in bytes, or one of these. */
#define MMF_ALIGN_AUTO (-1L)
#define MMF_ALIGN_OFF 0L

/* X(id, variable, type, default, min, max, choices)
 * type: B boolean (1/yes/on/true, 0/no/off/false), I integer in [min,max],
 * E one of the '|'-separated choices (the value is its index), S string,
 * Z a size in bytes in [min,max] (suffixes K, M, G: powers of 1024),
 * A "auto", "off" or a power-of-two size in [min,max] (MMF_ALIGN_*). */
#define MMF_OPTIONS(X)                                                                           \
	X(MODE, "MMFOLD_MODE", 'E', MMF_MODE_SAFE, 0, 0, MMF_CHOICES(MMF_MODES))                 \
	X(STATS, "MMFOLD_STATS", 'B', 0, 0, 1, NULL)                                             \
	X(STATS_FILE, "MMFOLD_STATS_FILE", 'S', 0, 0, 0, NULL)                                   \
	X(STATS_FORMAT, "MMFOLD_STATS_FORMAT", 'E', MMF_FMT_TEXT, 0, 0, MMF_CHOICES(MMF_FMTS))   \
	X(STATS_INTERVAL, "MMFOLD_STATS_INTERVAL", 'I', 0, 0, 86400, NULL)                       \
	X(LIVE, "MMFOLD_LIVE", 'B', 0, 0, 1, NULL)                                               \
	X(VERIFY, "MMFOLD_VERIFY", 'I', 0, 0, 2, NULL)                                           \
	X(LOG, "MMFOLD_LOG", 'I', 0, 0, 3, NULL)                                                 \
	X(STRICT, "MMFOLD_STRICT", 'B', 0, 0, 1, NULL)                                           \
	X(THP, "MMFOLD_THP", 'E', MMF_THP_AUTO, 0, 0, MMF_CHOICES(MMF_THPS))                     \
	X(THP_MIN, "MMFOLD_THP_MIN", 'Z', 2L << 20, 4096, 1L << 40, NULL)                        \
	X(ALIGN, "MMFOLD_ALIGN", 'A', MMF_ALIGN_AUTO, 4096, 1L << 30, NULL)                      \
	X(ALIGN_MIN, "MMFOLD_ALIGN_MIN", 'Z', 0, 0, 1L << 40, NULL)                              \
	X(SIGCHAIN, "MMFOLD_SIGCHAIN", 'E', MMF_SIGCHAIN_AUTO, 0, 0, MMF_CHOICES(MMF_SIGCHAINS)) \
	X(PROFILE, "MMFOLD_PROFILE", 'I', 0, 0, 1000, NULL)                                      \
	X(PROFILE_DEPTH, "MMFOLD_PROFILE_DEPTH", 'I', 16, 1, 64, NULL)                           \
	X(SHAPE, "MMFOLD_SHAPE", 'E', MMF_SHAPE_AUTO, 0, 0, MMF_CHOICES(MMF_SHAPES))             \
	X(WX, "MMFOLD_WX", 'E', MMF_WX_KEEP, 0, 0, MMF_CHOICES(MMF_WXS))                         \
	X(LAZY_TOUCHED, "MMFOLD_LAZY_TOUCHED", 'I', 75, 1, 100, NULL)                            \
	X(BARRIER, "MMFOLD_BARRIER", 'E', MMF_BARRIER_OFF, 0, 0, MMF_CHOICES(MMF_BARRIERS))      \
	X(LOCK_WAIT, "MMFOLD_LOCK_WAIT", 'I', 1000, 0, 1000000, NULL)                          \
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
