/* INTERNAL marks a function the C files share with each other but not with the library's
 * users: hidden from the dynamic symbol table on ELF and Mach-O, so it can neither clash with
 * nor be interposed by a symbol of the same name elsewhere in the host. Windows builds (PE,
 * where the attribute does not apply) export it as before. */
#ifndef EWBIK_INTERNAL_H
#define EWBIK_INTERNAL_H

#if defined(__GNUC__) && !defined(_WIN32) && !defined(__CYGWIN__)
#define INTERNAL __attribute__((visibility("hidden")))
#else
#define INTERNAL
#endif

#endif
