/* wwref's stand-in for glibc's libm-alias-double.h: the public names are defined in pin.c instead. */
#ifndef WWREF_LIBM_ALIAS_DOUBLE_H
#define WWREF_LIBM_ALIAS_DOUBLE_H
#define libm_alias_double(from, to)
#endif
