// SPDX-License-Identifier: MIT
/* output.c - output files written through a new file and a rename (output.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "output.h"

/* The directory part of path ("." when it has none) into dir. */
static void dir_of(const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(dir, size, ".");
	else if (slash == path)
		snprintf(dir, size, "/");
	else
		snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

/* Names only root can create, which no one plants: /dev/stdout is a
 * symlink to /proc/self/fd/1, itself one to wherever stdout goes. */
static bool system_name(const char *name)
{
	return !strncmp(name, "/dev/", 5) || !strncmp(name, "/proc/", 6);
}

/* The process's umask, without setting it (umask(2) would, under other
 * threads of a host that embeds the Lua module); 022 when unknown. */
static mode_t current_umask(void)
{
	unsigned mask = 022;
	char line[64];
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Umask: %o", &mask) == 1)
			break;
	if (f)
		fclose(f);
	return mask & 0777;
}

int output__open(struct output *o, const char *name, char *err, size_t errsz)
{
	char dir[PATH_MAX];
	struct stat st;
	int fd;

	memset(o, 0, sizeof(*o));
	if (!name || !name[0])
		return 0;
	snprintf(o->name, sizeof(o->name), "%s", name);
	if (!strcmp(name, "-")) {
		o->f = stdout;
		return 0;
	}
	/* A device or a FIFO is written where it is (no rename over it), and
	 * so is a name under /dev or /proc, through its links. */
	if (system_name(name)) {
		fd = open(name, O_WRONLY | O_CLOEXEC | O_TRUNC);
	} else if (!lstat(name, &st) && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
		fd = open(name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	} else {
		dir_of(name, dir, sizeof(dir));
		if (snprintf(o->tmp, sizeof(o->tmp), "%s/.nupp-bpf-XXXXXX", dir) >= (int)sizeof(o->tmp)) {
			snprintf(err, errsz, "cannot write %s: name too long", name);
			return -1;
		}
		fd = mkostemp(o->tmp, O_CLOEXEC);	/* O_EXCL: a new file of ours */
		if (fd >= 0)		/* as open(2) would make it */
			fchmod(fd, 0666 & ~current_umask());
	}
	if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
		snprintf(err, errsz, "cannot write %s: %s", name, strerror(errno));
		if (fd >= 0)
			close(fd);
		if (o->tmp[0])
			unlink(o->tmp);
		o->tmp[0] = '\0';
		return -1;
	}
	/* One writer per file: no lock taken per call (a flame graph makes
	 * tens of thousands), and 64 KiB to a write(2) rather than 4. */
	setvbuf(o->f, NULL, _IOFBF, 64 << 10);
	__fsetlocking(o->f, FSETLOCKING_BYCALLER);
	return 0;
}

int output__commit(struct output *o, char *err, size_t errsz)
{
	char old[PATH_MAX + 8];
	bool ok;

	if (!o->f)
		return 0;
	ok = !ferror(o->f) && !fflush(o->f);
	if (o->f != stdout)
		ok = !fclose(o->f) && ok;
	o->f = NULL;
	if (ok && o->tmp[0]) {
		/* rename() moves a symlink itself, never what it points to. */
		snprintf(old, sizeof(old), "%s.old", o->name);
		if (rename(o->name, old) && errno != ENOENT)
			ok = false;
		else
			ok = !rename(o->tmp, o->name);
	}
	if (!ok) {
		snprintf(err, errsz, "cannot write %s: %s", o->name, strerror(errno ? errno : EIO));
		output__discard(o);
		return -1;
	}
	o->tmp[0] = '\0';
	return 0;
}

void output__discard(struct output *o)
{
	if (o->f && o->f != stdout)
		fclose(o->f);
	o->f = NULL;
	if (o->tmp[0])
		unlink(o->tmp);
	o->tmp[0] = '\0';
}
