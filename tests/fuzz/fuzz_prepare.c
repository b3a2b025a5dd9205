/*
 * fuzz_prepare.c — the input reader and cleaner of `projmt prepare`
 * (pmt_prepare_read_pairs) on arbitrary files. First byte even: the rest is
 * a TSV corpus; odd: the rest, split at its first NUL byte, is an aligned
 * English / Spanish file pair.
 *
 * Properties: 0 or -1 with a message; every kept side is non-empty, valid
 * UTF-8 with no tab, newline, NUL or leading/trailing/double space; kept +
 * dropped = input lines.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/prepare_internal.h"
#include "fuzz_common.h"
#include "core/utf8.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

static void check_side(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || s[0] == ' ' || s[n - 1] == ' ' || strstr(s, "  ") || strpbrk(s, "\t\n\r")) abort();
    char *clean = malloc(3 * n + 1);
    if (!clean || pmt_utf8_sanitize(s, n, clean) != 0) abort();
    free(clean);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    char en_path[300], es_path[300];
    snprintf(en_path, sizeof en_path, "%s", fuzz_scratch_path(".en"));
    snprintf(es_path, sizeof es_path, "%s", fuzz_scratch_path(".es"));
    if (data[0] % 2 == 0) {
        fuzz_write_file(en_path, body, n);
        snprintf(cfg.corpus, sizeof cfg.corpus, "%s", en_path);
    } else {
        const char *nul = memchr(body, '\0', n);
        size_t en_n = nul ? (size_t)(nul - body) : n;
        fuzz_write_file(en_path, body, en_n);
        fuzz_write_file(es_path, nul ? nul + 1 : "", nul ? n - en_n - 1 : 0);
        snprintf(cfg.src_file, sizeof cfg.src_file, "%s", en_path);
        snprintf(cfg.tgt_file, sizeof cfg.tgt_file, "%s", es_path);
    }
    /* the reader's spill file goes into data_dir: the scratch file's folder */
    snprintf(cfg.data_dir, sizeof cfg.data_dir, "%.*s", (int)(strrchr(en_path, '/') - en_path), en_path);
    pmt_pair_list list;
    pmt_prepare_stats stats;
    memset(&stats, 0, sizeof stats);
    char err[512] = "";
    if (pmt_prepare_read_pairs(&cfg, NULL, &list, &stats, err, sizeof err) == 0) {
        for (long i = 0; i < list.n; i++) {
            const char *en, *es;
            if (pmt_pair_list_get(&list, i, &en, &es, err, sizeof err) != 0) abort();
            check_side(en);
            check_side(es);
        }
        const pmt_drop_counts *d = &stats.dropped;
        long dropped = d->invalid_utf8 + d->malformed + d->empty + d->duplicate + d->too_long + d->length_ratio +
                       d->markup + d->held_out;
        if (list.n != stats.kept_pairs || stats.kept_pairs + dropped != stats.input_lines) abort();
        pmt_pair_list_free(&list);
    } else if (err[0] == '\0') {
        abort();
    }
    unlink(en_path);
    unlink(es_path);
    return 0;
}
