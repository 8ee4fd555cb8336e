"""LinearProbe passes scikit-learn's estimator checks (all apply; none is marked as expected to fail)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from probing.probes.linear import LinearProbe


@parametrize_with_checks([LinearProbe()])
def test_sklearn_compatible(estimator, check):
    check(estimator)
