"""The status of each claim of the paper's abstract in this book: data, rendered by the introduction, checked by the tests.

Each entry names the claim, the model it is about, what the book establishes
(``proved``, ``proved (conditional)``, ``observed``, ``heuristic``, ``cited``,
``reconstructed``), where (a chapter and, for results, the label of the theorem
or section), and the test that fails if the claim breaks. ``tests/book/test_claims.py``
checks that every label exists in its chapter and every test exists. No IPython here:
the table is :func:`xorlib.report.html_table`'s, which Jupyter and the book display.
"""

from __future__ import annotations

from dataclasses import dataclass

from .report import html_table

__all__ = ["claims_table"]

STATUSES = ("proved", "proved (conditional)", "observed", "heuristic", "cited", "reconstructed")


@dataclass(frozen=True)
class Claim:
    """One claim of the abstract, as the book treats it."""

    claim: str
    model: str  # "tied", "split", "both", or "feed-forward"
    status: str
    chapter: str  # the chapter file name without extension
    label: str  # a theorem or section label in that chapter
    title: str  # the statement's or section's title there, as the reader sees it
    test: str  # a pytest node id


CLAIMS = (
    Claim("A single-layer, two-head Transformer", "both", "reconstructed", "01_task_and_models", "ch-task", "The task and the two models",
          "tests/core/test_population.py::test_the_split_model_at_an_antisymmetric_start_matches_autograd_through_the_module"),
    Claim("The tied model's two heads are one head in disguise", "tied", "proved", "03_split_heads", "prop-one-head", "One head in disguise",
          "tests/learners/test_one_step.py::test_tied_heads_are_one_head_in_disguise"),
    Claim("O(polylog d) trainable parameters suffice (2m, m = O(log d))", "tied", "proved", "02_tied_one_step", "lem-ties", "Ties are rare",
          "tests/core/test_theory.py::test_tie_probability_bound_holds_on_draws"),
    Claim("One gradient step finds the pair; the loss on every input is below ε", "tied", "proved", "02_tied_one_step",
          "thm-tied", "One step of the tied model", "tests/core/test_theory.py::test_lattice_sharpness_certifies_every_separable_draw"),
    Claim("One gradient step puts the two heads on the two hidden bits; every input's loss below ε", "split",
          "proved (conditional)", "03_split_heads", "thm-split", "One step splits the heads",
          "tests/core/test_theory.py::test_split_theorem_bounds_hold_on_fresh_draws"),
    Claim("... at the default σ = 1 and m, where the theorem's computed Γ > 0 (most draws at d = 4,096, δ = 0.1)", "split",
          "proved (conditional)", "03_split_heads", "thm-split", "One step splits the heads",
          "tests/core/test_theory.py::test_split_theorem_covers_sigma_1_at_the_default_m_at_d_4096"),
    Claim("... a priori, with no computation over the codes, at σ ≤ 1 and m ≥ max(64 ln(8(3d − 2)/δ), 16/δ), for codes with "
          "‖P‖² ≤ 2d/m (with probability ≥ 1 − δ_c once d ≥ 4m² ln(m²/δ_c): from d = 10⁷ at the least m; observed below)", "split", "proved (conditional)", "03_split_heads", "cor-split-apriori",
          "The split step, a priori", "tests/core/test_split_apriori.py::test_the_closed_form_implies_the_line_by_line_bound"),
    Claim("... at the default start scale σ = 1, d from 16 to 10⁶", "split", "observed", "04_one_step_across_d",
          "ch-across-d", "One step across d", "tests/learners/test_one_step.py::test_split_heads_split_on_every_one_of_20_draws_at_d_64"),
    Claim("A step size chosen without knowing the pair", "both", "proved", "02_tied_one_step", "lem-lattice", "The margin lattice",
          "tests/learners/test_one_step.py::test_pair_free_step_certifies_1e_6_at_d_10_000"),
    Claim("A specific random initialisation (the antisymmetric start)", "split", "reconstructed", "03_split_heads",
          "prop-independent", "Split probability of an independent start", "tests/core/test_theory.py::test_independent_start_split_probability_matches_the_first_order_formula"),
    Claim("Feed-forward networks need Ω(d) parameters", "feed-forward", "cited", "07_ffnn_baseline", "ch-ffnn", "What a feed-forward network pays",
          "tests/experiments/test_baselines.py::test_frozen_random_features_fit_every_input_for_several_pairs"),
    Claim("Models linear in their parameters need Ω(d²) parameters", "feed-forward", "proved", "07_ffnn_baseline",
          "thm-linear-models", "A lower bound for models linear in their parameters", "tests/experiments/test_baselines.py::test_linear_models_obey_the_proved_bound"),
    Claim("Linear and ReLU attention cannot leave the tied model's start", "tied", "proved", "05_attention_variants",
          "prop-stationary", "A stationary start", "tests/experiments/test_attention_variants.py::test_stationary_start"),
    Claim("Component-wise attention keeps a constant loss on some input", "tied", "proved", "05_attention_variants",
          "prop-jensen", "The Jensen floor of component-wise attention", "tests/experiments/test_attention_variants.py::test_jensen_floor"),
    Claim("Linear, ReLU, sigmoid and component-wise attention fall short of softmax", "both", "observed",
          "05_attention_variants", "ch-variants", "Why exact softmax", "tests/experiments/test_attention_variants.py::test_alternatives_fall_short"),
    Claim("A sample-complexity bound for finite data (draw by draw, at σ = 1: N ≤ 100 n* at the book's d)", "split", "proved",
          "06_finite_samples", "thm-samples", "Samples for one step of the split model",
          "tests/experiments/test_sample_bound.py::test_the_bound_is_above_the_measured_samples_and_within_100_times"),
    Claim("Samples needed, measured (n* against d)", "both", "observed", "06_finite_samples", "ch-samples", "Finite samples",
          "tests/experiments/test_finite_samples.py::test_split_needs_fewer_samples_than_tied"),
    Claim("The tied model's window of step sizes with samples", "tied", "heuristic", "06_finite_samples", "ch-samples", "Finite samples",
          "tests/experiments/test_finite_samples.py::test_tied_window_and_split_no_upper_edge"),
)  # fmt: skip


_KINDS = {"thm": "theorem", "lem": "lemma", "prop": "proposition", "cor": "corollary", "ch": "chapter"}


def _where(claim: Claim) -> str:
    """``ch. 2, lemma “Ties are rare”``: the chapter's number and the statement's kind and title."""
    number = int(claim.chapter.split("_", 1)[0])
    kind = _KINDS[claim.label.split("-", 1)[0]]
    return f"ch. {number}" if kind == "chapter" else f"ch. {number}, {kind} “{claim.title}”"


def claims_table() -> object:
    """The status table as the book's HTML table (:func:`xorlib.report.html_table`): claim, model, status, and where.

    ``where`` names the chapter and the title of its statement or section (``ch. 2, theorem “One step of the tied model”``).

    Examples
    --------
    >>> 'Theorem' in str(claims_table()) or 'proved' in str(claims_table())
    True
    """
    rows = [{"claim": c.claim, "model": c.model, "status": c.status, "where": _where(c)} for c in CLAIMS]
    columns = {"claim": "claim of the abstract", "model": "model", "status": "status in this book", "where": "where"}
    return html_table(rows, columns)
