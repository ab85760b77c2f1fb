/* wwref's stand-in for glibc's internal math_private.h: only the word access macros that
   sysdeps/ieee754/dbl-64/s_log1p.c and s_expm1.c use, on the IEEE-754 binary64 layout. */
#ifndef WWREF_MATH_PRIVATE_H
#define WWREF_MATH_PRIVATE_H
#include <errno.h>
#include <stdint.h>

typedef union {
  double value;
  uint64_t bits;
} wwref_double_bits;

#define GET_HIGH_WORD(word, d) \
  do { wwref_double_bits b_; b_.value = (d); (word) = (int32_t) (b_.bits >> 32); } while (0)
#define GET_LOW_WORD(word, d) \
  do { wwref_double_bits b_; b_.value = (d); (word) = (uint32_t) b_.bits; } while (0)
#define SET_HIGH_WORD(d, word)                                                                  \
  do {                                                                                          \
    wwref_double_bits b_; b_.value = (d);                                                       \
    b_.bits = (b_.bits & UINT64_C (0xffffffff)) | ((uint64_t) (uint32_t) (word) << 32);         \
    (d) = b_.value;                                                                             \
  } while (0)
#define __set_errno(e) (errno = (e))

#ifndef __glibc_unlikely
#define __glibc_unlikely(cond) __builtin_expect ((cond), 0)
#endif
#endif
