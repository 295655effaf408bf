// SPDX-License-Identifier: MIT
/*
 * libbpf_setup.c - libbpf's log and the kernel BTF for every BPF object.
 *
 * The minimal BTF is trusted only for the kernel it was made from: its GNU
 * build-id, which /sys/kernel/notes gives (the kernel's own ELF notes), must
 * equal the one recorded at build time. Same build-id, same vmlinux, same
 * BTF. libbpf wants a path, so the bytes go to a sealed memfd named through
 * /proc/self/fd.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "libbpf_setup.h"
#include "min_btf.h"

static bool verbose;

static int print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return verbose ? vfprintf(stderr, fmt, ap) : 0;
}

void libbpf_setup__verbose(bool on)
{
	verbose = on;
	libbpf_set_print(print);
}

/* The GNU build-id note of the running kernel; its length, 0 if none. */
static size_t kernel_build_id(unsigned char *id, size_t size)
{
	unsigned char notes[4096];
	ssize_t n = 0;
	size_t at = 0;
	int fd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, notes, sizeof(notes));
		close(fd);
	}
	while (n > 0 && at + sizeof(Elf64_Nhdr) <= (size_t)n) {
		Elf64_Nhdr h;
		size_t name_at = at + sizeof(h), desc_at;

		memcpy(&h, notes + at, sizeof(h));
		desc_at = name_at + ((h.n_namesz + 3) & ~3u);
		if (desc_at + h.n_descsz > (size_t)n)
			break;
		if (h.n_type == NT_GNU_BUILD_ID && h.n_namesz == 4 &&
		    !memcmp(notes + name_at, "GNU", 4) && h.n_descsz <= size) {
			memcpy(id, notes + desc_at, h.n_descsz);
			return h.n_descsz;
		}
		at = desc_at + ((h.n_descsz + 3) & ~3u);
	}
	return 0;
}

bool libbpf_setup__min_btf_matches(void)
{
	static int matches = -1;
	unsigned char id[64];
	size_t n;

	if (matches < 0) {
		n = kernel_build_id(id, sizeof(id));
		matches = n && n == min_btf_kernel_id_len && !memcmp(id, min_btf_kernel_id, n);
	}
	return matches;
}

/* The minimal BTF as a file: "/proc/self/fd/N", or NULL. */
static const char *min_btf_path(void)
{
	static char path[32];
	int fd;

	if (path[0] || !libbpf_setup__min_btf_matches())
		return path[0] ? path : NULL;
	fd = memfd_create("nupp-kernel-btf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return NULL;
	if (write(fd, min_btf, min_btf_len) != (ssize_t)min_btf_len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		close(fd);
		return NULL;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return path;
}

const struct bpf_object_open_opts *libbpf_setup__open_opts(void)
{
	static struct bpf_object_open_opts opts = { .sz = sizeof(opts) };

	libbpf_set_print(print);	/* quiet unless -v said otherwise */
	opts.btf_custom_path = min_btf_path();
	return &opts;
}

int libbpf_setup__learn_pid_view(const struct bpf_program *prog, const unsigned *learned,
				 char *err, size_t errsz)
{
	LIBBPF_OPTS(bpf_test_run_opts, run);

	if (bpf_prog_test_run_opts(bpf_program__fd(prog), &run)) {
		snprintf(err, errsz, "cannot learn nupp-bpf's own PID namespace: %s", strerror(errno));
		return -1;
	}
	if (!*learned) {
		snprintf(err, errsz, "cannot learn nupp-bpf's own PID namespace: its task has no pid");
		return -1;
	}
	return 0;
}
