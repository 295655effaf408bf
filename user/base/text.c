// SPDX-License-Identifier: MIT
/* text.c - text every writer needs: a growing string, escaping, UTF-8 (text.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "text.h"
#include "util.h"

/* ---------------------------------------------------------------------------
 * A growing string, and frame names escaped for collapsed stacks
 */

/* Room for n more bytes and the NUL; 0 or -ENOMEM. */
int strbuf__reserve(struct strbuf *sb, size_t n)
{
	if (sb->len + n + 1 > sb->cap) {
		size_t cap = sb->cap ? sb->cap : 64;
		char *nb;

		while (cap < sb->len + n + 1)
			cap *= 2;
		nb = realloc(sb->buf, cap);
		if (!nb)
			return -ENOMEM;
		sb->buf = nb;
		sb->cap = cap;
	}
	return 0;
}

int strbuf__put(struct strbuf *sb, const void *p, size_t n)
{
	if (strbuf__reserve(sb, n))
		return -ENOMEM;
	memcpy(sb->buf + sb->len, p, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
	return 0;
}

int strbuf__puts(struct strbuf *sb, const char *s)
{
	return strbuf__put(sb, s, strlen(s));
}

void strbuf__reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = '\0';
}

void strbuf__free(struct strbuf *sb)
{
	free(sb->buf);
	*sb = (struct strbuf){ 0 };
}

static int must_escape(unsigned char c)
{
	return c < 0x20 || c == 0x7f || c == ';' || c == '\\';
}

int strbuf__put_escaped(struct strbuf *sb, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0;

	while (i < n) {
		unsigned char c = u[i];
		char esc[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };
		size_t seq = c < 0x80 ? !must_escape(c) : (size_t)utf8_len(u + i, n - i);

		if (seq) {
			i += seq;
			continue;
		}
		/* Copy the clean run before c in one go. */
		if (strbuf__put(sb, s + run, i - run) || strbuf__put(sb, esc, 4))
			return -ENOMEM;
		run = ++i;
	}
	return strbuf__put(sb, s + run, n - run);
}

/* ---------------------------------------------------------------------------
 * UTF-8 for JSON and protobuf
 */

#define REPLACEMENT	"\xef\xbf\xbd"	/* U+FFFD */

void text__put_json(FILE *out, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;

	fputc('"', out);
	while (*u) {
		int n = utf8_len(u, 4);

		if (!n) {
			fputs(REPLACEMENT, out);
			u++;
		} else if (*u == '"' || *u == '\\') {
			fprintf(out, "\\%c", *u++);
		} else if (*u < 0x20) {
			fprintf(out, "\\u%04x", *u++);
		} else {
			fwrite(u, 1, n, out);
			u += n;
		}
	}
	fputc('"', out);
}

char *text__utf8_dup(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	char *copy = malloc(3 * strlen(s) + 1), *c = copy;	/* a byte grows to 3 at most */

	if (!copy)
		return NULL;
	while (*u) {
		int n = utf8_len(u, 4);

		if (n) {
			memcpy(c, u, n);
			u += n;
			c += n;
		} else {
			memcpy(c, REPLACEMENT, 3);
			u++;
			c += 3;
		}
	}
	*c = '\0';
	return copy;
}
