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


#define ELF_FILE_NOADDR (~0ULL)

/* Virtual address of a file offset, through the PT_LOAD headers, or ELF_FILE_NOADDR. */
__u64 elf_file__offset_to_vaddr(struct elf_file *ef, __u64 off);

/* File offset of a virtual address, through the PT_LOAD headers, or ELF_FILE_NOADDR. */
__u64 elf_file__vaddr_to_offset(struct elf_file *ef, __u64 vaddr);

/* e_machine (EM_X86_64 = 62), and whether the file is ELF64; -1 when unreadable. */
int elf_file__machine(struct elf_file *ef, bool *elf64);

/* The bytes of the section named name (valid until close), NULL when absent. */
const void *elf_file__section(struct elf_file *ef, const char *name, size_t *size);

struct Elf;

/* The libelf handle (for libdw's CFI reader), owned by ef. */
struct Elf *elf_file__elf(struct elf_file *ef);

/* The bytes of the executable section holding vaddr (valid until close),
 * and its address range [*lo, *hi); NULL when no such section holds it. */
const __u8 *elf_file__code_at(struct elf_file *ef, __u64 vaddr, __u64 *lo, __u64 *hi);

/* Address of a function the file defines, from .dynsym, else .symtab; 0 when
 * absent (an imported function is absent). */
__u64 elf_file__func(struct elf_file *ef, const char *name);

/* The name of the function defined here whose range holds vaddr, from
 * .symtab, else .dynsym; NULL when none (valid until close). */
const char *elf_file__func_at(struct elf_file *ef, __u64 vaddr);

#endif /* NUPP_ELF_FILE_H */
