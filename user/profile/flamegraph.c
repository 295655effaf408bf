// SPDX-License-Identifier: MIT
/*
 * flamegraph.c - an interactive SVG flame graph of a profile (flamegraph.h).
 *
 * The rows are merged into a tree by their collapsed text, then drawn
 * depth first. Every frame carries what the script needs to lay it out
 * again (its offset and width in samples, its level, its full name and
 * state counts), so that zooming and searching need nothing but the file.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "flamegraph.h"
#include "flamegraph_js.h"
#include "base/keymap.h"
#include "base/util.h"

#define WIDTH		1200.0	/* px, the image */
#define PAD		10.0	/* px, left and right of the frames */
#define ROW		16	/* px per frame */
#define TOP		84	/* px above the frames: title, legend, buttons */
#define FOOT		48	/* px below: the hovered frame, the search */
#define CHAR_PX		7.22	/* a 12px monospace glyph, until the script measures it */
#define MIN_PX		0.1	/* frames narrower than this are not drawn */

struct node {
	char *name;
	__u64 state[NUPP_ST_MAX];
	__u64 total;
	__u64 off;		/* of which off the CPU (the rows of waits) */
	struct node *kids;
	size_t nkids, cap;
	size_t id;		/* its key's first bytes in struct tree's kids */
};

/* A tree being built. A node's children are found through one map of
 * (parent id, name), not by a scan of them: the root of a program of
 * thousands of functions has thousands of children. */
struct tree {
	struct node root;
	struct keymap kids;	/* (parent id, name) -> index in the parent's kids */
	size_t ids;		/* ids given */
	char *key;		/* the key being looked up */
	size_t keycap;
};

/* Hue, saturation and lightness of each state's frames. */
static const double state_hsl[NUPP_ST_MAX][3] = {
	{ 112, 0.45, 0.56 }, { 32, 0.85, 0.58 }, { 210, 0.60, 0.62 },
	{ 0, 0.0, 0.66 }, { 280, 0.40, 0.64 },
};
/* A wait's own frame (the kernel leaf of a row off the CPU): pale, so that
 * time waited stands apart from time run. */
static const double waiting_hsl[3] = { 195, 0.35, 0.82 };
/* A heap's bytes by reference path (heap -o): no states, one hue. */
static const double heap_hsl[3] = { 165, 0.40, 0.58 };

/* ---------------------------------------------------------------------------
 * The tree
 */

static struct node *child(struct tree *t, struct node *n, const char *name, size_t len)
{
	size_t klen = sizeof(n->id) + len;
	struct node *k;
	long i;

	if (klen > t->keycap) {
		char *b = realloc(t->key, klen * 2);

		if (!b)
			return NULL;
		t->key = b;
		t->keycap = klen * 2;
	}
	memcpy(t->key, &n->id, sizeof(n->id));
	memcpy(t->key + sizeof(n->id), name, len);
	if ((i = keymap__get(&t->kids, t->key, klen)) >= 0)
		return &n->kids[i];
	if (ARRAY_ROOM(n->kids, n->nkids, n->cap, 4) ||
	    keymap__put(&t->kids, t->key, klen, (long)n->nkids))
		return NULL;
	k = &n->kids[n->nkids];
	*k = (struct node){ .id = ++t->ids, .name = strndup(name, len) };
	return k->name ? &n->kids[n->nkids++] : NULL;
}

static void add(struct node *n, const __u64 state[NUPP_ST_MAX], bool off)
{
	for (int i = 0; i < NUPP_ST_MAX; i++) {
		n->state[i] += state[i];
		n->total += state[i];
		n->off += off ? state[i] : 0;
	}
}

static int insert(struct tree *t, const char *stack, const __u64 state[NUPP_ST_MAX], bool off)
{
	struct node *n = &t->root;

	add(n, state, off);
	while (*stack) {
		const char *end = strchr(stack, ';');
		size_t len = end ? (size_t)(end - stack) : strlen(stack);

		n = child(t, n, stack, len);
		if (!n)
			return -1;
		add(n, state, off);
		stack += len + (end != NULL);
	}
	return 0;
}

/* The rows that pass the filters, by their collapsed text. */
static int build(struct tree *t, const struct profile *p, const struct render_opts *o)
{
	const struct profile_row *r;

	/* A node at least per distinct stack: its leaf. */
	if (keymap__reserve(&t->kids, p->nrows))
		return -1;
	for (size_t i = 0; (r = profile__next_kept(p, o, &i));) {
		char *owned;
		const char *text = profile_row__text(r, o, &owned);
		int err;

		if (!text)
			return -1;
		err = insert(t, text, r->state, r->off_cpu);
		free(owned);
		if (err)
			return -1;
	}
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct node *)a)->name, ((const struct node *)b)->name);
}

/* Children in name order, as FlameGraph draws them: the same stacks give
 * the same picture. */
static void sort_tree(struct node *n)
{
	qsort(n->kids, n->nkids, sizeof(*n->kids), name_cmp);
	for (size_t i = 0; i < n->nkids; i++)
		sort_tree(&n->kids[i]);
}

static void node_free(struct node *n)
{
	for (size_t i = 0; i < n->nkids; i++)
		node_free(&n->kids[i]);
	free(n->kids);
	free(n->name);
}

static int depth_of(const struct node *n)
{
	int d = 0;

	for (size_t i = 0; i < n->nkids; i++) {
		int k = depth_of(&n->kids[i]);

		if (k > d)
			d = k;
	}
	return d + 1;
}

/* ---------------------------------------------------------------------------
 * Drawing
 */

static int top_state(const __u64 state[NUPP_ST_MAX])
{
	int top = 0;

	for (int i = 1; i < NUPP_ST_MAX; i++)
		if (state[i] > state[top])
			top = i;
	return top;
}

/* hsl to "#rrggbb" (CSS Color 4's formula). */
static void hsl_hex(double h, double s, double l, char out[8])
{
	double a = s * fmin(l, 1 - l);
	int rgb[3];

	for (int i = 0; i < 3; i++) {
		double k = fmod((double[]){ 0, 8, 4 }[i] + h / 30, 12);

		rgb[i] = (int)lround(255 * (l - a * fmax(-1, fmin(fmin(k - 3, 9 - k), 1))));
	}
	/* By hand, as the numbers of draw(): a snprintf per frame here was a
	 * sixth of writing a large graph. */
	out[0] = '#';
	for (int i = 0; i < 3; i++) {
		out[1 + 2 * i] = "0123456789abcdef"[rgb[i] >> 4 & 15];
		out[2 + 2 * i] = "0123456789abcdef"[rgb[i] & 15];
	}
	out[7] = '\0';
}

/* The color of a frame: its state's, a little lighter or darker by a hash
 * of its name, so that neighbours in one state stay apart and a function
 * keeps its shade wherever it appears. */
static void frame_color(const struct node *n, bool heap, char out[8])
{
	const double *c = heap ? heap_hsl : n->off == n->total && !n->nkids && n->total ? waiting_hsl :
			  state_hsl[top_state(n->state)];
	uint32_t h = fnv1a32(FNV1A32_INIT, n->name, strlen(n->name));

	hsl_hex(c[0] + (int)(h % 9) - 4, c[1], c[2] + ((int)(h / 9 % 9) - 4) * 0.012, out);
}

/* What the graph is written through: a buffer of its own, as a stdio call
 * costs more than the few bytes it writes and a frame takes thirty of them. */
struct svg_out {
	FILE *f;
	size_t n;
	char b[1 << 16];
};

static void out_flush(struct svg_out *o)
{
	fwrite(o->b, 1, o->n, o->f);
	o->n = 0;
}

static void out_put(struct svg_out *o, const void *s, size_t len)
{
	if (len > sizeof(o->b) - o->n) {
		out_flush(o);
		if (len > sizeof(o->b)) {
			fwrite(s, 1, len, o->f);
			return;
		}
	}
	memcpy(o->b + o->n, s, len);
	o->n += len;
}

static inline void out_str(struct svg_out *o, const char *s)
{
	out_put(o, s, strlen(s));	/* a constant's length is folded */
}

static void out_char(struct svg_out *o, char c)
{
	if (o->n == sizeof(o->b))
		out_flush(o);
	o->b[o->n++] = c;
}

static void out_printf(struct svg_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(struct svg_out *o, const char *fmt, ...)
{
	va_list ap;

	out_flush(o);
	va_start(ap, fmt);
	vfprintf(o->f, fmt, ap);
	va_end(ap);
}

/* At most max characters of s as XML text (or an attribute's value): bytes
 * that are not UTF-8, and control characters, which XML 1.0 forbids, as
 * U+FFFD. Characters that need no escape go out a run at a time. */
static void out_xml(struct svg_out *o, const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s, *run = u;

	for (size_t chars = 0; *u && chars < max; chars++) {
		int n = utf8_len(u, 4);
		const char *esc;

		if (!n || *u < 0x20)
			esc = "\xef\xbf\xbd", n = 1;
		else if (*u == '<')
			esc = "&lt;";
		else if (*u == '>')
			esc = "&gt;";
		else if (*u == '&')
			esc = "&amp;";
		else if (*u == '"')
			esc = "&quot;";
		else {
			u += n;
			continue;
		}
		out_put(o, run, u - run);
		out_str(o, esc);
		run = u += n;
	}
	out_put(o, run, u - run);
}

/* The numbers of a frame, of which a flame graph writes tens of thousands:
 * by hand, as printf's exact conversion of a double took most of the
 * time. */
static void put_u64(struct svg_out *out, unsigned long long n)
{
	char buf[24], *at = u64_digits(buf + sizeof(buf), n);

	out_put(out, at, buf + sizeof(buf) - at);
}

/* v >= 0 with 1 or 2 decimals, as %.1f or %.2f write it but for a tie's
 * rounding when v * 10 or v * 100 is inexact. */
static void put_fixed(struct svg_out *out, double v, int decimals)
{
	unsigned scale = decimals == 1 ? 10 : 100;
	unsigned long long n;

	if (!(v >= 0 && v < 1e15)) {		/* NaN, negative, huge: never here */
		out_printf(out, "%.*f", decimals, v);
		return;
	}
	n = llrint(v * scale);	/* ties to even, as printf on exact ties */
	put_u64(out, n / scale);
	out_char(out, '.');
	if (decimals == 2)
		out_char(out, '0' + n / 10 % 10);
	out_char(out, '0' + n % 10);
}

/* The hover text: the name, its samples and their split by state (a
 * heap's: its bytes). */
static void put_title(struct svg_out *out, const struct node *n, __u64 total, bool heap,
		      bool bytes)
{
	out_str(out, "<title>");
	out_xml(out, n->name, (size_t)-1);
	out_str(out, " (");
	put_u64(out, n->total);
	out_str(out, heap || bytes ? " bytes, " : " samples, ");
	put_fixed(out, 100.0 * n->total / total, 1);
	out_char(out, '%');
	for (int i = 0; i < NUPP_ST_MAX && !heap; i++)
		if (n->state[i]) {
			out_str(out, "; ");
			out_str(out, profile_state_names[i]);
			out_char(out, ' ');
			put_fixed(out, 100.0 * n->state[i] / n->total, 1);
			out_char(out, '%');
		}
	out_str(out, ")</title>");
}

/* As much of the name as fits in w px, as the script cuts it. */
static void put_label(struct svg_out *out, const char *name, double w)
{
	long fits = (long)((w - 6) / CHAR_PX);
	size_t len = 0;

	for (const unsigned char *u = (const unsigned char *)name; *u; u++)
		len += (*u & 0xc0) != 0x80;	/* characters, not bytes */
	if ((long)len <= fits) {
		out_xml(out, name, (size_t)-1);
	} else if (fits >= 3) {
		out_xml(out, name, fits - 2);
		out_str(out, "..");
	}
}

struct canvas {
	struct svg_out *out;
	__u64 total;
	int depth;
	bool heap;		/* a heap's bytes: no VM states */
	bool bytes;		/* counts are bytes (a heap's, or allocated) */
};

static void draw(const struct canvas *c, const struct node *n, __u64 offset, int level)
{
	double w = n->total * (WIDTH - 2 * PAD) / c->total;
	double x = PAD + offset * (WIDTH - 2 * PAD) / c->total;
	int y = TOP + (c->depth - level - 1) * ROW;
	char color[8];

	if (w < MIN_PX)
		return;
	frame_color(n, c->heap, color);
	out_str(c->out, "<g class=\"f\" data-n=\"");
	out_xml(c->out, n->name, (size_t)-1);
	out_str(c->out, "\" data-o=\"");
	put_u64(c->out, offset);
	out_str(c->out, "\" data-s=\"");
	put_u64(c->out, n->total);
	out_str(c->out, "\" data-l=\"");
	put_u64(c->out, level);
	out_str(c->out, "\" data-st=\"");
	for (int i = 0; i < NUPP_ST_MAX; i++) {
		if (i)
			out_char(c->out, ',');
		put_u64(c->out, c->heap ? 0 : n->state[i]);
	}
	out_str(c->out, "\">");
	put_title(c->out, n, c->total, c->heap, c->bytes);
	out_str(c->out, "<rect x=\"");
	put_fixed(c->out, x, 2);
	out_str(c->out, "\" y=\"");
	put_u64(c->out, y);
	out_str(c->out, "\" width=\"");
	put_fixed(c->out, w, 2);
	out_str(c->out, "\" height=\"");
	put_u64(c->out, ROW - 1);
	out_str(c->out, "\" fill=\"");
	out_str(c->out, color);
	out_str(c->out, "\" rx=\"2\"/><text x=\"");
	put_fixed(c->out, x + 3, 2);
	out_str(c->out, "\" y=\"");
	put_u64(c->out, y + ROW - 6);	/* so low that an underscore shows (monospace 12 px) */
	out_str(c->out, "\">");
	put_label(c->out, n->name, w);
	out_str(c->out, "</text></g>\n");
	for (size_t i = 0; i < n->nkids; i++) {
		draw(c, &n->kids[i], offset, level + 1);
		offset += n->kids[i].total;
	}
}

static const char style[] =
	"<style>\n"
	"text { font-family: monospace; font-size: 12px; fill: #1d1d1d; }\n"
	".title { font-family: sans-serif; font-size: 17px; font-weight: bold; }\n"
	".sub { font-family: sans-serif; fill: #5a5a5a; }\n"
	".f { cursor: pointer; }\n"
	".f text { pointer-events: none; }\n"
	".f:hover rect { stroke: #1d1d1d; stroke-width: 1; }\n"
	".anc { opacity: 0.55; }\n"
	".hit rect { fill: #e0389c; }\n"
	".btn { fill: #0b5cad; cursor: pointer; font-family: sans-serif; }\n"
	".btn:hover { text-decoration: underline; }\n"
	".probe { visibility: hidden; }\n"
	"</style>\n";

/* "2.0 s from 2024-05-01 12:00:00 UTC, 1004 samples at 997 Hz" */
static void put_subtitle(struct svg_out *out, const struct profile *p, __u64 total)
{
	time_t t = p->time_ns / 1000000000ULL;
	char when[64] = "";
	struct tm tm;

	if (p->time_ns && gmtime_r(&t, &tm))
		strftime(when, sizeof(when), profile__is_heap(p) ? " at %Y-%m-%d %H:%M:%S UTC" :
			 " from %Y-%m-%d %H:%M:%S UTC", &tm);
	out_printf(out, "<text class=\"sub\" x=\"%.0f\" y=\"46\" text-anchor=\"middle\">", WIDTH / 2);
	if (p->measure == PROFILE_HEAP_GROWTH) {	/* two censuses: what was added */
		out_printf(out, "%.1f MiB more held%s than at the first census, by reference "
			   "path (own bytes)</text>\n", total / 1048576.0, when);
		return;
	}
	if (p->measure == PROFILE_HEAP) {	/* a census: a moment */
		out_printf(out, "%.1f MiB held%s, by reference path</text>\n", total / 1048576.0, when);
		return;
	}
	if (p->duration_ns)
		out_printf(out, "%.1f s%s, ", p->duration_ns / 1e9, when);
	if (p->measure == PROFILE_ALLOC) {	/* an estimate from sampled allocations */
		out_printf(out, "%.1f MiB allocated, sampled once per %.0f KiB on average</text>\n",
			   total / 1048576.0, p->period_ns / 1024.0);
		return;
	}
	if (p->measure != PROFILE_SAMPLES) {
		out_printf(out, p->measure == PROFILE_WALL ? "%.3f s of wall-clock time, on the CPU "
			   "and off it" : "%.3f s off the CPU", total / 1e6);
		out_str(out, "</text>\n");
		return;
	}
	out_printf(out, "%llu samples", (unsigned long long)total);
	if (p->period_ns)
		out_printf(out, " at %.4g Hz", 1e9 / p->period_ns);
	out_str(out, "</text>\n");
}

/* Each state's color and share of the samples. */
static void put_legend(struct svg_out *out, const struct node *root)
{
	double x = PAD;
	char color[8];

	for (int i = 0; i < NUPP_ST_MAX; i++) {
		char label[48];

		hsl_hex(state_hsl[i][0], state_hsl[i][1], state_hsl[i][2], color);
		snprintf(label, sizeof(label), "%s %.1f%%", profile_state_names[i],
			 root->total ? 100.0 * root->state[i] / root->total : 0.0);
		out_printf(out, "<rect x=\"%.0f\" y=\"60\" width=\"12\" height=\"12\" rx=\"2\" fill=\"%s\"/>"
			"<text x=\"%.0f\" y=\"70\">%s</text>\n", x, color, x + 16, label);
		x += 16 + CHAR_PX * (strlen(label) + 3);
	}
	if (root->off) {	/* a profile with waits: their frames' colour */
		char label[48];

		hsl_hex(waiting_hsl[0], waiting_hsl[1], waiting_hsl[2], color);
		snprintf(label, sizeof(label), "waiting (off the CPU) %.1f%%",
			 100.0 * root->off / root->total);
		out_printf(out, "<rect x=\"%.0f\" y=\"60\" width=\"12\" height=\"12\" rx=\"2\" fill=\"%s\"/>"
			"<text x=\"%.0f\" y=\"70\">%s</text>\n", x, color, x + 16, label);
	}
}

static void put_header(struct svg_out *out, const struct profile *p, const struct node *root, int height)
{
	out_printf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%.0f\" height=\"%d\" viewBox=\"0 0 %.0f %d\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n%s"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#fbfbf6\"/>\n"
		"<text class=\"title\" x=\"%.0f\" y=\"26\" text-anchor=\"middle\">",
		WIDTH, height, WIDTH, height, style, WIDTH / 2);
	out_xml(out, p->title ? p->title : "nupp-bpf", (size_t)-1);
	out_str(out, "</text>\n");
	put_subtitle(out, p, root->total);
	if (!profile__is_heap(p))
		put_legend(out, root);
	out_printf(out, "<text id=\"unzoom\" class=\"btn\" x=\"%.0f\" y=\"70\" text-anchor=\"end\" "
		"style=\"display: none\">Reset zoom</text>\n"
		"<text id=\"search\" class=\"btn\" x=\"%.0f\" y=\"70\" text-anchor=\"end\">Search</text>\n",
		WIDTH - PAD - 100, WIDTH - PAD);
}

/* Below the frames: the hovered frame's state split as a bar and in
 * words, and what a search matched. */
static void put_footer(struct svg_out *out, int y, bool heap)
{
	char color[8];

	for (int i = 0; i < NUPP_ST_MAX; i++) {
		hsl_hex(state_hsl[i][0], state_hsl[i][1], state_hsl[i][2], color);
		out_printf(out, "<rect id=\"split-%d\" x=\"%.0f\" y=\"%d\" width=\"0\" height=\"12\" "
			"fill=\"%s\"/>\n", i, PAD, y - 10, color);
	}
	out_printf(out, "<text id=\"details\" x=\"%.0f\" y=\"%d\">Hover a frame for its %s, "
		"click to zoom; Search (Ctrl-F) by regular expression; Esc resets</text>\n"
		"<text id=\"matched\" x=\"%.0f\" y=\"%d\" text-anchor=\"end\"></text>\n",
		PAD + 128, y, heap ? "bytes" : "VM states", WIDTH - PAD, y + 20);
}

int flamegraph__write(const struct profile *p, const struct render_opts *o, FILE *f)
{
	struct tree t = {};
	struct node *root = &t.root;
	struct svg_out *out = malloc(sizeof(*out));
	struct canvas c = { .out = out, .heap = profile__is_heap(p),
			    .bytes = p->measure == PROFILE_ALLOC };
	int height, ret = -1;

	root->name = strdup("all");
	if (!out || !root->name || build(&t, p, o))
		goto out;
	out->f = f;
	out->n = 0;
	keymap__free(&t.kids);		/* sort_tree() moves the children */
	sort_tree(root);
	c.depth = depth_of(root);
	c.total = root->total;
	height = TOP + c.depth * ROW + FOOT;
	put_header(out, p, root, height);
	out_printf(out, "<g id=\"frames\" data-x=\"%.0f\" data-w=\"%.0f\" data-total=\"%llu\" "
		   "data-unit=\"%s\">\n", PAD, WIDTH - 2 * PAD, (unsigned long long)root->total,
		   profile__unit(p));
	if (root->total)
		draw(&c, root, 0, 0);
	out_str(out, "</g>\n");
	put_footer(out, TOP + c.depth * ROW + 18, c.heap);
	out_printf(out, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n",
		flamegraph_js);
	out_flush(out);
	ret = ferror(f) ? -1 : 0;
out:
	free(out);
	keymap__free(&t.kids);
	free(t.key);
	node_free(root);
	return ret;
}
