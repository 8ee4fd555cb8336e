"""probing.analysis.patching: interchange interventions in the bundled biLM, against a float64 hand-stepped
reference, the model's own forward pass and LM scores, and the issue's three sanity rows."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from probing.analysis.patching import (
    Site,
    interchange_accuracy,
    patch,
    patch_many,
    random_subspace,
    resolve_model,
    run_direction,
)
from probing.errors import InputError

# (singular, plural) nouns and attractors the bundled head knows; verbs alternate is/are
NOUNS = [("key", "keys"), ("dog", "dogs"), ("book", "books"), ("girl", "girls"), ("car", "cars"), ("man", "men")]
ATTRACTORS = [("cabinet", "cabinets"), ("table", "tables"), ("house", "houses")]


def template_pairs(n: int) -> tuple[list[list[str]], list[list[str]], list[tuple[str, str]], list[int]]:
    """``the N near the A is/are here``: base with a singular subject, source the same words with a plural
    one (and the reverse), same length, the verb at word 5; candidates (base's form, source's form)."""
    base, source, cands = [], [], []
    for (s, p), (a1, a2), flip in itertools.product(NOUNS, ATTRACTORS, (False, True)):
        for attractor in (a1, a2):
            sing = ["the", s, "near", "the", attractor, "is", "here"]
            plur = ["the", p, "near", "the", attractor, "are", "here"]
            b, src, c = (plur, sing, ("are", "is")) if flip else (sing, plur, ("is", "are"))
            base.append(b)
            source.append(src)
            cands.append(c)
    return base[:n], source[:n], cands[:n], [5] * min(n, len(base))


@pytest.fixture(scope="module")
def model():
    return resolve_model("default")


def reference_run(lstm, x: np.ndarray, patches: dict) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """One sentence, one direction, float64, one step at a time from the weights (gate order i, j, f, o,
    clipping, skip connections); ``patches[(layer, step)] = (h or None, c or None, basis or None)`` replaces
    the state after the step (layer 0: the input vector)."""
    opts = lstm.opts
    cell_clip = opts.cell_clip or math.inf
    proj_clip = opts.proj_clip or math.inf
    x = x.copy()
    for (layer, step), (h_src, _, basis) in patches.items():
        if layer == 0:
            x[step] = h_src if basis is None else x[step] + (h_src - x[step]) @ basis @ basis.T
    outs, hs, cs = [], [], []
    for layer in range(opts.n_layers):
        w = lstm.weight[layer].detach().double().numpy()
        b = lstm.bias[layer].detach().double().numpy()
        proj = lstm.proj[layer].detach().double().numpy()
        p = x.shape[1]
        h, c = np.zeros(p), np.zeros(opts.lstm_dim)
        h_all, c_all = [], []
        for s in range(len(x)):
            z = x[s] @ w[:p] + h @ w[p:] + b
            i, j, f, o = np.split(z, 4)
            sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
            c = np.clip(sig(f) * c + sig(i) * np.tanh(j), -cell_clip, cell_clip)
            h = np.clip((sig(o) * np.tanh(c)) @ proj, -proj_clip, proj_clip)
            if (layer + 1, s) in patches:
                h_src, c_src, basis = patches[(layer + 1, s)]
                if h_src is not None:
                    h = h_src if basis is None else h + (h_src - h) @ basis @ basis.T
                if c_src is not None:
                    c = c_src if basis is None else c + (c_src - c) @ basis @ basis.T
            h_all.append(h)
            c_all.append(c)
        out = np.stack(h_all)
        if opts.use_skip_connections and layer > 0:
            out = out + x
        outs.append(out)
        hs.append(np.stack(h_all))
        cs.append(np.stack(c_all))
        x = out
    return outs, hs, cs


def reference_patch(model, base, source, sites, candidates, position, align) -> list[float]:
    """The patched logprob difference of each pair, one pair at a time through :func:`reference_run`."""
    from probing.elmo.chars import batch_char_ids

    elmo, head = model
    out = []
    for i, (b, s) in enumerate(zip(base, source)):

        def tokens(words):
            ids = torch.from_numpy(batch_char_ids([words], elmo.options.max_characters_per_token))
            with torch.no_grad():
                return elmo.bilm.token_embeddings(ids)[0].double().numpy()

        direction = sites[0].direction
        lstm = elmo.bilm.forward_lstm if direction == "forward" else elmo.bilm.backward_lstm
        xb, xs = tokens(b), tokens(s)
        if direction == "backward":
            xb, xs = xb[::-1].copy(), xs[::-1].copy()

        def step(word, n, direction=direction):
            return word + 1 if direction == "forward" else n - word

        _, src_h, src_c = reference_run(lstm, xs, {})
        patches = {}
        for site in sites:
            where = site.positions(len(base))[i]
            there = align[i][where] if align else where
            sb, ss = step(where, len(b)), step(there, len(s))
            basis = site.subspace
            if site.layer == 0:
                patches[(0, sb)] = (xs[ss], None, basis)
                continue
            h = src_h[site.layer - 1][ss] if site.state in ("h", "both") else None
            c = src_c[site.layer - 1][ss] if site.state in ("c", "both") else None
            patches[(site.layer, sb)] = (h, c, basis)
        outs, _, _ = reference_run(lstm, xb, patches)
        v = position[i]
        hidden = outs[-1][step(v - 1, len(b)) if direction == "forward" else step(v + 1, len(b))]
        ids, _ = head.ids(list(candidates[i]))
        hid = torch.from_numpy(np.stack([hidden, hidden])).float()
        lp = head.log_probs(hid, torch.from_numpy(ids)).double().numpy()
        out.append(float(lp[0] - lp[1]))
    return out


def test_the_unpatched_recurrence_is_the_models_forward_pass(model):
    """run_direction without patches gives BiLM's layer outputs (both directions; float32, 1e-5)."""
    from probing.elmo.chars import batch_char_ids
    from probing.elmo.model import reverse_padded

    elmo, _ = model
    sentences = [["the", "keys", "to", "the", "cabinet", "are", "here"], ["a", "dog", "runs"]]
    ids = torch.from_numpy(batch_char_ids(sentences, elmo.options.max_characters_per_token))
    with torch.no_grad():
        tokens, fw, bw, mask, _ = elmo.bilm(ids)
        lengths = mask.sum(1)
        mine_f, _, _ = run_direction(elmo.bilm.forward_lstm, tokens, mask)
        mine_b, _, _ = run_direction(elmo.bilm.backward_lstm, reverse_padded(tokens, lengths), mask)
    for k in range(elmo.options.n_layers):
        assert torch.allclose(mine_f[k], fw[k], atol=1e-5)
        assert torch.allclose(reverse_padded(mine_b[k], lengths), bw[k], atol=1e-5)


def test_base_and_source_differences_are_the_lm_scores(model):
    """logprob_diff_base = score(good)[v] - score(bad)[v]: the forward LM's log p at v reads only words before v,
    so the bad sentence's score at v is log p(second candidate | the base's prefix)."""
    from probing.lm.score import score

    base, source, cands, pos = template_pairs(4)
    frame = patch(model[0], base, source, [Site(1, "forward", 1)], candidates=cands, position=pos)
    bad = [b[:5] + [c[1]] + b[6:] for b, c in zip(base, cands)]
    good_lp = score(base, model[0]).query("position == 5").logprob_forward.to_numpy()
    bad_lp = score(bad, model[0]).query("position == 5").logprob_forward.to_numpy()
    assert np.allclose(frame.logprob_diff_base, good_lp - bad_lp, atol=1e-4)


def test_fast_path_equals_the_hand_stepped_reference(model):
    """h, c, both, a rank-3 subspace and the token layer, on pairs of different lengths aligned by a map, in
    each direction: the batched float32 path equals the float64 one-pair-at-a-time reference within 1e-4."""
    base = [["the", "key", "to", "the", "cabinets", "is", "here"], ["the", "dog", "runs", "fast"]]
    source = [["the", "old", "keys", "are", "here"], ["some", "big", "dogs", "run", "fast", "now"]]
    align = [{1: 2, 4: 2, 5: 3, 2: 1}, {1: 2, 2: 3, 3: 4, 0: 0}]
    cands = [("is", "are"), ("runs", "run")]
    basis = random_subspace(model[0].options.projection_dim, 3, seed=1)
    cases = {
        "forward": ([5, 2], [Site(1, "forward", (4, 1), "h"), Site(2, "forward", (1, 0), "c")]),
        "forward-sub": ([5, 2], [Site(2, "forward", (4, 1), "h", basis), Site(0, "forward", (1, 0))]),
        "backward": ([1, 2], [Site(1, "backward", (5, 3), "both"), Site(0, "backward", (4, 3), "h", basis)]),
    }
    for name, (pos, sites) in cases.items():
        fast = patch(model[0], base, source, sites, candidates=cands, position=pos, align=align)
        ref = reference_patch(model, base, source, sites, cands, pos, align)
        assert np.allclose(fast.logprob_diff_patched, ref, atol=1e-4), name
        assert not np.allclose(fast.logprob_diff_patched, fast.logprob_diff_base, atol=1e-3), name


def test_sanity_whole_forward_state_before_the_verb_gives_the_source(model):
    """Sanity row 1: every layer's full forward state at the word before the verb is all the forward LM reads
    at the verb (layer 2's output there is h2 + h1), so the patched difference is the source's own (1e-5) and
    the patched model follows the source on every pair where the source's run agrees with the source (100 %)."""
    base, source, cands, pos = template_pairs(48)
    sites = [Site(layer, "forward", 4) for layer in range(3)]
    frame = patch(model[0], base, source, sites, candidates=cands, position=pos)
    assert np.allclose(frame.logprob_diff_patched, frame.logprob_diff_source, atol=1e-5)
    agrees = frame.logprob_diff_source < 0
    assert agrees.sum() >= 40  # the bundled model gets most of these templates right
    assert interchange_accuracy(frame[agrees])[0] == 1.0


def test_sanity_random_subspace_control_is_within_two_points_of_no_effect(model):
    """Sanity row 2: a rank-1 random subspace of layer 1's forward h at the subject (the number probe's rank)
    carries about 1/256 of the base-source difference: the share following the source moves by at most 2
    points from the unpatched base's share, while the full h at the same site moves it by more than 20."""
    base, source, cands, pos = template_pairs(72)
    width = model[0].options.projection_dim
    sets = {"random": [Site(1, "forward", 1, "h", random_subspace(width, 1, seed=0))], "full": [Site(1, "forward", 1)]}
    frames = patch_many(model[0], base, source, sets, candidates=cands, position=pos)
    none = float((frames["random"].logprob_diff_base < 0).mean())
    assert abs(interchange_accuracy(frames["random"])[0] - none) <= 0.02
    assert interchange_accuracy(frames["full"])[0] - none > 0.2


def test_sanity_backward_sites_left_of_the_verb_change_nothing(model):
    """Sanity row 3: the backward LM predicts the verb from the words after it; it reaches the subject and the
    attractor only after that prediction, so patching them leaves the difference bit for bit as the base's."""
    base, source, cands, pos = template_pairs(8)
    sites = [Site(layer, "backward", where) for layer in range(3) for where in (1, 4)]
    frame = patch(model[0], base, source, sites, candidates=cands, position=pos)
    assert (frame.logprob_diff_patched.to_numpy() == frame.logprob_diff_base.to_numpy()).all()


def test_full_rank_subspace_is_the_whole_state_and_same_sentence_is_a_no_op(model):
    """A basis of all P directions replaces all of h (1e-5); patching a sentence with itself changes nothing."""
    base, source, cands, pos = template_pairs(3)
    width = model[0].options.projection_dim
    frames = patch_many(
        model[0],
        base,
        source,
        {"sub": [Site(1, "forward", 4, "h", np.eye(width))], "whole": [Site(1, "forward", 4, "h")]},
        candidates=cands,
        position=pos,
    )
    assert np.allclose(frames["sub"].logprob_diff_patched, frames["whole"].logprob_diff_patched, atol=1e-5)
    same = patch(model[0], base, base, [Site(2, "forward", 4)], candidates=cands, position=pos)
    assert np.allclose(same.logprob_diff_patched, same.logprob_diff_base, atol=1e-6)


def test_interchange_accuracy_value_and_interval():
    """3 of 4 pairs follow the source: 0.75, inside a percentile interval within [0, 1]."""
    import pandas as pd

    value, low, high = interchange_accuracy(pd.DataFrame({"follows_source": [True, True, False, True]}))
    assert value == 0.75 and 0.0 <= low <= value <= high <= 1.0 and low < high
    with pytest.raises(InputError, match="follows_source"):
        interchange_accuracy(pd.DataFrame({"x": [1]}))


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: Site(1, "left", 0), "Site.direction"),
        (lambda: Site(1, "forward", 0, "z"), "Site.state"),
        (lambda: Site(0, "forward", 0, "c"), "Site.state"),
        (lambda: Site(-1, "forward", 0), "Site.layer"),
        (lambda: Site(1, "forward", -2), "Site.position"),
        (lambda: Site(1, "forward", 0, "both", np.eye(4)[:, :2]), "Site.subspace"),
        (lambda: Site(1, "forward", 0, "h", np.zeros((4, 2))), "Site.subspace"),
    ],
)
def test_bad_sites_name_the_field(make, field):
    with pytest.raises(InputError, match=field):
        make()


def test_bad_calls_name_the_field(model):
    base, source, cands, pos = template_pairs(2)
    elmo = model[0]
    bad = [
        (dict(sites=[Site(1, "forward", 1), Site(1, "backward", 1)]), "sites"),
        (dict(sites=[Site(5, "forward", 1)]), "Site.layer"),
        (dict(sites=[Site(1, "forward", 9)]), "Site.position"),
        (dict(sites=[Site(1, "forward", 1, "h", np.eye(8)[:, :1])]), "Site.subspace"),
        (dict(position=7), "position"),
        (dict(candidates=("is", "zzzqqq")), "candidates"),
        (dict(align=[{1: 1}, {2: 2}], source_position=5), "align: pair 1"),
    ]
    for change, field in bad:
        kwargs = dict(sites=[Site(1, "forward", 1)], candidates=cands, position=pos) | change
        sites = kwargs.pop("sites")
        with pytest.raises(InputError, match=field):
            patch(elmo, base, source, sites, **kwargs)
