/*
 * json.h — the JSON string writer behind projmt's hand-written JSON outputs
 * (prepare's manifest.json, `projmt eval --json`, attention.json).
 *
 * Why by hand: each output is a fixed, small shape written with fprintf;
 * only strings (paths, pieces, sentences) need care, and that care lives here.
 */
#ifndef PROJMT_JSON_H
#define PROJMT_JSON_H

#include <stdio.h>

/* Writes s as a JSON string literal: quotes, backslashes and control
 * characters escaped, other bytes (UTF-8) as they are. */
void pmt_json_string(FILE *f, const char *s);

#endif
