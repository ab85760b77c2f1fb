/* wwref's stand-in for glibc's math-barriers.h: keep an expression evaluated (for its floating-point
   flags) and keep the compiler from moving a value across the barrier. */
#ifndef WWREF_MATH_BARRIERS_H
#define WWREF_MATH_BARRIERS_H
#define math_force_eval(x) do { __typeof (x) forced_ = (x); __asm __volatile ("" : : "m" (forced_)); } while (0)
#define math_opt_barrier(x) ({ __typeof (x) held_ = (x); __asm ("" : "+m" (held_)); held_; })
#endif
