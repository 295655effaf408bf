/* SPDX-License-Identifier: MIT */
/* text.h - text every writer needs: a growing string, escaping, UTF-8. */
#ifndef NUPP_TEXT_H
#define NUPP_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* A growing, NUL-terminated string. Zero-initialize; free with strbuf__free. */
struct strbuf {
	char *buf;	/* NULL until something is written */
	size_t len;	/* bytes used, without the NUL */
	size_t cap;	/* bytes allocated */
};

/* Room for n more bytes and the NUL; 0 or -ENOMEM. */
int strbuf__reserve(struct strbuf *sb, size_t n);
int strbuf__put(struct strbuf *sb, const void *p, size_t n);	/* 0 or -ENOMEM */
int strbuf__puts(struct strbuf *sb, const char *s);
void strbuf__reset(struct strbuf *sb);
void strbuf__free(struct strbuf *sb);

/* Append s[0..n) escaped for the collapsed-stack format (one stack per
 * line, ';' between frames, a space before the count) as \xHH, two
 * lower-case hex digits: ';', '\\', every control character (0x00-0x1f),
 * 0x7f, and every byte >= 0x80 not part of well-formed UTF-8 ('\\' so that
 * the escape itself is unambiguous). Spaces and UTF-8 stay. 0 or -ENOMEM. */
int strbuf__put_escaped(struct strbuf *sb, const char *s, size_t n);

/* s as the contents of a JSON string, quotes included. Bytes that are not
 * UTF-8 are written as U+FFFD. */
void text__put_json(FILE *out, const char *s);

/* A copy of s that is valid UTF-8: bytes that are not are U+FFFD (what
 * protobuf's string fields must hold). malloc'ed; NULL when out of memory. */
char *text__utf8_dup(const char *s);

#endif /* NUPP_TEXT_H */
