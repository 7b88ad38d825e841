/* The exported fscanf family (see preload/stdio.c).  <stdio.h> is not
 * included: it declares fscanf under the symbol __isoc99_fscanf, and both
 * names must be defined here. */
#include <stdarg.h>

#define MMF_EXPORT __attribute__((visibility("default")))

struct _IO_FILE;
int mmf_vfscanf(struct _IO_FILE *f, const char *fmt, va_list ap);
int mmf_vfscanf_c99(struct _IO_FILE *f, const char *fmt, va_list ap);

MMF_EXPORT int vfscanf(struct _IO_FILE *f, const char *fmt, va_list ap)
{
	return mmf_vfscanf(f, fmt, ap);
}

MMF_EXPORT int __isoc99_vfscanf(struct _IO_FILE *f, const char *fmt, va_list ap)
{
	return mmf_vfscanf_c99(f, fmt, ap);
}

MMF_EXPORT int fscanf(struct _IO_FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = mmf_vfscanf(f, fmt, ap);
	va_end(ap);
	return r;
}

MMF_EXPORT int __isoc99_fscanf(struct _IO_FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = mmf_vfscanf_c99(f, fmt, ap);
	va_end(ap);
	return r;
}
