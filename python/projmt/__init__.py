"""projmt: English→Spanish translation with standard or projection attention.

A thin ctypes binding of libprojmt's C API (include/projmt.h); nothing to
compile. The library is found, in order, at $PROJMT_LIBRARY, next to this
package in a source checkout (build/libprojmt.so.0), or by the system loader
(an installed libprojmt.so.0).

    import projmt
    translator = projmt.Translator("models/en-es.int8.pmt")
    print(translator.translate_batch(["Where is the station?"])[0].hypotheses[0])

The names follow CTranslate2's Translator where they fit: compute_type,
threads (inter_threads there), translate_batch(beam_size, num_hypotheses,
return_scores, return_attention, length_penalty, max_decoding_length).
A Translator is for one thread at a time; use one per thread.
"""

import ctypes
import os

__all__ = ["Translator", "TranslationResult", "Alignment", "ProjmtError", "ModelError", "cpu_isa", "version",
           "split_sentences"]

_STATUS_OK, _ERROR_ARGUMENT, _ERROR_MODEL, _ERROR_RUNTIME, _ERROR_MEMORY = range(5)
_API_VERSION = 1


class ProjmtError(RuntimeError):
    """A call into libprojmt failed; the message is the library's."""


class ModelError(ProjmtError, OSError):
    """The model file is missing, unreadable, damaged or not a projmt model."""


class _LoadOptions(ctypes.Structure):
    _fields_ = [("compute_type", ctypes.c_char_p), ("threads", ctypes.c_int), ("max_batch", ctypes.c_int)]


class _TranslateOptions(ctypes.Structure):
    _fields_ = [("beam_size", ctypes.c_int), ("num_hypotheses", ctypes.c_int), ("return_scores", ctypes.c_int),
                ("return_alignment", ctypes.c_int), ("length_penalty", ctypes.c_double),
                ("max_decoding_length", ctypes.c_int)]


class _Alignment(ctypes.Structure):
    _fields_ = [("n_source", ctypes.c_int), ("n_target", ctypes.c_int),
                ("source_pieces", ctypes.POINTER(ctypes.c_char_p)), ("target_pieces", ctypes.POINTER(ctypes.c_char_p)),
                ("weights", ctypes.POINTER(ctypes.c_float))]


class _Span(ctypes.Structure):
    _fields_ = [("start", ctypes.c_size_t), ("end", ctypes.c_size_t)]


class _Result(ctypes.Structure):
    _fields_ = [("n_hypotheses", ctypes.c_int), ("hypotheses", ctypes.POINTER(ctypes.c_char_p)),
                ("scores", ctypes.POINTER(ctypes.c_float)), ("alignment", ctypes.POINTER(_Alignment))]


def _candidates():
    env = os.environ.get("PROJMT_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "..", "..", "build", "libprojmt.so.0")
    yield "libprojmt.so.0"


def _load_library():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        lib.projmt_api_version.restype = ctypes.c_int
        if lib.projmt_api_version() != _API_VERSION:
            errors.append(f"{path}: API version {lib.projmt_api_version()}, this package needs {_API_VERSION}")
            continue
        return lib
    raise ImportError("projmt: cannot load libprojmt (set PROJMT_LIBRARY to its path, or build it: "
                      "cmake --build build); tried: " + "; ".join(errors))


_lib = _load_library()
_lib.projmt_version.restype = ctypes.c_char_p
_lib.projmt_last_error.restype = ctypes.c_char_p
_lib.projmt_cpu_isa.restype = ctypes.c_char_p
_lib.projmt_translator_new.restype = ctypes.c_void_p
_lib.projmt_translator_new.argtypes = [ctypes.c_char_p, ctypes.POINTER(_LoadOptions)]
_lib.projmt_translator_free.argtypes = [ctypes.c_void_p]
_lib.projmt_translator_compute.restype = ctypes.c_char_p
_lib.projmt_translator_compute.argtypes = [ctypes.c_void_p]
_lib.projmt_translate_batch.restype = ctypes.c_int
_lib.projmt_translate_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                                        ctypes.POINTER(_TranslateOptions), ctypes.POINTER(ctypes.POINTER(_Result))]
_lib.projmt_results_free.argtypes = [ctypes.POINTER(_Result), ctypes.c_size_t]
# Added to the API after its first release (additive: the API version stayed 1), so an older libprojmt lacks it.
_set_shortlist = getattr(_lib, "projmt_translator_set_shortlist", None)
if _set_shortlist is not None:
    _set_shortlist.restype = ctypes.c_int
    _set_shortlist.argtypes = [ctypes.c_void_p, ctypes.c_int]
_lib.projmt_split_sentences.restype = ctypes.c_int
_lib.projmt_split_sentences.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_Span), ctypes.c_size_t,
                                        ctypes.POINTER(ctypes.c_size_t)]


def _last_error():
    return _lib.projmt_last_error().decode("utf-8", "replace")


def version():
    """libprojmt's version, e.g. '0.1.0'."""
    return _lib.projmt_version().decode()


def cpu_isa():
    """The CPU as libprojmt sees it (oneDNN's effective ISA, e.g. 'avx512_core_vnni')."""
    return _lib.projmt_cpu_isa().decode()


def split_sentences(text):
    """The sentences of text (str), as `projmt serve` cuts a paragraph before translating
    (Moses' rule: abbreviations, initials, acronyms and decimals kept whole)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    count = ctypes.c_size_t()
    if _lib.projmt_split_sentences(data, len(data), None, 0, ctypes.byref(count)) != _STATUS_OK:
        raise ProjmtError(_last_error())
    spans = (_Span * max(count.value, 1))()
    if _lib.projmt_split_sentences(data, len(data), spans, count.value, ctypes.byref(count)) != _STATUS_OK:
        raise ProjmtError(_last_error())
    return [data[spans[i].start:spans[i].end].decode("utf-8", "replace") for i in range(count.value)]


class Alignment:
    """Cross-attention of the best hypothesis (last decoder layer, mean over heads):
    weights[t][s] is target piece t's attention to source piece s."""

    def __init__(self, source, target, weights):
        self.source, self.target, self.weights = source, target, weights

    def __repr__(self):
        return f"Alignment(source={self.source!r}, target={self.target!r})"


class TranslationResult:
    """One sentence's n-best list: hypotheses (str, best first), scores (or None), attention (or None)."""

    def __init__(self, hypotheses, scores=None, attention=None):
        self.hypotheses, self.scores, self.attention = hypotheses, scores, attention

    def __repr__(self):
        extra = f", scores={self.scores!r}" if self.scores is not None else ""
        return f"TranslationResult(hypotheses={self.hypotheses!r}{extra})"

    def __eq__(self, other):
        return isinstance(other, TranslationResult) and (self.hypotheses, self.scores) == (other.hypotheses, other.scores)


_split = split_sentences   # translate_batch's argument of that name hides the function there


def _joined(parts, return_scores):
    """One text's TranslationResult from those of its sentences (see translate_batch)."""
    parts = [r for r in parts if r.hypotheses]
    most = max((len(r.hypotheses) for r in parts), default=0)
    hyps = [" ".join(r.hypotheses[min(k, len(r.hypotheses) - 1)] for r in parts) for k in range(most)]
    scores = None
    if return_scores and most:
        scores = [sum(r.scores[min(k, len(r.scores) - 1)] for r in parts) for k in range(most)]
    return TranslationResult(hyps, scores)


class Translator:
    """A loaded model (checkpoint or exported .pmt file).

    compute_type: "auto" (the file's own where this CPU runs it fast, else fp32), "fp32", "bf16" or "int8".
    threads: threads of each call (0: all cores). max_batch: sentences decoded together (0: 64).
    shortlist: decode over the model's vocabulary shortlist, this many candidates per source piece
    (0: the whole vocabulary; see set_shortlist).
    """

    def __init__(self, model_path, compute_type="auto", threads=0, max_batch=0, shortlist=0):
        if not isinstance(model_path, (str, bytes, os.PathLike)):
            raise TypeError(f"model_path must be a path, not {type(model_path).__name__}")
        if compute_type not in ("auto", "fp32", "bf16", "int8"):
            raise ValueError(f"compute_type must be auto, fp32, bf16 or int8, not {compute_type!r}")
        path = os.fsencode(model_path)
        if not os.path.exists(path):
            raise FileNotFoundError(2, "no such model file", os.fsdecode(path))
        options = _LoadOptions(compute_type.encode(), int(threads), int(max_batch))
        self._handle = _lib.projmt_translator_new(path, ctypes.byref(options))
        if not self._handle:
            raise ModelError(_last_error())
        self.model_path = os.fsdecode(path)
        if shortlist:
            self.set_shortlist(shortlist)

    def set_shortlist(self, candidates):
        """Decodes the next batches over the model's vocabulary shortlist (CTranslate2's use_vmap): each
        batch's output vocabulary is `candidates` target pieces per source piece and the most frequent
        ones. Faster, close to but not exactly the full vocabulary's output; 0 restores it. ValueError when
        the model carries no shortlist (projmt export --shortlist DATA_DIR stores one)."""
        if not isinstance(candidates, int) or isinstance(candidates, bool):
            raise TypeError(f"candidates must be an int, not {type(candidates).__name__}")
        if not 0 <= candidates < 2**31:
            raise ValueError(f"candidates must be >= 0 (got {candidates})")
        if _set_shortlist is None:
            raise ProjmtError("this libprojmt predates vocabulary shortlists (projmt_translator_set_shortlist)")
        if _set_shortlist(self._require(), candidates) != _STATUS_OK:
            raise ValueError(_last_error())

    @property
    def compute(self):
        """What this translator multiplies with on this CPU, e.g. 'compute type int8 on avx2 (...)'."""
        return _lib.projmt_translator_compute(self._require()).decode()

    def _require(self):
        if not getattr(self, "_handle", None):
            raise ProjmtError("this Translator is closed")
        return self._handle

    def translate_batch(self, source, beam_size=4, num_hypotheses=1, return_scores=False, return_attention=False,
                        length_penalty=1.0, max_decoding_length=0, split_sentences=False):
        """Translates a list of English sentences; returns one TranslationResult per sentence, in order.

        split_sentences: cut each text into sentences first (split_sentences()), translate them all
        together and join each text's again with a space, as `projmt serve` does: for paragraphs, which
        the models (trained on one or two sentences a line) would cut short. Hypothesis k of a text joins
        the k-th of each sentence (its best when it has fewer); its score is their sum. Not with
        return_attention (a joined text has no one attention matrix)."""
        if isinstance(source, (str, bytes)):
            raise TypeError("source must be a list of sentences, not a single string")
        if split_sentences:
            if return_attention:
                raise ValueError("return_attention needs whole sentences (split_sentences=False)")
            pieces = [_split(s) for s in source]
            flat = self.translate_batch([p for text in pieces for p in text], beam_size, num_hypotheses,
                                        return_scores, False, length_penalty, max_decoding_length)
            results, at = [], 0
            for text in pieces:
                results.append(_joined(flat[at:at + len(text)], return_scores))
                at += len(text)
            return results
        lines = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in source]
        n = len(lines)
        array = (ctypes.c_char_p * max(n, 1))(*lines)
        options = _TranslateOptions(int(beam_size), int(num_hypotheses), int(bool(return_scores)),
                                    int(bool(return_attention)), float(length_penalty), int(max_decoding_length))
        out = ctypes.POINTER(_Result)()
        status = _lib.projmt_translate_batch(self._require(), array, n, ctypes.byref(options), ctypes.byref(out))
        if status != _STATUS_OK:
            message = _last_error()
            raise ValueError(message) if status == _ERROR_ARGUMENT else ProjmtError(message)
        try:
            return [self._result(out[i], return_scores) for i in range(n)]
        finally:
            _lib.projmt_results_free(out, n)

    @staticmethod
    def _result(r, return_scores):
        hyps = [r.hypotheses[h].decode("utf-8") for h in range(r.n_hypotheses)]
        scores = [r.scores[h] for h in range(r.n_hypotheses)] if return_scores and r.scores else None
        attention = None
        if r.alignment:
            a = r.alignment.contents
            src = [a.source_pieces[i].decode("utf-8") for i in range(a.n_source)]
            tgt = [a.target_pieces[i].decode("utf-8") for i in range(a.n_target)]
            w = [[a.weights[t * a.n_source + s] for s in range(a.n_source)] for t in range(a.n_target)]
            attention = Alignment(src, tgt, w)
        return TranslationResult(hyps, scores, attention)

    def close(self):
        """Frees the model now (also done when the Translator is collected)."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _lib.projmt_translator_free(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
