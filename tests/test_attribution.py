"""probing.analysis.attribution: integrated gradients through the bundled biLM, against the LM scores, a
one-node-at-a-time reference and Captum's IntegratedGradients (when installed)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probing.analysis.attribution import attribute_sentence, gauss_legendre, integrated_gradients, log_probs
from probing.analysis.patching import resolve_model
from probing.errors import InputError

SENTENCES = [["the", "keys", "to", "the", "cabinet", "are", "here"], ["a", "dog", "runs", "fast"]]


@pytest.fixture(scope="module")
def model():
    return resolve_model("default")


def word_function(elmo, head, words, position, target="forward"):
    """f on the words' vectors ``(rows, n, P)``, ``<S>``/``</S>`` added from the char CNN: the reference's own
    route to the forward (or backward) LM's log-probability of ``words[position]``."""
    from probing.elmo.chars import batch_char_ids

    ids = torch.from_numpy(batch_char_ids([words], elmo.options.max_characters_per_token))[0]
    with torch.no_grad():
        bounds = elmo.bilm.char_cnn(ids[[0, -1]])
    target_id = torch.from_numpy(head.ids([words[position]])[0])
    n = len(words)

    def f(vectors):
        rows = vectors.shape[0]
        seq = torch.cat([bounds[0].expand(rows, 1, -1), vectors, bounds[1].expand(rows, 1, -1)], 1)
        mask = torch.ones(rows, n + 2, dtype=torch.bool)
        if target == "forward":
            outs, _ = elmo.bilm.forward_lstm(seq, mask, None)
            hidden = outs[-1][:, position]
        else:
            outs, _ = elmo.bilm.backward_lstm(seq.flip(1), mask, None)
            hidden = outs[-1].flip(1)[:, position + 2]
        return log_probs(head, hidden, target_id.expand(rows))

    return f, ids


def test_the_output_is_the_lm_score(model):
    """f(x) is the log-probability probing.lm.score gives the word (forward: the last word; backward: the first)."""
    from probing.lm.score import score

    frame = integrated_gradients(SENTENCES, model=model[0], n_steps=4)
    back = integrated_gradients(SENTENCES, model=model[0], n_steps=4, target="backward")
    scores = score(SENTENCES, model[0])
    for i in range(len(SENTENCES)):
        mine = scores[scores.sentence == i]
        assert frame[frame.sentence == i].output.iloc[0] == pytest.approx(mine.logprob_forward.iloc[-1], abs=1e-4)
        assert back[back.sentence == i].output.iloc[0] == pytest.approx(mine.logprob_backward.iloc[0], abs=1e-4)


def test_words_the_lm_does_not_read_get_exactly_zero(model):
    """The forward LM predicting word 3 reads words 0..2 only: words 3.. have zero gradient, so attribution 0.0;
    the backward LM predicting word 2 reads words 3.. only."""
    forward = integrated_gradients([SENTENCES[0]], model=model[0], position=3, n_steps=8)
    assert (forward.attribution.to_numpy()[3:] == 0).all() and (forward.attribution.to_numpy()[:3] != 0).all()
    backward = integrated_gradients([SENTENCES[0]], model=model[0], position=2, n_steps=8, target="backward")
    assert (backward.attribution.to_numpy()[:3] == 0).all() and (backward.attribution.to_numpy()[3:] != 0).all()


def test_batched_nodes_equal_one_node_at_a_time(model):
    """The nodes run as rows of one batch from the zero state; the reference runs each node alone (its own
    forward pass and gradient, float32): the attributions agree within 1e-5 per word, so no state or
    gradient leaks between nodes (Captum #1183's failure would make them differ)."""
    elmo, head = model
    words, position, n_steps = SENTENCES[0], 5, 16
    f, ids = word_function(elmo, head, words, position)
    x = elmo.bilm.char_cnn(ids[1:-1]).detach()
    from probing.elmo.model import PAD_ID

    with torch.no_grad():
        base = elmo.bilm.char_cnn(torch.full((1, ids.shape[1]), PAD_ID, dtype=torch.long))[0]
    alphas, weights = gauss_legendre(n_steps)
    total = torch.zeros_like(x, dtype=torch.float64)
    for a, w in zip(alphas, weights):
        point = (base + float(a) * (x - base)).unsqueeze(0).requires_grad_(True)
        (g,) = torch.autograd.grad(f(point).sum(), point)
        total += w * g[0].double()
    reference = ((x - base).double() * total).sum(-1).numpy()
    mine = attribute_sentence(elmo, head, words, position=position, n_steps=n_steps)
    assert np.allclose(mine.words_attr, reference, atol=1e-5)


def test_against_captum_integrated_gradients(model):
    """Captum's IntegratedGradients (Gauss-Legendre, 64 steps, the padding token as baseline) on the same f
    gives the same attributions within 1e-4 per word."""
    captum = pytest.importorskip("captum.attr")
    elmo, head = model
    for target, words, position in (("forward", SENTENCES[0], 5), ("backward", SENTENCES[1], 0)):
        f, ids = word_function(elmo, head, words, position, target)
        from probing.elmo.model import PAD_ID

        with torch.no_grad():
            x = elmo.bilm.char_cnn(ids[1:-1]).unsqueeze(0)
            base = elmo.bilm.char_cnn(torch.full((1, ids.shape[1]), PAD_ID, dtype=torch.long))[0].expand_as(x)
        ig = captum.IntegratedGradients(f)
        theirs = ig.attribute(x, baselines=base, n_steps=64, method="gausslegendre").sum(-1)[0].double().numpy()
        mine = attribute_sentence(elmo, head, words, target=target, position=position, n_steps=64)
        assert np.abs(mine.words_attr - theirs).max() < 1e-4, target


def test_completeness_gap_is_small_for_words(model):
    """With 64 Gauss-Legendre nodes the sum of the word attributions is f(x) - f(x') within 1 % of
    |f(x) - f(x')| on these sentences (the path is smooth but for the clipping of cells and states)."""
    frame = integrated_gradients(SENTENCES, model=model[0])
    for i, words in enumerate(SENTENCES):
        rows = frame[frame.sentence == i]
        a = attribute_sentence(*model, words)
        assert rows.completeness_gap.iloc[0] == pytest.approx(a.completeness_gap)
        assert a.completeness_gap < 0.01 * abs(a.output - a.baseline_output)


def test_characters_share_the_word_baseline_and_read_the_same_words(model):
    """With characters, the baseline (the padding character at every slot) gives the same CNN vector as the
    padding token, so f(x') is the word mode's (1e-5); words the forward LM does not read get 0.0 at every
    character; each word's rows are <w>, its characters, </w>."""
    elmo, head = model
    words = SENTENCES[1]
    chars = attribute_sentence(elmo, head, words, position=2, n_steps=8, characters=True)
    plain = attribute_sentence(elmo, head, words, position=2, n_steps=8)
    assert chars.baseline_output == pytest.approx(plain.baseline_output, abs=1e-5)
    assert chars.output == pytest.approx(plain.output, abs=1e-5)
    assert chars.chars is not None
    assert [c for c, _ in chars.chars[1]] == ["<w>", "d", "o", "g", "</w>"]
    assert all(v == 0 for j in (2, 3) for _, v in chars.chars[j])
    assert any(v != 0 for _, v in chars.chars[1])
    frame = integrated_gradients([words], model=elmo, position=2, n_steps=8, characters=True)
    assert list(frame.columns) == ["sentence", "position", "word", "char", "attribution", "output", "completeness_gap"]


def test_bad_options_name_the_field(model):
    elmo, _ = model
    for kwargs, field in (
        (dict(target="sideways"), "target"),
        (dict(position=9), "position"),
        (dict(baseline=np.zeros(3)), "baseline"),
        (dict(n_steps=0), "n_steps"),
    ):
        with pytest.raises(InputError, match=field):
            integrated_gradients([SENTENCES[1]], model=elmo, **kwargs)


def test_probing_attribute_writes_the_api_rows(tmp_path, model):
    """The CLI's CSV is integrated_gradients' table for the file's lines (sentence = 0-based line, blank lines
    skipped); a --position past a line's end is a one-line error naming position (exit status 2)."""
    import pandas as pd

    from probing import cli

    text = tmp_path / "in.txt"
    text.write_text("a dog runs fast\n\nthe keys to the cabinet are here\n")
    out = tmp_path / "out.csv"
    assert (
        cli.main(["attribute", "--model", "default", "--input", str(text), "--output", str(out), "--steps", "8"]) == 0
    )
    got = pd.read_csv(out)
    want = integrated_gradients([SENTENCES[1], SENTENCES[0]], model=model[0], n_steps=8)
    assert got.sentence.tolist() == [0] * 4 + [2] * 7
    assert got.word.tolist() == want.word.tolist()
    assert np.allclose(got.attribution, want.attribution, atol=1e-6)
    args = ["attribute", "--model", "default", "--input", str(text), "--output", str(tmp_path / "x.csv")]
    assert cli.main([*args, "--position", "5"]) == 2
    assert not (tmp_path / "x.csv").exists()
