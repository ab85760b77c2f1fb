/* wwref's stand-in for glibc's libc-diag.h: glibc's own build silences some warnings; here they are
   left as they are. Newer glibc names compiler-specific variants (_GCC, _CLANG) of the same macros. */
#ifndef WWREF_LIBC_DIAG_H
#define WWREF_LIBC_DIAG_H
#define DIAG_PUSH_NEEDS_COMMENT
#define DIAG_POP_NEEDS_COMMENT
#define DIAG_PUSH_NEEDS_COMMENT_CLANG
#define DIAG_POP_NEEDS_COMMENT_CLANG
#define DIAG_IGNORE_NEEDS_COMMENT(version, option)
#define DIAG_IGNORE_Os_NEEDS_COMMENT(version, option)
#define DIAG_IGNORE_NEEDS_COMMENT_GCC(version, option)
#define DIAG_IGNORE_Os_NEEDS_COMMENT_GCC(version, option)
#define DIAG_IGNORE_NEEDS_COMMENT_CLANG(version, option)
#define DIAG_IGNORE_Os_NEEDS_COMMENT_CLANG(version, option)
#endif
