// SPDX-License-Identifier: MIT
/* flamegraph.c - a self-contained SVG flame graph of a profile. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "flamegraph.h"

#define WIDTH		1200.0	/* px */
#define ROW		17	/* px per frame */
#define CHAR_PX		7.0	/* approximate width of a 12px monospace glyph */
#define MIN_PX		0.3	/* frames narrower than this are not drawn */

struct node {
	char *name;
	__u64 state[NUPP_ST_MAX];
	__u64 total;
	struct node *kids;
	size_t nkids, cap;
};

static const char *const state_names[NUPP_ST_MAX] = {
	"compiled", "interpreted", "C", "GC", "compiling",
};
static const char *const state_colors[NUPP_ST_MAX] = {
	"#6cc36c", "#f0a03c", "#5b9bd5", "#a0a0a0", "#b07cc6",
};

static struct node *child(struct node *n, const char *name, size_t len)
{
	for (size_t i = 0; i < n->nkids; i++)
		if (strlen(n->kids[i].name) == len && !memcmp(n->kids[i].name, name, len))
			return &n->kids[i];
	if (n->nkids == n->cap) {
		size_t cap = n->cap ? 2 * n->cap : 4;
		struct node *kids = realloc(n->kids, cap * sizeof(*kids));

		if (!kids)
			return NULL;
		n->kids = kids;
		n->cap = cap;
	}
	memset(&n->kids[n->nkids], 0, sizeof(struct node));
	n->kids[n->nkids].name = strndup(name, len);
	return n->kids[n->nkids].name ? &n->kids[n->nkids++] : NULL;
}

static void add(struct node *n, const __u64 state[NUPP_ST_MAX])
{
	for (int i = 0; i < NUPP_ST_MAX; i++) {
		n->state[i] += state[i];
		n->total += state[i];
	}
}

static int insert(struct node *root, const char *stack, const __u64 state[NUPP_ST_MAX])
{
	struct node *n = root;

	add(n, state);
	while (*stack) {
		const char *end = strchr(stack, ';');
		size_t len = end ? (size_t)(end - stack) : strlen(stack);

		n = child(n, stack, len);
		if (!n)
			return -1;
		add(n, state);
		stack += len + (end != NULL);
	}
	return 0;
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

static void put_escaped(FILE *out, const char *s, size_t max)
{
	for (size_t i = 0; s[i] && i < max; i++) {
		switch (s[i]) {
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '&': fputs("&amp;", out); break;
		case '"': fputs("&quot;", out); break;
		default: fputc(s[i], out);
		}
	}
}

static void draw(FILE *out, const struct node *n, double x, int level, int height, double px_per)
{
	double w = n->total * px_per, y = height - (level + 1) * ROW;
	int top = 0;

	if (w < MIN_PX)
		return;
	for (int i = 1; i < NUPP_ST_MAX; i++)
		if (n->state[i] > n->state[top])
			top = i;
	fputs("<g><title>", out);
	put_escaped(out, n->name, (size_t)-1);
	fprintf(out, " (%llu samples", (unsigned long long)n->total);
	for (int i = 0; i < NUPP_ST_MAX; i++)
		if (n->state[i])
			fprintf(out, ", %s %.1f%%", state_names[i], 100.0 * n->state[i] / n->total);
	fprintf(out, ")</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\" "
		"rx=\"2\"/>", x, y, w, ROW - 1, state_colors[top]);
	if (w > 3 * CHAR_PX) {
		fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">", x + 3, y + ROW - 5);
		put_escaped(out, n->name, (size_t)((w - 6) / CHAR_PX));
		fputs("</text>", out);
	}
	fputs("</g>\n", out);
	for (size_t i = 0; i < n->nkids; i++) {
		draw(out, &n->kids[i], x, level + 1, height, px_per);
		x += n->kids[i].total * px_per;
	}
}

int flamegraph__write(const struct profile *p, const struct render_opts *o, FILE *out)
{
	const char *title = p->title ? p->title : "nupp-bpf";
	struct node root = { .name = "all" };
	int height, ret = -1;
	double legend_x = 10;

	root.name = strdup("all");
	if (!root.name)
		return -1;
	for (size_t i = 0; i < p->nrows; i++) {
		const struct profile_row *r = &p->rows[i];

		if (o->zone && !zone__under(r->zone, o->zone))
			continue;
		if (insert(&root, stack__cut_root(r->stack, o->root), r->state))
			goto out;
	}
	height = (depth_of(&root) + 3) * ROW;
	fprintf(out, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%.0f\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\" "
		"font-family=\"monospace\" font-size=\"12\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#fdfdf8\"/>\n"
		"<text x=\"%.0f\" y=\"16\" text-anchor=\"middle\" font-size=\"15\">", WIDTH + 20,
		height + 2 * ROW, (WIDTH + 20) / 2);
	put_escaped(out, title, (size_t)-1);
	fputs("</text>\n", out);
	for (int i = 0; i < NUPP_ST_MAX; i++) {
		fprintf(out, "<rect x=\"%.0f\" y=\"26\" width=\"12\" height=\"12\" fill=\"%s\"/>"
			"<text x=\"%.0f\" y=\"37\">%s</text>\n", legend_x, state_colors[i],
			legend_x + 16, state_names[i]);
		legend_x += 16 + CHAR_PX * (strlen(state_names[i]) + 3);
	}
	fprintf(out, "<g transform=\"translate(10,%d)\">\n", ROW);
	if (root.total)
		draw(out, &root, 0, 0, height, WIDTH / root.total);
	fputs("</g>\n</svg>\n", out);
	ret = ferror(out) ? -1 : 0;
out:
	node_free(&root);
	return ret;
}
