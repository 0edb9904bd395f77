"""What several test modules share: doubles of the loop's actors and stages, the tiny run configs, recorded
timelines, CLI and server launchers, and plug-ins the tests load into rlsim's worker processes by name
(``tests.helpers.tiny_scorer``, ``tests.helpers.bench_fake_runtime``, ``tests.helpers.reward_fns``).

Imported as ``tests.helpers.<module>`` (pytest runs with ``--import-mode=importlib`` and the repository
root on ``sys.path``, pyproject's ``[tool.pytest.ini_options]``); none of them holds a test.
"""
