import pytest

from rlsim.rewards.math_check import final_answer, reference_answer, score


@pytest.mark.parametrize(
    "prompt, response, reward",
    [
        ("What is 3/4 + 5/6?", r"so \boxed{\frac{19}{12}}", 1.0),
        ("What is 3/4 + 5/6?", "the answer is 19/12", 1.0),
        ("What is 3/4 + 5/6?", "the answer is 1.58", 0.0),
        ("Compute 12*(3+4).", "84", 1.0),
        ("Compute 12*(3+4).", "85", 0.0),
        ("What is 2^10?", r"\boxed{1024}", 1.0),
        ("What is 1/2 + 0?", "0.5", 1.0),
        ("Some filler text with no problem", "42", 0.0),
        ("What is 2+2?", "no number here", 0.0),
    ],
)
def test_score(prompt, response, reward):
    assert score(prompt, response) == reward


def test_final_answer_prefers_the_last_balanced_box():
    assert final_answer(r"\boxed{1} then \boxed{\frac{a}{b}} and 7") == r"\frac{a}{b}"
    assert final_answer("1, then 2, finally -3.5") == "-3.5"
    assert final_answer("none") is None


def test_reference_is_the_last_expression_with_an_operator():
    assert str(reference_answer("Year 2024. What is 6*7?")) == "42"
    assert reference_answer("only 2024 here") is None


def test_no_code_runs_from_an_answer():
    assert score("What is 1+1?", r"\boxed{__import__('os').system('true')}") == 0.0
