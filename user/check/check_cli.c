// SPDX-License-Identifier: MIT
/*
 * check_cli.c - `nupp-bpf check FILE|DIR...`: the files loaded by the
 * LuaJIT build that will run them, their findings written as CSV, text or
 * SARIF (check.h).
 *
 * The build loads the files itself: `luajit -e DRIVER` runs a few lines of
 * Lua that loadfile() each file and string.dump() the result, never
 * calling it. While that process runs, nupp-bpf identifies the LuaJIT it
 * maps as it does a profiled process's (lj_target.h): the opcode names and
 * the recorder come from that build, not from the one nupp-bpf knows best.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include "check.h"
#include "profile.pb-c.h"
#include "base/text.h"
#include "luajit/lj_target.h"
#include "base/output.h"
#include "trace/trace_report.h"
#include "version.h"

/* Loads every file named in $NUPP_CHECK_LIST (NUL-separated) and writes
 * "D<len>\n<dump>" or "E<len>\n<error>" for each; then waits for stdin to
 * close, so that its process can be identified while it lives. */
static const char DRIVER[] =
	"local dump, write, tostring = string.dump, io.write, tostring\n"
	"io.stdout:setvbuf('full')\n"
	"write('nupp-check 1\\n') io.stdout:flush()\n"
	"local list = assert(io.open(os.getenv('NUPP_CHECK_LIST'), 'rb')):read('*a')\n"
	"for path in list:gmatch('[^%z]+') do\n"
	"  local f, err = loadfile(path)\n"
	"  if f then\n"
	"    local ok, d = pcall(dump, f)\n"
	"    if ok then write('D', #d, '\\n', d) else f, err = nil, d end\n"
	"  end\n"
	"  if not f then err = tostring(err) write('E', #err, '\\n', err) end\n"
	"end\n"
	"io.stdout:flush() io.stdin:read('*a')\n";

static int errors;

static void error_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void error_line(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("nupp-bpf: error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	errors++;
}

/* ---- the files ------------------------------------------------------------ */

struct files {
	char **v;
	int n, cap;
};

static struct files *walking;

static int add_file(struct files *fl, const char *p)
{
	if (fl->n == fl->cap) {
		int cap = fl->cap ? 2 * fl->cap : 64;
		char **v = realloc(fl->v, cap * sizeof(*v));

		if (!v)
			return -1;
		fl->v = v, fl->cap = cap;
	}
	return (fl->v[fl->n++] = strdup(p)) ? 0 : -1;
}

static int on_entry(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
	size_t n = strlen(p);

	(void)st, (void)ftw;
	if (type == FTW_F && n > 4 && !strcmp(p + n - 4, ".lua"))
		return add_file(walking, p) ? FTW_STOP : FTW_CONTINUE;
	if (type == FTW_D && ftw->level > 0 && p[ftw->base] == '.')
		return FTW_SKIP_SUBTREE;	/* .git and the like */
	return FTW_CONTINUE;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files to load: each FILE, and each DIR's *.lua, sorted. */
static void collect(const struct check_opts *o, struct files *fl)
{
	for (int i = 0; i < o->npaths; i++) {
		const char *p = o->paths[i];
		struct stat st;
		int before = fl->n;

		if (stat(p, &st)) {
			error_line("cannot read %s: %s", p, strerror(errno));
		} else if (S_ISDIR(st.st_mode)) {
			walking = fl;
			if (nftw(p, on_entry, 32, FTW_PHYS | FTW_ACTIONRETVAL) < 0)
				error_line("cannot read %s: %s", p, strerror(errno));
			else if (fl->n == before)
				error_line("%s: no Lua files (*.lua) in it", p);
			qsort(fl->v + before, fl->n - before, sizeof(*fl->v), cmp_path);
		} else if (access(p, R_OK)) {
			error_line("cannot read %s: %s", p, strerror(errno));
		} else if (add_file(fl, p)) {
			error_line("out of memory");
		}
	}
}

/* ---- the build that loads them ------------------------------------------- */

struct loader {
	pid_t pid;
	FILE *out;		/* its dumps */
	int in;			/* its stdin: closed when it may exit */
};

static int start_loader(const char *luajit, const struct files *fl, struct loader *ld)
{
	int list = memfd_create("nupp-check-list", 0), to[2], from[2];
	char env[64];

	if (list < 0 || pipe(to) || pipe(from)) {
		error_line("cannot start %s: %s", luajit, strerror(errno));
		return -1;
	}
	for (int i = 0; i < fl->n; i++)
		if (write(list, fl->v[i], strlen(fl->v[i]) + 1) < 0) {
			error_line("cannot pass the file list: %s", strerror(errno));
			return -1;
		}
	fflush(NULL);
	ld->pid = fork();
	if (ld->pid < 0) {
		error_line("cannot start %s: %s", luajit, strerror(errno));
		return -1;
	}
	if (ld->pid == 0) {
		snprintf(env, sizeof(env), "/proc/self/fd/%d", list);
		setenv("NUPP_CHECK_LIST", env, 1);
		dup2(to[0], 0), dup2(from[1], 1);
		close(to[0]), close(to[1]), close(from[0]), close(from[1]);
		execlp(luajit, luajit, "-e", DRIVER, (char *)NULL);
		fprintf(stderr, "nupp-bpf: error: cannot run %s: %s\n", luajit, strerror(errno));
		_exit(127);
	}
	close(list), close(to[0]), close(from[1]);
	ld->in = to[1];
	ld->out = fdopen(from[0], "r");
	return ld->out ? 0 : -1;
}

static void stop_loader(struct loader *ld)
{
	int st;

	if (ld->in >= 0)
		close(ld->in);
	if (ld->out)
		fclose(ld->out);
	if (ld->pid > 0) {
		kill(ld->pid, SIGKILL);
		waitpid(ld->pid, &st, 0);
	}
}

/* One record: 'D' or 'E', and its bytes (malloc'ed) in *data. */
static int next_record(FILE *f, char *type, char **data, size_t *len)
{
	int c = fgetc(f);
	unsigned long n;

	if (c == EOF)
		return -1;
	*type = (char)c;
	if (fscanf(f, "%lu", &n) != 1 || fgetc(f) != '\n' || n > (1ul << 31))
		return -1;
	*data = malloc(n + 1);
	if (!*data || fread(*data, 1, n, f) != n) {
		free(*data);
		return -1;
	}
	(*data)[n] = 0;
	*len = n;
	return 0;
}

/* ---- outputs --------------------------------------------------------------- */

static int sev_rank(const char *s)
{
	return trace_severity_rank(s);
}

/* Hottest first under --profile, then by file and line. */
static int cmp_where(const struct check_finding *a, const struct check_finding *b)
{
	int d;

	if (a->samples != b->samples)
		return a->samples < b->samples ? 1 : -1;
	if ((d = strcmp(a->path, b->path)))
		return d;
	return a->line - b->line;
}

/* CSV: the trace report's order, severity first. */
static int cmp_report(const void *pa, const void *pb)
{
	const struct check_finding *a = pa, *b = pb;
	int d = sev_rank(a->severity) - sev_rank(b->severity);

	return d ? d : (d = cmp_where(a, b)) ? d : strcmp(a->reason_id, b->reason_id);
}

/* Text and SARIF: by place, severity last. */
static int cmp_source(const void *pa, const void *pb)
{
	const struct check_finding *a = pa, *b = pb;
	int d = cmp_where(a, b);

	return d ? d : sev_rank(a->severity) - sev_rank(b->severity);
}

static int write_csv(const struct check_result *r, FILE *f)
{
	struct trace_report rep = { 0 };
	int ret;

	rep.sites = calloc(r->n + 1, sizeof(*rep.sites));
	if (!rep.sites)
		return -1;
	for (size_t i = 0; i < r->n; i++) {
		const struct check_finding *x = &r->f[i];
		struct trace_site *s = &rep.sites[rep.nsites++];

		s->severity = x->severity;
		s->count = 1;
		s->reason_class = x->row ? x->row->cls : TRACE_REASON_UNKNOWN_CLASS;
		if (trace_site__set_strings(s, x->reason, x->reason_id, x->raw, x->location, "")) {
			rep.nsites--;
			break;
		}
	}
	ret = trace_report__write_csv(&rep, f);
	for (size_t i = 0; i < rep.nsites; i++)
		trace_site__free(&rep.sites[i]);
	free(rep.sites);
	return ret;
}

static void where(const struct check_finding *x, char *out, size_t n)
{
	if (x->after_line)
		snprintf(out, n, ", reached only after the blocker at line %d", x->after_line);
	else if (x->loop_line)
		snprintf(out, n, ", in the loop at line %d", x->loop_line);
	else if (x->func_line)
		snprintf(out, n, ", in the function at line %d", x->func_line);
	else
		snprintf(out, n, ", in the main chunk");
}

static int write_text(const struct check_result *r, const char *build, FILE *f)
{
	size_t blockers = 0, bl = 0;

	for (size_t i = 0; i < r->n; i++) {
		const struct check_finding *x = &r->f[i];
		char w[96], hot[64] = "";

		where(x, w, sizeof(w));
		if (x->samples > 0)
			snprintf(hot, sizeof(hot), " [%.0f samples]", x->samples);
		else if (x->samples == 0)
			snprintf(hot, sizeof(hot), " [never ran]");
		fprintf(f, "%s:%d: %s: %s (%s%s)%s\n", x->path, x->line, x->severity, x->reason,
			x->reason_id, w, hot);
		if (x->row)
			fprintf(f, "    %s %s\n", x->row->explanation, x->row->action);
		blockers += check__is_blocker(x);
		bl += !strcmp(x->severity, "blacklist");
	}
	fprintf(f, "%zu finding%s, %zu blocker%s (%zu in loops: blacklisting), checked against the "
		   "recorder of %s\n", r->n, r->n == 1 ? "" : "s", blockers, blockers == 1 ? "" : "s",
		bl, build);
	return ferror(f) ? -1 : 0;
}

static const char *sarif_level(const char *severity)
{
	return !strcmp(severity, "blacklist") ? "error" : !strcmp(severity, "warn") ? "warning" : "note";
}

/* lead as it is, then value as a JSON string. */
static void json_field(FILE *f, const char *lead, const char *value)
{
	fputs(lead, f);
	text__put_json(f, value);
}

static int write_sarif(const struct check_result *r, const char *build, FILE *f)
{
	const struct trace_reason *used[128];
	int nused = 0;

	fputs("{\n  \"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\",\n"
	      "  \"version\": \"2.1.0\",\n  \"runs\": [\n    {\n      \"tool\": {\n"
	      "        \"driver\": {\n          \"name\": \"nupp-bpf check\",\n"
	      "          \"version\": ", f);
	text__put_json(f, NUPP_VERSION);
	fputs(",\n          \"rules\": [", f);
	for (size_t i = 0; i < r->n; i++) {
		const struct trace_reason *row = r->f[i].row;
		int k = 0;

		while (k < nused && used[k] != row)
			k++;
		if (!row || k < nused || nused == 128)
			continue;
		used[nused++] = row;
		json_field(f, nused > 1 ? ",\n            {\"id\": " : "\n            {\"id\": ", row->id);
		json_field(f, ", \"name\": ", row->name);
		json_field(f, ", \"shortDescription\": {\"text\": ", row->vm_text);
		json_field(f, "}, \"fullDescription\": {\"text\": ", row->explanation);
		json_field(f, "}, \"help\": {\"text\": ", row->action);
		json_field(f, "}, \"properties\": {\"reasonClass\": ", row->cls);
		fputs("}}", f);
	}
	fputs("\n          ]\n        }\n      },\n      \"properties\": {\"recorder\": ", f);
	text__put_json(f, build);
	fputs("},\n      \"results\": [", f);
	for (size_t i = 0; i < r->n; i++) {
		const struct check_finding *x = &r->f[i];
		char msg[512], w[96];
		int k = 0;

		while (k < nused && used[k] != x->row)
			k++;
		where(x, w, sizeof(w));
		snprintf(msg, sizeof(msg), "%s (%s%s)", x->reason, x->reason_id, w);
		json_field(f, i ? ",\n        {\"ruleId\": " : "\n        {\"ruleId\": ",
			   x->row ? x->row->id : TRACE_REASON_UNKNOWN_ID);
		if (x->row && k < nused)
			fprintf(f, ", \"ruleIndex\": %d", k);
		fprintf(f, ", \"level\": \"%s\"", sarif_level(x->severity));
		json_field(f, ", \"message\": {\"text\": ", msg);
		json_field(f, "}, \"locations\": [{\"physicalLocation\": {\"artifactLocation\": {\"uri\": ",
			   x->path);
		fprintf(f, "}, \"region\": {\"startLine\": %d}}}]", x->line > 0 ? x->line : 1);
		json_field(f, ", \"properties\": {\"severity\": ", x->severity);
		json_field(f, ", \"reasonId\": ", x->reason_id);
		json_field(f, ", \"location\": ", x->location);
		fprintf(f, ", \"functionLine\": %d, \"loopLine\": %d, \"pc\": %d}}", x->func_line,
			x->loop_line, x->pc);
	}
	fputs("\n      ]\n    }\n  ]\n}\n", f);
	return ferror(f) ? -1 : 0;
}

static int write_result(const struct check_opts *o, struct check_result *r, const char *build)
{
	struct output out;
	char err[512];
	int ret;

	qsort(r->f, r->n, sizeof(*r->f), o->format == CHECK_CSV ? cmp_report : cmp_source);
	if (output__open(&out, o->output ? o->output : "-", err, sizeof(err))) {
		error_line("%s", err);
		return -1;
	}
	ret = o->format == CHECK_CSV ? write_csv(r, out.f) :
	      o->format == CHECK_TEXT ? write_text(r, build, out.f) : write_sarif(r, build, out.f);
	if (ret) {
		output__discard(&out);
		error_line("cannot write %s", o->output ? o->output : "stdout");
		return -1;
	}
	if (output__commit(&out, err, sizeof(err))) {
		error_line("%s", err);
		return -1;
	}
	return 0;
}

/* ---- the command ----------------------------------------------------------- */

/* A load error: "CHUNK:LINE: MESSAGE", where LuaJIT shortened a long path
 * to its last 60 characters, said with the path as given. */
static void syntax_error(const char *path, const char *msg)
{
	const char *p = msg;
	int line, n;

	while ((p = strchr(p, ':'))) {
		if (sscanf(p, ":%d: %n", &line, &n) == 1 && n > 0) {
			error_line("%s:%d: %s", path, line, p + n);
			return;
		}
		p++;
	}
	error_line("%s: %s", path, msg);
}

/* Does a collapsed stack's frame stand in the function of finding x?
 * Frames name a function by its name or, when it has none, by its first
 * line ("app.lua:17", the main chunk "app.lua:0"); with --lines the current
 * line follows ("app.lua:update:42"). A named function is known by that
 * line falling in its range (the main chunk's range holds every other, so
 * it is known by its name 0 alone). */
static int frame_in(const char *fr, size_t n, const struct check_finding *x)
{
	size_t cl = strlen(x->chunk);
	const char *name = fr + cl + 1, *end = fr + n, *colon;
	int first, line, named;

	if (n <= cl + 1 || memcmp(fr, x->chunk, cl) || fr[cl] != ':')
		return 0;
	colon = memchr(name, ':', end - name);
	named = !(name[0] >= '0' && name[0] <= '9');
	if (!named)
		return sscanf(name, "%d", &first) == 1 && first == x->func_line;
	return colon && x->func_line > 0 && sscanf(colon + 1, "%d", &line) == 1 &&
	       line >= x->func_line && line <= x->func_last;
}

static const Perftools__Profiles__Function *pb_function(const Perftools__Profiles__Profile *p, __u64 id)
{
	if (id >= 1 && id <= p->n_function && p->function[id - 1]->id == id)
		return p->function[id - 1];	/* nupp-bpf numbers them so */
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id == id)
			return p->function[i];
	return NULL;
}

static const Perftools__Profiles__Location *pb_location(const Perftools__Profiles__Profile *p, __u64 id)
{
	if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id)
		return p->location[id - 1];
	for (size_t i = 0; i < p->n_location; i++)
		if (p->location[i]->id == id)
			return p->location[i];
	return NULL;
}

static const char *pb_str(const Perftools__Profiles__Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

/* A pprof profile (record's .pb.gz): each Function names its file and
 * first line, which is exactly a finding's function. */
static int profile_pprof(const char *path, struct check_result *r)
{
	gzFile gz = gzopen(path, "rb");
	size_t len = 0, cap = 1 << 20;
	char *buf = malloc(cap);
	Perftools__Profiles__Profile *p = NULL;
	int n;

	if (!gz || !buf) {
		error_line("cannot read %s: %s", path, strerror(errno));
		goto fail;
	}
	while ((n = gzread(gz, buf + len, cap - len)) > 0)
		if ((len += n) == cap) {
			char *nb = realloc(buf, cap *= 2);

			if (!nb)
				goto fail;
			buf = nb;
		}
	if (n < 0 || !(p = perftools__profiles__profile__unpack(NULL, len, (const uint8_t *)buf))) {
		error_line("%s: not a pprof profile", path);
		goto fail;
	}
	for (size_t s = 0; s < p->n_sample; s++) {
		const Perftools__Profiles__Sample *sm = p->sample[s];
		double v = sm->n_value ? (double)sm->value[0] : 0;

		for (size_t i = 0; i < r->n; i++) {
			struct check_finding *x = &r->f[i];
			int hit = 0;

			/* Its own samples: the leaf (location 0, its innermost line). */
			for (size_t l = 0; l < sm->n_location_id && l < 1; l++) {
				const Perftools__Profiles__Location *loc = pb_location(p, sm->location_id[l]);

				for (size_t k = 0; loc && k < loc->n_line && k < 1; k++) {
					const Perftools__Profiles__Function *fn = pb_function(p, loc->line[k]->function_id);
					const char *file = fn ? pb_str(p, fn->filename) : "", *base = strrchr(file, '/');

					hit = fn && fn->start_line == x->func_line &&
					      !strcmp(base ? base + 1 : file, x->chunk);
				}
			}
			if (hit)
				x->samples += v;
		}
	}
	perftools__profiles__profile__free_unpacked(p, NULL);
	gzclose(gz);
	free(buf);
	return 0;
fail:
	if (gz)
		gzclose(gz);
	free(buf);
	return -1;
}

/* --profile FILE: each finding's samples, those its function took itself
 * (the leaf of the stack: a main chunk under every stack would otherwise
 * come first): pprof (exact), or collapsed stacks (from record --lines;
 * without --lines only functions named by their first line are found). */
static int check__profile_samples(const char *profile, struct check_result *r)
{
	FILE *f = fopen(profile, "r");
	unsigned char magic[2] = { 0 };
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	if (f && fread(magic, 1, 2, f) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
		fclose(f);
		for (size_t i = 0; i < r->n; i++)
			r->f[i].samples = 0;
		return profile_pprof(profile, r);
	}
	if (f)
		rewind(f);
	if (!f) {
		error_line("cannot read %s: %s", profile, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < r->n; i++)
		r->f[i].samples = 0;
	while ((len = getline(&line, &cap, f)) > 0) {
		char *sp = strrchr(line, ' '), *end, *leaf;
		double count;

		if (!sp || (count = strtod(sp + 1, &end), end == sp + 1)) {
			error_line("%s: not collapsed stacks (\"frame;frame count\" lines)", profile);
			fclose(f), free(line);
			return -1;
		}
		*sp = 0;
		/* Its own samples: the stack's leaf frame. */
		leaf = strrchr(line, ';');
		leaf = leaf ? leaf + 1 : line;
		for (size_t i = 0; i < r->n; i++)
			if (frame_in(leaf, strlen(leaf), &r->f[i]))
				r->f[i].samples += count;
	}
	fclose(f);
	free(line);
	return 0;
}

/* check -p PID: what the process has loaded, against its own LuaJIT. */
static int check_pid(const struct check_opts *o, struct lj_target *t)
{
	struct check_result r = { 0 };
	const struct lj_recorder *rec;
	struct check_ctx ctx;
	char err[512], build[256];
	int status = 2;

	if (lj_target__identify(t, o->pid, err, sizeof(err))) {
		error_line("%s", err);
		goto out;
	}
	if (!(rec = lj_recorder__of(t, build, sizeof(build)))) {
		error_line("process %d: %s", o->pid, build);
		goto out;
	}
	if (check__ctx_init(&ctx, lj_target__build(t), rec, err, sizeof(err))) {
		error_line("process %d: %s", o->pid, err);
		goto out;
	}
	if (check__process(o->pid, &ctx, &t->layout, &r, err, sizeof(err)))
		error_line("%s", err);
	else if (!(o->profile && check__profile_samples(o->profile, &r)) && !write_result(o, &r, build))
		status = 0;
	for (size_t k = 0; status == 0 && k < r.n; k++)
		if (check__is_blocker(&r.f[k]))
			status = 1;
	check__ctx_free(&ctx);
out:
	check__result_free(&r);
	free(t);
	return errors ? 2 : status;
}

int check__run(const struct check_opts *o)
{
	const char *luajit = o->luajit ? o->luajit : "luajit";
	struct files fl = { 0 };
	struct loader ld = { .pid = -1, .in = -1 };
	struct check_result r = { 0 };
	struct check_ctx ctx;
	struct lj_target *t = calloc(1, sizeof(*t));
	const struct lj_recorder *rec;
	char line[64], err[512], build[256] = "?";
	int i = 0, ready = 0, status;

	if (!t)
		return error_line("out of memory"), 2;
	if (o->pid)
		return check_pid(o, t);
	collect(o, &fl);
	if (!fl.n)
		goto done;
	if (start_loader(luajit, &fl, &ld))
		goto done;
	if (!fgets(line, sizeof(line), ld.out) || strcmp(line, "nupp-check 1\n")) {
		error_line("%s did not load the files (is it LuaJIT?)", luajit);
		goto done;
	}
	if (lj_target__identify(t, ld.pid, err, sizeof(err))) {
		error_line("%s: %s", luajit, err);
		goto done;
	}
	if (!(rec = lj_recorder__of(t, build, sizeof(build)))) {
		error_line("%s: %s", luajit, build);
		goto done;
	}
	if (check__ctx_init(&ctx, lj_target__build(t), rec, err, sizeof(err))) {
		error_line("%s: %s", luajit, err);
		goto done;
	}
	ready = 1;
	for (char type, *data; i < fl.n; i++) {
		size_t len;
		struct bc_chunk ch;

		if (next_record(ld.out, &type, &data, &len)) {
			error_line("%s stopped before loading %s", luajit, fl.v[i]);
			break;
		}
		if (type == 'E') {
			syntax_error(fl.v[i], data);
		} else if (bcdump__parse(data, len, &ch, err, sizeof(err))) {
			error_line("%s: %s", fl.v[i], err);
		} else {
			if (check__chunk(&ctx, &ch, fl.v[i], &r))
				error_line("%s: out of memory", fl.v[i]);
			bcdump__free(&ch);
		}
		free(data);
	}
	if (o->profile && check__profile_samples(o->profile, &r))
		goto done_ctx;
	write_result(o, &r, build);
done_ctx:
	check__ctx_free(&ctx);
done:
	stop_loader(&ld);
	status = errors ? 2 : 0;
	for (size_t k = 0; ready && !errors && k < r.n; k++)
		if (check__is_blocker(&r.f[k]))
			status = 1;
	check__result_free(&r);
	for (int k = 0; k < fl.n; k++)
		free(fl.v[k]);
	free(fl.v);
	free(t);
	return status;
}
