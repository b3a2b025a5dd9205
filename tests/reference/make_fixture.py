#!/usr/bin/python3
"""make_fixture.py — an independent PyTorch implementation of projmt's model,
used to produce reference fixtures for tests/test_reference.c.

It rebuilds the tiny encoder-decoder in float64 with torch's own autograd
(no code shared with the C implementation), from weights it draws itself, runs
one padded batch and writes: the config, the weights in projmt's tensor-table
order, the batch, the output probabilities, the loss and every gradient.

    /usr/bin/python3 tests/reference/make_fixture.py tests/fixtures

Needs Debian's python3-torch (scripts/setup.sh --torch installs it).
"""
import math
import sys

import torch

torch.set_default_dtype(torch.float64)

V, C, NH, F, LAYERS = 29, 8, 2, 12, 2
HS = C // NH
EPS_LS = 0.1
PAD, BOS, EOS = 0, 2, 3
B, S, T = 3, 6, 5
SRC_LEN = [6, 4, 1]
TGT_LEN = [5, 2, 4]


def make_batch(gen):
    src = torch.zeros(B, S, dtype=torch.long)
    tin = torch.zeros(B, T, dtype=torch.long)
    tout = torch.zeros(B, T, dtype=torch.long)
    for b in range(B):
        src[b, :SRC_LEN[b]] = torch.randint(4, V, (SRC_LEN[b],), generator=gen)
        y = torch.randint(4, V, (TGT_LEN[b] - 1,), generator=gen)
        tout[b, :TGT_LEN[b] - 1] = y
        tout[b, TGT_LEN[b] - 1] = EOS
        tin[b, 0] = BOS
        tin[b, 1:TGT_LEN[b]] = y
    return src, tin, tout


def tensor_table(kinds, learned_sigma):
    """(name, shape) in projmt's order (src/model/model.c build_tensor_table)
    as it was before the fused Q/K/V projection: separate wq, bq, wk, bk, wv,
    bv per standard site. test_reference.c converts them with the loader's
    converter (pmt_model_fuse_legacy_qkv), which the fixtures thereby test."""
    table = [("wte", (V, C))]

    def attn(prefix, kind):
        t = [(prefix + ".ln_w", (C,)), (prefix + ".ln_b", (C,))]
        if kind == "standard":
            for w in "qkv":
                t += [(f"{prefix}.w{w}", (C, C)), (f"{prefix}.b{w}", (C,))]
        t += [(prefix + ".wo", (C, C)), (prefix + ".bo", (C,))]
        if kind == "projection" and learned_sigma:
            t += [(prefix + ".log_sigma", (NH,))]
        return t

    def ffn(prefix):
        return [(prefix + ".ln_w", (C,)), (prefix + ".ln_b", (C,)), (prefix + ".w1", (F, C)),
                (prefix + ".b1", (F,)), (prefix + ".w2", (C, F)), (prefix + ".b2", (C,))]

    for l in range(LAYERS):
        table += attn(f"enc.{l}.self", kinds[0]) + ffn(f"enc.{l}.ffn")
    table += [("enc.ln_w", (C,)), ("enc.ln_b", (C,))]
    for l in range(LAYERS):
        table += attn(f"dec.{l}.self", kinds[1]) + attn(f"dec.{l}.cross", kinds[2]) + ffn(f"dec.{l}.ffn")
    table += [("dec.ln_w", (C,)), ("dec.ln_b", (C,))]
    return table


def make_weights(table, gen):
    w = {}
    for name, shape in table:
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "ln_w":
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif leaf == "log_sigma":
            t = 0.25 * math.log(HS) + 0.1 * torch.randn(shape, generator=gen)
        elif len(shape) == 1:
            t = 0.1 * torch.randn(shape, generator=gen)
        else:
            t = torch.randn(shape, generator=gen) / math.sqrt(shape[1])
        w[name] = t.requires_grad_(True)
    return w


def positions(n):
    pos = torch.zeros(n, C)
    for t in range(n):
        for i in range(0, C, 2):
            angle = t / (10000.0 ** (i / C))
            pos[t, i] = math.sin(angle)
            pos[t, i + 1] = math.cos(angle)
    return pos


def layernorm(x, w, b):
    return torch.nn.functional.layer_norm(x, (C,), w, b, eps=1e-5)


def key_mask(klen, tq, tk, causal):
    """True where key j is visible to query t."""
    j = torch.arange(tk).view(1, 1, tk)
    t = torch.arange(tq).view(1, tq, 1)
    visible = j < torch.tensor(klen).view(-1, 1, 1)
    if causal:
        visible = visible & (j <= t)
    return visible.unsqueeze(1)  # [B, 1, Tq, Tk]


def heads(x):
    b, n, _ = x.shape
    return x.view(b, n, NH, HS).transpose(1, 2)  # [B, NH, n, HS]


def attention(w, prefix, kind, a, mem, klen, causal):
    if kind == "standard":
        q = heads(a @ w[prefix + ".wq"].T + w[prefix + ".bq"])
        k = heads(mem @ w[prefix + ".wk"].T + w[prefix + ".bk"])
        v = heads(mem @ w[prefix + ".wv"].T + w[prefix + ".bv"])
        logits = q @ k.transpose(-1, -2) / math.sqrt(HS)
    else:
        q, k = heads(a), heads(mem)
        v = k
        log_sigma = w.get(prefix + ".log_sigma", torch.full((NH,), 0.25 * math.log(HS)))
        sigma2 = torch.exp(2 * log_sigma).view(1, NH, 1, 1)
        dist = (q * q).sum(-1, keepdim=True) + (k * k).sum(-1).unsqueeze(-2) - 2 * q @ k.transpose(-1, -2)
        logits = -dist / (2 * sigma2)
    logits = logits.masked_fill(~key_mask(klen, a.shape[1], mem.shape[1], causal), float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    out = (probs @ v).transpose(1, 2).reshape(a.shape[0], a.shape[1], C)
    return out @ w[prefix + ".wo"].T + w[prefix + ".bo"]


def attn_block(w, prefix, kind, x, mem, klen, causal):
    a = layernorm(x, w[prefix + ".ln_w"], w[prefix + ".ln_b"])
    return x + attention(w, prefix, kind, a, a if mem is None else mem, klen, causal)


def ffn_block(w, prefix, x):
    a = layernorm(x, w[prefix + ".ln_w"], w[prefix + ".ln_b"])
    return x + torch.relu(a @ w[prefix + ".w1"].T + w[prefix + ".b1"]) @ w[prefix + ".w2"].T + w[prefix + ".b2"]


def forward(w, kinds, src, tin, tout):
    pos = positions(max(S, T))
    x = w["wte"][src] * math.sqrt(C) + pos[:S]
    for l in range(LAYERS):
        x = attn_block(w, f"enc.{l}.self", kinds[0], x, None, SRC_LEN, False)
        x = ffn_block(w, f"enc.{l}.ffn", x)
    enc = layernorm(x, w["enc.ln_w"], w["enc.ln_b"])
    y = w["wte"][tin] * math.sqrt(C) + pos[:T]
    for l in range(LAYERS):
        y = attn_block(w, f"dec.{l}.self", kinds[1], y, None, TGT_LEN, True)
        y = attn_block(w, f"dec.{l}.cross", kinds[2], y, enc, SRC_LEN, False)
        y = ffn_block(w, f"dec.{l}.ffn", y)
    dec = layernorm(y, w["dec.ln_w"], w["dec.ln_b"])
    logits = dec @ w["wte"].T  # [B, T, V]
    logp = torch.log_softmax(logits, dim=-1)
    target = torch.full((V,), EPS_LS / V).expand(B, T, V).clone()
    target.scatter_add_(-1, tout.unsqueeze(-1), torch.full((B, T, 1), 1.0 - EPS_LS))
    row_loss = -(target * logp).sum(-1)
    keep = tout != PAD
    loss = row_loss[keep].sum() / keep.sum()
    return torch.exp(logp), loss


def write_fixture(path, kinds, learned_sigma, seed):
    gen = torch.Generator().manual_seed(seed)
    src, tin, tout = make_batch(gen)
    table = tensor_table(kinds, learned_sigma)
    w = make_weights(table, gen)
    probs, loss = forward(w, kinds, src, tin, tout)
    loss.backward()

    def row(name, values):
        vals = [float(v) for v in values]
        return f"{name} {len(vals)}\n" + " ".join(f"{v:.17g}" for v in vals) + "\n"

    with open(path, "w") as f:
        f.write("# projmt reference fixture, generated by tests/reference/make_fixture.py (PyTorch "
                f"{torch.__version__}, float64)\n")
        f.write(f"config V={V} C={C} NH={NH} F={F} layers={LAYERS} label_smoothing={EPS_LS} "
                f"encoder_self={kinds[0]} decoder_self={kinds[1]} decoder_cross={kinds[2]} "
                f"sigma={'learned' if learned_sigma else 'fixed'}\n")
        f.write(row("shape", [B, S, T]))
        f.write(row("src_len", SRC_LEN))
        f.write(row("tgt_len", TGT_LEN))
        f.write(row("src", src.flatten().tolist()))
        f.write(row("tgt_in", tin.flatten().tolist()))
        f.write(row("tgt_out", tout.flatten().tolist()))
        f.write(row("params", torch.cat([w[n].detach().flatten() for n, _ in table]).tolist()))
        f.write(row("probs", probs.detach().flatten().tolist()))
        f.write(row("loss", [loss.item()]))
        f.write(row("grads", torch.cat([w[n].grad.flatten() for n, _ in table]).tolist()))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    cases = [
        ("standard", ["standard"] * 3, False, 1),
        ("projection", ["projection"] * 3, False, 2),
        ("projection_learned", ["projection"] * 3, True, 3),
        ("mixed", ["projection", "standard", "projection"], False, 4),
    ]
    for name, kinds, learned, seed in cases:
        path = f"{out}/reference_{name}.txt"
        write_fixture(path, kinds, learned, seed)
        print("wrote", path)


if __name__ == "__main__":
    main()
