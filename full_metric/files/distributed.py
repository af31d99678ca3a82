"""Scoring on several processes with ``torch.distributed``, as ``torchrun`` and ``accelerate launch``
start them (one machine or many): the process's rank and device, shares balanced by length, and
gathering each rank's scores. No files here (see :mod:`full_metric.files.corpus`)."""

from __future__ import annotations

import datetime
import heapq
import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from ..errors import UsageError
from ..result import signature_differences

logger = logging.getLogger(__name__)

#: How long a rank waits for the others at a barrier: scoring shares can take hours.
BARRIER_TIMEOUT = datetime.timedelta(hours=48)


@dataclass(frozen=True)
class Rank:
    """This process's place: ``rank`` of ``world_size`` processes, ``local_rank`` of
    ``local_world_size`` on its machine (all 0 / 1 for a plain single process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def current_rank(environ: Any = None) -> Rank:
    """The rank from the environment ``torchrun`` and ``accelerate launch`` set (``RANK``,
    ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``); a single process without them."""
    env = os.environ if environ is None else environ
    world = int(env.get("WORLD_SIZE", "1"))
    local_world = int(env.get("LOCAL_WORLD_SIZE", str(world)))
    return Rank(int(env.get("RANK", "0")), world, int(env.get("LOCAL_RANK", "0")), local_world)


def setup(rank: Rank | None = None) -> Rank:
    """Join the process group when started by a launcher (``nccl`` with GPUs, ``gloo`` without), each
    process on its own GPU (``cuda:LOCAL_RANK``, made the current device before the group is joined, so
    that NCCL's collectives and the model of each rank do not all land on ``cuda:0``), and on a CPU
    give each process of this machine its share of the cores (unless ``OMP_NUM_THREADS`` says
    otherwise). Returns the rank."""
    rank = rank or current_rank()
    if rank.world_size > 1:
        import torch.distributed as dist

        if torch.cuda.is_available():
            torch.cuda.set_device(rank.local_rank % torch.cuda.device_count())
        if not dist.is_initialized():
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend, timeout=BARRIER_TIMEOUT)
            logger.info("rank %d of %d joined the %s process group", rank.rank, rank.world_size, backend)
        if not torch.cuda.is_available() and "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // rank.local_world_size))
    return rank


def barrier() -> None:
    """Wait for every rank (nothing to wait for in a single process)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def decided_by_rank_zero(decide: Callable[[], Any], error: type[Exception]) -> Any:
    """Run ``decide`` on rank 0 only and give its outcome to every rank: its value, or, when it raised,
    an error on every rank, so that no rank goes on (and writes) where rank 0 refused or failed, and no
    rank waits for a decision that never comes: ``error`` itself raises ``error`` everywhere; any other
    exception is re-raised on rank 0 and raised as ``error`` naming it on the others. In a single
    process: ``decide()``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return decide()
    outcome: list[Any] = [None]
    failure: BaseException | None = None
    if dist.get_rank() == 0:
        try:
            outcome[0] = ("value", decide())
        except error as refused:
            outcome[0] = ("error", str(refused))
        except Exception as failed:  # noqa: BLE001 - told to every rank, then re-raised here
            failure, outcome[0] = failed, ("failed", f"rank 0 failed: {type(failed).__name__}: {failed}")
    dist.broadcast_object_list(outcome, src=0)
    kind, value = outcome[0]
    if failure is not None:
        raise failure
    if kind != "value":
        raise error(value)
    return value


def teardown() -> None:
    """Leave the process group cleanly: wait for every rank, then destroy the group. A rank that
    exits (or destroys its group) while another is still in the last collective can abort in
    gloo's destructor ("terminate called without an active exception"); the barrier first avoids it."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def balanced_shares(lengths: Sequence[int], world_size: int) -> list[list[int]]:
    """Split item indices into ``world_size`` shares of about equal total length (longest items
    first, each to the share with the least so far), each share in input order. Deterministic, so
    every rank computes the same split without communication."""
    shares: list[list[int]] = [[] for _ in range(world_size)]
    heap = [(0, r) for r in range(world_size)]
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        total, r = heapq.heappop(heap)
        shares[r].append(index)
        heapq.heappush(heap, (total + lengths[index], r))
    return [sorted(share) for share in shares]


def gather_results(result: Any) -> list[Any]:
    """Every rank's object (e.g. its :class:`~full_metric.result.FullResult`), in rank order, on
    every rank; ``[result]`` in a single process. For evaluation loops where each rank scores its
    own predictions on its own device and all ranks need all the scores."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [result]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, result)
    return out


def merge_results(results: Sequence[Any], order: Sequence[int] | None = None) -> Any:
    """One :class:`~full_metric.result.FullResult` from several with the same signature (e.g. the
    ranks' results of :func:`gather_results`), their dialogs concatenated in the order given, or,
    with ``order``, the concatenation's dialogs taken in that order."""
    from dataclasses import replace

    first = results[0]
    other = next((r for r in results if r.signature != first.signature), None)
    if other is not None:
        raise UsageError("results made with different settings cannot be merged: "
                         + signature_differences(first.signature, other.signature))

    def join(values: list[Any]) -> list[Any]:
        return values if order is None else [values[k] for k in order]

    return replace(
        first,
        scores=join([s for r in results for s in r.scores]),
        follow_up_log_likelihoods=join([v for r in results for v in r.follow_up_log_likelihoods]),
        dropped_tokens=join([d for r in results for d in r.dropped_tokens]),
        category_scores={k: join([v for r in results for v in r.category_scores[k]]) for k in first.category_scores},
    )


def merge_in_order(parts: Sequence[tuple[Sequence[int], Any]]) -> Any:
    """One :class:`~full_metric.result.FullResult` from the ranks' ``(indices, result)`` parts (each
    result scores the items at its indices), its dialogs in index order: the order of the input,
    whatever share each rank had. The indices must cover ``0 .. n-1`` exactly once."""
    positions = [i for indices, _ in parts for i in indices]
    count = sum(len(result.scores) for _, result in parts)
    if sorted(positions) != list(range(len(positions))) or len(positions) != count:
        raise UsageError(f"the shares cover items {sorted(positions)}, not each of 0..{count - 1} once")
    return merge_results([result for _, result in parts], order=sorted(range(len(positions)), key=positions.__getitem__))
