"""Encoder kinds own themselves: the built-in kinds' fingerprints and store keys are those recorded before kinds
existed (byte for byte), a kind registered from outside the package (tests/toy_encoder.py, one registration
line) runs through ``probing run`` and ``probing report`` with its own option, and its code names its stores."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import probing.encoders.elmo as elmo_kind
import probing.encoders.random_elmo as random_elmo_kind
from probing import cli
from probing._toml import ExperimentError
from probing.encoders import (
    ENCODER_KINDS,
    CodeKeyedEncoder,
    EncoderKind,
    encoder_kind,
    get_encoder,
    lm_checkpoint,
    register_encoder_kind,
)
from probing.errors import InputError
from probing.experiment import parse_experiment
from probing.identity import digest
from probing.results import read_results
from probing.store import Store
from probing.store.format import store_key
from tests import toy_encoder

FIX = Path(__file__).parent / "fixtures"
GLOVE = FIX / "glove" / "tiny.glove.txt"
N = 12

# Recorded on main at 6b13b37, before the encoders became a package of kinds (probing/encoders.py): for each
# description, the encoder's name, fingerprint and the key of its store of a corpus whose fingerprint is "0" * 64.
# ELMo fingerprints include the code digest of probing.elmo, pinned here to its value then, so that this test
# checks what the encoders add (a real edit of probing.elmo renews every ELMo store, as it should).
ELMO_CODE = "aca51037cb99cec11afc911f51e681b34d89e51f210849e0ed83acca85b5e0fa"
CORPUS = "0" * 64
GOLDEN = {
    "folder": (
        "elmo",
        "931dc64f353fa59bc3fa54fe59c686b721f0058bf3e4b7acc4538ec346c0285c",
        "b769881b77e15f719e151ff41f2e89b3e122f1b3abda7d7503322ca0bb28e0e2",
    ),
    "folder-stateful": (
        "elmo",
        "9c8036e37ca87828c17e3e506434991fbfddd81d101fdff352033322b03441ae",
        "518ff2e19e017435ec4cad7d0eb24aa1fc0f16df643f2540c212bbede4685355",
    ),
    "default": (
        "elmo",
        "538cbcbf64dd94cc76bdf4f5f5a0ad675f361e1be7c700d3469382c108cc1848",
        "e3c2dc4c02f7c3bb7d97a7229662b392a1a46448b316ee798dfec56068b7482d",
    ),
    "random-elmo": (
        "random-elmo",
        "fb83eec740a9850baf9178717d18d17bb870ce23442ab69a05db6a46b0a6db13",
        "287de2c6feabfc7413d1718beb51a4e8e4a703620364ccd041ad6bfada2e8540",
    ),
    "random-elmo:folder seed 3": (
        "random-elmo",
        "17591e115ced752936206a57cab69cc8f653df5d22b7f67827f82e81d512e199",
        "47dc95b59eb25d4aea8a843dd15f528b3dd4bcd7826c836a0283b7f6f40c6f23",
    ),
    "random-elmo:options.json": (
        "random-elmo",
        "da6a8f59c7db58281c2af1aa6e48d1f1bda23e749a0d0361e05bc2a89717ab4f",
        "47baab7cf219af489468aee781206e4225b40d13ee0daa3b46d81fe7a2d47442",
    ),
    "glove:PATH": (
        "glove",
        "5329edafe422aef3fce70367f64cf49ffadfc235f46788570eb1f0d0a9adfe95",
        "dfa317677740673709118cc6603a5ba18582ef07d070cf58d5bf9740c6fda629",
    ),
    "glove": (
        "glove",
        "38ff21c15d7521690795019f9da76aee89098678a849c1efa38a5ff4f4eac3d0",
        "f3cf47d8804253967e11de1e99dbfa5d94b0eef122f94a1ea12d5244888a5f45",
    ),
}
# the same encoders from an experiment file: (the description above whose encoder it is, the [[encoders]] keys)
SPECS = {
    "e1": ("folder", 'kind = "elmo"\noptions = "model/options.json"\nweights = "model/weights.hdf5"'),
    "e3": ("folder", 'kind = "elmo"\nmodel = "model"'),
    "r2": ("random-elmo:options.json", 'kind = "random-elmo"\nmodel = "model"'),
    "r3": ("random-elmo:options.json", 'kind = "random-elmo"\noptions = "model/options.json"'),
    "g1": ("glove", 'kind = "glove"'),
    "g2": ("glove:PATH", f'kind = "glove"\nvectors = "{GLOVE}"'),
}
# encoders only an experiment file describes: (name, fingerprint, store key), recorded with the others
SPEC_ONLY = {
    "e2": (
        'kind = "elmo"\nmodel = "default"\nstateful = true\nbatch_size = 8',
        "fa22f6341fe7d722d061c960be2c2886377d0c8cdb7c03cb9bc19a118266d2c5",
        "48e71a76ced4ab2c07753c06f386bf89b21082c31beb25c2a8b6f3c3b7b93255",
    ),
    "r1": (
        'kind = "random-elmo"\nseed = 5',
        "070c1dc9f452d57f2d23e4a5b6c8795b5f0a0ca7f2d89edeeaecc80daef5ae2d",
        "9e5613f9d15e704600167efd965d9b136d6129484b0c72c79843f2523378d80f",
    ),
}


@pytest.fixture
def pinned_elmo_code(monkeypatch):
    for module in (elmo_kind, random_elmo_kind):
        monkeypatch.setattr(module, "elmo_code_digest", lambda: ELMO_CODE)


@pytest.fixture
def kinds():
    """Encoder kinds registered by a test are unregistered after it."""
    saved = dict(ENCODER_KINDS)
    yield
    ENCODER_KINDS.clear()
    ENCODER_KINDS.update(saved)


def _described(description: str, model: Path):
    given = {
        "folder": (str(model), {}),
        "folder-stateful": (str(model), {"stateful": True}),
        "random-elmo:folder seed 3": (f"random-elmo:{model}", {"seed": 3}),
        "random-elmo:options.json": (f"random-elmo:{model / 'options.json'}", {}),
        "glove:PATH": (f"glove:{GLOVE}", {}),
    }
    text, kwargs = given.get(description, (description, {}))
    return get_encoder(text, **kwargs)


@pytest.mark.parametrize("description", list(GOLDEN))
def test_built_in_kinds_keep_their_fingerprints_and_store_keys(description, elmo_folder, pinned_elmo_code):
    enc = _described(description, elmo_folder / "model")
    assert (enc.name, enc.fingerprint, store_key(enc.fingerprint, CORPUS)) == GOLDEN[description]
    assert not isinstance(enc, CodeKeyedEncoder)  # the built-in kinds are keyed as they were


def test_experiment_encoders_keep_their_fingerprints_and_store_keys(elmo_folder, pinned_elmo_code):
    tables = {**{n: keys for n, (_, keys) in SPECS.items()}, **{n: keys for n, (keys, _, _) in SPEC_ONLY.items()}}
    toml = "".join(f'[[encoders]]\nname = "{n}"\n{keys}\n' for n, keys in tables.items())
    toml += '[[tasks]]\nkind = "tagging"\nlabel = "upos"\ntrain = "demo-ud:train"\ntest = "demo-ud:test"\n'
    built = {spec.name: spec.build() for spec in parse_experiment(toml, base=elmo_folder).encoders}
    for name, (description, _) in SPECS.items():
        assert (built[name].fingerprint, store_key(built[name].fingerprint, CORPUS)) == GOLDEN[description][1:]
    for name, (_, fingerprint, key) in SPEC_ONLY.items():
        assert (built[name].fingerprint, store_key(built[name].fingerprint, CORPUS)) == (fingerprint, key)
    assert {name: enc.name for name, enc in built.items()} == {name: name for name in tables}


def test_capabilities_come_from_the_kind_not_the_class(elmo_folder):
    """The bundled model (a registered checkpoint) has an LM head; the same files from a folder, a random ELMo
    and GloVe have none; only the ELMo kinds have a biLM to intervene in."""
    assert lm_checkpoint(get_encoder("default")) == "default"
    assert lm_checkpoint(get_encoder(str(elmo_folder / "model"))) is None
    assert lm_checkpoint(get_encoder("random-elmo")) is None
    assert lm_checkpoint(get_encoder(f"glove:{GLOVE}")) is None
    assert [k for k, kind in ENCODER_KINDS.items() if kind.bilm is not None] == ["elmo", "random-elmo"]


def test_get_encoder_names_every_kinds_forms_when_none_matches():
    # the kinds asked in turn, the latest registered first; ELMo's forms are the checkpoint names (as before kinds)
    with pytest.raises(
        InputError,
        match=r"nor a known name \(minilm, transformer:FOLDER, fasttext:PATH, word2vec:PATH, glove, glove:PATH, random-elmo\[:MODEL\], small, .*default\)$",
    ):
        get_encoder("no-such-model")


def test_register_encoder_kind_refuses_to_shadow_a_kind_silently(kinds):
    with pytest.raises(InputError, match="'glove' is already registered"):
        register_encoder_kind(replace(encoder_kind("glove"), version=2))
    with pytest.raises(InputError, match="options must be a dataclass"):
        EncoderKind("bad", dict, toy_encoder.build)
    with pytest.raises(InputError, match="shorthand and forms together"):
        EncoderKind("bad", toy_encoder.ToyOptions, toy_encoder.build, shorthand=toy_encoder.shorthand)


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_an_outside_kinds_code_names_its_stores(tmp_path, monkeypatch):
    """The fingerprint of a kind keyed by its code changes with a statement of its module, not with a comment."""
    source = Path(toy_encoder.__file__).read_text(encoding="utf-8")
    path = tmp_path / "toy_copy.py"
    monkeypatch.setattr(sys, "modules", dict(sys.modules))

    def fingerprint(text: str) -> str:
        path.write_text(text, encoding="utf-8")
        return _load(path, "toy_copy").SPELLING.encoder(toy_encoder.ToyOptions(2.0)).fingerprint

    before = fingerprint(source)
    assert fingerprint(source + "\n# a comment\n") == before
    # a longer file: the code digest is memoised per (path, mtime, size), and a coarse clock may keep the mtime
    edited = source.replace("sum(c.isupper() for c in word)", "sum(c.isupper() for c in word) * 2")
    assert edited != source and fingerprint(edited) != before
    inner = toy_encoder.SpellingEncoder(2.0, "spelling")
    assert before != inner.fingerprint  # the built encoder's own fingerprint is not its store identity


def test_an_encoder_kind_from_outside_runs_through_the_cli_and_the_report(kinds, elmo_folder, capsys):
    register_encoder_kind(toy_encoder.SPELLING)  # the one registration line
    toml = elmo_folder / "spelling.toml"
    text = f"""
        [experiment]
        max_sentences = {N}
        bootstrap = 20
        [probe]
        C = [1.0]
        control = false
        mix = false
        concat = false
        [[encoders]]
        name = "spell"
        kind = "spelling"
        scale = 2.0
        [[tasks]]
        name = "upos"
        kind = "tagging"
        label = "upos"
        train = "demo-ud:train"
        test = ["demo-ud:test"]
        """
    toml.write_text(text)
    out = elmo_folder / "out"
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    results = read_results(out)
    acc = results[(results.metric == "accuracy") & (results.encoder == "spell")].set_index("layer")["value"]
    assert sorted(acc.index) == ["0", "1"] and ((acc > 0) & (acc <= 1)).all()
    prov = json.loads((out / "results.json").read_text())["provenance"]
    assert prov["experiment"]["encoders"] == [{"name": "spell", "kind": "spelling", "scale": 2.0}]
    # the store is named by the kind's code identity beside the encoder's own fingerprint
    inner = toy_encoder.SpellingEncoder(2.0, "spell")
    code = toy_encoder.SPELLING.code_identity()
    fingerprint = digest({"kind": "spelling", "code": code, "encoder": inner.fingerprint})
    assert prov["encoders"]["spell"]["fingerprint"] == fingerprint
    store = prov["stores"]["spell/demo-ud:test"]
    assert store["key"] == store_key(fingerprint, store["corpus_fingerprint"])
    # the stored vectors are the encoder's: layer "0" = scale x spelling features (small integers: exact in fp16)
    stored = Store.open(store["path"])
    expected = [[2.0 * f for f in inner.features(w)] for w in stored.tokens["word"]]
    np.testing.assert_array_equal(stored.layer("0", dtype=np.float64), expected)
    assert cli.main(["report", str(out)]) == 0
    assert "spell" in (out / "report.html").read_text(encoding="utf-8")

    # its own option is checked like any key, naming file and key
    with pytest.raises(ExperimentError, match=r"encoders\[0\]\.scale: expected a positive finite number, got 'x'"):
        parse_experiment(text.replace("scale = 2.0", 'scale = "x"'))
    with pytest.raises(ExperimentError, match=r"encoders\[0\]: unknown key\(s\) 'intervene'"):
        parse_experiment(text.replace("scale = 2.0", "intervene = {}"))  # no biLM: no intervene key

    # a new version of the kind's code: a new store, extracted again, and the same rows (same vectors)
    register_encoder_kind(replace(toy_encoder.SPELLING, version=2), replace=True)
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    again = json.loads((out / "results.json").read_text())["provenance"]["stores"]["spell/demo-ud:test"]
    assert again["key"] != store["key"] and not again["cache_hit"]
    np.testing.assert_array_equal(read_results(out)["value"], results["value"])
    # the shorthand of the CLI's --model, parsed by the kind itself
    enc = get_encoder("spelling:3")
    assert (enc.name, enc.encode([["Ab"]])[0][0, 0].tolist()) == ("spelling", [6.0, 3.0, 3.0, 3.0])
    capsys.readouterr()


def test_every_name_the_encoders_module_defined_is_still_importable():
    """The names probing/encoders.py defined before it became a package (its own definitions, not its imports)."""
    import probing.encoders

    before = [
        "ELMO_COMPUTE_VERSION",
        "FINGERPRINT_VERSION",
        "VOCAB_FILES",
        "ElmoEncoder",
        "Encoder",
        "GloveEncoder",
        "RandomElmoEncoder",
        "elmo_code_digest",
        "elmo_options_path",
        "get_encoder",
        "training_vocabulary",
        "weights_in_folder",
    ]
    assert [name for name in before if not hasattr(probing.encoders, name)] == []
