/*
 * test_json.c — the JSON string writer every JSON output uses (core/json.h):
 * quotes, backslashes and control bytes are escaped, UTF-8 passes through.
 */
#include <string.h>

#include "core/json.h"
#include "testutil.h"

static void check_json(const char *in, const char *want) {
    char buf[256] = "";
    FILE *f = tmpfile();
    if (!f) { CHECK(f != NULL); return; }
    pmt_json_string(f, in);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    CHECK_MSG(strcmp(buf, want) == 0, "json(%s) = %s, want %s", in, buf, want);
}

int main(void) {
    check_json("plain", "\"plain\"");
    check_json("", "\"\"");
    check_json("say \"hi\"", "\"say \\\"hi\\\"\"");
    check_json("C:\\dir", "\"C:\\\\dir\"");
    check_json("tab\there\nnew\x01", "\"tab\\u0009here\\u000anew\\u0001\"");
    check_json("año ▁piece", "\"año ▁piece\"");
    return test_finish();
}
