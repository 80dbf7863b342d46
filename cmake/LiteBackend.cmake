# lite_backend(NAME SOURCES ... [LIBS ...])
# Registers a compiled-in backend: its sources join the library and LITE_HAVE_<NAME> is defined
# so src/core/registry.c lists it.
function(lite_backend name)
  cmake_parse_arguments(B "" "" "SOURCES;LIBS" ${ARGN})
  string(TOUPPER ${name} up)
  set(LITE_BACKEND_SOURCES ${LITE_BACKEND_SOURCES} ${B_SOURCES} PARENT_SCOPE)
  set(LITE_BACKEND_LIBS ${LITE_BACKEND_LIBS} ${B_LIBS} PARENT_SCOPE)
  set(LITE_BACKEND_DEFS ${LITE_BACKEND_DEFS} LITE_HAVE_${up}=1 PARENT_SCOPE)
  set(LITE_BACKENDS_BUILT ${LITE_BACKENDS_BUILT} ${name} PARENT_SCOPE)
endfunction()

# lite_backend_option(NAME DOC): LITE_WITH_<NAME> = AUTO | ON | OFF.
#   AUTO builds the backend when its dependencies are found, ON fails the configure when they
#   are not, OFF never builds it. After the dependency checks, call lite_backend_decide().
function(lite_backend_option name doc)
  string(TOUPPER ${name} up)
  set(LITE_WITH_${up} AUTO CACHE STRING "${doc} (AUTO|ON|OFF)")
  set_property(CACHE LITE_WITH_${up} PROPERTY STRINGS AUTO ON OFF)
endfunction()

# lite_backend_decide(NAME FOUND MISSING_MSG OUTVAR): sets OUTVAR to TRUE when the backend is
# to be built; stops the configure when LITE_WITH_<NAME>=ON and FOUND is false.
function(lite_backend_decide name found missing outvar)
  string(TOUPPER ${name} up)
  set(want ${LITE_WITH_${up}})
  if(want STREQUAL "OFF")
    message(STATUS "backend ${name}: disabled (LITE_WITH_${up}=OFF)")
    set(${outvar} FALSE PARENT_SCOPE)
  elseif(found)
    set(${outvar} TRUE PARENT_SCOPE)
  elseif(want STREQUAL "ON")
    message(FATAL_ERROR "backend ${name}: LITE_WITH_${up}=ON but ${missing}")
  else()
    message(STATUS "backend ${name}: not built (${missing})")
    set(${outvar} FALSE PARENT_SCOPE)
  endif()
endfunction()

# lite_test_variant(NAME TRANSPORT tp [ENV K=V ...] [FIXTURE name]): the multi-process tests run
# once per variant. Every backend gets a default variant named after it; a backend with several
# configurations worth testing (e.g. libfabric providers) adds more. Values with ';' must be
# escaped as '\\;'. FIXTURE: a CTest fixture every test of the variant requires (files its ENV
# names, made by a FIXTURES_SETUP test). GATE: an executable target every rank runs as
# `gate program args...`: it exits 77 (skipped) with the reason when the variant cannot run on
# this host, and otherwise sets up the rank and execs the program.
function(lite_test_variant name)
  cmake_parse_arguments(V "" "TRANSPORT;FIXTURE;GATE" "ENV" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY LITE_TEST_VARIANTS ${name})
  set_property(GLOBAL PROPERTY LITE_VARIANT_${name}_TRANSPORT ${V_TRANSPORT})
  set_property(GLOBAL PROPERTY LITE_VARIANT_${name}_ENV "${V_ENV}")
  set_property(GLOBAL PROPERTY LITE_VARIANT_${name}_FIXTURE "${V_FIXTURE}")
  set_property(GLOBAL PROPERTY LITE_VARIANT_${name}_GATE "${V_GATE}")
endfunction()
