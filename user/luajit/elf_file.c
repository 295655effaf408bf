// SPDX-License-Identifier: MIT
/* elf_file.c - ELF facts through libelf; digests through libmd. */
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sha2.h>
#include "elf_file.h"

struct elf_file {
	int fd;
	Elf *elf;
};

struct elf_file *elf_file__open(const char *path)
{
	struct elf_file *ef;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	ef = calloc(1, sizeof(*ef));
	if (!ef)
		return NULL;
	ef->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (ef->fd < 0)
		goto fail;
	/* Not ELF_C_READ_MMAP: the kernel writes active uprobes' breakpoints
	 * into every executable-capable private mapping of a probed file,
	 * ours included, which would change the .text we digest. read()
	 * sees the file as it is. */
	ef->elf = elf_begin(ef->fd, ELF_C_READ, NULL);
	if (!ef->elf || elf_kind(ef->elf) != ELF_K_ELF)
		goto fail;
	return ef;
fail:
	elf_file__close(ef);
	return NULL;
}

void elf_file__close(struct elf_file *ef)
{
	if (!ef)
		return;
	elf_end(ef->elf);	/* NULL is fine */
	if (ef->fd >= 0)
		close(ef->fd);
	free(ef);
}

/* The section named name, or with type (when name is NULL). */
static Elf_Scn *find_section(struct elf_file *ef, const char *name, Elf64_Word type, GElf_Shdr *sh)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(ef->elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(ef->elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, sh))
			continue;
		if (!name) {
			if (sh->sh_type == type)
				return scn;
			continue;
		}
		n = elf_strptr(ef->elf, shstrndx, sh->sh_name);
		if (n && !strcmp(n, name))
			return scn;
	}
	return NULL;
}

__u64 elf_file__text_size(struct elf_file *ef)
{
	GElf_Shdr sh;

	return find_section(ef, ".text", 0, &sh) ? sh.sh_size : 0;
}

int elf_file__text_sha256(struct elf_file *ef, unsigned char out[32])
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(ef, ".text", 0, &sh);
	Elf_Data *d;
	SHA2_CTX c;

	if (!scn || !(d = elf_rawdata(scn, NULL)) || !d->d_buf)
		return -1;
	SHA256Init(&c);
	SHA256Update(&c, d->d_buf, d->d_size);
	SHA256Final(out, &c);
	return 0;
}

/* A symbol's value in the symbol table of type, 0 when absent; with
 * func_only, only a function defined here: an imported one (SHN_UNDEF) may
 * carry its PLT stub's address. */
static __u64 sym_in(struct elf_file *ef, Elf64_Word type, const char *name, bool func_only)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(ef, NULL, type, &sh);
	Elf_Data *d;
	size_t i, n;

	if (!scn || !(d = elf_getdata(scn, NULL)) || !sh.sh_entsize)
		return 0;
	n = sh.sh_size / sh.sh_entsize;
	for (i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *s;

		if (!gelf_getsym(d, i, &sym) || !sym.st_value)
			continue;
		if (func_only && (sym.st_shndx == SHN_UNDEF || GELF_ST_TYPE(sym.st_info) != STT_FUNC))
			continue;
		s = elf_strptr(ef->elf, sh.sh_link, sym.st_name);
		if (s && !strcmp(s, name))
			return sym.st_value;
	}
	return 0;
}

/* The function of the symbol table of type whose range holds vaddr. */
static const char *func_at_in(struct elf_file *ef, Elf64_Word type, __u64 vaddr)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(ef, NULL, type, &sh);
	Elf_Data *d;
	size_t n;

	if (!scn || !(d = elf_getdata(scn, NULL)) || !sh.sh_entsize)
		return NULL;
	n = sh.sh_size / sh.sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;

		if (gelf_getsym(d, i, &sym) && GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
		    sym.st_shndx != SHN_UNDEF && vaddr >= sym.st_value &&
		    vaddr < sym.st_value + (sym.st_size ? sym.st_size : 1))
			return elf_strptr(ef->elf, sh.sh_link, sym.st_name);
	}
	return NULL;
}

const char *elf_file__func_at(struct elf_file *ef, __u64 vaddr)
{
	const char *name = func_at_in(ef, SHT_SYMTAB, vaddr);

	return name && name[0] ? name : func_at_in(ef, SHT_DYNSYM, vaddr);
}

__u64 elf_file__sym(struct elf_file *ef, const char *name, bool dynamic)
{
	return sym_in(ef, dynamic ? SHT_DYNSYM : SHT_SYMTAB, name, false);
}

/* Walk the PT_LOAD headers; map between file offsets and vaddrs. */
static __u64 load_map(struct elf_file *ef, __u64 x, bool from_offset)
{
	size_t i, n;

	if (elf_getphdrnum(ef->elf, &n))
		return ELF_FILE_NOADDR;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(ef->elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (from_offset && x >= ph.p_offset && x < ph.p_offset + ph.p_filesz)
			return x - ph.p_offset + ph.p_vaddr;
		if (!from_offset && x >= ph.p_vaddr && x < ph.p_vaddr + ph.p_filesz)
			return x - ph.p_vaddr + ph.p_offset;
	}
	return ELF_FILE_NOADDR;
}

__u64 elf_file__offset_to_vaddr(struct elf_file *ef, __u64 off)
{
	return load_map(ef, off, true);
}

__u64 elf_file__vaddr_to_offset(struct elf_file *ef, __u64 vaddr)
{
	return load_map(ef, vaddr, false);
}

int elf_file__machine(struct elf_file *ef, bool *elf64)
{
	GElf_Ehdr eh;

	if (!gelf_getehdr(ef->elf, &eh))
		return -1;
	*elf64 = eh.e_ident[EI_CLASS] == ELFCLASS64;
	return eh.e_machine;
}

const void *elf_file__section(struct elf_file *ef, const char *name, size_t *size)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(ef, name, 0, &sh);
	Elf_Data *d;

	if (!scn || sh.sh_type == SHT_NOBITS || !(d = elf_rawdata(scn, NULL)) || !d->d_buf)
		return NULL;
	*size = d->d_size;
	return d->d_buf;
}

struct Elf *elf_file__elf(struct elf_file *ef)
{
	return ef->elf;
}

const __u8 *elf_file__code_at(struct elf_file *ef, __u64 vaddr, __u64 *lo, __u64 *hi)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf_Data *d;

	while ((scn = elf_nextscn(ef->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR) || vaddr < sh.sh_addr || vaddr >= sh.sh_addr + sh.sh_size)
			continue;
		d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size != sh.sh_size)
			return NULL;
		*lo = sh.sh_addr;
		*hi = sh.sh_addr + sh.sh_size;
		return d->d_buf;
	}
	return NULL;
}

__u64 elf_file__func(struct elf_file *ef, const char *name)
{
	__u64 v = sym_in(ef, SHT_DYNSYM, name, true);

	return v ? v : sym_in(ef, SHT_SYMTAB, name, true);
}
