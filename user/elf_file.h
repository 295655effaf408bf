/* SPDX-License-Identifier: MIT */
/* elf_file.h - the few facts nupp-bpf needs from an ELF file. */
#ifndef NUPP_ELF_FILE_H
#define NUPP_ELF_FILE_H

#include <stdbool.h>
#include <linux/types.h>

struct elf_file;

/* Open path; NULL when it is not a readable ELF file. */
struct elf_file *elf_file__open(const char *path);
void elf_file__close(struct elf_file *ef);

/* Size of .text, 0 when absent. */
__u64 elf_file__text_size(struct elf_file *ef);

/* SHA-256 of .text's bytes into out; 0, or -1 when there is no .text. */
int elf_file__text_sha256(struct elf_file *ef, unsigned char out[32]);

/* Value of a symbol in .symtab (local symbols too), or .dynsym when
 * dynamic is set; 0 when absent. */
__u64 elf_file__sym(struct elf_file *ef, const char *name, bool dynamic);

/* Whether .symtab is present (the file is not stripped). */
bool elf_file__has_symtab(struct elf_file *ef);

#define ELF_FILE_NOADDR (~0ULL)

/* Virtual address of a file offset, through the PT_LOAD headers, or ELF_FILE_NOADDR. */
__u64 elf_file__offset_to_vaddr(struct elf_file *ef, __u64 off);

/* File offset of a virtual address, through the PT_LOAD headers, or ELF_FILE_NOADDR. */
__u64 elf_file__vaddr_to_offset(struct elf_file *ef, __u64 vaddr);

#endif /* NUPP_ELF_FILE_H */
