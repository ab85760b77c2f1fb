/* wwref's stand-in for glibc's math-underflow.h: raise the underflow flag for a subnormal result. */
#ifndef WWREF_MATH_UNDERFLOW_H
#define WWREF_MATH_UNDERFLOW_H
#include <float.h>
#include <math.h>
#include "math-barriers.h"
#define math_check_force_underflow(x)                                        \
  do {                                                                       \
    if (fabs (x) < DBL_MIN) { double square_ = (x) * (x); math_force_eval (square_); } \
  } while (0)
#endif
