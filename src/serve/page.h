/*
 * page.h — the web page served at GET / (src/serve/page.html), turned into
 * this byte array at build time by cmake/embed_file.cmake, so the binary
 * needs no file at run time.
 */
#ifndef PROJMT_SERVE_PAGE_H
#define PROJMT_SERVE_PAGE_H

#include <stddef.h>

extern const unsigned char pmt_serve_page[];
extern const size_t pmt_serve_page_size;

#endif
