// SPDX-License-Identifier: MIT
/*
 * top.c - the live view of `nupp-bpf top` (top.h).
 *
 * Each second it takes the sampler's counts of the interval just ended and
 * the aborts the trace channel reported since, counts each function's self
 * and total samples, and shows them: drawn in place on a terminal's
 * alternate screen, else printed as a block of plain text. Keys, read
 * unechoed every few ticks, change the sort or quit.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include "profile/formats.h"
#include "profile/interval.h"
#include "base/keymap.h"
#include "top.h"
#include "base/util.h"

#define REFRESH_S	1.0	/* between two views */
#define RECENT		32	/* abort lines remembered */
#define RECENT_SHOWN	5	/* of which shown on the screen */
#define PLAIN_ROWS	15	/* functions in a plain-text block */
#define KEY_TICKS	5	/* keys are read every 5th tick (50 ms): soon
				 * enough for a key press, and a read of the
				 * terminal each tick costs top much of its CPU */

enum top_sort {
	SORT_SELF,		/* s, P: self share in the last interval */
	SORT_TOTAL,		/* t: total share in the last interval */
	SORT_SELF_ALL,		/* S: self samples since the start */
	SORT_TOTAL_ALL,		/* T: total samples since the start */
};

static const char *const sort_names[] = { "self%", "total%", "self", "total" };

struct fn_stat {
	char *name;		/* the frame's name, as collapsed stacks say it */
	__u64 self_now;		/* samples with it as leaf, last interval */
	__u64 total_now;	/* samples with it anywhere, last interval */
	__u64 self_all, total_all;	/* the same since the start */
	__u64 stamp;		/* the last row that counted it in total_now */
};

struct top {
	struct top_opts o;
	bool screen;			/* drawn in place, else plain text blocks */
	bool keys;			/* stdin is a terminal: keys are read */
	struct termios saved;		/* its settings before */
	double started, last, next;	/* CLOCK_MONOTONIC s: start, last and next refresh */
	struct interval iv;
	struct fn_stat *fns;
	size_t nfns, cap;
	struct keymap fn_index;		/* name -> index in fns */
	__u64 stamp;
	__u64 state[NUPP_ST_MAX];	/* last interval's samples by VM state */
	__u64 samples_now;
	double interval_s;		/* the last interval's length */
	bool tracing;			/* the trace channel runs */
	unsigned long long aborts, blacklisted;
	struct keymap sites;		/* an abort site -> its count at the last refresh */
	char recent[RECENT][256];	/* abort lines, newest at nrecent - 1 */
	unsigned nrecent;
	enum top_sort sort;
	unsigned ticks;			/* top__tick calls so far */
};

/* A terminal that places text where asked: not TERM=dumb, not a pipe. */
static bool can_draw(void)
{
	const char *term = getenv("TERM");

	return isatty(STDOUT_FILENO) && term && *term && strcmp(term, "dumb");
}

struct top *top__open(const struct top_opts *o)
{
	struct top *t = calloc(1, sizeof(*t));
	struct termios raw;

	if (!t)
		return NULL;
	t->o = *o;
	t->started = t->last = monotonic_s();
	t->next = t->started + REFRESH_S;
	t->screen = can_draw();
	/* Keys one at a time, unechoed; Ctrl-C still interrupts. */
	if (isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &t->saved)) {
		raw = t->saved;
		raw.c_lflag &= ~(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		t->keys = !tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	if (t->screen)		/* the alternate screen, no cursor */
		fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
	fflush(stdout);
	return t;
}

void top__close(struct top *t)
{
	if (!t)
		return;
	if (t->screen)
		fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	if (t->keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
	for (size_t i = 0; i < t->nfns; i++)
		free(t->fns[i].name);
	free(t->fns);
	keymap__free(&t->fn_index);
	keymap__free(&t->sites);
	interval__free(&t->iv);
	free(t);
}

/* ------------------------------------------------------------------------ */

/* The function called name, added when new; NULL when out of memory. */
static struct fn_stat *fn_of(struct top *t, const char *name)
{
	size_t len = strlen(name);
	long i = keymap__get(&t->fn_index, name, len);

	if (i >= 0)
		return &t->fns[i];
	if (ARRAY_ROOM(t->fns, t->nfns, t->cap, 256))
		return NULL;
	memset(&t->fns[t->nfns], 0, sizeof(*t->fns));
	if (!(t->fns[t->nfns].name = strdup(name)))
		return NULL;
	if (keymap__put(&t->fn_index, name, len, t->nfns)) {
		free(t->fns[t->nfns].name);
		return NULL;
	}
	return &t->fns[t->nfns++];
}

/* Count one row's n samples: self for its leaf, total once for each
 * function on its stack (a recursive one counts once). */
static int count_row(struct top *t, const struct profile *p, const struct profile_row *r)
{
	__u64 n = profile_row__count(r);
	__u32 k = profile_row__first_frame(p, r, t->o.render->root);

	t->stamp++;
	for (; k < r->nframes; k++) {
		struct fn_stat *f = fn_of(t, p->frames[r->frames[k]].name);

		if (!f)
			return -1;
		if (f->stamp != t->stamp) {
			f->stamp = t->stamp;
			f->total_now += n;
			f->total_all += n;
		}
		if (k == r->nframes - 1) {
			f->self_now += n;
			f->self_all += n;
		}
	}
	return 0;
}

/* The functions and VM states of p's interval. */
static int count_functions(struct top *t, const struct profile *p)
{
	const struct profile_row *r;

	for (size_t i = 0; i < t->nfns; i++)
		t->fns[i].self_now = t->fns[i].total_now = 0;
	memset(t->state, 0, sizeof(t->state));
	t->samples_now = 0;
	for (size_t i = 0; (r = profile__next_kept(p, t->o.render, &i));) {
		for (int s = 0; s < NUPP_ST_MAX; s++)
			t->state[s] += r->state[s];
		t->samples_now += profile_row__count(r);
		if (count_row(t, p, r))
			return -1;
	}
	return 0;
}

/* One line for the aborts a site gained since the last refresh. */
static void add_recent(struct top *t, const struct trace_site *s, unsigned long long n)
{
	char *line = t->recent[t->nrecent++ % RECENT];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	snprintf(line, sizeof(t->recent[0]), "%02d:%02d:%02d %-9s %5llu  %s  %s%s%s", tm.tm_hour,
		 tm.tm_min, tm.tm_sec, s->severity, n, s->location, s->reason,
		 s->zone_path[0] ? "  zone " : "", s->zone_path);
}

/* The aborts the trace channel reported since the last refresh: each site
 * whose count grew makes a line. */
static int read_aborts(struct top *t, struct tracer *tr)
{
	struct trace_report rep;
	char key[2048];

	t->tracing = tr != NULL;
	if (!tr)
		return 0;
	if (tracer__report(tr, &rep))
		return -1;
	t->aborts = rep.total_aborts;
	t->blacklisted = rep.blacklisted;
	for (size_t i = 0; i < rep.nsites; i++) {
		const struct trace_site *s = &rep.sites[i];
		int len = snprintf(key, sizeof(key), "%s\037%s\037%s\037%s", s->severity,
				   s->reason_id, s->location, s->zone_path);
		long seen;

		if (len >= (int)sizeof(key))	/* a site that long is told by its start */
			len = sizeof(key) - 1;
		seen = keymap__get(&t->sites, key, len);

		if (seen < 0)
			seen = 0;
		if (s->count > (unsigned long long)seen) {
			add_recent(t, s, s->count - seen);
			keymap__put(&t->sites, key, len, s->count);
		}
	}
	trace_report__free(&rep);
	return 0;
}

/* The interval that ends now: its samples, and the aborts since the last. */
static void refresh(struct top *t, struct sampler *s, struct tracer *tr)
{
	struct sampler_stats st;
	struct profile *p = sampler__counts(s, &st);	/* no copy: read once, here */
	double now = monotonic_s();

	/* Out of memory: this view stays as it was; the next one catches up
	 * (the interval is taken whole or not at all). */
	if (p && !interval__take(&t->iv, p)) {
		count_functions(t, p);
		t->interval_s = now - t->last;
		t->last = now;
	}
	read_aborts(t, tr);
}

/* ------------------------------------------------------------------------ */

static __u64 sort_key(const struct top *t, const struct fn_stat *f)
{
	switch (t->sort) {
	case SORT_TOTAL:
		return f->total_now;
	case SORT_SELF_ALL:
		return f->self_all;
	case SORT_TOTAL_ALL:
		return f->total_all;
	default:
		return f->self_now;
	}
}

/* Hottest first by the sort key, then by total samples, then by name. */
static int by_sort(const void *a, const void *b, void *arg)
{
	const struct top *t = arg;
	const struct fn_stat *x = &t->fns[*(const size_t *)a], *y = &t->fns[*(const size_t *)b];
	__u64 kx = sort_key(t, x), ky = sort_key(t, y);

	if (kx != ky)
		return kx > ky ? -1 : 1;
	if (x->total_all != y->total_all)
		return x->total_all > y->total_all ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The functions' indexes in view order (malloc'ed), NULL when out of memory. */
static size_t *view_order(struct top *t)
{
	size_t *order = malloc((t->nfns + 1) * sizeof(*order));

	if (!order)
		return NULL;
	for (size_t i = 0; i < t->nfns; i++)
		order[i] = i;
	qsort_r(order, t->nfns, sizeof(*order), by_sort, t);
	return order;
}

/* The characters of s (UTF-8; a stray byte counts as one). */
static int chars_of(const unsigned char *s)
{
	int n = 0;

	for (int len; *s; s += len ? len : 1, n++)
		len = utf8_len(s, 4);
	return n;
}

/* A line; with cols, of at most cols characters, a longer one cut to end
 * with "..", and the rest of the screen line cleared. */
static void put_line(FILE *out, int cols, const char *fmt, ...)
{
	char buf[1024];
	const unsigned char *s = (const unsigned char *)buf;
	int keep, len;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!cols) {
		fprintf(out, "%s\n", buf);
		return;
	}
	keep = chars_of(s) <= cols ? cols : cols - 2;
	for (int i = 0; *s && i < keep; i++, s += len) {
		len = utf8_len(s, 4);
		len = len ? len : 1;
		fwrite(s, 1, len, out);
	}
	fputs(*s ? "..\033[K\n" : "\033[K\n", out);
}

/* s past its first n characters. */
static const char *skip_chars(const char *s, int n)
{
	for (int len; *s && n > 0; n--, s += len ? len : 1)
		len = utf8_len((const unsigned char *)s, 4);
	return s;
}

/* The first line: a title longer than the screen loses its middle, not its
 * end, so that a long command line keeps the PID a person attached to. */
static void put_title(FILE *out, int cols, const char *title)
{
	static const char prefix[] = "nupp-bpf top - ";
	int room = cols - (int)strlen(prefix);
	int chars = chars_of((const unsigned char *)title), tail = (room - 2) / 2;
	const char *head_end;

	if (!cols || room < 8 || chars <= room) {
		put_line(out, cols, "%s%s", prefix, title);
		return;
	}
	head_end = skip_chars(title, room - 2 - tail);
	put_line(out, cols, "%s%.*s..%s", prefix, (int)(head_end - title), title,
		 skip_chars(title, chars - tail));
}

static void put_header(const struct top *t, FILE *out, int cols)
{
	double up = monotonic_s() - t->started;
	const char *const *names = profile_state_names;
	__u64 n = t->samples_now ? t->samples_now : 1;

	put_title(out, cols, t->o.title);
	if (t->o.off_cpu)
		put_line(out, cols, "%.0f s, %.3f s off the CPU in the last %.1f s (columns in µs); "
			 "sort: %s (s t S T, q quits)", up, t->samples_now / 1e6, t->interval_s,
			 sort_names[t->sort]);
	else
		put_line(out, cols, "%.0f s, %llu samples in the last %.1f s at %u Hz; sort: %s "
			 "(s t S T, q quits)", up, (unsigned long long)t->samples_now, t->interval_s,
			 t->o.rate_hz, sort_names[t->sort]);
	put_line(out, cols, "VM states: %s %.1f%% %s %.1f%% %s %.1f%% %s %.1f%% %s %.1f%%",
		 names[0], 100.0 * t->state[0] / n, names[1], 100.0 * t->state[1] / n,
		 names[2], 100.0 * t->state[2] / n, names[3], 100.0 * t->state[3] / n,
		 names[4], 100.0 * t->state[4] / n);
	if (t->tracing)
		put_line(out, cols, "trace aborts: %llu, blacklisted %llu", t->aborts,
			 t->blacklisted);
	else
		put_line(out, cols, "trace aborts: not collected");
}

static void put_function(const struct top *t, FILE *out, int cols, const struct fn_stat *f)
{
	__u64 n = t->samples_now ? t->samples_now : 1;

	put_line(out, cols, "%6.1f %6.1f %9llu %9llu  %s", 100.0 * f->self_now / n,
		 100.0 * f->total_now / n, (unsigned long long)f->self_all,
		 (unsigned long long)f->total_all, f->name);
}

#define COLUMNS	" SELF%% TOTAL%%      SELF     TOTAL  FUNCTION"

/* The screen: header, the functions that fit, the latest aborts. Written
 * at once, over the last one. */
static void draw(struct top *t, const size_t *order)
{
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	unsigned recent = t->nrecent < RECENT_SHOWN ? t->nrecent : RECENT_SHOWN;
	char *buf = NULL;
	size_t len;
	FILE *out = open_memstream(&buf, &len);
	int rows;

	if (!out)
		return;
	ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	fputs("\033[H", out);
	put_header(t, out, ws.ws_col);
	fputs("\033[7m", out);
	put_line(out, ws.ws_col, COLUMNS);
	fputs("\033[m", out);
	rows = ws.ws_row - 5 - (recent ? recent + 2 : 0) - 1;
	for (int i = 0; i < rows && (size_t)i < t->nfns; i++)
		put_function(t, out, ws.ws_col, &t->fns[order[i]]);
	if (recent) {
		put_line(out, ws.ws_col, "");
		put_line(out, ws.ws_col, "latest aborts:");
	}
	for (unsigned i = t->nrecent - recent; i < t->nrecent; i++)
		put_line(out, ws.ws_col, "%s", t->recent[i % RECENT]);
	fputs("\033[J", out);
	if (!fclose(out))
		fwrite(buf, 1, len, stdout);
	free(buf);
	fflush(stdout);
}

/* A block of plain text: header, the hottest functions, the aborts since
 * the last block. */
static void print_plain(struct top *t, const size_t *order, unsigned new_aborts)
{
	put_header(t, stdout, 0);
	put_line(stdout, 0, COLUMNS);
	for (int i = 0; i < PLAIN_ROWS && (size_t)i < t->nfns; i++)
		put_function(t, stdout, 0, &t->fns[order[i]]);
	if (new_aborts > RECENT)
		new_aborts = RECENT;
	for (unsigned i = t->nrecent - new_aborts; i < t->nrecent; i++)
		put_line(stdout, 0, "abort: %s", t->recent[i % RECENT]);
	put_line(stdout, 0, "");
	fflush(stdout);
}

static void show(struct top *t, unsigned new_aborts)
{
	size_t *order = view_order(t);

	if (!order)
		return;
	if (t->screen)
		draw(t, order);
	else
		print_plain(t, order, new_aborts);
	free(order);
}

/* Keys pressed since the last tick: true for q; a sort key redraws. */
static bool read_keys(struct top *t, bool *redraw)
{
	char keys[16];
	ssize_t n = t->keys ? read(STDIN_FILENO, keys, sizeof(keys)) : 0;

	for (ssize_t i = 0; i < n; i++) {
		enum top_sort sort = t->sort;

		switch (keys[i]) {
		case 'q':
		case 'Q':
			return true;
		case 's':
		case 'P':
			sort = SORT_SELF;
			break;
		case 't':
			sort = SORT_TOTAL;
			break;
		case 'S':
			sort = SORT_SELF_ALL;
			break;
		case 'T':
			sort = SORT_TOTAL_ALL;
			break;
		}
		*redraw |= sort != t->sort;
		t->sort = sort;
	}
	return false;
}

bool top__tick(struct top *t, struct sampler *s, struct tracer *tr)
{
	bool redraw = false;
	double now = monotonic_s();
	unsigned seen = t->nrecent;

	if (++t->ticks % KEY_TICKS == 0 && read_keys(t, &redraw))
		return true;
	if (now >= t->next) {
		refresh(t, s, tr);
		/* A late tick (a loaded machine) does not bunch the next ones. */
		t->next = now - t->next < REFRESH_S ? t->next + REFRESH_S : now + REFRESH_S;
		show(t, t->nrecent - seen);
	} else if (redraw && t->screen) {	/* plain text: the next block is sorted so */
		show(t, 0);
	}
	return false;
}
