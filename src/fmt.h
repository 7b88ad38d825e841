/* A tiny formatter into a caller's buffer: no stdio, no malloc, safe in
 * signal handlers.  Output that does not fit is truncated, never overrun. */
#ifndef MMF_FMT_H
#define MMF_FMT_H

#include <stddef.h>
#include <stdint.h>

struct mmf_buf {
	char *p;
	size_t len, cap;
};

#define MMF_BUF(name, storage) struct mmf_buf name = {storage, 0, sizeof(storage)}

void mmf_puts(struct mmf_buf *b, const char *s);
void mmf_putc(struct mmf_buf *b, char c);
void mmf_putu(struct mmf_buf *b, uint64_t v);
void mmf_puti(struct mmf_buf *b, int64_t v);
void mmf_putx(struct mmf_buf *b, uint64_t v); /* 0x-prefixed hex */
/* Right-aligns s in a field of width w (left-aligns when w < 0). */
void mmf_putpad(struct mmf_buf *b, const char *s, int w);
void mmf_putu_pad(struct mmf_buf *b, uint64_t v, int w);
/* v / 10^6 with three decimals, e.g. nanoseconds as milliseconds. */
void mmf_putmilli(struct mmf_buf *b, uint64_t v);
/* Escapes for a JSON string body. */
void mmf_putjson(struct mmf_buf *b, const char *s);

#endif
