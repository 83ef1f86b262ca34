# Manual pages (man/): man3 generated from the public headers' doc comments
# (the headers are their single source), man1 and man7 from scdoc sources.
# Built with the project into <build>/man/man{1,3,7}, installed under
# CMAKE_INSTALL_MANDIR (share/man). DISTC_MAN: AUTO (default) builds them when
# scdoc is found and warns otherwise; ON requires scdoc; OFF skips them.
# Sets DISTC_MAN_DIR and DISTC_HAVE_MAN for the tests (tests/man).

set(DISTC_MAN AUTO CACHE STRING "Build and install the manual pages: AUTO (when scdoc is found), ON or OFF")
set_property(CACHE DISTC_MAN PROPERTY STRINGS AUTO ON OFF)
set(DISTC_MAN_DIR ${PROJECT_BINARY_DIR}/man)
set(DISTC_HAVE_MAN OFF)

find_program(DISTC_SCDOC scdoc)
# Debian's interpreter, as the tests use; the generators need only its standard library.
find_program(DISTC_DEBIAN_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
set(distc_man_python ${DISTC_DEBIAN_PYTHON})
if(NOT distc_man_python)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(distc_man_python ${Python3_EXECUTABLE})
endif()

if(DISTC_MAN STREQUAL "OFF")
  message(STATUS "distc: manual pages off (DISTC_MAN=OFF)")
elseif(NOT DISTC_SCDOC OR NOT distc_man_python)
  set(distc_man_why "scdoc or python3 not found: apt-get install scdoc")
  if(DISTC_MAN STREQUAL "ON")
    message(FATAL_ERROR "distc: DISTC_MAN=ON but ${distc_man_why}")
  endif()
  message(WARNING "distc: the manual pages are not built (${distc_man_why})")
else()
  set(DISTC_HAVE_MAN ON)
endif()

if(DISTC_HAVE_MAN)
  set(distc_man_src ${PROJECT_SOURCE_DIR}/man)
  file(GLOB distc_man_headers CONFIGURE_DEPENDS
    ${PROJECT_SOURCE_DIR}/include/distc.h ${PROJECT_SOURCE_DIR}/include/distc/*.h
    ${PROJECT_SOURCE_DIR}/include/distc/sys/*.h)
  # The set of man3 pages follows the headers, so one stamp stands for all of
  # them; the generator removes pages of functions that are gone.
  set(distc_man3_stamp ${PROJECT_BINARY_DIR}/CMakeFiles/distc-man3.stamp)
  add_custom_command(OUTPUT ${distc_man3_stamp}
    COMMAND ${distc_man_python} ${distc_man_src}/gen_man3.py --include ${PROJECT_SOURCE_DIR}/include --out ${DISTC_MAN_DIR}/man3
    COMMAND ${CMAKE_COMMAND} -E touch ${distc_man3_stamp}
    DEPENDS ${distc_man_headers} ${distc_man_src}/gen_man3.py ${distc_man_src}/headerdoc.py ${distc_man_src}/roff.py
    COMMENT "man3 pages from the headers' doc comments"
    VERBATIM)
  set(distc_man_outputs ${distc_man3_stamp})
  foreach(distc_man_page distc-run.1 distc-perf.1 distc-store.1 distc-trace.1 distc.7)
    string(REGEX MATCH "[0-9]$" distc_man_section ${distc_man_page})
    set(distc_man_out ${DISTC_MAN_DIR}/man${distc_man_section}/${distc_man_page})
    add_custom_command(OUTPUT ${distc_man_out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${DISTC_MAN_DIR}/man${distc_man_section}
      COMMAND ${distc_man_python} ${distc_man_src}/scd.py --scdoc ${DISTC_SCDOC} --version ${PROJECT_VERSION}
              ${distc_man_src}/${distc_man_page}.scd ${distc_man_out}
      DEPENDS ${distc_man_src}/${distc_man_page}.scd ${distc_man_src}/scd.py ${distc_man_src}/roff.py
      COMMENT "${distc_man_page} from man/${distc_man_page}.scd"
      VERBATIM)
    list(APPEND distc_man_outputs ${distc_man_out})
  endforeach()
  add_custom_target(distc-man ALL DEPENDS ${distc_man_outputs})
  install(DIRECTORY ${DISTC_MAN_DIR}/man1 ${DISTC_MAN_DIR}/man3 ${DISTC_MAN_DIR}/man7
          DESTINATION ${CMAKE_INSTALL_MANDIR})
endif()
