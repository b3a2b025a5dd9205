"""projmt: English→Spanish translation with standard or projection attention.

A thin ctypes binding of libprojmt's C API (include/projmt.h); nothing to
compile. The library is found, in order, at $PROJMT_LIBRARY, next to this
package in a source checkout (build/libprojmt.so.0), or by the system loader
(an installed libprojmt.so.0); it must be 0.2.0 or later (every function
bound here is checked when the package is imported).

    import projmt
    translator = projmt.Translator("models/en-es.int8.pmt")
    print(translator.translate_batch(["Where is the station?"])[0].hypotheses[0])

The names follow CTranslate2's Translator where they fit: compute_type,
threads (inter_threads there), translate_batch(beam_size, num_hypotheses,
return_scores, return_attention, length_penalty, max_decoding_length).

Threads: Translators are independent, so several translate at once on
several threads. One Translator may also be shared by threads: its calls
are serialised by its own lock, close() waits for a running call to end,
and cancel() (from any thread) stops the running call, which raises
Cancelled.
"""

import ctypes
import math
import os
import threading

__all__ = ["Translator", "TranslationResult", "Alignment", "ProjmtError", "ModelError", "Cancelled", "cpu_isa",
           "version", "split_sentences"]

_STATUS_OK, _ERROR_ARGUMENT, _ERROR_MODEL, _ERROR_RUNTIME, _ERROR_MEMORY, _ERROR_CANCELLED = range(6)
_API_VERSION = 1
_OLDEST_LIBRARY = 2000   # projmt_version_number() of 0.2.0, the first with projmt_translate
_RESULT_INPUT_CUT, _RESULT_BYTES_REPLACED = 1, 2


class ProjmtError(RuntimeError):
    """A call into libprojmt failed; the message is the library's."""


class ModelError(ProjmtError, OSError):
    """The model file is missing, unreadable, damaged or not a projmt model."""


class Cancelled(ProjmtError):
    """Translator.cancel() stopped the call."""


_ABORT_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class _TranslatorOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("compute_type", ctypes.c_char_p), ("threads", ctypes.c_int),
                ("max_batch", ctypes.c_int)]


class _TranslationOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("beam_size", ctypes.c_int), ("num_hypotheses", ctypes.c_int),
                ("return_scores", ctypes.c_int), ("return_alignment", ctypes.c_int),
                ("length_penalty", ctypes.c_double), ("max_decoding_length", ctypes.c_int),
                ("abort_callback", _ABORT_CALLBACK), ("abort_callback_user_data", ctypes.c_void_p)]


class _Alignment(ctypes.Structure):
    _fields_ = [("n_source", ctypes.c_int), ("n_target", ctypes.c_int),
                ("source_pieces", ctypes.POINTER(ctypes.c_char_p)), ("target_pieces", ctypes.POINTER(ctypes.c_char_p)),
                ("weights", ctypes.POINTER(ctypes.c_float))]


class _Span(ctypes.Structure):
    _fields_ = [("start", ctypes.c_size_t), ("end", ctypes.c_size_t)]


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
_missing = []


def _bind(name, restype, argtypes):
    """Sets up one C function; a library without it (older than this package) is reported by name."""
    fn = getattr(_lib, name, None)
    if fn is None:
        _missing.append(name)
        return None
    fn.restype, fn.argtypes = restype, argtypes
    return fn


_P = ctypes.c_void_p
_version = _bind("projmt_version", ctypes.c_char_p, [])
_version_number = _bind("projmt_version_number", ctypes.c_int, [])
_last_error_fn = _bind("projmt_last_error", ctypes.c_char_p, [])
_cpu_isa = _bind("projmt_cpu_isa", ctypes.c_char_p, [])
_translator_options_init = _bind("projmt_translator_options_init", None,
                                 [ctypes.POINTER(_TranslatorOptions), ctypes.c_size_t])
_translator_open = _bind("projmt_translator_open", ctypes.c_int,
                         [ctypes.c_char_p, ctypes.POINTER(_TranslatorOptions), ctypes.POINTER(_P)])
_translator_free = _bind("projmt_translator_free", None, [_P])
_translator_compute = _bind("projmt_translator_compute", ctypes.c_char_p, [_P])
_set_shortlist = _bind("projmt_translator_set_shortlist", ctypes.c_int, [_P, ctypes.c_int])
_translation_options_init = _bind("projmt_translation_options_init", None,
                                  [ctypes.POINTER(_TranslationOptions), ctypes.c_size_t])
_translate = _bind("projmt_translate", ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                                                      ctypes.POINTER(_TranslationOptions), ctypes.POINTER(_P)])
_results_count = _bind("projmt_results_count", ctypes.c_size_t, [_P])
_results_num_hypotheses = _bind("projmt_results_num_hypotheses", ctypes.c_int, [_P, ctypes.c_size_t])
_results_hypothesis = _bind("projmt_results_hypothesis", ctypes.c_char_p, [_P, ctypes.c_size_t, ctypes.c_int])
_results_score = _bind("projmt_results_score", ctypes.c_float, [_P, ctypes.c_size_t, ctypes.c_int])
_results_alignment = _bind("projmt_results_alignment", ctypes.POINTER(_Alignment), [_P, ctypes.c_size_t])
_results_flags = _bind("projmt_results_flags", ctypes.c_uint, [_P, ctypes.c_size_t])
_results_source_pieces = _bind("projmt_results_source_pieces", ctypes.c_int, [_P, ctypes.c_size_t])
_results_destroy = _bind("projmt_results_destroy", None, [_P])
_split_sentences = _bind("projmt_split_sentences", ctypes.c_int,
                         [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_Span), ctypes.c_size_t,
                          ctypes.POINTER(ctypes.c_size_t)])
if _missing:
    _have = _version().decode() if _version else "unknown"
    raise ImportError(f"projmt: libprojmt {_have} ({_lib._name}) lacks {', '.join(_missing)}: this package needs "
                      "libprojmt 0.2.0 or later (rebuild it, or set PROJMT_LIBRARY to a newer one)")
if _version_number() < _OLDEST_LIBRARY:
    raise ImportError(f"projmt: libprojmt {_version().decode()} is older than 0.2.0, which this package needs")


def _last_error():
    return _last_error_fn().decode("utf-8", "replace")


def version():
    """libprojmt's version, e.g. '0.2.0'."""
    return _version().decode()


def cpu_isa():
    """The CPU as libprojmt sees it (oneDNN's effective ISA, e.g. 'avx512_core_vnni')."""
    return _cpu_isa().decode()


def split_sentences(text):
    """The sentences of text (str), as `projmt serve` cuts a paragraph before translating
    (Moses' rule: abbreviations, initials, acronyms and decimals kept whole)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    count = ctypes.c_size_t()
    if _split_sentences(data, len(data), None, 0, ctypes.byref(count)) != _STATUS_OK:
        raise ProjmtError(_last_error())
    spans = (_Span * max(count.value, 1))()
    if _split_sentences(data, len(data), spans, count.value, ctypes.byref(count)) != _STATUS_OK:
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
    """One sentence's n-best list: hypotheses (str, best first), scores (or None), attention (or None).

    input_cut: the sentence had more pieces than the model takes (source_pieces of them); only the first
    were translated. bytes_replaced: invalid UTF-8 bytes were read as U+FFFD."""

    def __init__(self, hypotheses, scores=None, attention=None, input_cut=False, bytes_replaced=False,
                 source_pieces=0):
        self.hypotheses, self.scores, self.attention = hypotheses, scores, attention
        self.input_cut, self.bytes_replaced, self.source_pieces = input_cut, bytes_replaced, source_pieces

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
    return TranslationResult(hyps, scores, None, any(r.input_cut for r in parts),
                             any(r.bytes_replaced for r in parts), sum(r.source_pieces for r in parts))


class Translator:
    """A loaded model (checkpoint or exported .pmt file).

    compute_type: "auto" (the file's own where this CPU runs it fast, else fp32), "fp32", "bf16" or "int8".
    threads: threads of each call (0: all cores). max_batch: sentences decoded together (0: 64).
    shortlist: decode over the model's vocabulary shortlist, this many candidates per source piece
    (0: the whole vocabulary; see set_shortlist).

    Safe to share between threads: calls run one at a time (a lock of the Translator's own), close()
    waits for the running call, cancel() stops it from any thread.
    """

    def __init__(self, model_path, compute_type="auto", threads=0, max_batch=0, shortlist=0):
        self._handle = None
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        if not isinstance(model_path, (str, bytes, os.PathLike)):
            raise TypeError(f"model_path must be a path, not {type(model_path).__name__}")
        if compute_type not in ("auto", "fp32", "bf16", "int8"):
            raise ValueError(f"compute_type must be auto, fp32, bf16 or int8, not {compute_type!r}")
        path = os.fsencode(model_path)
        if not os.path.exists(path):
            raise FileNotFoundError(2, "no such model file", os.fsdecode(path))
        options = _TranslatorOptions()
        _translator_options_init(ctypes.byref(options), ctypes.sizeof(options))
        options.compute_type, options.threads, options.max_batch = compute_type.encode(), int(threads), int(max_batch)
        handle = ctypes.c_void_p()
        status = _translator_open(path, ctypes.byref(options), ctypes.byref(handle))
        if status != _STATUS_OK:
            raise _error(status)
        self._handle = handle.value
        # Kept on the object: C holds the pointer while a call runs.
        self._abort = _ABORT_CALLBACK(lambda _user: 1 if self._cancel.is_set() else 0)
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
        with self._lock:
            if _set_shortlist(self._require(), candidates) != _STATUS_OK:
                raise ValueError(_last_error())

    @property
    def compute(self):
        """What this translator multiplies with on this CPU, e.g. 'compute type int8 on avx2 (...)'."""
        with self._lock:
            return _translator_compute(self._require()).decode()

    def _require(self):
        if not self._handle:
            raise ProjmtError("this Translator is closed")
        return self._handle

    def cancel(self):
        """Stops the call running on this Translator (from any thread; it raises Cancelled). A no-op when
        none is running: the next call starts afresh."""
        self._cancel.set()

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
        options = _TranslationOptions()
        _translation_options_init(ctypes.byref(options), ctypes.sizeof(options))
        options.beam_size, options.num_hypotheses = int(beam_size), int(num_hypotheses)
        options.return_scores = int(bool(return_scores))
        options.return_alignment = int(bool(return_attention))
        options.length_penalty, options.max_decoding_length = float(length_penalty), int(max_decoding_length)
        options.abort_callback = self._abort
        out = ctypes.c_void_p()
        with self._lock:
            handle = self._require()
            self._cancel.clear()
            status = _translate(handle, array, n, ctypes.byref(options), ctypes.byref(out))
            if status != _STATUS_OK:
                raise _error(status)
            try:
                return [self._result(out, i, return_scores) for i in range(n)]
            finally:
                _results_destroy(out)

    @staticmethod
    def _result(res, i, return_scores):
        count = _results_num_hypotheses(res, i)
        hyps = [_results_hypothesis(res, i, k).decode("utf-8") for k in range(count)]
        scores = None
        if return_scores and count:
            scores = [_results_score(res, i, k) for k in range(count)]
            scores = None if any(math.isnan(x) for x in scores) else scores
        attention = None
        a = _results_alignment(res, i)
        if a:
            a = a.contents
            src = [a.source_pieces[j].decode("utf-8") for j in range(a.n_source)]
            tgt = [a.target_pieces[j].decode("utf-8") for j in range(a.n_target)]
            w = [[a.weights[t * a.n_source + s] for s in range(a.n_source)] for t in range(a.n_target)]
            attention = Alignment(src, tgt, w)
        flags = _results_flags(res, i)
        return TranslationResult(hyps, scores, attention, bool(flags & _RESULT_INPUT_CUT),
                                 bool(flags & _RESULT_BYTES_REPLACED), _results_source_pieces(res, i))

    def close(self):
        """Frees the model now (also done when the Translator is collected); waits for a running call."""
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            handle, self._handle = self._handle, None
            if handle:
                _translator_free(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def _error(status):
    """The exception for a failed call's status (the message is the library's)."""
    message = _last_error()
    if status == _ERROR_ARGUMENT:
        return ValueError(message)
    if status == _ERROR_MEMORY:
        return MemoryError(message)
    if status == _ERROR_CANCELLED:
        return Cancelled(message)
    if status == _ERROR_MODEL:
        return ModelError(message)
    return ProjmtError(message)
