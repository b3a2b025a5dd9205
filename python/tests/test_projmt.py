"""pytest tests of the Python package (python/projmt) over libprojmt, on the shipped model.

Run: PYTHONPATH=python python3 -m pytest python/tests  (PROJMT_LIBRARY=path/to/libprojmt.so.0 to
choose the library; by default the build/ of this checkout, then the system's)."""
import os
import threading

import pytest

import projmt

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODEL = os.path.join(ROOT, "models", "en-es.int8.pmt")

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="no shipped model (models/en-es.int8.pmt)")


@pytest.fixture(scope="module")
def translator():
    with projmt.Translator(MODEL, compute_type="auto", threads=1) as t:
        yield t


def test_translates_like_the_program(translator):
    results = translator.translate_batch(["Where is the station?", "", "I like green tea."])
    assert [r.hypotheses for r in results] == [["¿Dónde está la estación?"], [], ["Me gusta el té verde."]]
    assert results[0].scores is None and results[0].attention is None


def test_nbest_scores_and_attention(translator):
    (r,) = translator.translate_batch(["Where is the station?"], beam_size=4, num_hypotheses=3, return_scores=True,
                                      return_attention=True)
    assert len(r.hypotheses) == 3 and r.hypotheses[0] == "¿Dónde está la estación?"
    assert r.scores == sorted(r.scores, reverse=True) and r.scores[0] < 0
    a = r.attention
    assert a.source[-1] == "</s>" and a.target[-1] == "</s>"
    assert len(a.weights) == len(a.target) and all(abs(sum(row) - 1) < 1e-4 for row in a.weights)


def test_greedy_and_length(translator):
    (r,) = translator.translate_batch(["Where is the station?"], beam_size=1, max_decoding_length=2)
    assert len(r.hypotheses) == 1 and len(r.hypotheses[0]) < len("¿Dónde está la estación?")


def test_compute_and_cpu(translator):
    assert "compute type" in translator.compute and projmt.cpu_isa() in translator.compute
    assert projmt.version() == "0.2.0"


def test_bad_path_raises_file_not_found():
    with pytest.raises(FileNotFoundError):
        projmt.Translator("/nonexistent/model.pmt")


def test_bad_model_raises_model_error(tmp_path):
    bad = tmp_path / "bad.pmt"
    bad.write_bytes(b"this is not a model\n")
    with pytest.raises(projmt.ModelError, match="bad.pmt"):
        projmt.Translator(str(bad))


def test_bad_options(translator):
    with pytest.raises(ValueError, match="compute_type"):
        projmt.Translator(MODEL, compute_type="fp16")
    with pytest.raises(ValueError, match="num_hypotheses"):
        translator.translate_batch(["hello"], beam_size=2, num_hypotheses=3)
    with pytest.raises(TypeError):
        translator.translate_batch("a single string")


def test_closed_translator():
    t = projmt.Translator(MODEL, threads=1)
    t.close()
    with pytest.raises(projmt.ProjmtError, match="closed"):
        t.translate_batch(["hello"])


def test_threads_each_with_its_own_translator(translator):
    lines = ["Where is the station?", "Tom is reading a book.", "It is raining."]
    alone = [r.hypotheses for r in translator.translate_batch(lines)]
    got = [None] * 3

    def work(i):
        with projmt.Translator(MODEL, threads=1) as t:
            got[i] = [r.hypotheses for r in t.translate_batch(lines)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert got == [alone] * 3


SUBJECTS = ["Tom", "My sister", "The old man", "Nobody", "The children", "We"]
ACTIONS = ["is reading a book", "wants to go home", "was waiting at the station", "likes green tea",
           "did not understand the question", "will call you tomorrow"]
PLACES = ["", " in the garden", " after the long meeting with his colleagues", " because it was raining"]
MANY = [f"{s} {a}{p}." for s in SUBJECTS for a in ACTIONS for p in PLACES][:96]


def _texts(results):
    return [(r.hypotheses, r.scores) for r in results]


def test_translators_on_threads_with_mixed_thread_counts(translator):
    # Issue 43's case: two Translators, threads=1 and threads=2, each on its own Python thread, many
    # rounds at once; every call gives what the same Translator gives alone.
    pair = [projmt.Translator(MODEL, threads=1), projmt.Translator(MODEL, threads=2)]
    alone = [_texts(t.translate_batch(MANY, return_scores=True)) for t in pair]
    bad = []
    start = threading.Barrier(2)

    def work(i):
        for _ in range(4):
            start.wait()
            if _texts(pair[i].translate_batch(MANY, return_scores=True)) != alone[i]:
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in pair:
        t.close()
    assert bad == []


def test_one_translator_shared_by_threads():
    with projmt.Translator(MODEL, threads=2) as t:
        want = _texts(t.translate_batch(MANY[:24], return_scores=True))
        got = [None] * 4

        def work(i):
            got[i] = _texts(t.translate_batch(MANY[:24], return_scores=True))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert got == [want] * 4


def test_close_during_a_call_waits_for_it():
    t = projmt.Translator(MODEL, threads=1)
    out = {}

    def work():
        out["results"] = t.translate_batch(MANY, beam_size=4)

    th = threading.Thread(target=work)
    th.start()
    while not t._lock.locked() and th.is_alive():   # the call is running (it holds the Translator's lock)
        pass
    t.close()   # blocks until the call has returned its results
    th.join()
    assert len(out["results"]) == len(MANY) and all(r.hypotheses for r in out["results"])
    with pytest.raises(projmt.ProjmtError, match="closed"):
        t.translate_batch(["hello"])


def test_close_during_a_call_never_frees_under_it():
    for _ in range(5):
        t = projmt.Translator(MODEL, threads=1)
        errors = []

        def work():
            try:
                r = t.translate_batch(MANY[:48], beam_size=4)
                assert len(r) == 48 and r[0].hypotheses
            except projmt.ProjmtError as e:   # close() won the lock first
                errors.append(str(e))

        th = threading.Thread(target=work)
        th.start()
        t.close()
        th.join()
        assert all("closed" in e for e in errors)


def test_cancel_stops_a_running_call():
    with projmt.Translator(MODEL, threads=1) as t:
        raised = []

        def work():
            try:
                t.translate_batch(MANY * 4, beam_size=8)
            except projmt.Cancelled as e:
                raised.append(str(e))

        th = threading.Thread(target=work)
        th.start()
        deadline = 0
        while th.is_alive() and deadline < 200 and not raised:
            t.cancel()
            th.join(0.01)
            deadline += 1
        th.join()
        assert raised and "cancelled" in raised[0]
        (r,) = t.translate_batch(["Where is the station?"])   # the next call starts afresh
        assert r.hypotheses == ["¿Dónde está la estación?"]


def test_flags_for_repaired_input(translator):
    (clean, replaced, cut) = translator.translate_batch([b"I like green tea.", b"I like gr\xffeen tea.",
                                                         ("house " * 400).encode()])
    assert not clean.input_cut and not clean.bytes_replaced and clean.source_pieces > 3
    assert replaced.bytes_replaced and not replaced.input_cut
    assert cut.input_cut and cut.source_pieces >= 400


def test_split_sentences():
    assert projmt.split_sentences("  I like cats. Mr. Smith is here.  Where is it? ") == \
        ["I like cats.", "Mr. Smith is here.", "Where is it?"]
    assert projmt.split_sentences("Pi is 3.14 today.") == ["Pi is 3.14 today."]
    assert projmt.split_sentences("") == [] and projmt.split_sentences("   ") == []
    assert projmt.split_sentences("¿Vienes? ¡Vamos!") == ["¿Vienes?", "¡Vamos!"]


def test_translate_batch_split_sentences(translator):
    alone = translator.translate_batch(["I like cats.", "Where is the station?"], num_hypotheses=2,
                                       return_scores=True)
    (joined, empty, whole) = translator.translate_batch(["I like cats. Where is the station?", "", "Hello."],
                                                        num_hypotheses=2, return_scores=True, split_sentences=True)
    assert joined.hypotheses == [alone[0].hypotheses[k] + " " + alone[1].hypotheses[k] for k in range(2)]
    assert joined.scores == pytest.approx([alone[0].scores[k] + alone[1].scores[k] for k in range(2)])
    assert empty.hypotheses == [] and empty.scores is None
    # Scores move in the last digits with the batch's make-up (a product's rows are summed in other orders).
    (one,) = translator.translate_batch(["Hello."], num_hypotheses=2, return_scores=True)
    assert whole.hypotheses == one.hypotheses and whole.scores == pytest.approx(one.scores, abs=1e-5)
    with pytest.raises(ValueError, match="return_attention"):
        translator.translate_batch(["A. B."], return_attention=True, split_sentences=True)



def test_shortlist_of_the_shipped_model(translator):
    # The shipped file carries a vocabulary shortlist (scripts/train_release.sh exports one); a model
    # without one refuses K > 0 with the library's ValueError (tests/test_api.c, tests/test_shortlist_cli.sh).
    translator.set_shortlist(50)
    (r,) = translator.translate_batch(["Where is the station?"])
    assert r.hypotheses == ["¿Dónde está la estación?"]
    with pytest.raises(ValueError, match="must be >= 0"):
        translator.set_shortlist(-1)
    with pytest.raises(TypeError):
        translator.set_shortlist("50")
    translator.set_shortlist(0)
    (r,) = translator.translate_batch(["Where is the station?"])
    assert r.hypotheses == ["¿Dónde está la estación?"]
