#include "fmt.h"

#include <string.h>

void mmf_putc(struct mmf_buf *b, char c)
{
	if (b->len + 1 < b->cap)
		b->p[b->len++] = c;
	if (b->cap)
		b->p[b->len < b->cap ? b->len : b->cap - 1] = 0;
}

void mmf_puts(struct mmf_buf *b, const char *s)
{
	while (*s)
		mmf_putc(b, *s++);
}

static int utoa(char *out, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (int i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	out[n] = 0;
	return n;
}

void mmf_putu(struct mmf_buf *b, uint64_t v)
{
	char s[24];
	utoa(s, v);
	mmf_puts(b, s);
}

void mmf_puti(struct mmf_buf *b, int64_t v)
{
	if (v < 0) {
		mmf_putc(b, '-');
		mmf_putu(b, (uint64_t)0 - (uint64_t)v);
	} else {
		mmf_putu(b, (uint64_t)v);
	}
}

void mmf_putx(struct mmf_buf *b, uint64_t v)
{
	char s[20];
	int n = 0;
	do {
		s[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	mmf_puts(b, "0x");
	while (n)
		mmf_putc(b, s[--n]);
}

void mmf_putpad(struct mmf_buf *b, const char *s, int w)
{
	int n = (int)strlen(s);
	if (w > 0)
		for (int i = n; i < w; i++)
			mmf_putc(b, ' ');
	mmf_puts(b, s);
	if (w < 0)
		for (int i = n; i < -w; i++)
			mmf_putc(b, ' ');
}

void mmf_putu_pad(struct mmf_buf *b, uint64_t v, int w)
{
	char s[24];
	utoa(s, v);
	mmf_putpad(b, s, w);
}

void mmf_putmilli(struct mmf_buf *b, uint64_t v)
{
	uint64_t ms = v / 1000000, frac = (v % 1000000) / 1000;
	mmf_putu(b, ms);
	mmf_putc(b, '.');
	mmf_putc(b, (char)('0' + frac / 100));
	mmf_putc(b, (char)('0' + frac / 10 % 10));
	mmf_putc(b, (char)('0' + frac % 10));
}

void mmf_putjson(struct mmf_buf *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			mmf_putc(b, '\\');
			mmf_putc(b, (char)c);
		} else if (c < 0x20) {
			mmf_puts(b, "\\u00");
			mmf_putc(b, "0123456789abcdef"[c >> 4]);
			mmf_putc(b, "0123456789abcdef"[c & 15]);
		} else {
			mmf_putc(b, (char)c);
		}
	}
}
