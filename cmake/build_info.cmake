# build_info.cmake — run at every build (cmake -P): writes OUTPUT, the C
# file behind src/core/build_info.h, with the version and the source tree's
# git commit, and rewrites it only when they change, so a build of the same
# commit recompiles nothing. A tree that is not a git checkout (a release
# tarball) or a machine without git says "unknown".
#   -DSOURCE_DIR=... -DVERSION=... -DTEMPLATE=cmake/build_info.c.in -DOUTPUT=...
set(PROJMT_COMMIT "unknown")
find_program(GIT_EXECUTABLE git)
if(GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} describe --always --dirty --abbrev=12
                  OUTPUT_VARIABLE _described OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND NOT _described STREQUAL "")
    set(PROJMT_COMMIT "${_described}")
  endif()
endif()
set(PROJMT_VERSION "${VERSION}")
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)
