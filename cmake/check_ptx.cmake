# cmake -DPTX=file -P check_ptx.cmake: fails when the reduction kernels' PTX contains an
# instruction that would break bit-identity with the CPU reference: a fused multiply-add, a
# flush-to-zero variant, or an approximate operation (what -fmad=true, -ftz=true or fast-math
# would bring in).
file(STRINGS ${PTX} bad REGEX "^[ \t]*(@!?%p[0-9]+[ \t]+)?(fma\\.|[a-z0-9.]*\\.ftz|[a-z0-9.]*\\.approx)")
if(bad)
  list(GET bad 0 first)
  message(FATAL_ERROR "${PTX}: instruction not allowed in the deterministic kernels: ${first}")
endif()
