/*
 * build_info.h — which projmt this is: the version and the git commit of
 * the source tree it was built from (`git describe --always --dirty`,
 * "unknown" outside a git checkout). Written into a C file at every build
 * (cmake/build_info.cmake), not at configure time, so a binary names its
 * own commit however long ago CMake ran: `projmt --version` prints it and
 * train.log records it, and a report names the binary that trained a run.
 */
#ifndef PROJMT_BUILD_INFO_H
#define PROJMT_BUILD_INFO_H

extern const char pmt_build_version[]; /* "0.1.0" */
extern const char pmt_build_commit[];  /* "4b50f49c1d2e", "4b50f49c1d2e-dirty" or "unknown" */

#endif
