"""LinearProbe / ScalarMixProbe and their CV forms against sklearn and known answers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.datasets import load_digits, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from probing.probes.linear import LinearProbe, LinearProbeCV, concat_layers
from probing.probes.mix import ScalarMixProbe, ScalarMixProbeCV, bootstrap_mix_weights
from probing.probes.solver import _linear_objective, _mix_objective


def objective(X, y_idx, coef, intercept, C):
    """sklearn's LogisticRegression objective divided by C n, in float64."""
    z = X.astype(np.float64) @ coef.T + intercept
    if z.shape[1] == 1:
        z = np.column_stack([np.zeros(len(z)), z[:, 0]])
    nll = logsumexp(z, axis=1) - z[np.arange(len(z)), y_idx]
    return nll.mean() + np.sum(coef**2) / (2 * C * len(X))


def sk_fit(X, y, C, solver="lbfgs", **kw):
    """High-precision sklearn reference (float64, tol 1e-10). One BLAS thread: these problems are far too
    small to gain from more, and on a busy machine threads spinning for each other made the digits
    reference (newton-cholesky, 650 x 650 Hessians) 25x slower (10 s instead of 0.4 s)."""
    with threadpool_limits(limits=1):
        return LogisticRegression(C=C, tol=1e-10, max_iter=10000, solver=solver, **kw).fit(X.astype(np.float64), y)


def rel_diff(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def _five_classes(scales, offsets):
    X, y = make_classification(
        n_samples=1500,
        n_features=30,
        n_informative=12,
        n_redundant=0,
        n_classes=5,
        n_clusters_per_class=1,
        class_sep=0.8,
        random_state=0,
    )
    X = (X * scales + offsets).astype(np.float32)
    return X[:1200], y[:1200], X[1200:], y[1200:]


@pytest.fixture(scope="module")
def multiclass():
    """Mildly scaled features: sklearn's lbfgs converges to 1e-10 in ~200 iterations."""
    return _five_classes(np.linspace(0.5, 3, 30), np.linspace(-1, 2, 30))


@pytest.fixture(scope="module")
def uneven():
    """Scales from 0.1 to 20 and offsets up to 50, like activations with a few huge dimensions."""
    return _five_classes(np.linspace(0.1, 20, 30), np.linspace(-5, 50, 30))


def _assert_same_solution(ours, sk, X, y, Xt, yt, C, coef_tol):
    # Same objective, same C: same solution. Accuracy within 0.3 points (the brief's bound).
    assert abs(ours.score(X, y) - sk.score(X, y)) <= 0.003
    assert abs(ours.score(Xt, yt) - sk.score(Xt, yt)) <= 0.003
    assert rel_diff(ours.coef_, sk.coef_) < coef_tol
    assert np.allclose(ours.intercept_, sk.intercept_, atol=coef_tol * np.abs(sk.intercept_).max())
    f_ours, f_sk = (objective(X, y, m.coef_, m.intercept_, C) for m in (ours, sk))
    assert f_ours - f_sk < 1e-7, (f_ours, f_sk)


@pytest.mark.parametrize("C", [0.05, 1.0])
def test_matches_sklearn_lbfgs(multiclass, C):
    X, y, Xt, yt = multiclass
    sk = sk_fit(X, y, C)
    ours = LinearProbe(C=C, tol=1e-7, max_iter=2000).fit(X, y)
    # coefficients within 1e-3 relative (measured ~1e-4; the problem is well conditioned)
    _assert_same_solution(ours, sk, X, y, Xt, yt, C, 1e-3)


@pytest.mark.parametrize("precondition", ["whiten", "standardize"])
def test_matches_sklearn_on_uneven_scales(uneven, precondition):
    # sklearn's lbfgs needs >5000 iterations here; its Newton solver minimises the same objective
    # exactly in 6 steps, so it is the reference. Both our preconditioners must reach it.
    X, y, Xt, yt = uneven
    sk = sk_fit(X, y, 1.0, solver="newton-cholesky")
    ours = LinearProbe(C=1.0, tol=1e-7, max_iter=3000, precondition=precondition).fit(X, y)
    _assert_same_solution(ours, sk, X, y, Xt, yt, 1.0, 1e-3)


def test_matches_sklearn_digits():
    X, y = load_digits(return_X_y=True)  # 1797 x 64 pixels, several constant, near-collinear
    X = X.astype(np.float32)
    sk = sk_fit(X, y, 0.05, solver="newton-cholesky")
    ours = LinearProbe(C=0.05, tol=1e-6, max_iter=3000).fit(X, y)
    assert abs(ours.score(X, y) - sk.score(X, y)) <= 0.003
    assert rel_diff(ours.coef_, sk.coef_) < 2e-3  # measured 4e-4
    const = X.std(0) == 0
    assert np.abs(ours.coef_[:, const]).max() < 1e-6 * np.abs(ours.coef_).max()  # no signal there


def test_binary_string_labels_match_sklearn():
    X, y = make_classification(n_samples=800, n_features=12, n_redundant=0, random_state=3)
    labels = np.array(["NOUN", "VERB"])[y]
    sk = sk_fit(X, labels, 0.5)
    ours = LinearProbe(C=0.5, tol=1e-7).fit(X.astype(np.float32), labels)
    assert ours.coef_.shape == (1, 12)  # one logit for two classes, as sklearn
    assert list(ours.classes_) == ["NOUN", "VERB"]
    assert rel_diff(ours.coef_, sk.coef_) < 1e-4
    assert np.array_equal(ours.predict(X), sk.predict(X))
    assert np.allclose(ours.predict_proba(X), sk.predict_proba(X), atol=1e-4)


def test_no_intercept_matches_sklearn(multiclass):
    X, y, _, _ = multiclass
    X = X[:, :10] + 0.5  # an offset the model must live with
    sk = sk_fit(X, y, 1.0, fit_intercept=False)
    ours = LinearProbe(C=1.0, tol=1e-7, max_iter=2000, fit_intercept=False).fit(X, y)
    assert np.all(ours.intercept_ == 0)
    assert rel_diff(ours.coef_, sk.coef_) < 1e-4


def test_fp16_memmap_and_chunking(tmp_path, multiclass):
    X, y, Xt, _ = multiclass
    path = tmp_path / "layer.f16"
    mm = np.memmap(path, dtype=np.float16, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    ro = np.memmap(path, dtype=np.float16, mode="r", shape=X.shape)
    a = LinearProbe(C=1.0, tol=1e-7, max_iter=1000, chunk_rows=97).fit(ro, y)
    b = LinearProbe(C=1.0, tol=1e-7, max_iter=1000).fit(np.asarray(ro, dtype=np.float32), y)
    # Same data (the fp16 values), different chunking and input dtype: same solution, up to where
    # within tol each run stops (chunked fp32 sums give slightly different preconditioners).
    assert rel_diff(a.coef_, b.coef_) < 1e-3
    assert np.array_equal(a.predict(ro), b.predict(ro))
    assert np.array_equal(a.predict(Xt.astype(np.float16)), b.predict(Xt.astype(np.float16)))


def test_fp16_memmap_is_copied_once(tmp_path):
    # The only full-size copy is the fp32 design tensor (torch memory, not traced here); numpy
    # allocations stay at chunk size: far below the 5 MB that one fp32 copy would take.
    import tracemalloc

    n, d = 20000, 64
    mm = np.memmap(tmp_path / "x.f16", dtype=np.float16, mode="w+", shape=(n, d))
    mm[:] = np.random.default_rng(0).standard_normal((n, d))
    y = np.random.default_rng(1).integers(0, 3, n)
    probe = LinearProbe(max_iter=5, chunk_rows=256)
    tracemalloc.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        probe.fit(mm, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.4 * n * d * 4, peak


def test_probabilities_consistent(multiclass):
    X, y, Xt, _ = multiclass
    p = LinearProbe(C=1.0).fit(X, y)
    proba = p.predict_proba(Xt)
    assert proba.shape == (len(Xt), 5)
    assert np.allclose(proba.sum(1), 1.0)
    assert np.array_equal(p.classes_[proba.argmax(1)], p.predict(Xt))
    assert np.array_equal(p.decision_function(Xt).argmax(1), proba.argmax(1))
    assert np.allclose(np.exp(p.predict_log_proba(Xt)), proba)


def test_linear_probe_cv_picks_best_dev_C(multiclass):
    X, y, Xd, yd = multiclass
    Cs = (1.0, 1e-4, 1e-2)
    probe = LinearProbeCV(Cs=Cs, tol=1e-6, max_iter=1000).fit(X, y, Xd, yd)
    path = {row["C"]: row["dev_accuracy"] for row in probe.l2_path_}
    assert probe.Cs_.tolist() == [1e-4, 1e-2, 1.0] and probe.dev_scores_.tolist() == [path[c] for c in probe.Cs_]
    # Warm-started path == independent cold fits (same convex problems), to within one dev item.
    for C in Cs:
        cold = LinearProbe(C=C, tol=1e-6, max_iter=1000).fit(X, y)
        assert abs(cold.score(Xd, yd) - path[C]) <= 1 / len(yd) + 1e-12, C
    best = max(Cs, key=lambda c: (path[c], -c))
    assert probe.C_ == best and probe.dev_score_ == path[best]
    assert path[1e-4] < path[1.0]  # C=1e-4 shrinks everything towards the class prior
    ref = LinearProbe(C=best, tol=1e-6, max_iter=1000).fit(X, y)
    assert rel_diff(probe.coef_, ref.coef_) < 1e-3


def test_linear_probe_cv_clone_redoes_the_selection(multiclass):
    """A clone is unfitted and its fit repeats the whole path: the same C and bit-identical weights."""
    X, y, Xd, yd = multiclass
    probe = LinearProbeCV(Cs=(1e-4, 1e-2, 1.0)).fit(X, y, Xd, yd)
    again = clone(probe)
    assert not hasattr(again, "C_") and again.get_params() == probe.get_params()
    again.fit(X, y, Xd, yd)
    assert again.C_ == probe.C_ and again.l2_path_ == probe.l2_path_
    assert np.array_equal(again.coef_, probe.coef_) and np.array_equal(again.intercept_, probe.intercept_)


def test_cv_probes_without_dev_data_hold_out_every_kth_row(multiclass):
    """fit(X, y) alone = fit on the rows not in every ``holdout``-th position, with those rows as dev data."""
    X, y, _, _ = multiclass
    dev = np.arange(len(y)) % 4 == 3
    auto = LinearProbeCV(Cs=(1e-2, 1.0), holdout=4).fit(X, y)
    given = LinearProbeCV(Cs=(1e-2, 1.0)).fit(X[~dev], y[~dev], X[dev], y[dev])
    assert auto.l2_path_ == given.l2_path_ and np.array_equal(auto.coef_, given.coef_)
    layers, labels = _layered(n=400, d=4, signal_layer=1)
    dev = np.arange(len(labels)) % 10 == 9
    auto_mix = ScalarMixProbeCV(Cs=(0.1, 1.0)).fit(layers, labels)
    given_mix = ScalarMixProbeCV(Cs=(0.1, 1.0)).fit(
        [a[~dev] for a in layers], labels[~dev], [a[dev] for a in layers], labels[dev]
    )
    assert auto_mix.l2_path_ == given_mix.l2_path_ and np.array_equal(auto_mix.mix_weights_, given_mix.mix_weights_)
    with pytest.raises(ValueError, match="at least holdout=10 samples, got 9"):
        LinearProbeCV().fit(X[:9], y[:9])
    with pytest.raises(ValueError, match="Cs must be a non-empty sequence"):
        LinearProbeCV(Cs=[]).fit(X, y)
    with pytest.raises(ValueError, match=r"C must be a positive number \(or inf\), got -1"):
        ScalarMixProbeCV(Cs=[1.0, -1]).fit(layers, labels)


def test_adam_close_to_lbfgs(multiclass):
    X, y, Xd, yd = multiclass
    lbfgs = LinearProbe(C=1.0).fit(X, y)
    adam = LinearProbe(C=1.0, solver="adam", max_iter=50, batch_size=128, chunk_rows=512, random_state=0).fit(
        X, y, Xd, yd
    )
    # Stochastic optimisation of the same objective: dev accuracy within 2 points of the exact fit.
    assert adam.dev_score_ >= lbfgs.score(Xd, yd) - 0.02
    again = LinearProbe(C=1.0, solver="adam", max_iter=50, batch_size=128, chunk_rows=512, random_state=0).fit(
        X, y, Xd, yd
    )
    assert np.array_equal(adam.coef_, again.coef_)  # seeded


def test_bad_input_errors(multiclass):
    X, y, _, _ = multiclass
    Xn = X.copy()
    Xn[7, 3] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity \(row 7, column 3\)"):
        LinearProbe().fit(Xn, y)
    Xb = X.copy()
    Xb[5, 2] = 1e38  # finite, but its square overflows float32: the fit would go non-finite without a word
    with pytest.raises(ValueError, match=r"value of 1e\+38 \(row 5, column 2\), beyond 1e\+15"):
        LinearProbe().fit(Xb, y)
    with pytest.raises(ValueError, match=r"beyond 1e\+15"):
        ScalarMixProbe().fit([Xb, X], y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        LinearProbe().fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="C must be a positive"):
        LinearProbe(C=0).fit(X, y)
    with pytest.raises(ValueError, match="both X_dev and y_dev"):
        LinearProbe().fit(X, y, X_dev=X)
    with pytest.raises(ValueError, match="needs X_dev"):
        LinearProbe(solver="adam").fit(X, y)
    fitted = LinearProbe().fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features, but LinearProbe is expecting 30"):
        fitted.predict(X[:, :3])


def test_convergence_warning(multiclass):
    X, y, _, _ = multiclass
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        LinearProbe(max_iter=2, tol=1e-12).fit(X, y)


def test_clone_keeps_params():
    p = LinearProbe(C=3.0, precondition="standardize", random_state=4)
    assert clone(p).get_params() == p.get_params()


# ----------------------------------------------------------------------------- layer combinations


def test_concat_layers_keeps_dtype():
    a = np.arange(6, dtype=np.float16).reshape(3, 2)
    b = np.ones((3, 1), dtype=np.float16)
    out = concat_layers([a, b])
    assert out.dtype == np.float16 and np.array_equal(out, np.hstack([a, b]))
    with pytest.raises(ValueError, match="same number of rows"):
        concat_layers([a, b[:2]])


def _layered(n=1500, d=16, L=3, signal_layer=1, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    means = rng.normal(0, 1.0, (4, d))
    layers = [rng.normal(0, 1, (n, d)) for _ in range(L)]
    layers[signal_layer] = layers[signal_layer] + means[y]
    return [a.astype(np.float32) for a in layers], y


@pytest.mark.parametrize("k", [0, 2])
def test_scalar_mix_finds_informative_layer(k):
    layers, y = _layered(signal_layer=k)
    probe = ScalarMixProbe(C=1.0).fit(layers, y)
    # Only layer k carries the label; mixing in the others only adds noise, so its weight wins.
    assert int(np.argmax(probe.mix_weights_)) == k, probe.mix_weights_
    assert probe.mix_weights_[k] > 0.5
    assert np.isclose(probe.mix_weights_.sum(), 1.0)
    assert probe.gamma_ == pytest.approx(np.linalg.norm(probe.coef_))
    single = LinearProbe(C=1.0).fit(layers[k], y)
    assert probe.score(layers, y) >= single.score(layers[k], y) - 0.02


def test_bootstrap_mix_weights_resample_sentences_reproducibly():
    """Refits on bootstrap resamples of the sentences: one row of L softmax weights per refit, the same rows
    for the same random_state and others for another; the informative layer keeps most weight in every
    refit, as in the fit on all data."""
    layers, y = _layered(signal_layer=1)
    groups = np.arange(len(y)) // 10  # 150 "sentences" of 10 tokens
    probe = ScalarMixProbeCV(Cs=[0.1, 1.0]).fit(layers, y, layers, y)
    w = bootstrap_mix_weights(probe, layers, y, groups, 3, random_state=0)
    assert w.shape == (3, 3)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    assert (w.argmax(axis=1) == 1).all() and (w[:, 1] > 0.5).all(), w
    np.testing.assert_array_equal(w, bootstrap_mix_weights(probe, layers, y, groups, 3, random_state=0))
    assert not np.array_equal(w, bootstrap_mix_weights(probe, layers, y, groups, 3, random_state=1))
    assert len({tuple(r) for r in w}) == 3  # each refit saw another resample
    with pytest.raises(ValueError, match="groups has 10 entries but y has 1500"):
        bootstrap_mix_weights(probe, layers, y, groups[:10], 2)
    with pytest.raises(ValueError, match="n_refits must be a positive integer, got 0"):
        bootstrap_mix_weights(probe, layers, y, groups, 0)


def test_scalar_mix_one_layer_is_linear_probe():
    layers, y = _layered(L=1, signal_layer=0)
    mix = ScalarMixProbe(C=0.5, tol=1e-7).fit(np.stack(layers, axis=1), y)  # (n, 1, d) array input
    lin = LinearProbe(C=0.5, tol=1e-7).fit(layers[0], y)
    # softmax of one weight is 1, so the objective is LinearProbe's: same solution, up to where
    # within tol each stops (they use different preconditioners).
    assert mix.mix_weights_.tolist() == [1.0]
    assert rel_diff(mix.coef_, lin.coef_) < 1e-3
    assert np.allclose(mix.intercept_, lin.intercept_, atol=1e-3)
    y_idx = np.unique(y, return_inverse=True)[1]
    f_mix, f_lin = (objective(layers[0], y_idx, m.coef_, m.intercept_, 0.5) for m in (mix, lin))
    assert abs(f_mix - f_lin) < 1e-8


def test_scalar_mix_input_forms_and_errors():
    layers, y = _layered(n=300)
    a = ScalarMixProbe().fit(layers, y)
    stacked = np.stack(layers, axis=1)
    assert np.array_equal(a.predict(layers), a.predict(stacked))
    with pytest.raises(ValueError, match="layer 1 has shape"):
        ScalarMixProbe().fit([layers[0], layers[1][:, :3]], y)
    # a 2-D array is read as side-by-side layers (n_layers column blocks): the same probe as the list
    side = ScalarMixProbe(n_layers=3).fit(np.concatenate(layers, axis=1), y)
    np.testing.assert_allclose(side.coef_, a.coef_, rtol=1e-6, atol=1e-9)
    assert side.n_features_in_ == 3 * layers[0].shape[1] and side.dim_ == layers[0].shape[1]
    with pytest.raises(ValueError, match="do not split into n_layers=3"):
        ScalarMixProbe(n_layers=3).fit(np.concatenate(layers, axis=1)[:, :-1], y)
    with pytest.raises(ValueError, match=r"shape \(n_samples, n_layers, dim\)"):
        ScalarMixProbe().fit(stacked[..., None], y)
    with pytest.raises(ValueError, match="fit on 3 layers"):
        a.predict(layers[:2])


# ----------------------------------------------------------------------------- hand-written gradients


def _autograd(loss_fn, params):
    params = [p.detach().clone().requires_grad_() for p in params]
    loss = loss_fn(*params)
    loss.backward()
    return loss.item(), [p.grad for p in params]


@pytest.mark.parametrize("k", [1, 4])
def test_linear_objective_gradient_is_autograds(k):
    # The L-BFGS objective and its written-out gradient against autograd on the documented formula:
    # mean cross-entropy (one logit for binary problems) + sum(penalty * theta^2) / 2.
    g = torch.Generator().manual_seed(0)
    n, d = 300, 7
    x = torch.randn(n, d, generator=g)
    y = torch.randint(0, max(k, 2), (n,), generator=g)
    target = y.double() if k == 1 else y
    theta, b = torch.randn(k, d, dtype=torch.float64, generator=g), torch.randn(k, dtype=torch.float64, generator=g)
    penalty = torch.rand(d, dtype=torch.float64, generator=g)

    def reference(theta, b):
        z = (x.double() @ theta.T) + b
        nll = F.binary_cross_entropy_with_logits(z[:, 0], target) if k == 1 else F.cross_entropy(z, target)
        return nll + 0.5 * (penalty * theta**2).sum()

    loss, grads = _linear_objective(x, target, k == 1, penalty, theta, b)()
    ref_loss, ref_grads = _autograd(reference, [theta, b])
    assert float(loss) == pytest.approx(ref_loss, rel=1e-6)  # fp32 products in ours, float64 in the reference
    for ours, ref in zip(grads, ref_grads):
        assert torch.allclose(ours, ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("k", [1, 4])
def test_mix_objective_gradient_is_autograds(k):
    g = torch.Generator().manual_seed(1)
    n, L, d = 300, 3, 6
    h = torch.randn(n, L, d, generator=g)
    y = torch.randint(0, max(k, 2), (n,), generator=g)
    target = y.double() if k == 1 else y
    s, theta, b = (torch.randn(shape, dtype=torch.float64, generator=g) for shape in (L, (k, d), k))
    penalty, mix_l2 = torch.rand(d, dtype=torch.float64, generator=g), 0.3

    def reference(s, theta, b):
        z = torch.einsum("l,nld->nd", torch.softmax(s, 0), h.double()) @ theta.T + b  # mix, then the classifier
        nll = F.binary_cross_entropy_with_logits(z[:, 0], target) if k == 1 else F.cross_entropy(z, target)
        return nll + 0.5 * (penalty * theta**2).sum() + 0.5 * mix_l2 * (s**2).sum()

    loss, grads = _mix_objective(h, target, k == 1, penalty, mix_l2, s, theta, b)()
    ref_loss, ref_grads = _autograd(reference, [s, theta, b])
    assert float(loss) == pytest.approx(ref_loss, rel=1e-6)
    for ours, ref in zip(grads, ref_grads):
        assert torch.allclose(ours, ref, rtol=1e-5, atol=1e-7)


def test_scalar_mix_probe_cv_path_matches_cold_fits():
    both, labels = _layered(n=1200, d=8, signal_layer=2, seed=3)
    layers, y, dev_layers, y_dev = [a[:600] for a in both], labels[:600], [a[600:] for a in both], labels[600:]
    Cs = (1e-5, 1e-1, 10.0)
    probe = ScalarMixProbeCV(Cs=Cs, tol=1e-6, max_iter=2000).fit(layers, y, dev_layers, y_dev)
    path = {row["C"]: row["dev_accuracy"] for row in probe.l2_path_}
    # The layer that carries the label dominates the mix whatever the penalty, so the problem has one
    # optimum per C: the warm-started path must reach what a cold fit reaches.
    cold = {C: ScalarMixProbe(C=C, tol=1e-6, max_iter=2000).fit(layers, y) for C in Cs}
    for C in Cs:
        assert abs(cold[C].score(dev_layers, y_dev) - path[C]) <= 1 / len(y_dev) + 1e-12, C
    best = max(Cs, key=lambda c: (path[c], -c))
    assert probe.C_ == best and probe.dev_score_ == path[best]
    assert path[1e-5] < path[10.0] - 0.2  # C=1e-5 shrinks the weights to almost nothing
    ref = cold[best]
    assert np.allclose(probe.mix_weights_, ref.mix_weights_, atol=1e-3)
    # the uninformative layers' weights are near 0, where the objective is nearly flat in their mix
    # logits: coefficients agree to a few 1e-3 (measured 1.5e-3), predictions exactly
    assert rel_diff(probe.coef_, ref.coef_) < 5e-3
    assert np.array_equal(probe.predict(dev_layers), ref.predict(dev_layers))


def _fit_with_threads(make, X, y, threads: int):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            return make().fit(X, y)
    finally:
        torch.set_num_threads(old)


class _CVFirstRowsDev:
    """``LinearProbeCV`` with the first 1000 rows as dev data, for :func:`_fit_with_threads`."""

    def fit(self, X, y):
        return LinearProbeCV(Cs=[0.1, 10.0, 1000.0], max_iter=40).fit(X, y, X[:1000], y[:1000])


@pytest.mark.parametrize(
    "kind", ["linear", pytest.param("mix", marks=pytest.mark.slow), "near-duplicate features"]
)  # mix: 9.6 s on a shared 2-core machine
def test_a_probe_fit_is_bit_identical_for_one_and_two_threads(kind):
    """The same data gives the same probe, to the last bit, whatever the thread count of torch and of the
    BLAS: the loss and gradient sums over samples are added in fixed blocks, L-BFGS's dot products
    (k d = 6,450 terms, which a BLAS dot splits across threads) run on one thread, and so do the
    covariance's eigendecomposition and the map back to raw weights. Without these, the fitted weights of
    these problems differ between 1 and 2 threads: by ~1e-3, and by ~8 for the near-duplicate features
    (a threaded LAPACK rotates their near-degenerate eigenvectors differently), which moved demo scores
    by 0.1-3 points (issue 15)."""
    rng = np.random.default_rng(3)
    if kind == "near-duplicate features":
        n, d, k = 8000, 160, 20
        labels = rng.integers(0, k, n)
        A = rng.normal(size=(k, d))[labels] * 0.5 + rng.normal(size=(n, d)) * 2
        X = np.concatenate([A, A + rng.normal(size=(n, d)) * 1e-3, A[:, :80] * 0.5], 1).astype(np.float32)
        make = _CVFirstRowsDev
    else:
        n, d, k = 40_000, 128, 50
        labels = rng.integers(0, k, n)
        centres = rng.normal(size=(k, d))
        layers = [(centres[labels] * s + rng.normal(size=(n, d)) * 2).astype(np.float32) for s in (0.3, 0.5)]
        if kind == "linear":
            X = layers[1]
            make = lambda: LinearProbe(C=1.0, max_iter=40)  # noqa: E731
        else:
            X = layers
            make = lambda: ScalarMixProbe(C=1.0, max_iter=40)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one, two = (_fit_with_threads(make, X, labels, t) for t in (1, 2))
    assert np.array_equal(one.coef_, two.coef_) and np.array_equal(one.intercept_, two.intercept_)
    assert one.n_iter_ == two.n_iter_
