"""Erasing inside the biLM: an edit of layer 1's output per direction, read by layer 2 (BiLM.forward's ``edits``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from probing.analysis.erasure import Eraser, fit_eraser
from probing.elmo import Elmo
from probing.elmo.chars import batch_char_ids
from probing.errors import InputError

FIX = Path(__file__).parent / "fixtures" / "elmo_allennlp"
SENTENCES = [
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["Colorless", "green", "ideas", "sleep", "furiously"],
    ["I", "saw", "Paris", "in", "May", ",", "and", "it", "rained", "."],
    ["Yes"],
]


@pytest.fixture(scope="module")
def elmo() -> Elmo:
    """The AllenNLP test biLM (2 layers, 16-wide projections: each direction half of a stored layer is 16)."""
    return Elmo.from_files(FIX / "options.json", FIX / "lm_weights.hdf5")


def char_ids(elmo: Elmo) -> torch.Tensor:
    return torch.from_numpy(batch_char_ids(SENTENCES, elmo.options.max_characters_per_token))


@pytest.fixture(scope="module")
def erasers(elmo) -> tuple[Eraser, Eraser]:
    """Rank-1 LEACE erasers of "the word is capitalised" fitted on each direction's layer-1 outputs."""
    with torch.no_grad():
        _, fw, bw, mask, _ = elmo.bilm(char_ids(elmo))
    words = [w for s in SENTENCES for w in ["<S>", *s, "</S>"]]
    caps = np.array([w[:1].isupper() for w in words])
    out = []
    for half in (fw[0], bw[0]):
        eraser = fit_eraser(half[mask].double().numpy(), caps)
        assert eraser.rank_ == 1
        out.append(eraser)
    return out[0], out[1]


def cell_layer(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, w_p: torch.Tensor, cell_clip: float, proj_clip: float
) -> torch.Tensor:
    """One LSTM layer over one sentence ``(T, P)`` in float64, step by step (gate order i, j, f, o)."""
    p = x.shape[1]
    h = torch.zeros(p, dtype=torch.float64)
    c = torch.zeros(w_p.shape[0], dtype=torch.float64)
    outs = []
    for t in range(x.shape[0]):
        i, j, f, o = (x[t] @ w[:p] + h @ w[p:] + b).chunk(4)
        c = (torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)).clamp(-cell_clip, cell_clip)
        h = ((torch.sigmoid(o) * torch.tanh(c)) @ w_p).clamp(-proj_clip, proj_clip)
        outs.append(h)
    return torch.stack(outs)


@torch.no_grad()
def reference_layer2(elmo: Elmo, erasers: tuple[Eraser, Eraser]) -> list[torch.Tensor]:
    """Per sentence ``(T, 2P)`` [forward | backward] layer 2, run by hand: layer 1, the eraser's affine map
    ``x - ((x - bias) R^T) L^T`` applied to its output in float64, layer 2 on that, plus the skip connection
    from the erased layer 1."""
    bilm, opts = elmo.bilm, elmo.options
    ids = char_ids(elmo)
    mask = (ids > 0).any(-1)
    with torch.no_grad():
        tokens = bilm.token_embeddings(ids).double()
    result = []
    for row in range(len(SENTENCES)):
        x = tokens[row, : int(mask[row].sum())]
        halves = []
        for direction, eraser, reverse in (
            (bilm.forward_lstm, erasers[0], False),
            (bilm.backward_lstm, erasers[1], True),
        ):
            seq = x.flip(0) if reverse else x
            params = [
                (direction.weight[k].double(), direction.bias[k].double(), direction.proj[k].double()) for k in range(2)
            ]
            h1 = cell_layer(seq, *params[0], opts.cell_clip, opts.proj_clip)
            left, right, bias = (torch.from_numpy(a) for a in (eraser.proj_left_, eraser.proj_right_, eraser.bias_))
            h1 = h1 - ((h1 - bias) @ right.T) @ left.T
            h2 = cell_layer(h1, *params[1], opts.cell_clip, opts.proj_clip) + h1
            halves.append(h2.flip(0) if reverse else h2)
        result.append(torch.cat(halves, -1))
    return result


@pytest.mark.parametrize("grad", [False, True], ids=["packed-inference", "autograd"])
def test_identity_edit_is_bit_identical(elmo, grad):
    ids = char_ids(elmo)
    with torch.set_grad_enabled(grad):
        plain = elmo.bilm(ids)
        edited = elmo.bilm(ids, edits={1: (lambda x: x, lambda x: x)})
    for a, b in zip(plain[1] + plain[2], edited[1] + edited[2]):
        assert torch.equal(a, b)


@pytest.mark.parametrize("grad", [False, True], ids=["packed-inference", "autograd"])
def test_rank1_edit_matches_the_layers_run_by_hand(elmo, erasers, grad):
    """Layer 2 after erasing layer 1 equals the float64 hand-run reference to float32 precision (1e-5, the
    conformance bound of tests/test_elmo.py), and differs from the unedited layer 2 by much more (it did act)."""
    ids = char_ids(elmo)
    edits = {1: (erasers[0].torch_transform, erasers[1].torch_transform)}
    with torch.set_grad_enabled(grad):
        _, fw, bw, mask, _ = elmo.bilm(ids, edits=edits)
        _, fw0, bw0, _, _ = elmo.bilm(ids)
    for row, want in enumerate(reference_layer2(elmo, erasers)):
        n = int(mask[row].sum())
        got = torch.cat([fw[1][row, :n], bw[1][row, :n]], -1).double()
        plain = torch.cat([fw0[1][row, :n], bw0[1][row, :n]], -1).double()
        assert (got - want).abs().max() < 1e-5
        assert (plain - want).abs().max() > 1e-2
        for edited, before, eraser in ((fw, fw0, erasers[0]), (bw, bw0, erasers[1])):  # layer 1 is the erased one
            erased = eraser.torch_transform(before[0][row, :n].double())
            assert (edited[0][row, :n].double() - erased).abs().max() < 1e-6
    assert (fw[1] * ~mask.unsqueeze(-1)).abs().max() == 0  # padding stays zero


def test_edits_name_biLSTM_layers(elmo):
    with pytest.raises(InputError, match="no biLSTM layer \\[3\\]"):
        elmo.bilm(char_ids(elmo), edits={3: (lambda x: x, lambda x: x)})


# -- the intervened encoder (probing.analysis.intervention) ------------------------------------------------------------

DEMO_DEV = Path(__file__).parents[1] / "probing" / "resources" / "data" / "demo-ud" / "en_ewt-demo-dev.conllu.gz"


@pytest.fixture(scope="module")
def base(elmo):
    from probing.encoders import ElmoEncoder

    return ElmoEncoder.from_model(elmo)


def test_intervened_encoder_recomputes_layer_2_from_the_erased_layer_1(elmo, erasers, base):
    """encode() gives the hand-run reference's layer 2 (boundaries removed), the erased layer 1 and the
    unchanged layer 0; its fingerprint is the base's and the erasers'."""
    from probing.analysis.intervention import IntervenedElmoEncoder

    enc = IntervenedElmoEncoder(base, 1, *erasers, label="caps", method="leace")
    got, plain = enc.encode(SENTENCES), base.encode(SENTENCES)
    for want2, g, p in zip(reference_layer2(elmo, erasers), got, plain):
        assert np.abs(g[2] - want2[1:-1].numpy()).max() < 1e-5
        assert np.array_equal(g[0], p[0])
        halves = [erasers[0].transform(p[1][:, :16]), erasers[1].transform(p[1][:, 16:])]
        assert np.abs(g[1] - np.hstack(halves)).max() < 1e-5
    assert enc.intervention == "intervene:1:caps:leace"
    assert enc.fingerprint != base.fingerprint
    assert enc.fingerprint == IntervenedElmoEncoder(base, 1, *erasers).fingerprint
    assert enc.fingerprint != IntervenedElmoEncoder(base, 1, erasers[1], erasers[0]).fingerprint


def test_an_intervened_encoders_fingerprint_names_the_code_that_intervenes(erasers, base, monkeypatch):
    """The fingerprint names the intervened stores: another version of probing.analysis.intervention's code identity
    gives another fingerprint (so its stores are not served to changed intervening code)."""
    import probing.analysis.intervention
    from probing.analysis.intervention import IntervenedElmoEncoder

    before = IntervenedElmoEncoder(base, 1, *erasers).fingerprint
    monkeypatch.setattr(
        probing.analysis.intervention, "INTERVENTION_VERSION", probing.analysis.intervention.INTERVENTION_VERSION + 1
    )
    assert IntervenedElmoEncoder(base, 1, *erasers).fingerprint != before


def test_intervened_encoder_rejects_bad_layers_and_widths(erasers, base):
    from probing.analysis.intervention import IntervenedElmoEncoder

    with pytest.raises(InputError, match="biLSTM layer \\(1..2\\)"):
        IntervenedElmoEncoder(base, 3, *erasers)
    wide = fit_eraser(np.random.default_rng(0).standard_normal((50, 32)), np.arange(50) % 2)
    with pytest.raises(InputError, match="width 16"):
        IntervenedElmoEncoder(base, 1, erasers[0], wide)


def test_intervening_on_the_top_layer_erases_what_the_lm_head_reads(elmo, erasers, base):
    """Layer 2 (the top one) erased inside the biLM: stored layer 2 is the erasers' map of the unedited one, per
    half, and the layers below are unchanged (nothing above it is recomputed)."""
    from probing.analysis.intervention import IntervenedElmoEncoder

    enc = IntervenedElmoEncoder(base, 2, *erasers)
    for g, p in zip(enc.encode(SENTENCES), base.encode(SENTENCES)):
        assert np.array_equal(g[:2], p[:2])
        halves = [erasers[0].transform(p[2][:, :16]), erasers[1].transform(p[2][:, 16:])]
        assert np.abs(g[2] - np.hstack(halves)).max() < 1e-5


def test_fit_intervention_on_the_base_encoders_store(base, tmp_path):
    """UPOS erased from layer 1 on the demo UD dev split: fitted per half on the base model's own store; a store
    of another encoder is refused; the intervened store has another key and a guarded layer 1."""
    from probing.analysis.intervention import fit_intervention
    from probing.corpora import read_conllu
    from probing.encoders import get_encoder
    from probing.store import extract

    corpus = read_conllu(DEMO_DEV, name="demo-dev", split="dev")
    store = extract(base, corpus, cache_dir=tmp_path, progress=False)
    enc = fit_intervention(base, store, 1, "upos")
    assert enc.intervention == "intervene:1:upos:leace"
    assert all(e.rank_ == len(e.classes_) - 1 for e in enc.erasers)  # every UPOS class, the rare ones too
    erased = extract(enc, corpus, cache_dir=tmp_path, progress=False)
    assert erased.key != store.key
    y = store.tokens["upos"].to_numpy()
    for d in ("1f", "1b"):
        X = erased.layer(d, dtype=np.float64)
        means = np.stack([X[y == c].mean(0) for c in np.unique(y)])
        assert np.abs(means - X.mean(0)).max() < 1e-2  # fp16 store: class means equal to its rounding
    with pytest.raises(InputError, match="another encoder"):
        fit_intervention(get_encoder("random-elmo:" + str(FIX)), store, 1, "upos")


def experiment(intervene: dict, kind: str = "elmo") -> dict:
    encoder = {"name": "amnesic", "kind": kind, "intervene": intervene}
    if kind == "elmo":
        encoder.update(options=str(FIX / "options.json"), weights=str(FIX / "lm_weights.hdf5"))
    task = {"name": "upos", "kind": "tagging", "label": "upos", "train": "demo-ud:train", "test": ["demo-ud:test"]}
    return {"experiment": {"name": "erase"}, "encoders": [encoder], "tasks": [task]}


def test_experiment_intervene_option_builds_the_fitted_encoder(tmp_path):
    """``intervene = {...}`` on an [[encoders]] table gives an encoder whose erasers are fitted on first use on the
    unedited model's store of ``fit_on``: the same fingerprint as fit_intervention on that store."""
    from probing.analysis.intervention import LazyIntervenedEncoder, fit_intervention
    from probing.encoders import ElmoEncoder
    from probing.experiment.spec import parse_experiment
    from probing.store import extract

    fit_on = f"conllu:{DEMO_DEV}"
    exp = parse_experiment(experiment({"layer": 1, "label": "upos", "fit_on": fit_on}))
    spec = exp.encoders[0]
    assert exp.to_dict()["encoders"][0]["intervene"]["method"] == "leace"
    enc = spec.build(tmp_path)
    assert isinstance(enc, LazyIntervenedEncoder) and enc.name == "amnesic" and enc.dim == 32
    assert "fitted" not in enc.__dict__  # nothing is fitted until the fingerprint is asked for
    base = ElmoEncoder(FIX / "options.json", FIX / "lm_weights.hdf5")
    store = extract(base, spec.intervene.fit_on.load(), cache_dir=tmp_path, progress=False)
    assert enc.fingerprint == fit_intervention(base, store, 1, "upos").fingerprint
    assert enc.intervention == "intervene:1:upos:leace"


@pytest.mark.parametrize(
    ("intervene", "kind", "message"),
    [
        ({"layer": 1, "label": "upos", "fit_on": "demo-ud:train", "method": "pca"}, "elmo", "method"),
        ({"layer": 1, "label": "sense", "fit_on": "demo-ud:train"}, "elmo", "label"),
        ({"layer": 1, "label": "upos"}, "elmo", "fit_on"),
        ({"layer": 1, "label": "upos", "fit_on": "demo-ud:train", "rank": 3}, "elmo", "rank"),
        ({"layer": 1, "label": "upos", "fit_on": "demo-ud:train"}, "glove", "intervene"),
    ],
)
def test_experiment_intervene_option_errors(intervene, kind, message):
    from probing._toml import ExperimentError
    from probing.experiment.spec import parse_experiment

    with pytest.raises(ExperimentError, match=message):
        parse_experiment(experiment(intervene, kind))


def test_run_experiment_with_an_intervened_encoder(tmp_path):
    """The runner builds the intervened encoder with the experiment's cache: its rows come out under its name,
    and its stores are another key than the unedited model's."""
    from probing.experiment import run_experiment
    from probing.experiment.spec import parse_experiment

    data = experiment({"layer": 1, "label": "upos", "fit_on": f"conllu:{DEMO_DEV}"})
    plain = {
        "name": "plain",
        "kind": "elmo",
        "options": str(FIX / "options.json"),
        "weights": str(FIX / "lm_weights.hdf5"),
    }
    data["encoders"].append(plain)
    data["experiment"].update(cache_dir=str(tmp_path / "cache"), max_sentences=30, seeds=[0], bootstrap=10)
    data["probe"] = {"C": [1.0], "control": False, "mix": False, "concat": False}
    res = run_experiment(parse_experiment(data), tmp_path / "out", progress=False)
    acc = res.results.query("metric == 'accuracy' and layer in ['1', '2'] and encoder in ['amnesic', 'plain']")
    score = acc.pivot_table(index="layer", columns="encoder", values="value")
    majority = res.results.query("layer == 'majority' and metric == 'accuracy'")["value"].iloc[0]
    # UPOS erased from layer 1 (fitted on the whole demo dev split): a probe on 30 training sentences of the
    # erased layer 1 scores the majority class's 14.4 %, on the unedited one 38.3 %
    assert abs(score.loc["1", "amnesic"] - majority) < 0.02 < score.loc["1", "plain"] - majority - 0.1
    assert res.store("amnesic", "demo-ud", "test").key != res.store("plain", "demo-ud", "test").key
    tags = res.results.groupby("encoder")["intervention"].unique()
    assert list(tags["amnesic"]) == ["intervene:1:upos:leace"] and list(tags["plain"]) == [""]


def test_erase_task_option_adds_rows_that_differ_only_in_intervention(tmp_path):
    """``erase = { label = "upos" }`` runs the task again on every layer with UPOS erased by LEACE (fitted on the
    training store) and by the same-rank random control: the same rows, told apart by ``intervention``."""
    from probing.experiment import run_experiment
    from probing.experiment.spec import parse_experiment

    data = experiment({"layer": 1, "label": "upos", "fit_on": f"conllu:{DEMO_DEV}"})
    data["encoders"] = [
        {"name": "plain", "kind": "elmo", "options": str(FIX / "options.json"), "weights": str(FIX / "lm_weights.hdf5")}
    ]
    data["tasks"][0]["erase"] = {"label": "upos"}
    data["experiment"].update(cache_dir=str(tmp_path / "cache"), max_sentences=30, seeds=[0], bootstrap=10)
    data["probe"] = {"C": [1.0], "control": False, "mix": False, "concat": False}
    res = run_experiment(parse_experiment(data), tmp_path / "out", progress=False)
    rows = res.results[res.results["encoder"] == "plain"]
    keys = ["task", "dataset", "split", "encoder", "layer", "metric", "seed"]
    by = {tag: set(map(tuple, g[keys].to_numpy())) for tag, g in rows.groupby("intervention")}
    assert set(by) == {"", "erase:upos:leace", "erase:upos:random"}
    assert by[""] == by["erase:upos:leace"] == by["erase:upos:random"]
    acc = rows[rows["metric"] == "accuracy"].pivot_table(index="layer", columns="intervention", values="value")
    majority = res.results.query("layer == 'majority' and metric == 'accuracy'")["value"].iloc[0]
    # measured: every layer 14.4 % (the majority class) after LEACE; unerased 38.3 / 38.3 / 35.9 %, random
    # control 37.9 / 37.3 / 37.3 % (30 training sentences of the 32-wide AllenNLP test biLM)
    assert (acc["erase:upos:leace"] - majority).abs().max() < 0.01
    assert (acc["erase:upos:random"] - acc[""]).abs().max() < 0.03
    assert (acc[""] - majority).min() > 0.2
    summary = res.summary()
    assert "intervention" in summary.index.names


@pytest.mark.parametrize(
    ("erase", "message"),
    [
        ({"label": "upos", "method": "pca"}, "method"),
        ({"label": "sense"}, "label"),
        ([{"label": "upos"}, {"label": "upos", "method": "leace"}], "distinct"),
        ("upos", "erase"),
    ],
)
def test_task_erase_option_errors(erase, message):
    from probing._toml import ExperimentError
    from probing.experiment.spec import parse_experiment

    data = experiment({"layer": 1, "label": "upos", "fit_on": "demo-ud:train"})
    data["tasks"][0]["erase"] = erase
    with pytest.raises(ExperimentError, match=message):
        parse_experiment(data)


def test_task_erase_option_lists_and_keys():
    from probing.experiment.spec import parse_experiment

    data = experiment({"layer": 1, "label": "upos", "fit_on": "demo-ud:train"})
    plain = parse_experiment(data).tasks[0]
    data["tasks"][0]["erase"] = [{"label": "upos"}, {"label": "xpos", "method": "inlp"}]
    task = parse_experiment(data).tasks[0]
    assert [[str(iv) for iv in e.interventions()] for e in task.options["erase"]] == [
        ["erase:upos:leace", "erase:upos:random"],
        ["erase:xpos:inlp", "erase:xpos:random"],
    ]
    assert "erase" not in plain.to_dict() and task.to_dict()["erase"][1] == {"label": "xpos", "method": "inlp"}


# -- the LM's behaviour (lm_effect) ---------------------------------------------------------------------------

PAIRS = [
    ("The cat sat on the mat .", "The cat sit on the mat ."),
    ("I saw Paris in May .", "I seen Paris in May ."),
    ("Yes , it rained .", "Yes , it rain ."),
    ("They care about the government .", "They cares about the government ."),
]


@pytest.fixture(scope="module")
def head():
    """A synthetic full softmax over the AllenNLP test vocabulary, 16 wide like each direction's top layer."""
    from probing.lm import SoftmaxHead
    from probing.lm.head import read_vocab

    vocab = read_vocab(FIX / "vocab_test.txt")
    rng = np.random.default_rng(0)
    return SoftmaxHead(rng.standard_normal((len(vocab), 16)), rng.standard_normal(len(vocab)), vocab)


def slow_logprob(elmo: Elmo, head, sentence: list[str], edits) -> tuple[float, float]:
    """One sentence alone through the autograd path with ``edits``: float64 log-softmax totals of the forward
    (``w1 .. wn </S>``) and backward (``<S> w1 .. wn``) predictions."""
    with torch.enable_grad():
        _, fw, bw, _, _ = elmo.bilm(torch.from_numpy(batch_char_ids([sentence])), edits=edits)
    w, b = head.weight.double().numpy(), head.bias.double().numpy()
    tokens = ["<S>", *sentence, "</S>"]
    target = [head.index.get(t, head.unk) for t in tokens]

    def logp(h: torch.Tensor, t: int) -> float:
        z = w @ h.detach().double().numpy() + b
        return float(z[t] - np.log(np.exp(z - z.max()).sum()) - z.max())

    n = len(sentence)
    forward = sum(logp(fw[-1][0, k], target[k + 1]) for k in range(n + 1))
    backward = sum(logp(bw[-1][0, k], target[k - 1]) for k in range(1, n + 2))
    return forward, backward


def test_lm_effect_matches_a_straightforward_computation(elmo, erasers, base, head):
    """Perplexity per direction and minimal-pair accuracy of the unedited model, the LEACE intervention and a
    rank-1 random control, each equal to a sentence-at-a-time float64 computation on the autograd path; the
    change is the difference to the unedited row, with a paired bootstrap CI (zero for the unedited row)."""
    import pandas as pd

    from probing.analysis.intervention import IntervenedElmoEncoder, lm_effect

    leace = IntervenedElmoEncoder(base, 1, *erasers, label="caps", method="leace")
    random = [fit_eraser(np.zeros((2, 16)), None, "random", rank=1, random_state=s) for s in (1, 2)]
    control = IntervenedElmoEncoder(base, 1, *random, label="caps", method="random")
    pairs = pd.DataFrame(PAIRS, columns=["good", "bad"])
    table = lm_effect([leace, control], SENTENCES, pairs, head=head, n_boot=200, batch_size=2)
    assert list(table["intervention"].unique()) == ["", "intervene:1:caps:leace", "intervene:1:caps:random"]
    for tag, edits in (("", None), (leace.intervention, leace.edits), (control.intervention, control.edits)):
        rows = table[table["intervention"] == tag].set_index(["measure", "direction"])
        totals = np.array([slow_logprob(elmo, head, s, edits) for s in SENTENCES])
        count = sum(len(s) + 1 for s in SENTENCES)
        want = np.exp(-np.array([totals[:, 0].sum(), totals[:, 1].sum(), totals.sum() / 2]) / count)
        got = rows.loc["perplexity"].loc[["forward", "backward", "both"], "value"].to_numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5)
        good = np.array([slow_logprob(elmo, head, g.split(), edits) for g, _ in PAIRS])
        bad = np.array([slow_logprob(elmo, head, b.split(), edits) for _, b in PAIRS])
        right = [np.mean(good[:, 0] > bad[:, 0]), np.mean(good[:, 1] > bad[:, 1]), np.mean(good.sum(1) > bad.sum(1))]
        assert rows.loc["pair_accuracy"].loc[["forward", "backward", "both"], "value"].tolist() == right
        assert (rows["ci_low"] <= rows["value"] + 1e-12).all() and (rows["value"] <= rows["ci_high"] + 1e-12).all()
    base_rows = table[table["intervention"] == ""]
    assert (base_rows[["change", "change_ci_low", "change_ci_high"]] == 0).all().all()
    edited = table[table["intervention"] == leace.intervention].reset_index(drop=True)
    np.testing.assert_allclose(edited["change"], edited["value"] - base_rows["value"].to_numpy())
    perplexity = edited[edited["measure"] == "perplexity"]
    assert (perplexity["change"].abs() > 1e-3).all()  # the edit did act on what the head reads
    assert set(table.loc[table["measure"] == "perplexity", "n"]) == {len(SENTENCES)}
    assert set(table.loc[table["measure"] == "pair_accuracy", "n"]) == {len(PAIRS)}


def test_lm_effect_errors(erasers, base, head):
    from probing.analysis.intervention import IntervenedElmoEncoder, lm_effect
    from probing.encoders import ElmoEncoder

    with pytest.raises(InputError, match="at least one intervention"):
        lm_effect([], SENTENCES, head=head)
    one = IntervenedElmoEncoder(base, 1, *erasers)
    with pytest.raises(InputError, match="no held-out sentences"):
        lm_effect([one], [], head=head)
    other = ElmoEncoder.from_model(Elmo.from_files(FIX / "options.json", FIX / "lm_weights.hdf5"), name="other")
    other._model_fingerprint = "another model"
    with pytest.raises(InputError, match="same model"):
        lm_effect([one, IntervenedElmoEncoder(other, 1, *erasers, name="x")], SENTENCES, head=head)
    with pytest.raises(InputError, match="named alike"):
        lm_effect([one, IntervenedElmoEncoder(base, 1, *erasers, name="again")], SENTENCES, head=head)


def identity_eraser(width: int) -> Eraser:
    """An eraser that removes nothing (rank 0): ``transform`` subtracts an exact zero."""
    eraser = fit_eraser(np.zeros((2, width)), None, "random", rank=1)
    eraser.proj_left_, eraser.proj_right_, eraser.rank_ = np.zeros((width, 0)), np.zeros((0, width)), 0
    return eraser


def test_lm_effect_of_the_top_layer_equals_scoring_with_the_eraser_folded_into_the_head(elmo, erasers, base, head):
    """Erasing the top layer (one eraser for both directions) is an affine map the head reads: logits
    ``W (P h + c) + b`` = ``(W P) h + (W c + b)``. So the intervened perplexity must equal
    :func:`probing.lm.score.iter_scores` of the unedited model with that folded head (an independent path)."""
    from probing.analysis.intervention import IntervenedElmoEncoder, lm_effect
    from probing.lm import SoftmaxHead
    from probing.lm.score import iter_scores

    eraser = fit_eraser(np.random.default_rng(3).standard_normal((40, 16)), np.arange(40) % 3)
    top = IntervenedElmoEncoder(base, 2, eraser, eraser, label="toy", method="leace")
    table = lm_effect([top], SENTENCES, head=head, n_boot=50)
    w, b = head.weight.double().numpy(), head.bias.double().numpy()
    shift = eraser.proj_left_ @ (eraser.proj_right_ @ eraser.bias_)  # c: transform(h) = P h + c
    folded = SoftmaxHead(w @ eraser.projection_, w @ shift + b, head.vocab)
    totals = np.array([(s.total_forward, s.total_backward) for _, s in iter_scores(SENTENCES, elmo, folded)])
    count = sum(len(s) + 1 for s in SENTENCES)
    want = np.exp(-np.array([totals[:, 0].sum(), totals[:, 1].sum(), totals.sum() / 2]) / count)
    rows = table[(table["intervention"] == "intervene:2:toy:leace") & (table["measure"] == "perplexity")]
    np.testing.assert_allclose(rows["value"].to_numpy(), want, rtol=1e-5)


def test_lm_effect_on_the_bundled_model(tmp_path):
    """The bundled model and its own LM head, three sentences and two pairs: the unedited perplexities are
    those of :func:`probing.lm.sentence_scores`; an intervention that removes nothing changes nothing, bit
    for bit (value, change and its CI all exactly 0); a rank-64 random subspace out of layer 1 does change
    the perplexity (what the top layer computes from layer 1 moved)."""
    import pandas as pd

    from probing.analysis.intervention import IntervenedElmoEncoder, lm_effect
    from probing.encoders import ElmoEncoder
    from probing.lm import sentence_scores

    model = Elmo.from_pretrained("default")
    base = ElmoEncoder.from_model(model)
    half = base.dim // 2
    none = IntervenedElmoEncoder(base, 1, identity_eraser(half), identity_eraser(half), label="none", method="identity")
    noise = [fit_eraser(np.zeros((2, half)), None, "random", rank=64, random_state=s) for s in (1, 2)]
    control = IntervenedElmoEncoder(base, 1, *noise, label="none")
    texts = ["The cat sat on the mat .", "It rained in May .", "Colorless green ideas sleep furiously ."]
    pairs = pd.DataFrame([PAIRS[0], PAIRS[2]], columns=["good", "bad"])
    table = lm_effect([none, control], texts, pairs, n_boot=100).set_index(["intervention", "measure", "direction"])
    scores = sentence_scores(texts, model)
    count = (scores["n_words"] + 1).sum()
    want = np.exp(-scores[["logprob_forward", "logprob_backward", "logprob_both"]].sum().to_numpy() / count)
    got = table.loc[("", "perplexity")].loc[["forward", "backward", "both"], "value"].to_numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    unedited, identity = table.loc[""], table.loc[none.intervention]
    assert unedited["value"].tolist() == identity["value"].tolist()
    assert (identity[["change", "change_ci_low", "change_ci_high"]] == 0).all().all()
    assert (table.loc[(control.intervention, "perplexity"), "change"].abs() > 1e-3).all()


def test_a_registered_encoder_keeps_its_checkpoint_so_lm_effect_finds_the_head():
    """An experiment's ``model = "default"`` encoder (ElmoEncoder.pretrained) builds a model that knows its
    registered name, so the LM head is found without being passed (what notebook 09 relies on)."""
    from probing.encoders import ElmoEncoder
    from probing.lm.head import AdaptiveHead
    from probing.lm.score import load_model

    enc = ElmoEncoder.pretrained("default")
    assert enc.checkpoint == "default" and enc.model.checkpoint == "default"
    assert isinstance(load_model(enc.model)[1], AdaptiveHead)
    assert ElmoEncoder.from_model(enc.model).checkpoint == "default"
