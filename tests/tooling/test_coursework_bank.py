"""The question bank: every solution passes its own cases, every reference agrees with an independent computation,
and every known mistake is recognised by name (the student-facing check runs in-process here; no sandbox)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from xorlib.certify import worst_case_loss
from xorlib.coursework import CheckFailure, check
from xorlib.coursework.bank import CHAPTERS, chapter_questions, get_question
from xorlib.coursework.feedback import as_outputs, expected_outputs, judge, run_case
from xorlib.coursework.questions import LEVELS, AutoQuestion, Case, WrittenQuestion, stub_source
from xorlib.empirical import empirical
from xorlib.model import ModelConfig
from xorlib.population import population
from xorlib.task import all_inputs

AUTO = [q for qs in CHAPTERS.values() for q in qs if isinstance(q, AutoQuestion)]
WRITTEN = [q for qs in CHAPTERS.values() for q in qs if isinstance(q, WrittenQuestion)]
SEEDS = (0, 1, 12345)


def _verdicts(question: AutoQuestion, fn, cases):
    return [judge(question, c, run_case(question, fn, c), expected_outputs(question, c)) for c in cases]


def _teacher_verdicts(question: AutoQuestion, fn, cases):
    """As the grader compares a known mistake's outputs: the teacher's code, in the grader, autograd allowed."""
    return [judge(question, c, as_outputs(fn(*c.args), question.outputs), expected_outputs(question, c)) for c in cases]


def test_every_main_chapter_has_two_auto_graded_questions_and_a_written_one() -> None:
    assert list(CHAPTERS) == [f"ch0{k}" for k in range(1, 8)]
    for chapter in CHAPTERS:
        assert len(chapter_questions(chapter, AutoQuestion)) >= 2, chapter
        written = chapter_questions(chapter, WrittenQuestion)
        assert written and all(len(q.rubric) >= 2 and q.points > 0 and q.answer for q in written), chapter


@pytest.mark.parametrize("question", AUTO + WRITTEN, ids=lambda q: q.id)
def test_every_question_has_a_level_and_a_time(question) -> None:
    assert LEVELS == ("warm-up", "core", "challenge") and question.level in LEVELS
    assert type(question.minutes) is int and 5 <= question.minutes <= 90
    assert question.id.startswith(f"{question.chapter}-{'q' if isinstance(question, AutoQuestion) else 'w'}")


@pytest.mark.parametrize(
    ("change", "field", "allowed"),
    [
        ({"level": "hard"}, "level", "'warm-up', 'core', 'challenge'"),
        ({"level": "Core"}, "level", "'warm-up', 'core', 'challenge'"),
        ({"level": None}, "level", "'warm-up', 'core', 'challenge'"),
        ({"minutes": 4}, "minutes", "from 5 to 90"),
        ({"minutes": 91}, "minutes", "from 5 to 90"),
        ({"minutes": 20.0}, "minutes", "an int"),
        ({"minutes": "20"}, "minutes", "an int"),
        ({"minutes": True}, "minutes", "an int"),
    ],
)
@pytest.mark.parametrize("qid", ["ch02-q1", "ch02-w1"])
def test_a_bad_level_or_time_is_refused_naming_the_field(qid: str, change: dict, field: str, allowed: str) -> None:
    question = get_question(qid)
    with pytest.raises(ValueError, match=rf"question {qid}: {field} must be") as raised:
        dataclasses.replace(question, **change)
    assert allowed in str(raised.value) and repr(change[field]) in str(raised.value)
    for required in ("level", "minutes"):  # both fields are required, for both kinds of question
        kwargs = {f.name: getattr(question, f.name) for f in dataclasses.fields(question) if f.init}
        del kwargs[required]
        with pytest.raises(TypeError, match=required):
            type(question)(**kwargs)


@pytest.mark.parametrize("question", AUTO, ids=lambda q: q.id)
def test_solution_passes_every_public_and_hidden_case(question: AutoQuestion) -> None:
    cases = question.public() + tuple(c for s in SEEDS for c in question.hidden(s))
    failed = [v.message for v in _verdicts(question, question.solution, cases) if not v.passed]
    assert not failed, failed[0]


@pytest.mark.parametrize("question", AUTO, ids=lambda q: q.id)
def test_cases_are_enough_and_hidden_ones_are_not_public(question: AutoQuestion) -> None:
    public, hidden = question.public(), question.hidden(0)
    assert len(public) >= 2 and len(hidden) >= 2
    assert not {c.description for c in hidden} & {c.description for c in public}
    # The student's cell is the solution with its body stubbed, and the stub raises.
    assert "BEGIN SOLUTION" not in question.student_source() and "NotImplementedError" in question.student_source()
    namespace: dict = {}
    exec("import math\nimport torch\n" + question.student_source(), namespace)
    with pytest.raises(NotImplementedError):
        namespace[question.function](*public[0].args)


@pytest.mark.parametrize("question", AUTO, ids=lambda q: q.id)
def test_every_known_mistake_fails_and_is_diagnosed_by_name(question: AutoQuestion) -> None:
    cases = question.public() + question.hidden(0)
    for mistake in question.mistakes:
        verdicts = _teacher_verdicts(question, mistake.compute, cases)
        failing = [v for v in verdicts if not v.passed]
        assert failing, f"{question.id}: the mistake {mistake.text!r} passes every case"
        assert all(mistake.text in v.message for v in failing), failing[0].message


def test_solutions_fit_the_books_code_cells() -> None:
    long = [(q.id, line) for q in AUTO for line in q.answer_source().splitlines() if len(line) > 84]
    assert not long, long


def test_hidden_cases_follow_the_teachers_seed() -> None:
    for question in AUTO:
        a, b = question.hidden(0), question.hidden(777)
        if any(isinstance(x, torch.Tensor) for c in a for x in c.args):
            assert any(
                not torch.equal(x, y)
                for ca, cb in zip(a, b, strict=True)
                for x, y in zip(ca.args, cb.args, strict=True)
                if isinstance(x, torch.Tensor) and x.shape == y.shape
            ), question.id
        assert all(repr(ca.args) == repr(cb.args) for ca, cb in zip(a, question.hidden(0), strict=True))


# ----------------------------------------------------------------------------- references against independent ones
def test_losses_on_every_input_average_to_the_closed_form_population_loss() -> None:
    question = get_question("ch01-q2")
    from xorlib.codes import Codes

    codes = Codes(8, 6, seed=3).dense()
    queries = torch.randn(2, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    weights = torch.softmax(queries @ codes.T, -1)
    for heads in ("tied", "split"):
        losses = question.reference(weights, (2, 5), heads)
        model = ModelConfig(8, heads, m=6, code_seed=3)  # its codes are Codes(8, 6, seed=3)
        assert torch.allclose(losses.mean(), population(model, queries, (2, 5)).loss, rtol=1e-12)


@pytest.mark.parametrize("qid, heads", [("ch02-q1", "tied"), ("ch03-q1", "split")])
def test_population_gradient_references_match_autograd(qid: str, heads: str) -> None:
    question = get_question(qid)
    for case in question.public() + question.hidden(0):
        queries, codes, pair = case.args
        q = queries.clone().requires_grad_(True)
        model = ModelConfig(codes.shape[0], heads, m=codes.shape[1], code_kind="gaussian")  # codes given below
        (grad,) = torch.autograd.grad(population(model, q, pair, codes=codes).loss, q)
        # Entries that are zero in exact arithmetic may carry the rounding noise of the largest: compare on its scale.
        scale = float(grad.abs().max())
        assert torch.allclose(question.reference(queries, codes, pair), grad, rtol=1e-9, atol=1e-9 * scale)


def test_tied_worst_case_is_the_maximum_over_every_input_and_the_certificate() -> None:
    question = get_question("ch02-q3")
    for case in question.public() + tuple(c for s in SEEDS for c in question.hidden(s)):
        weights, (u, v) = case.args
        rest = float(weights.sum() - weights[u] - weights[v])
        assert rest <= 0.5, case.description  # the exercise's assumption holds for every case
        value = question.reference(weights, (u, v))
        certified = worst_case_loss(ModelConfig(weights.shape[0], "tied"), torch.stack([weights, weights]), (u, v))
        assert float(certified.lower) <= value * (1 + 1e-9) and value <= float(certified.upper) * (1 + 1e-9)
        if weights.shape[0] <= 16:
            x = all_inputs(weights.shape[0])
            z = x @ weights
            losses = 0.5 * (1 - 2 * z**2 + x[:, u] * x[:, v]) ** 2
            assert math.isclose(float(losses.max()), value, rel_tol=1e-10)


def test_empirical_gradient_reference_matches_autograd() -> None:
    question = get_question("ch06-q1")
    for case in question.public() + question.hidden(0):
        scores, x, y, heads = case.args
        s = scores.clone().requires_grad_(True)
        eye = torch.eye(scores.shape[-1], dtype=torch.float64)
        model = ModelConfig(scores.shape[-1], heads, code_kind="onehot")  # one-hot codes: the identity
        (grad,) = torch.autograd.grad(empirical(model, s, x, y, codes=eye).loss, s)
        scale = float(grad.abs().max())  # as above: the tolerance follows the gradient's largest entry
        assert torch.allclose(question.reference(scores, x, y, heads), grad, rtol=1e-9, atol=1e-9 * scale)


def test_rest_mass_reference_matches_plain_sums_where_those_are_accurate() -> None:
    question = get_question("ch04-q1")
    for case in question.public() + question.hidden(0):
        scores, (u, v) = case.args
        weights = torch.softmax(scores, -1)
        direct = weights.sum(-1) - weights[:, u] - weights[:, v]
        if bool((direct > 1e-3).all()):
            assert torch.allclose(question.reference(scores, (u, v)), direct, rtol=1e-10)
        assert bool((question.reference(scores, (u, v)) > 0).all())


def test_logistic_fit_solves_its_score_equations() -> None:
    from xorlib.coursework.bank.ch06 import _fit

    for case in get_question("ch06-q2").public() + get_question("ch06-q2").hidden(0):
        n, k, m = (a.double() for a in case.args)
        a, b = _fit(torch.log(n), k, m)
        residual = k - m * torch.sigmoid(a + b * torch.log(n))
        assert abs(float(residual.sum())) < 1e-8 and abs(float((residual * torch.log(n)).sum())) < 1e-7
        assert b > 0


def test_certified_and_lattice_steps_match_the_theory_module() -> None:
    from xorlib import theory

    for case in get_question("ch04-q2").public():  # the lattice rule: the tied sharpness at the lattice step 4/m
        d, m, eps = case.args
        assert math.isclose(get_question("ch04-q2").reference(d, m, eps), theory.tied_sharpness(d, 4 / m, eps))
    for case in get_question("ch03-q2").public():
        direction, scores, target = case.args
        top = direction.sort(-1, descending=True).values
        gaps, spreads = top[:, 0] - top[:, 1], scores.amax(-1) - scores.amin(-1)
        eps = 2 * (2 * target + 2 * target**2) ** 2  # the epsilon whose split rest target is `target`
        expected = theory.split_step_from_gaps(scores.shape[-1], gaps, spreads, eps)
        assert math.isclose(get_question("ch03-q2").reference(*case.args), expected, rel_tol=1e-9)


# ----------------------------------------------------------------------------- the student-facing check
def test_check_prints_the_public_cases_on_success(capsys) -> None:
    check("ch02-q2", get_question("ch02-q2").solution)
    out = capsys.readouterr().out
    assert "ch02-q2 passed its 2 public test cases" in out and "hidden" in out


def test_check_explains_a_sign_error_with_the_case_the_values_and_a_hint() -> None:
    def flipped(codes, pair, lr):
        return -get_question("ch02-q2").solution(codes, pair, lr)

    with pytest.raises(CheckFailure) as failure:
        check("ch02-q2", flipped)
    message = str(failure.value)
    assert "balanced codes, d=8" in message and "expected [" in message and "returned [" in message
    assert "Diagnosis: wrong sign" in message and "Hint:" in message


def test_check_names_an_off_by_one_normalisation_and_a_stub() -> None:
    def off_by_one(codes, pair, lr):
        d = codes.shape[0]
        return get_question("ch02-q2").solution(codes, pair, lr) * d**2 / (d - 1) ** 2

    with pytest.raises(CheckFailure, match=r"\(d - 1\)\^2 where d\^2 belongs"):
        check("ch02-q2", off_by_one)


def test_check_of_an_unanswered_stub_says_so_without_stopping_the_notebook(capsys) -> None:
    def stub(codes, pair, lr):
        raise NotImplementedError

    check("ch02-q2", stub)  # a fresh student notebook runs from top to bottom
    assert "ch02-q2: not answered yet" in capsys.readouterr().out


def test_autograd_is_disabled_where_a_prompt_forbids_it(capsys) -> None:
    forbidding = [q for q in AUTO if not q.autograd]
    assert {q.id for q in forbidding} == {"ch05-q1", "ch06-q1", "ch07-q1"}
    assert all("without autograd" in q.prompt for q in forbidding)
    assert not any("without autograd" in q.prompt for q in AUTO if q.autograd)

    def with_autograd(scores, grad):
        s = scores.clone().requires_grad_(True)
        return torch.relu(s) / scores.shape[-1], torch.autograd.grad(torch.relu(s) / scores.shape[-1], s, grad)[0]

    with pytest.raises(
        CheckFailure, match="torch.autograd.grad is disabled here: ch05-q1 asks for this without autograd"
    ):
        check("ch05-q1", with_autograd)
    assert "Warning" not in capsys.readouterr().out
    x = torch.ones(2, requires_grad=True)
    (2 * x).sum().backward()  # outside the check, autograd is untouched
    assert torch.equal(x.grad, torch.full((2,), 2.0))


def test_check_flags_overflow_and_wrong_shapes() -> None:
    def naive(query, codes, x):
        e = torch.exp(codes @ query)
        return e / e.sum(), x @ (e / e.sum())

    with pytest.raises(CheckFailure, match="NaN or infinite.*\n.*subtracting the largest score"):
        check("ch01-q1", naive)

    def one_head(codes, pair, lr):
        return get_question("ch02-q2").solution(codes, pair, lr)[0]

    with pytest.raises(CheckFailure, match=r"wrong shape: expected \(2, 6\), got \(6,\)"):
        check("ch02-q2", one_head)


def test_an_answer_that_modifies_its_inputs_cannot_change_the_reference() -> None:
    def vandal(codes, pair, lr):
        out = get_question("ch02-q2").solution(codes, pair, lr)
        codes.zero_()
        return out

    check("ch02-q2", vandal)


def test_check_warns_when_an_answer_calls_the_books_reference(capsys) -> None:
    from xorlib.population import population

    def borrowed(queries, codes, pair):
        model = ModelConfig(codes.shape[0], "tied", m=codes.shape[1], code_kind="gaussian")
        return population(model, queries, pair, codes=codes).gradient

    check("ch02-q1", borrowed)
    assert "Warning: tied_gradient uses xorlib." in capsys.readouterr().out  # xorlib.model.ModelConfig, first
    check("ch02-q1", get_question("ch02-q1").solution)
    assert "Warning" not in capsys.readouterr().out


def test_check_refuses_written_and_unknown_questions() -> None:
    with pytest.raises(ValueError, match="written question"):
        check("ch02-w1", print)
    with pytest.raises(KeyError, match="no question 'ch99-q1'"):
        check("ch99-q1", print)


def test_generic_diagnoses_name_a_permutation_and_a_plain_factor() -> None:
    question = get_question("ch01-q2")
    case = question.public()[1]
    expected = expected_outputs(question, case)
    reordered = (np.roll(expected[0], 1),)  # (reversing would not do: the loss is even in x)
    assert "wrong order" in judge(question, case, reordered, expected).message
    assert "a missing factor 1/2" in judge(question, case, (2 * expected[0],), expected).message
    assert judge(question, case, (np.asarray(expected[0]),), expected).passed


def test_stub_source_replaces_only_the_solution_and_refuses_unbalanced_markers() -> None:
    source = "def f(x):\n    y = 1\n    # BEGIN SOLUTION\n    return x\n    # END SOLUTION\n"
    assert stub_source(source) == "def f(x):\n    y = 1\n    raise NotImplementedError  # your code here"
    with pytest.raises(ValueError, match="without an END"):
        stub_source("# BEGIN SOLUTION\nx = 1\n")
    assert isinstance(Case("c", ()).args, tuple)


def test_the_grading_build_leaves_out_every_module_that_answers_a_question(tmp_path) -> None:
    from xorlib.coursework.sandbox import build_modules, write_build

    modules = set(build_modules())
    assert "task" in modules
    assert not modules & {"population", "empirical", "attention", "certify", "model", "codes", "theory", "one_step"}
    package = write_build(tmp_path) / "xorlib"
    assert not (package / "coursework").exists() and (package / "task.py").is_file()
    assert (tmp_path / "_runner.py").is_file()
    forbidden = {name.split(".")[1] for q in AUTO for name in q.forbidden}
    assert forbidden and not forbidden & modules
    with pytest.raises(RuntimeError, match="would hold xorlib.task"):
        write_build(tmp_path / "again", forbidden={"task"})
