"""Rewards that are no reward model: a Python verifier in a worker pool, code run in a sandbox, a judge LLM.

Each is a scoring runtime (``rlsim.scoring.SCORERS``, ``kind`` ``function``, ``sandbox`` or ``judge``), so the
loop, every schedule, ``rlsim bench scoring`` and ``rlsim score`` take it like any runtime:

- ``function_reward``: runtime ``function``, ``module:function(prompt, response)`` in a ``call_pool``
  (``call_worker`` is one worker process) with a per-call deadline; ``math_check`` is the built-in verifier.
- ``sandbox_reward``: runtime ``sandbox``, each response's program run by ``sandbox`` (namespaces, read-only
  filesystem, limits; ``sandbox_init`` is the set-up inside), from the ``program_bank`` of installed doctests.
- ``genrm_reward``: runtime ``genrm``, a judge LLM on vLLM in the scoring actor reading each prompt and response
  through a template: the log-probability of a verdict, or a score parsed from its decoded answer.
- ``text_reward``: what they share (lengths in characters, the outcome counts); ``options``: their settings.
"""
