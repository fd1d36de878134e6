/*
 * ringlab compat stub for <linux/compiler_types.h>.
 *
 * csrc/compat/include is first on the -I path when a user's ptr_ring.h is
 * built, so the header's kernel #includes land here instead of on the UAPI
 * headers in /usr/include (which lack the kernel-internal API).  Everything
 * ptr_ring.h needs comes from csrc/compat/kernel_shim.h, which
 * csrc/compat/kernel_ptr_ring.h includes first; this file is deliberately
 * empty apart from passing through to a system header of the same name, if
 * one exists, so that libc headers (<errno.h> -> <linux/errno.h> ->
 * <asm/errno.h>, <linux/perf_event.h> -> <linux/types.h>) still work in any
 * translation unit compiled with this -I.
 */
#if defined(__has_include_next)
#  if __has_include_next(<linux/compiler_types.h>)
#    include_next <linux/compiler_types.h>
#  endif
#endif
