/* The public log1p and expm1 of wwref's libm pin (README.md beside this file).

   The computations are glibc's generic binary64 code, compiled from glibc's own
   sysdeps/ieee754/dbl-64/s_log1p.c and s_expm1.c with their entry points renamed to
   wwref_glibc_log1p and wwref_glibc_expm1 (scripts/build-libm-pin.py). This file adds what glibc's
   exported symbols add around them, so that callers see the C library's behaviour: log1p sets
   errno to EDOM below -1 and to ERANGE at -1 (s_expm1.c sets its own errno on overflow). */
#include <errno.h>

double wwref_glibc_log1p (double x);
double wwref_glibc_expm1 (double x);

double
log1p (double x)
{
  /* A quiet comparison: a NaN argument must not raise the invalid flag here. */
  if (__builtin_expect (__builtin_islessequal (x, -1.0), 0))
    errno = x == -1.0 ? ERANGE : EDOM;
  return wwref_glibc_log1p (x);
}

double
expm1 (double x)
{
  return wwref_glibc_expm1 (x);
}

#ifndef WWREF_PIN_IDENTITY
#error "WWREF_PIN_IDENTITY names the build (scripts/build-libm-pin.py defines it)"
#endif
/* Read by the workers' hello (workflows/libm.py) to report which pin the process loaded. */
const char wwref_libm_pin[] = WWREF_PIN_IDENTITY;
