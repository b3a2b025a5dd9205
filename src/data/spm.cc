/*
 * spm.cc — the C API of spm.h over the SentencePiece C++ library.
 *
 * Why this shape: the rest of projmt is C11, so this file is the one place
 * where C++ exceptions and sentencepiece::util::Status exist. Every entry
 * point catches everything and turns it into a NULL/-1 result plus a message
 * (returned through err or kept on the handle for pmt_spm_last_error).
 *
 * Training reads its input through our own SentenceIterator rather than
 * SentencePiece's `--input=a,b` list, so file names containing commas work
 * and a missing/unreadable input file gets a message naming it. The trained
 * model comes back as bytes and is written by us, atomically (core/fileio.h),
 * as <prefix>.model and <prefix>.vocab.
 *
 * Ownership: see spm.h. The handle keeps the serialized model bytes so
 * pmt_spm_serialized can hand out a pointer without copying.
 */
#include "data/spm.h"

#include "core/fileio.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

struct pmt_spm {
    sentencepiece::SentencePieceProcessor processor;
    std::string serialized;
    /* mutable: const accessors (encode/decode) record their failure here. */
    mutable std::string last_error;
};

namespace {

/* Copies msg into the caller's err buffer (always NUL-terminated). */
void set_error(char *err, size_t errlen, const std::string &msg) {
    if (!err || errlen == 0) return;
    std::snprintf(err, errlen, "%s", msg.c_str());
}

/* Feeds the lines of several text files to the trainer, one file after the
 * other; a file that cannot be opened or read ends iteration with an error
 * status naming it. */
class FileLinesIterator : public sentencepiece::SentenceIterator {
public:
    explicit FileLinesIterator(std::vector<std::string> paths) : paths_(std::move(paths)) { Next(); }
    bool done() const override { return done_; }
    const std::string &value() const override { return line_; }
    sentencepiece::util::Status status() const override { return status_; }

    void Next() override {
        while (!done_) {
            if (!stream_.is_open() && !OpenNextFile()) return;
            if (std::getline(stream_, line_)) {
                if (!line_.empty() && line_.back() == '\r') line_.pop_back();
                return;
            }
            if (stream_.bad()) {
                Fail("read error in training input '" + paths_[file_index_ - 1] + "'");
                return;
            }
            stream_.close();
        }
    }

private:
    /* Opens the next file; false when there is none (done) or it failed. */
    bool OpenNextFile() {
        if (file_index_ >= paths_.size()) { done_ = true; return false; }
        const std::string &path = paths_[file_index_++];
        stream_.clear();
        stream_.open(path, std::ios::binary);
        if (!stream_.is_open()) {
            Fail("cannot open training input '" + path + "': " + std::strerror(errno));
            return false;
        }
        return true;
    }
    void Fail(const std::string &msg) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound, msg);
        done_ = true;
    }

    std::vector<std::string> paths_;
    size_t file_index_ = 0;
    std::ifstream stream_;
    std::string line_;
    bool done_ = false;
    sentencepiece::util::Status status_;
};

/* The .vocab text SentencePiece's own trainer writes: "piece<TAB>score". */
std::string vocab_text(const sentencepiece::SentencePieceProcessor &sp) {
    std::ostringstream out;
    for (int id = 0; id < sp.GetPieceSize(); id++) out << sp.IdToPiece(id) << '\t' << sp.GetScore(id) << '\n';
    return out.str();
}

/* Online cores: SentencePiece's own default (16) oversubscribes small machines. */
int default_thread_count() {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The trainer flags. Chosen so training is quiet (minloglevel), uses the ids
 * the model code hard-wires (pad 0, unk 1, bos 2, eos 3), treats vocab_size as
 * a soft limit (small corpora cannot always fill it; the real vocab size is
 * read back from the model), and is repeatable (fixed sampling seed). */
std::unordered_map<std::string, std::string> trainer_flags(const pmt_spm_train_options &opt) {
    std::unordered_map<std::string, std::string> flags = {
        {"model_type", opt.model_type ? opt.model_type : "unigram"},
        {"vocab_size", std::to_string(opt.vocab_size)},
        {"character_coverage", std::to_string(opt.character_coverage)},
        {"num_threads", std::to_string(opt.num_threads > 0 ? opt.num_threads : default_thread_count())},
        {"input_sentence_size", std::to_string(opt.input_sentence_size > 0 ? opt.input_sentence_size : 0)},
        {"shuffle_input_sentence", "true"},
        {"hard_vocab_limit", "false"},
        {"pad_id", std::to_string(PMT_PAD_ID)}, {"unk_id", std::to_string(PMT_UNK_ID)},
        {"bos_id", std::to_string(PMT_BOS_ID)}, {"eos_id", std::to_string(PMT_EOS_ID)},
        {"pad_piece", "<pad>"}, {"unk_piece", "<unk>"}, {"bos_piece", "<s>"}, {"eos_piece", "</s>"},
        {"minloglevel", "2"},
    };
    return flags;
}

}  // namespace

extern "C" {

void pmt_spm_train_options_default(pmt_spm_train_options *opt) {
    opt->vocab_size = 8000;
    opt->model_type = "unigram";
    opt->character_coverage = 1.0;
    opt->num_threads = 0;
    opt->seed = 1;
    opt->input_sentence_size = 0;
}

int pmt_spm_train(const char *const *input_files, int n_files, const char *model_prefix,
                  const pmt_spm_train_options *opt, char *err, size_t errlen) {
    try {
        if (n_files <= 0 || !input_files || !model_prefix || !opt) {
            set_error(err, errlen, "pmt_spm_train: no input files or no model prefix given");
            return -1;
        }
        if (opt->vocab_size < 8) {
            set_error(err, errlen, "SentencePiece vocab_size " + std::to_string(opt->vocab_size) +
                                   " is too small; use at least 8");
            return -1;
        }
        std::vector<std::string> paths(input_files, input_files + n_files);
        for (const std::string &p : paths) {
            if (access(p.c_str(), R_OK) != 0) {
                set_error(err, errlen, "cannot read training input '" + p + "': " + std::strerror(errno));
                return -1;
            }
        }
        /* The seed value UINT32_MAX means "random device" to SentencePiece. */
        unsigned int seed = (unsigned int)(opt->seed & 0xffffffffUL);
        if (seed == 0xffffffffU) seed = 0;
        sentencepiece::SetRandomGeneratorSeed(seed);

        FileLinesIterator lines(paths);
        std::string model_bytes;
        sentencepiece::util::Status st =
            sentencepiece::SentencePieceTrainer::Train(trainer_flags(*opt), &lines, &model_bytes);
        if (!lines.status().ok()) { set_error(err, errlen, lines.status().ToString()); return -1; }
        if (!st.ok()) { set_error(err, errlen, "SentencePiece training failed: " + st.ToString()); return -1; }

        sentencepiece::SentencePieceProcessor trained;
        st = trained.LoadFromSerializedProto(model_bytes);
        if (!st.ok()) { set_error(err, errlen, "SentencePiece produced an unreadable model: " + st.ToString()); return -1; }

        const std::string prefix(model_prefix), vocab = vocab_text(trained);
        if (pmt_atomic_write((prefix + ".model").c_str(), model_bytes.data(), model_bytes.size(), err, errlen) != 0 ||
            pmt_atomic_write((prefix + ".vocab").c_str(), vocab.data(), vocab.size(), err, errlen) != 0)
            return -1;
        return 0;
    } catch (const std::exception &e) {
        set_error(err, errlen, std::string("SentencePiece training failed: ") + e.what());
    } catch (...) {
        set_error(err, errlen, "SentencePiece training failed with an unknown exception");
    }
    return -1;
}

int pmt_spm_save(const pmt_spm *spm, const char *model_prefix, char *err, size_t errlen) {
    try {
        const std::string prefix(model_prefix), vocab = vocab_text(spm->processor);
        if (pmt_atomic_write((prefix + ".model").c_str(), spm->serialized.data(), spm->serialized.size(), err,
                             errlen) != 0 ||
            pmt_atomic_write((prefix + ".vocab").c_str(), vocab.data(), vocab.size(), err, errlen) != 0)
            return -1;
        return 0;
    } catch (const std::exception &e) {
        set_error(err, errlen, std::string("cannot write SentencePiece model '") + model_prefix + ".model': " + e.what());
    } catch (...) {
        set_error(err, errlen, std::string("cannot write SentencePiece model '") + model_prefix + ".model'");
    }
    return -1;
}

pmt_spm *pmt_spm_load_buffer(const void *data, size_t size, char *err, size_t errlen) {
    try {
        if (!data || size == 0) { set_error(err, errlen, "empty SentencePiece model buffer"); return nullptr; }
        std::unique_ptr<pmt_spm> spm(new pmt_spm);
        spm->serialized.assign(static_cast<const char *>(data), size);
        sentencepiece::util::Status st = spm->processor.LoadFromSerializedProto(spm->serialized);
        if (!st.ok()) {
            set_error(err, errlen, "not a valid SentencePiece model (" + st.ToString() + ")");
            return nullptr;
        }
        return spm.release();
    } catch (const std::exception &e) {
        set_error(err, errlen, std::string("cannot load SentencePiece model: ") + e.what());
    } catch (...) {
        set_error(err, errlen, "cannot load SentencePiece model: unknown exception");
    }
    return nullptr;
}

pmt_spm *pmt_spm_load_file(const char *path, char *err, size_t errlen) {
    try {
        std::ifstream in(path, std::ios::binary);
        if (!in.is_open()) {
            set_error(err, errlen, std::string("cannot open SentencePiece model '") + path + "': " +
                                   std::strerror(errno) + " (run `projmt prepare` to create it)");
            return nullptr;
        }
        std::ostringstream bytes;
        bytes << in.rdbuf();
        if (in.bad()) { set_error(err, errlen, std::string("read error in SentencePiece model '") + path + "'"); return nullptr; }
        std::string data = bytes.str();
        char inner[512] = "";
        pmt_spm *spm = pmt_spm_load_buffer(data.data(), data.size(), inner, sizeof inner);
        if (!spm) set_error(err, errlen, std::string("SentencePiece model '") + path + "': " + inner);
        return spm;
    } catch (const std::exception &e) {
        set_error(err, errlen, std::string("cannot load SentencePiece model '") + path + "': " + e.what());
    } catch (...) {
        set_error(err, errlen, std::string("cannot load SentencePiece model '") + path + "': unknown exception");
    }
    return nullptr;
}

void pmt_spm_free(pmt_spm *spm) { delete spm; }

const void *pmt_spm_serialized(const pmt_spm *spm, size_t *size) {
    *size = spm->serialized.size();
    return spm->serialized.data();
}

int pmt_spm_encode(const pmt_spm *spm, const char *text, int32_t *ids, int max_ids) {
    try {
        std::vector<int> pieces;
        sentencepiece::util::Status st = spm->processor.Encode(text ? text : "", &pieces);
        if (!st.ok()) { spm->last_error = "encode failed: " + st.ToString(); return -1; }
        int n = (int)pieces.size();
        for (int i = 0; i < n && i < max_ids; i++) ids[i] = pieces[i];
        return n;
    } catch (const std::exception &e) {
        spm->last_error = std::string("encode failed: ") + e.what();
    } catch (...) {
        spm->last_error = "encode failed: unknown exception";
    }
    return -1;
}

char *pmt_spm_decode(const pmt_spm *spm, const int32_t *ids, int n) {
    try {
        int vocab = spm->processor.GetPieceSize();
        std::vector<int> pieces;
        pieces.reserve(n > 0 ? n : 0);
        for (int i = 0; i < n; i++) {
            /* SentencePiece aborts on out-of-range ids, so check first. */
            if (ids[i] < 0 || ids[i] >= vocab) {
                spm->last_error = "decode: id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")";
                return nullptr;
            }
            pieces.push_back(ids[i]);
        }
        std::string text;
        sentencepiece::util::Status st = spm->processor.Decode(pieces, &text);
        if (!st.ok()) { spm->last_error = "decode failed: " + st.ToString(); return nullptr; }
        char *out = static_cast<char *>(std::malloc(text.size() + 1));
        if (!out) { spm->last_error = "decode: out of memory"; return nullptr; }
        std::memcpy(out, text.data(), text.size());
        out[text.size()] = '\0';
        return out;
    } catch (const std::exception &e) {
        spm->last_error = std::string("decode failed: ") + e.what();
    } catch (...) {
        spm->last_error = "decode failed: unknown exception";
    }
    return nullptr;
}

int pmt_spm_vocab_size(const pmt_spm *spm) { return spm->processor.GetPieceSize(); }

int pmt_spm_piece_to_id(const pmt_spm *spm, const char *piece) {
    try {
        return spm->processor.PieceToId(piece ? piece : "");
    } catch (...) {
        return spm->processor.unk_id();
    }
}

const char *pmt_spm_id_to_piece(const pmt_spm *spm, int id) {
    if (id < 0 || id >= spm->processor.GetPieceSize()) return nullptr;
    try {
        return spm->processor.IdToPiece(id).c_str();
    } catch (...) {
        return nullptr;
    }
}

int pmt_spm_pad_id(const pmt_spm *spm) { return spm->processor.pad_id(); }
int pmt_spm_unk_id(const pmt_spm *spm) { return spm->processor.unk_id(); }
int pmt_spm_bos_id(const pmt_spm *spm) { return spm->processor.bos_id(); }
int pmt_spm_eos_id(const pmt_spm *spm) { return spm->processor.eos_id(); }

const char *pmt_spm_last_error(const pmt_spm *spm) { return spm->last_error.c_str(); }

}  /* extern "C" */
