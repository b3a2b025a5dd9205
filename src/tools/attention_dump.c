/*
 * attention_dump.c — one teacher-forced pass over a sentence pair, then its
 * attention weights as JSON (format in attention_dump.h).
 */
#include "tools/attention_dump.h"

#include <stdlib.h>
#include <string.h>

#include "core/json.h"

static const char *const site_names[PMT_SITES] = {"encoder_self", "decoder_self", "decoder_cross"};

/* Encodes text into a malloc'd array of at most max_ids ids; -1 with err. */
static int encode_side(const pmt_spm *spm, const char *what, const char *text, int max_ids, int32_t **ids,
                       int *len, char *err, size_t errlen) {
    *ids = malloc((size_t)(max_ids > 0 ? max_ids : 1) * sizeof **ids);
    if (!*ids) {
        snprintf(err, errlen, "out of memory encoding the %s", what);
        return -1;
    }
    int n = pmt_spm_encode(spm, text, *ids, max_ids);
    if (n <= 0) {
        snprintf(err, errlen, "the %s '%s' has no pieces to attend over", what, text);
        free(*ids);
        *ids = NULL;
        return -1;
    }
    /* Longer sentences keep their first max_ids pieces, as the batcher does. */
    *len = n < max_ids ? n : max_ids;
    return 0;
}

int pmt_attention_pair_init(pmt_attention_pair *p, const pmt_spm *spm, const char *source, const char *target,
                            int max_len, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    p->source = source;
    p->target = target;
    if (encode_side(spm, "source", source, max_len - 1, &p->src, &p->src_len, err, errlen) != 0) return -1;
    if (encode_side(spm, "target", target, max_len - 1, &p->tgt, &p->tgt_len, err, errlen) != 0) {
        pmt_attention_pair_free(p);
        return -1;
    }
    return 0;
}

void pmt_attention_pair_free(pmt_attention_pair *p) {
    free(p->src);
    free(p->tgt);
    memset(p, 0, sizeof *p);
}

/* The batch of one pair: src </s>, <s> tgt, tgt </s>, over caller buffers. */
static void fill_batch(const pmt_attention_pair *p, int32_t *buf, pmt_batch *b) {
    b->B = 1;
    b->S = p->src_len + 1;
    b->T = p->tgt_len + 1;
    b->src = buf;
    b->tgt_in = b->src + b->S;
    b->tgt_out = b->tgt_in + b->T;
    b->src_len = b->tgt_out + b->T;
    b->tgt_len = b->src_len + 1;
    memcpy(b->src, p->src, (size_t)p->src_len * sizeof *b->src);
    b->src[p->src_len] = PMT_EOS_ID;
    b->tgt_in[0] = PMT_BOS_ID;
    memcpy(b->tgt_in + 1, p->tgt, (size_t)p->tgt_len * sizeof *b->tgt_in);
    memcpy(b->tgt_out, p->tgt, (size_t)p->tgt_len * sizeof *b->tgt_out);
    b->tgt_out[p->tgt_len] = PMT_EOS_ID;
    b->src_len[0] = b->S;
    b->tgt_len[0] = b->T;
}

static void write_pieces(FILE *out, const char *key, const pmt_spm *spm, const int32_t *ids, int n) {
    fprintf(out, ",\n \"%s\": [", key);
    for (int i = 0; i < n; i++) {
        const char *piece = pmt_spm_id_to_piece(spm, ids[i]);
        if (i) fputs(", ", out);
        pmt_json_string(out, piece ? piece : "?");
    }
    fputc(']', out);
}

/* One site of one layer: its [NH, Tq, Tk] weights as nested arrays. */
static void write_site(FILE *out, const pmt_model *m, const pmt_batch *b, int site, int layer, int first) {
    int Tq = site == PMT_SITE_ENC_SELF ? b->S : b->T;
    int Tk = site == PMT_SITE_DEC_SELF ? b->T : b->S;
    const char *queries = site == PMT_SITE_ENC_SELF ? "src" : "tgt_out";
    const char *keys = site == PMT_SITE_ENC_SELF ? "src" : site == PMT_SITE_DEC_SELF ? "tgt_in" : "src";
    const float *w = pmt_model_attention_weights(m, site, layer);
    fprintf(out, "%s\n  {\"site\": \"%s\", \"layer\": %d, \"kind\": \"%s\", \"queries\": \"%s\", \"keys\": \"%s\", "
            "\"weights\": [", first ? "" : ",", site_names[site], layer,
            pmt_attention_kind_name(m->cfg.site_kind[site]), queries, keys);
    for (int h = 0; h < m->NH; h++) {
        fputs(h ? ",\n    [" : "\n    [", out);
        for (int q = 0; q < Tq; q++) {
            fputs(q ? ", [" : "[", out);
            for (int k = 0; k < Tk; k++) fprintf(out, "%s%.5g", k ? ", " : "", w[((size_t)h * Tq + q) * Tk + k]);
            fputc(']', out);
        }
        fputc(']', out);
    }
    fputs("]}", out);
}

static void write_json(FILE *out, const pmt_model *m, const pmt_spm *spm, const pmt_attention_pair *p,
                       const pmt_batch *b) {
    fputs("{\"source\": ", out);
    pmt_json_string(out, p->source);
    fputs(", \"target\": ", out);
    pmt_json_string(out, p->target);
    fprintf(out, ", \"n_heads\": %d, \"sigma\": \"%s\", \"kernel\": \"%s\", \"metric\": \"%s\",\n \"attention\": {",
            m->NH, m->cfg.sigma_learned ? "learned" : "fixed", pmt_kernel_name(m->cfg.proj_kernel),
            pmt_metric_name(m->cfg.proj_metric));
    for (int s = 0; s < PMT_SITES; s++)
        fprintf(out, "%s\"%s\": \"%s\"", s ? ", " : "", site_names[s], pmt_attention_kind_name(m->cfg.site_kind[s]));
    fputc('}', out);
    write_pieces(out, "src_pieces", spm, b->src, b->S);
    write_pieces(out, "tgt_in_pieces", spm, b->tgt_in, b->T);
    write_pieces(out, "tgt_out_pieces", spm, b->tgt_out, b->T);
    fputs(",\n \"sites\": [", out);
    int first = 1;
    for (int l = 0; l < m->cfg.enc_layers; l++, first = 0) write_site(out, m, b, PMT_SITE_ENC_SELF, l, first);
    for (int l = 0; l < m->cfg.dec_layers; l++) {
        write_site(out, m, b, PMT_SITE_DEC_SELF, l, first);
        write_site(out, m, b, PMT_SITE_DEC_CROSS, l, 0);
        first = 0;
    }
    fputs("]}\n", out);
}

int pmt_attention_dump(pmt_model *m, const pmt_spm *spm, const pmt_attention_pair *p, FILE *out,
                       char *err, size_t errlen) {
    int S = p->src_len + 1, T = p->tgt_len + 1;
    if (S > m->max_len || T > m->max_len || S > m->max_rows || T > m->max_rows) {
        snprintf(err, errlen, "a pair of %d source and %d target tokens does not fit the model (max_len %d)", S, T,
                 m->max_len);
        return -1;
    }
    /* src + tgt_in + tgt_out + the two lengths */
    int32_t *buf = malloc((size_t)(S + 2 * T + 2) * sizeof *buf);
    if (!buf) {
        snprintf(err, errlen, "out of memory for the attention batch");
        return -1;
    }
    pmt_batch b;
    fill_batch(p, buf, &b);
    pmt_stats stats;
    pmt_model_forward(m, &b, 0, 0, &stats);
    write_json(out, m, spm, p, &b);
    free(buf);
    if (ferror(out)) {
        snprintf(err, errlen, "writing the attention weights failed");
        return -1;
    }
    return 0;
}
