"""probing.lm: LM heads and scoring, checked against a slow full-softmax scorer and AllenNLP's perplexity procedure."""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
import torch

from probing import cli
from probing.elmo import Elmo
from probing.errors import InputError
from probing.lm import AdaptiveHead, NoHeadError, SoftmaxHead, score, sentence_scores
from probing.lm.head import read_vocab

FIXTURES = Path(__file__).parent / "fixtures" / "elmo_allennlp"
SENTENCES = [
    ["The", "cat", "sat", "."],
    ["Why", "do", "we", "care", "about", "government", "employment", "?"],
    ["zyxq"],
    ["Bush", "disciplined", "the", "press", "on", "flu", "and", "the", "romance", "of", "sport", "."],
]


def write_softmax(path: Path, vocab: list[str], dim: int, seed: int = 0, scale: float = 1.0) -> Path:
    """A synthetic softmax file in the official layout (HDF5 softmax/W (V, d), softmax/b (V,))."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f["softmax/W"] = (scale * rng.standard_normal((len(vocab), dim))).astype(np.float32)
        f["softmax/b"] = rng.standard_normal(len(vocab)).astype(np.float32)
    return path


@pytest.fixture(scope="module")
def lm(tmp_path_factory) -> tuple[Elmo, Path, Path]:
    """The AllenNLP test biLM (official layout, projection 16) and a synthetic softmax over its test vocabulary."""
    folder = tmp_path_factory.mktemp("lm")
    vocab = FIXTURES / "vocab_test.txt"
    softmax = write_softmax(folder / "softmax.hdf5", read_vocab(vocab), 16)
    return Elmo.from_files(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5"), softmax, vocab


def slow_scores(model: Elmo, softmax: Path, vocab: Path, sentence: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """One sentence alone, through the autograd path of the biLM, with a float64 softmax over the full
    vocabulary: log p of ``w1 .. wn </S>`` (forward) and of ``<S> w1 .. wn`` (backward)."""
    from probing.elmo.chars import batch_char_ids

    words = read_vocab(vocab)
    with h5py.File(softmax) as f:
        w, b = np.asarray(f["softmax/W"], dtype=np.float64), np.asarray(f["softmax/b"], dtype=np.float64)
    ids = torch.from_numpy(batch_char_ids([sentence]))
    with torch.enable_grad():
        _, fw, bw, _, _ = model.bilm(ids)
    top_f, top_b = fw[-1][0].detach().double().numpy(), bw[-1][0].detach().double().numpy()
    tokens = ["<S>", *sentence, "</S>"]
    target = [words.index(t) if t in words else words.index("<UNK>") for t in tokens]

    def logp(h: np.ndarray, t: int) -> float:
        z = w @ h + b
        return float(z[t] - (z.max() + math.log(np.exp(z - z.max()).sum())))

    n = len(sentence)
    forward = np.array([logp(top_f[k], target[k + 1]) for k in range(n + 1)])
    backward = np.array([logp(top_b[k], target[k - 1]) for k in range(1, n + 2)])
    return forward, backward


def test_scores_match_a_slow_full_softmax_one_sentence_at_a_time(lm):
    model, softmax, vocab = lm
    words = score(SENTENCES, model=model, softmax=softmax, vocab=vocab, batch_size=3)
    totals = sentence_scores(SENTENCES, model=model, softmax=softmax, vocab=vocab, batch_size=3)
    assert list(words.columns) == ["sentence", "position", "word", "logprob_forward", "logprob_backward", "in_vocab"]
    assert len(words) == sum(len(s) for s in SENTENCES)
    vocab_words = set(read_vocab(vocab))
    for i, sent in enumerate(SENTENCES):
        fw, bw = slow_scores(model, softmax, vocab, sent)
        rows = words[words.sentence == i]
        assert rows.word.tolist() == sent and rows.position.tolist() == list(range(len(sent)))
        # word rows: forward w_j given <S> w_<j, backward w_j given w_>j </S>; boundary predictions not rows
        np.testing.assert_allclose(rows.logprob_forward, fw[:-1], rtol=0, atol=2e-5)
        np.testing.assert_allclose(rows.logprob_backward, bw[1:], rtol=0, atol=2e-5)
        assert rows.in_vocab.tolist() == [w in vocab_words for w in sent]
        row = totals.iloc[i]
        assert row.sentence == i and row.n_words == len(sent)
        assert row.n_oov == sum(w not in vocab_words for w in sent)
        np.testing.assert_allclose(row.logprob_forward, fw.sum(), atol=1e-4)
        np.testing.assert_allclose(row.logprob_backward, bw.sum(), atol=1e-4)
        np.testing.assert_allclose(row.logprob_both, (fw.sum() + bw.sum()) / 2, atol=1e-4)
    assert totals.n_oov.tolist()[2] == 1, "'zyxq' is outside the vocabulary and scored as <UNK>"


def test_strings_are_tokenized_and_streaming_keeps_input_order(lm):
    model, softmax, vocab = lm
    a = sentence_scores(["The cat sat.", "Why do we care?"], model=model, softmax=softmax, vocab=vocab)
    b = sentence_scores(
        [["The", "cat", "sat", "."], ["Why", "do", "we", "care", "?"]], model=model, softmax=softmax, vocab=vocab
    )
    pd.testing.assert_frame_equal(a, b)
    from probing.lm.score import iter_scores

    head = SoftmaxHead.from_files(softmax, vocab)
    chunked = [s.total_forward for _, s in iter_scores(SENTENCES, model, head, batch_size=2, chunk=3)]
    whole = sentence_scores(SENTENCES, model=model, softmax=softmax, vocab=vocab).logprob_forward
    np.testing.assert_allclose(chunked, whole, atol=1e-5)


def allennlp_perplexity_procedure(model: Elmo, softmax: Path, vocab: Path, batch: list[list[str]]) -> list[np.ndarray]:
    """AllenNLP's former ``elmo-perplexities`` (allennlp/commands/elmo_perplexities.py), re-implemented from
    its description: one padded batch; the top layer with <S>/</S> (forward ‖ backward); forward log-probs
    from the first half at positions [0, T-2) against the word ids, backward from the second half at
    [2, T); a log-softmax over the whole vocabulary; unknown words as <UNK>; no boundary predictions.
    Returns (2, n_words) per sentence."""
    from probing.elmo.chars import batch_char_ids

    words = read_vocab(vocab)
    index = {w: i for i, w in enumerate(words)}
    with h5py.File(softmax) as f:
        w, b = torch.from_numpy(np.asarray(f["softmax/W"])), torch.from_numpy(np.asarray(f["softmax/b"]))
    d = w.shape[1]
    longest = max(len(s) for s in batch)
    word_ids = torch.tensor([[index.get(t, index["<UNK>"]) for t in s] + [0] * (longest - len(s)) for s in batch])
    with torch.inference_mode():
        _, fw, bw, _, _ = model.bilm(torch.from_numpy(batch_char_ids(batch)))
    activations = torch.cat([fw[-1], bw[-1]], dim=-1)
    fwd = torch.log_softmax(activations[:, :-2, :d] @ w.t() + b, dim=2).gather(2, word_ids.unsqueeze(2)).squeeze(2)
    bwd = torch.log_softmax(activations[:, 2:, d:] @ w.t() + b, dim=2).gather(2, word_ids.unsqueeze(2)).squeeze(2)
    return [torch.stack([fwd[i], bwd[i]])[:, : len(s)].numpy() for i, s in enumerate(batch)]


def test_random_official_model_through_the_cli_matches_allennlp_procedure(tmp_path, capsys):
    model = Elmo.random(FIXTURES / "options.json", seed=3)
    model.save(tmp_path / "options.json", tmp_path / "weights.hdf5")
    vocab_words = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "on", "mat", ".", "a", "dog"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab_words) + "\n")
    # scale 3: logits far from uniform, so a shifted position or a swapped half changes the numbers
    write_softmax(tmp_path / "softmax.hdf5", vocab_words, 16, seed=1, scale=3.0)
    lines = ["the cat sat on the mat .", "", "a dog sat on a zebra .", "the"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    argv = ["score", "--options", str(tmp_path / "options.json"), "--weights", str(tmp_path / "weights.hdf5")]
    argv += ["--softmax", str(tmp_path / "softmax.hdf5"), "--vocab", str(tmp_path / "vocab.txt")]
    assert cli.main([*argv, "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.csv")]) == 0
    assert "15 words of 3 sentences" in capsys.readouterr().out
    got = pd.read_csv(tmp_path / "out.csv", keep_default_na=False)
    assert sorted(set(got.sentence)) == [0, 2, 3], "sentence = 0-based line; the blank line 1 has no rows"
    sentences = [lines[i].split() for i in (0, 2, 3)]
    loaded = Elmo.from_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    expected = allennlp_perplexity_procedure(loaded, tmp_path / "softmax.hdf5", tmp_path / "vocab.txt", sentences)
    for line, sent, exp in zip((0, 2, 3), sentences, expected):
        rows = got[got.sentence == line]
        assert rows.word.tolist() == sent
        np.testing.assert_allclose(rows.logprob_forward, exp[0], atol=1e-5)
        np.testing.assert_allclose(rows.logprob_backward, exp[1], atol=1e-5)
        assert rows.in_vocab.tolist() == [w in vocab_words for w in sent]


def test_a_model_without_a_head_says_so():
    model = Elmo.random(FIXTURES / "options.json")
    with pytest.raises(NoHeadError, match="no LM head.*softmax= and vocab="):
        score(["the cat"], model=model)


def test_bad_head_files_are_named(tmp_path, lm):
    model, softmax, vocab = lm
    with h5py.File(tmp_path / "bad.hdf5", "w") as f:
        f["W"] = np.zeros((3, 16), dtype=np.float32)
    with pytest.raises(InputError, match=r"bad\.hdf5.*softmax/W and softmax/b"):
        SoftmaxHead.from_files(tmp_path / "bad.hdf5", vocab)
    (tmp_path / "short.txt").write_text("<S>\n</S>\n<UNK>\n")
    with pytest.raises(InputError, match="458 rows but the vocabulary has 3 tokens"):
        SoftmaxHead.from_files(softmax, tmp_path / "short.txt")
    (tmp_path / "nounk.txt").write_text("<S>\n</S>\nthe\n")
    with pytest.raises(InputError, match="lacks <UNK>"):
        SoftmaxHead(np.zeros((3, 16)), np.zeros(3), read_vocab(tmp_path / "nounk.txt"), source="x")
    wide = SoftmaxHead(np.zeros((3, 8)), np.zeros(3), ["<S>", "</S>", "<UNK>"], source="wide")
    from probing.lm.score import score_batch

    with pytest.raises(InputError, match="width 8.*16 wide"):
        score_batch(model, wide, [["the"]])


def test_adaptive_head_roundtrip_and_log_probs_sum_to_one(tmp_path):
    torch.manual_seed(0)
    vocab = ["<S>", "</S>", "<UNK>", *[f"w{i}" for i in range(37)]]
    module = torch.nn.AdaptiveLogSoftmaxWithLoss(16, len(vocab), [5, 15], div_value=2.0)
    head = AdaptiveHead(module, vocab)
    head.save(tmp_path / "head.npz", dtype="float32")
    loaded = AdaptiveHead.load(tmp_path / "head.npz")
    assert loaded.vocab == vocab
    h = torch.randn(4, 16)
    every = torch.stack([loaded.log_probs(h, torch.full((4,), t)) for t in range(len(vocab))], dim=1)
    np.testing.assert_allclose(every.exp().sum(1), np.ones(4), atol=1e-5)  # a proper distribution
    np.testing.assert_allclose(every, module.log_prob(h).detach(), atol=1e-6)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="junk.npz"):
        AdaptiveHead.load(tmp_path / "junk.npz")


def test_surprisal_is_minus_log2_of_the_scores_and_the_figure_has_a_bar_each(lm):
    from probing.lm.surprisal import surprisal, surprisal_figure

    model, softmax, vocab = lm
    table = surprisal("The old man the boat .", model=model, softmax=softmax, vocab=vocab)
    words = score(["The old man the boat ."], model=model, softmax=softmax, vocab=vocab)
    np.testing.assert_allclose(table.surprisal_forward, -words.logprob_forward / math.log(2))
    np.testing.assert_allclose(table.surprisal_backward, -words.logprob_backward / math.log(2))
    ax = surprisal_figure(table, title="garden path").axes[0]
    assert len(ax.patches) == 2 * 6
    assert [t.get_text() for t in ax.get_xticklabels()][:3] == ["The", "old*", "man*"]


def test_the_bundled_head_is_found_by_checkpoint_name(tmp_path, monkeypatch):
    """A bundled model without lm_head.npz refuses to score; with one (here a random adaptive head at the
    fixture's width) both the name and an Elmo loaded by that name find it."""
    import dataclasses
    import shutil

    from probing import paths
    from probing.elmo import hub

    folder = tmp_path / "resources" / "models" / "default"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "options.json", folder / "options.json")
    shutil.copy(FIXTURES / "lm_weights.hdf5", folder / "weights.hdf5")
    monkeypatch.setattr(paths, "resources_dir", lambda: tmp_path / "resources")
    # the fixture stands in for the bundled model through an entry without the bundled files' pinned hashes
    unpinned = dataclasses.replace(hub.REGISTRY["default"], options_sha256=None, weights_sha256=None)
    monkeypatch.setitem(hub.REGISTRY, "default", unpinned)
    with pytest.raises(NoHeadError, match="no LM head"):
        score(["the cat"], model="default")
    torch.manual_seed(0)
    vocab = ["<S>", "</S>", "<UNK>", "the", "cat", *[f"w{i}" for i in range(20)]]
    module = torch.nn.AdaptiveLogSoftmaxWithLoss(16, len(vocab), [8], div_value=2.0)
    AdaptiveHead(module, vocab).save(folder / "lm_head.npz", dtype="float32")
    by_name = sentence_scores(["the cat", "a dog"], model="default")
    by_model = sentence_scores(["the cat", "a dog"], model=Elmo.from_pretrained("default"))
    pd.testing.assert_frame_equal(by_name, by_model)
    assert by_name.n_oov.tolist() == [0, 2]
