#!/usr/bin/env python3
"""make_seeds.py — writes the small, made-up seed inputs of the fuzz targets
into tests/fuzz/seeds/<target>/ and the crafted loader files of
tests/fuzz-regressions/{checkpoint,model_file}/ (committed; rerun after a
file format changes). The binary seeds follow the layouts in model/checkpoint.h and
data/corpus.h; the first byte of the loader seeds is the framing of
tests/fuzz/fuzz_common.h (2 = gzip with the crc32 fixed up), so they decode
to valid files that the fuzzer then mutates."""
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
FRAME_RAW, FRAME_GZIP, FRAME_GZIP_CRC = 0, 1, 2


def write(target, name, data):
    folder = os.path.join(HERE, "seeds", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def with_crc(body):
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def checkpoint_body(flags, version=1):
    """A checkpoint of format `version` with one 2x3 tensor and no tokenizer."""
    config = b"[model]\nd_model = 4\nn_heads = 2\nmax_len = 8\n" + (b"[newer]\nunknown_key = 1\n" if version > 1 else b"")
    body = b"PMTCKPT\0" + struct.pack("<II", version, flags)
    body += struct.pack("<Q", len(config)) + config
    body += struct.pack("<Q", 0)                                  # no SentencePiece bytes
    body += struct.pack("<ii", 4, 1)                              # vocab, tensors
    body += b"tok_embedding".ljust(64, b"\0") + struct.pack("<iiQQ", 2, 3, 0, 6)
    body += struct.pack("<Q", 6) + struct.pack("<6f", 0.5, -1, 2, 0, 0.25, 3)
    if flags & 1:
        body += struct.pack("<6f", *[0.1] * 6) + struct.pack("<6f", *[0.01] * 6) + struct.pack("<qqq", 7, 0, 1)
    if flags & 2 and version == 1:
        state = struct.pack("<qqqQqdqdq", 7, 1, 2, 1, 1, 2.5, 0, 12.0, 300) + struct.pack("<ddd", 1, 2, 3)
        state += struct.pack("<qqqq", 10, 5, 2, 12) + struct.pack("<d", 0.5)
        body += struct.pack("<I", len(state)) + state
    elif flags & 2:
        fields = [("step", struct.pack("<q", 7)), ("epoch", struct.pack("<q", 1)), ("best_metric", struct.pack("<d", 2.5)),
                  ("train_pairs", struct.pack("<q", 240)), ("train_checksum", struct.pack("<Q", 0xDEADBEEF)),
                  ("from_the_future", struct.pack("<q", 3))]
        body += struct.pack("<I", len(fields))
        for name, value in fields:
            body += name.encode().ljust(32, b"\0") + value
    return with_crc(body)


def model_file_body(weights, flags=0, shortlist=False):
    """An exported model file (model/model_file.h) of weight type `weights`
    (0 fp32, 1 bf16, 2 int8) without its 8-byte magic, which the harness of
    fuzz_model_file puts in front: a 2x3 matrix, stored in that type, and a
    3-vector, always fp32; with `shortlist`, format version 2 and a
    vocabulary shortlist of 2 candidates per piece; the crc32 is fixed up by
    the framing."""
    config = b"[model]\nd_model = 4\nn_heads = 2\nmax_len = 8\n"
    body = struct.pack("<III", 2 if shortlist else 1, weights, flags)
    body += struct.pack("<Q", len(config)) + config + struct.pack("<Q", 0)
    body += struct.pack("<ii", 4, 2)
    body += b"tok_embedding".ljust(64, b"\0") + struct.pack("<iiQQI", 2, 3, 0, 6, weights)
    body += b"ln_gain".ljust(64, b"\0") + struct.pack("<iiQQI", 1, 3, 6, 3, 0)
    matrix = [0.5, -1, 2, 0, 0.25, 3]
    if weights == 0:
        body += struct.pack("<6f", *matrix)
    elif weights == 1:
        body += struct.pack("<6H", *[struct.unpack("<I", struct.pack("<f", v))[0] >> 16 for v in matrix])
    else:
        body += struct.pack("<2f", 2 / 127, 3 / 127) + struct.pack("<6b", 32, -64, 127, 0, 11, 127)
    body += struct.pack("<3f", 1, 1, 1)
    if shortlist:   # vocabulary 4, 2 per source piece, 1 frequent; -1 ends a row
        body += struct.pack("<iii", 4, 2, 1) + struct.pack("<i", 3) + struct.pack("<8i", 1, 2, 0, -1, 3, 3, -1, -1)
    return body + b"\0\0\0\0"


def tensor_table(d_model, d_ff, enc_layers, dec_layers, vocab):
    """(name, rows, cols) of every tensor of a model with standard attention
    at all three sites, in the order of build_tensor_table (model/model.c):
    the table a stored file of that config must hold."""
    C, F = d_model, d_ff

    def attention(prefix):
        return [(prefix + ".ln_w", C, 1), (prefix + ".ln_b", C, 1), (prefix + ".wqkv", 3 * C, C),
                (prefix + ".bqkv", 3 * C, 1), (prefix + ".wo", C, C), (prefix + ".bo", C, 1)]

    def ffn(prefix):
        return [(prefix + ".ln_w", C, 1), (prefix + ".ln_b", C, 1), (prefix + ".w1", F, C), (prefix + ".b1", F, 1),
                (prefix + ".w2", C, F), (prefix + ".b2", C, 1)]

    table = [("wte", vocab, C)]
    for layer in range(enc_layers):
        table += attention("enc.%d.self" % layer) + ffn("enc.%d.ffn" % layer)
    table += [("enc.ln_w", C, 1), ("enc.ln_b", C, 1)]
    for layer in range(dec_layers):
        table += attention("dec.%d.self" % layer) + attention("dec.%d.cross" % layer) + ffn("dec.%d.ffn" % layer)
    return table + [("dec.ln_w", C, 1), ("dec.ln_b", C, 1)]


# The smallest model the limits allow (model/record.h): its table is ~3 KB.
TINY = dict(d_model=2, d_ff=1, enc_layers=1, dec_layers=1, vocab=4)


def model_config(d_model=2, n_heads=1, d_ff=1, enc_layers=1, dec_layers=1, max_len=8, extra=b""):
    return (b"[model]\nd_model = %d\nn_heads = %d\nd_ff = %d\nenc_layers = %d\ndec_layers = %d\nmax_len = %d\n"
            % (d_model, n_heads, d_ff, enc_layers, dec_layers, max_len)) + extra


def stored_model(magic, config, vocab, table, with_storage):
    """The part both formats share from the config on (checkpoint.h and
    model_file.h): config, no SentencePiece bytes, the tensor table (with a
    fp32 storage word per entry in an exported file), then the weights
    (0.01 each), in the checkpoint's layout (a count first) or the exported
    file's (tensor after tensor, all fp32)."""
    body = magic + struct.pack("<Q", len(config)) + config + struct.pack("<Q", 0)
    body += struct.pack("<ii", vocab, len(table))
    offset = 0
    for name, rows, cols in table:
        body += name.encode().ljust(64, b"\0") + struct.pack("<iiQQ", rows, cols, offset, rows * cols)
        body += struct.pack("<I", 0) if with_storage else b""
        offset += rows * cols
    if not with_storage:
        body += struct.pack("<Q", offset)
    return body + struct.pack("<f", 0.01) * offset


def checkpoint_of(config, vocab, table):
    """A version 2 checkpoint (no Adam state, no training state) of that config and table."""
    return with_crc(stored_model(b"PMTCKPT\0" + struct.pack("<II", 2, 0), config, vocab, table, False))


def model_file_of(config, vocab, table, shortlist_sizes=None):
    """An fp32 exported file of that config and table, without its magic (the
    harness of fuzz_model_file puts it in front); the framing fixes the crc.
    shortlist_sizes (vocabulary, per source piece, frequent) makes it a
    version 2 file whose shortlist stops after its sizes."""
    version = 2 if shortlist_sizes else 1
    body = stored_model(struct.pack("<III", version, 0, 0), config, vocab, table, True)
    if shortlist_sizes:
        body += struct.pack("<iii", *shortlist_sizes)
    return body + b"\0\0\0\0"


def crafted_loader_files():
    """The files of issue 43 (part 5): a stored config beyond one of the
    limits of model/record.h, or one that does not describe the stored
    tensor table, each a few KB that the loaders once sized a model by.
    tests/test_loader_limits.c loads each and checks the message it names;
    fuzz_replay_checkpoint and fuzz_replay_model_file replay them. Each
    entry: file name, config, vocabulary size of the table header, table."""
    tiny = tensor_table(**TINY)
    cases = [
        ("limit-d_model", model_config(d_model=1 << 20), 4, tiny),
        ("limit-n_heads", model_config(d_model=4096, n_heads=4096), 4, tiny),
        ("limit-head_size", model_config(d_model=8192, n_heads=2), 4, tiny),
        ("limit-d_ff", model_config(d_ff=1 << 28), 4, tiny),
        ("limit-enc_layers", model_config(enc_layers=1000000), 4, tiny),
        ("limit-dec_layers", model_config(dec_layers=1 << 24), 4, tiny),
        ("limit-vocab", model_config(), 1 << 24, tiny),
        ("limit-max_len", model_config(max_len=1000000), 4, tiny),
        ("limit-batch_tokens", model_config(extra=b"[train]\nbatch_tokens = 1073741824\n"), 4, tiny),
        # 3 * d_model overflows an int (the fused Q|K|V rows): once the
        # size of wqkv, computed in int.
        ("overflow-3-d_model", model_config(d_model=715827884, n_heads=2), 4, tiny),
        # Within every limit, but the tiny table cannot be that model:
        # ~60M parameters (242 MB) from a 4 KB file.
        ("mismatch-config-table", model_config(d_model=512, n_heads=8, d_ff=2048, enc_layers=6, dec_layers=6,
                                               max_len=128), 32000, tiny),
        ("mismatch-extra-tensor", model_config(), 4, tiny + [("extra", 2, 2)]),
    ]
    folder = os.path.join(HERE, "..", "fuzz-regressions")
    for target in ("checkpoint", "model_file"):
        os.makedirs(os.path.join(folder, target), exist_ok=True)
    for name, config, vocab, table in cases:
        with open(os.path.join(folder, "checkpoint", name), "wb") as f:
            f.write(bytes([FRAME_GZIP_CRC]) + checkpoint_of(config, vocab, table))
        with open(os.path.join(folder, "model_file", name), "wb") as f:
            f.write(bytes([FRAME_GZIP_CRC]) + model_file_of(config, vocab, table))
    # The shortlist's own limit (model/shortlist.h), exported files only.
    with open(os.path.join(folder, "model_file", "limit-shortlist_per_source"), "wb") as f:
        f.write(bytes([FRAME_GZIP_CRC]) + model_file_of(model_config(), 4, tiny, shortlist_sizes=(4, 1001, 0)))


def corpus_body(pairs):
    src = [p[0] for p in pairs]
    tgt = [p[1] for p in pairs]

    def offsets(side):
        out, total = [0], 0
        for ids in side:
            total += len(ids)
            out.append(total)
        return out

    body = b"PMTTOK\0\1" + struct.pack("<IIQQ", 1, len(pairs), sum(map(len, src)), sum(map(len, tgt)))
    for side in (src, tgt):
        body += struct.pack("<%dQ" % (len(side) + 1), *offsets(side))
    for side in (src, tgt):
        flat = [i for ids in side for i in ids]
        body += struct.pack("<%di" % len(flat), *flat)
    return with_crc(body)


def main():
    for version in (1, 2):
        for flags in range(4):
            write("checkpoint", "v%d-flags%d" % (version, flags), bytes([FRAME_GZIP_CRC]) + checkpoint_body(flags, version))
    write("checkpoint", "raw-garbage", bytes([FRAME_RAW]) + b"not a checkpoint\n")
    # The seeds above stop at the architecture check (a 2x3 table no config
    # implies); these load whole, so the harness also builds their model.
    write("checkpoint", "v2-tiny-model", bytes([FRAME_GZIP_CRC]) + checkpoint_of(model_config(), 4, tensor_table(**TINY)))
    write("model_file", "fp32-tiny-model", bytes([FRAME_GZIP_CRC]) + model_file_of(model_config(), 4, tensor_table(**TINY)))
    crafted_loader_files()
    for weights, name in ((0, "fp32"), (1, "bf16"), (2, "int8")):
        write("model_file", name, bytes([FRAME_GZIP_CRC]) + model_file_body(weights))
    write("model_file", "int8-ema", bytes([FRAME_GZIP_CRC]) + model_file_body(2, flags=1))
    write("model_file", "int8-shortlist", bytes([FRAME_GZIP_CRC]) + model_file_body(2, shortlist=True))
    write("corpus", "three-pairs", bytes([FRAME_GZIP_CRC]) + corpus_body([([5, 6, 7], [8, 9]), ([], [4]), ([10], [11, 12, 13])]))
    write("corpus", "empty", bytes([FRAME_GZIP_CRC]) + corpus_body([]))
    write("corpus", "raw-gzip-text", bytes([FRAME_RAW]) + zlib.compress(b"hello"))

    ini = b"[model]\nd_model = 32\nn_heads = 4\nattention = projection\nsigma = learned\n" \
          b"[train]\nlr = 1e-3\nsave_dir = models/x\nearly_stopping_metric = bleu\n; comment\n"
    write("config", "string-ini", b"\0" + ini)
    write("config", "file-ini", b"\1" + ini + b"seed = 18446744073709551615\nmax_ratio=2.5e0\n")
    write("config", "argv", b"\2--beam\0" + b"4\0--lr=1e-3\0--decoder-self\0projection\0-i\0in.txt\0--scores")
    write("config", "stored-newer", b"\3" + ini + b"[newer]\nnot_a_key_yet = 5\n")
    write("config", "argv-bad", b"\2--beam-size\0 1e3\0--nope\0")

    write("metrics", "numbers", "El 3.5% de 1,000 niños (¡sí!) dijo \"hola\".\nEl 3.5 % de 1000 niños dijo hola .".encode())
    write("metrics", "markup", b"a &quot;b&quot; &amp; c &lt;d&gt; -- e-mail x.,y\nu.s.a. e-mail\t\xc2\xa0z")
    write("metrics", "cjk", "日本 語 テスト\u3000x\n日本語".encode())

    write("prepare", "tsv", "Go.\tVe.\tCC-BY x\nHi!  \t ¡Hola!\nno tab here\n\tempty\nGo.\tVe.\n".encode())
    write("prepare", "aligned", b"\1" + "one two\r\nthree\n\xff bad\n".encode() + b"\0" + "uno dos\ntres\nmalo\n".encode())

    write("request", "string", b'{"q": "the cat sleeps", "source": "en", "target": "es"}')
    write("request", "array-options", '{"q": ["a\\nb", "", "¿dónde?"], "source": "auto", "target": "es", '
          '"format": "text", "alternatives": "1", "beam_size": 3, "api_key": "k"}'.encode())
    write("request", "attention", b'{"q": "x", "source": "en", "target": "es", "attention": "true", "beam_size": null}')
    write("request", "bad-pair", '{"q": "x", "source": "ja", "target": "ñ"}'.encode())
    write("request", "raw-bytes", b'{"q": "caf\xc3\xa9 \xff\xfe", "source": "en", "target": "es", "format": "\xe2\x82"}')
    write("translate", "two-lines", "\0the red kite\n¿dónde están las llaves?".encode())
    write("translate", "beam-long", ("\x05" + "my neighbour bakes bread " * 6 + "\n\n  \t\nowls\xc0\xaf").encode("latin-1", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
