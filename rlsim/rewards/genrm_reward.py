"""Runtime ``genrm``: a generative judge, an LLM on vLLM in the scoring actor that reads each prompt and response
through a template and gives the reward (rlsim.rewards.options.GenrmOptions).

The frameworks run judges this way: ROLL's ``LLMJudgeRewardWorker`` (``roll/pipeline/rlvr/rewards/
llm_judge_reward_worker.py``) decodes the judge's answer on a vLLM strategy it puts to sleep between reward
stages and parses a score from the text; Generative Verifiers (GenRM, Zhang et al., arXiv 2408.15240) read the
probability of "Yes" after "Is the answer correct (Yes/No)?", the default template and verdict here. Two
readings of the judge:

- ``verdict``: the log-probability of the verdict tokens right after the template, from one prefill (vLLM's
  ``prompt_logprobs`` of the template with the verdict appended): the cost of a judge that decodes nothing,
  and a reward that is a smooth function of the judge's belief;
- ``score``: the judge decodes up to ``max_tokens`` and the first number in its text is the reward (divided by
  ``score_max``): the cost of decoding, the judge's share of the pool rlsim measures.

Where the judge runs is the scorer's placement: cores of its own (``placement.preset: split``), or the policy
engine's (``shared``), where with the ``sequential`` schedule the two take turns as verl's colocated reward
mode does (the judge works after generation) and with ``overlapped`` they contend.

Token ids are built piecewise (template text before the response, the response cut to fit ``max_model_len``,
the text after it, then the verdict), each piece encoded on its own with the judge's tokenizer, so the verdict's
tokens are exactly those of ``verdict`` whatever the response ends with.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlsim.errors import RlsimError
from rlsim.models import resolve_policy
from rlsim.models.reward import RewardModelSpec
from rlsim.rewards.options import DROPPED, GenrmOptions, parse_options
from rlsim.rewards.text_reward import TextReward
from rlsim.rollout.engine_errors import engine_failure, is_engine_failure
from rlsim.rollout.vllm_processes import engine_process_args, engine_start_failed, shutdown_engine
from rlsim.scoring.base import RuntimeInfo, ScorerSettings, register_scorer
from rlsim.scoring.needs import VLLM
from rlsim.scoring.vllm_server import vllm_env


def first_number(text: str, pattern: str = GenrmOptions.model_fields["score_pattern"].default) -> float | None:
    """The first match of ``pattern`` in ``text`` as a number (its one group, if it has one), or None: by default
    the first decimal number (``"Score: 7/10"`` -> 7.0)."""
    match = re.search(pattern, text)
    if match is None:
        return None
    try:
        return float(match.group(1) if match.re.groups else match.group())
    except (TypeError, ValueError):  # the group matched nothing, or not a number
        return None


class JudgePrompts:
    """Token ids of the judge's prompts: the template around each response, cut to the judge's context."""

    def __init__(self, tokenizer: Any, options: GenrmOptions) -> None:
        self._tok, self.options = tokenizer, options
        head, _, tail = options.template.partition("{response}")
        self._head, self._tail = head, tail
        self.verdict_ids = self._encode(options.verdict)
        if not self.verdict_ids:
            raise RlsimError(f"reward.genrm.verdict {options.verdict!r} encodes to no token with the judge's tokenizer")
        self._bos = special_prefix(tokenizer)

    def _encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False)) if text else []

    def build(self, prompt: str, response: str) -> tuple[list[int], int]:
        """(prompt token ids, response tokens cut): the template filled in, with the verdict appended in
        ``verdict`` mode; the response is cut from its end so that the ids (and in ``score`` mode the decoded
        tokens) fit ``max_model_len``."""
        o = self.options
        head = self._bos + self._encode(self._head.format(prompt=prompt))
        tail = self._encode(self._tail.format(prompt=prompt))
        extra = self.verdict_ids if o.mode == "verdict" else []
        room = o.max_model_len - len(head) - len(tail) - len(extra) - (o.max_tokens if o.mode == "score" else 1)
        if room < 1:
            raise RlsimError(
                f"reward.genrm.template leaves no room for the response in max_model_len {o.max_model_len} tokens "
                f"({len(head) + len(tail)} template tokens); raise reward.genrm.max_model_len or shorten the template"
            )
        body = self._encode(response)
        return head + body[:room] + tail + extra, max(0, len(body) - room)


class JudgeEngine:
    """The judge on vLLM (fp32, eager, seed 0), pinned like the scoring actor it runs in, with its tokenizer;
    several ``GenrmReward`` readings may share one (the tests read one engine both ways)."""

    def __init__(self, judge: str, settings: ScorerSettings, max_model_len: int) -> None:
        self.path = resolve_policy(judge)
        longest = json.loads((self.path / "config.json").read_text()).get("max_position_embeddings")
        if isinstance(longest, int) and max_model_len > longest:
            raise RlsimError(
                f"reward.genrm.max_model_len {max_model_len} is longer than the judge {judge} reads "
                f"(max_position_embeddings {longest}); set it to {longest} or less"
            )
        os.environ.update(vllm_env(settings))
        from transformers import AutoTokenizer
        from vllm import LLM

        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        args: dict[str, Any] = dict(
            model=str(self.path), dtype="float32", max_model_len=max_model_len, enforce_eager=True, seed=0
        )
        args.update(engine_process_args(settings.engine_inline))
        try:
            self.llm = LLM(**args)
        except Exception as err:
            engine_start_failed(settings.engine_inline)
            if is_engine_failure(err):
                raise self._failure(err, "starting") from None
            raise RlsimError(f"runtime 'genrm' could not start the judge {judge} on vLLM: {err}") from None

    def generate(self, prompts: list[list[int]], params: Any) -> list[Any]:
        from vllm.inputs import TokensPrompt

        try:
            return list(
                self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompts], params, use_tqdm=False)
            )
        except Exception as err:
            if is_engine_failure(err):
                raise self._failure(err, "judging") from None
            raise

    def _failure(self, err: BaseException, doing: str) -> RlsimError:
        advice = "fix the folder, or check that vLLM runs it as a policy (policy.model) to see the same error"
        return engine_failure(err, doing, self.path, actor="scorer", advice=advice, folder="judge folder")

    def close(self) -> None:
        if hasattr(self, "llm"):
            shutdown_engine(self.llm.llm_engine)


@register_scorer("genrm", RuntimeInfo(precision=None, kind="judge", needs=VLLM, pads=False))  # vLLM schedules rows
class GenrmReward(TextReward):
    """``reward.genrm`` settings; the reward model (``reward.model``) is not used. ``engine``: a running judge
    engine to read (left open by ``close``); None starts one. ``last_answers``: the judge's decoded text of the
    last batch (``score`` mode), to see what it said."""

    name = "genrm"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings, engine: JudgeEngine | None = None) -> None:
        from vllm import SamplingParams

        o = self.options = parse_options("genrm", settings.options)
        super().__init__("default", o.default_reward)
        self._own_engine = engine is None
        self.engine = engine or JudgeEngine(o.judge, settings, o.max_model_len)
        self.prompts = JudgePrompts(self.engine.tokenizer, o)
        self.last_answers: list[str] = []
        if o.mode == "verdict":  # one prefill; the log-probs of the prompt's own tokens, the verdict's among them
            self._params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        else:
            self._params = SamplingParams(max_tokens=o.max_tokens, temperature=o.temperature, seed=0)

    def score_pairs(self, prompts: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        built = [self.prompts.build(p, r) for p, r in zip(prompts, responses, strict=True)]
        cut = sum(1 for _, n in built if n)
        if cut:
            self._outcomes["responses_cut"] += cut
        outputs = self.engine.generate([ids for ids, _ in built], self._params)
        self.last_answers = [out.outputs[0].text for out in outputs] if self.options.mode == "score" else []
        rewards = np.array([self._reward(i, out) for i, out in enumerate(outputs)], dtype=np.float32)
        prefilled = sum(len(ids) for ids, _ in built)
        self._outcomes["judge_prompt_tokens"] += prefilled  # the judge's work, beside the policy's in the records
        if self.options.mode == "score":
            self._outcomes["judge_tokens_decoded"] += sum(len(out.outputs[0].token_ids) for out in outputs)
        self._count(len(built), prefilled)
        return rewards

    def _reward(self, i: int, out: Any) -> float:
        if self.options.mode == "verdict":
            return verdict_logprob(out.prompt_logprobs, out.prompt_token_ids, len(self.prompts.verdict_ids))
        value = first_number(out.outputs[0].text, self.options.score_pattern)
        if value is not None and math.isfinite(value):
            return value / self.options.score_max
        self._outcomes["unparsed"] += 1
        o = self.options
        if o.on_unparsed == "fail":
            raise RlsimError(
                f"the judge's answer to item {i} of the batch has no score_pattern match: {out.outputs[0].text[:80]!r}"
                " (reward.genrm.on_unparsed: fail; set it to default or drop, or raise reward.genrm.max_tokens)"
            )
        if o.on_unparsed == "drop":
            self._outcomes["dropped"] += 1
            return DROPPED
        return o.default_reward

    def close(self) -> None:
        if self._own_engine:
            self.engine.close()


def special_prefix(tokenizer: Any) -> list[int]:
    """The special tokens the tokenizer puts before a text (a BOS, BERT's [CLS]); none it puts after it."""
    plain = list(tokenizer.encode("a", add_special_tokens=False))
    full = list(tokenizer.encode("a", add_special_tokens=True))
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return full[:start]
    return []


def verdict_logprob(prompt_logprobs: Sequence[Any], token_ids: Sequence[int], n: int) -> float:
    """The summed log-probability of the prompt's last ``n`` tokens (the verdict) from vLLM's ``prompt_logprobs``:
    one entry per prompt position (None for the first), each a dict from token id to a ``Logprob`` that holds the
    prompt's own token whatever the top-k asked for."""
    total = 0.0
    for pos in range(len(token_ids) - n, len(token_ids)):
        entry = prompt_logprobs[pos]
        total += entry[token_ids[pos]].logprob
    return total
