"""The Ray executor: one actor per worker, each loading its model once and reusing it.

Units of work (scoring passes or batches of them, retrieval cases, QA evaluator passes, judge
requests) are dealt to the actors with long and short units interleaved (as lm-eval deals
requests to vLLM's data-parallel workers), a few in flight per actor; results stream back as
they complete (`ray.wait`) and the driver alone writes records. A unit whose actor dies is put
back at the head of the queue and runs on the next free actor; the dead actor is replaced.

No wait is for ever: an actor that no node of the cluster could hold (more CPUs or GPUs than
any node has) stops the run at once, and one that waits longer than `--placement-timeout` for
a node to free its resources (held by another job, or by an actor Ray has not released) stops
it then, in one line naming what it waits for. Only an actor not yet placed on a node is timed
(the GCS's actor table says which: no worker process yet), so a slow machine, where a placed
actor loads or scores slowly, is waited for as long as it takes.
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from collections.abc import Iterator

from ctxeval.errors import FieldError, UserError, install_hint
from ctxeval.pipeline.executors.spec import ExecutorOptions, Loadable, WorkerModel
from ctxeval.pipeline.executors.work import J, Task, Work

IN_FLIGHT_PER_WORKER = 2  # a queued unit keeps an actor busy while the driver writes results
MAX_ATTEMPTS = 3  # a unit whose actor died this many times ends the run
# Tests set this to kill one busy actor (ray.kill) after that many jobs came back.
KILL_WORKER_AFTER_ENV = "CTXEVAL_TEST_KILL_WORKER_AFTER"
POLL_S = 5.0  # how often a wait for actors or results looks whether its actors are placed
UNPLACED = ("DEPENDENCIES_UNREADY", "PENDING_CREATION")  # an actor's states before it runs


class ModelWorker:
    """A Ray actor holding one loaded model (loaded inside the actor, on its node)."""

    def __init__(self, load_spec: Loadable, n_threads: int) -> None:
        self.model: WorkerModel | None = None
        self.error: str | None = None
        try:
            self.model = load_spec.load(n_threads)
        except UserError as exc:
            self.error = str(exc)

    def ready(self) -> str | None:
        """None once the model is loaded, else why it could not be."""
        return self.error

    def run(self, task: Task, items: list) -> list[object]:
        return task(self.model, items)

    def usage(self) -> dict:
        return self.model.usage()


class RayExecutor:
    """Deals passes to Ray actors; connects to a cluster, or starts a local one on 127.0.0.1."""

    def __init__(self, options: ExecutorOptions) -> None:
        try:
            import ray
        except ImportError:
            raise FieldError("kind", "{name} ray needs Ray: " + install_hint("ray")) from None
        self._ray = ray
        self.options = options
        self._started = False
        self._actors: list = []
        self._worker_class = None
        self._warm: tuple[Loadable, list] | None = None
        self._unplaced: dict[str, float] = {}  # actor id -> when it was first seen waiting to be placed
        self._feasible = False
        self.worker_usage: dict[str, list[dict]] = {}
        if not ray.is_initialized():
            address = options.address or os.environ.get("RAY_ADDRESS")
            try:
                if address:
                    ray.init(address=address, log_to_driver=False, configure_logging=False)
                else:
                    ray.init(num_cpus=options.workers * options.threads_per_worker, include_dashboard=False,
                             _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise UserError(f"cannot start or reach a Ray cluster{f' at {address}' if address else ''}: {str(exc).splitlines()[0]}") from None
            self._started = True

    def stream(self, model: WorkerModel, load_spec: Loadable, work: Work[J]) -> Iterator[tuple[J, object]]:
        """(job, result) for every job exactly once, in completion order. The driver holds every
        pending job (and, for scoring, its document's tokens) to deal long and short units together."""
        ray = self._ray
        groups = list(work.units)
        n_actors = min(self.options.workers, len(groups))
        warmed = self._take_warm(load_spec, n_actors)
        if not groups:
            return

        def spawn(slot: int):
            return self._spawn(load_spec, slot)

        actors = warmed + [spawn(slot) for slot in range(len(warmed), n_actors)]
        loaded = [a.ready.remote() for a in actors]
        while ray.wait(loaded, num_returns=len(loaded), timeout=self._poll())[1]:
            self._check_placed(actors)
        for error in ray.get(loaded):
            if error is not None:
                raise UserError(error)
        queue = deque(interleaved([sum(work.cost(job) for job in group) for group in groups]))
        inflight: dict = {}  # ref -> (slot, actor, unit)

        def submit(slot: int) -> None:
            busy = sum(1 for s, _, _ in inflight.values() if s == slot)
            while queue and busy < IN_FLIGHT_PER_WORKER:
                unit = queue.popleft()
                items = [work.item(job) for job in groups[unit]]
                inflight[actors[slot].run.remote(work.task, items)] = (slot, actors[slot], unit)
                busy += 1

        try:
            yield from self._gather(actors, spawn, submit, groups, queue, inflight)
            if model.remote:
                self.worker_usage.setdefault(model.name, []).extend(ray.get([a.usage.remote() for a in actors]))
        finally:
            self._kill_actors()

    def warm(self, load_spec: Loadable) -> None:
        """Start `--workers` actors loading this model now, so they load while the driver plans;
        the next `stream` of the same model uses them."""
        self._warm = (load_spec, [self._spawn(load_spec, slot) for slot in range(self.options.workers)])

    def _take_warm(self, load_spec: Loadable, n_actors: int) -> list:
        """Up to `n_actors` warmed actors of this model; the others warmed (surplus, or of
        another model) are killed, so their CPUs are free for the actors that run."""
        warm, self._warm = self._warm, None
        if warm is None:
            return []
        spec, started = warm
        keep = started[:n_actors] if spec == load_spec else []
        self._kill_once_created(started[len(keep):])
        return keep

    def _kill_once_created(self, actors: list) -> None:
        """Kill actors after their creation finished (loaded, or failed): Ray 2.60 can keep the
        CPU of an actor killed while its creation is being scheduled, and the next model's
        actors then wait for it for ever (seen on 2 loaded cores: one of two never started)."""
        from ray.exceptions import RayActorError

        for actor in actors:
            try:
                self._ray.get(actor.ready.remote())
            except RayActorError:  # already dead: nothing holds its CPU
                pass
            self._ray.kill(actor, no_restart=True)

    def _spawn(self, load_spec: Loadable, slot: int):
        """A new actor for `slot`; actor i reaches server i mod n (openai: several --base-url)."""
        if not self._feasible:
            self._check_feasible()
        if self._worker_class is None:
            self._worker_class = self._ray.remote(num_cpus=self.options.threads_per_worker, num_gpus=self.options.gpus_per_worker)(ModelWorker)
        servers = load_spec.per_server()
        actor = self._worker_class.remote(servers[slot % len(servers)], self.options.threads_per_worker)
        self._actors.append(actor)
        return actor

    def _gather(self, actors: list, spawn, submit, groups: list[list[J]], queue: deque, inflight: dict) -> Iterator[tuple[J, object]]:
        ray = self._ray
        from ray.exceptions import RayActorError, RayTaskError

        attempts: Counter[int] = Counter()
        kill_after = int(os.environ.get(KILL_WORKER_AFTER_ENV, "0")) or None
        returned = 0
        for slot in range(len(actors)):
            submit(slot)
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=self._poll())
            if not ready:
                self._check_placed(actors)
                continue
            (ref,) = ready
            slot, actor, unit = inflight.pop(ref)
            try:
                results = ray.get(ref)
            except RayActorError as exc:
                attempts[unit] += 1
                if attempts[unit] >= MAX_ATTEMPTS:
                    raise RuntimeError(f"a unit of {len(groups[unit])} jobs lost its Ray worker {MAX_ATTEMPTS} times: {str(exc).splitlines()[0]}") from exc
                queue.appendleft(unit)
                if actors[slot] is actor:  # replace the dead actor once, not once per lost unit
                    actors[slot] = spawn(slot)
                for other in range(len(actors)):
                    submit(other)
                continue
            except RayTaskError as exc:
                if isinstance(exc.cause, UserError):
                    raise exc.cause from None
                raise
            yield from zip(groups[unit], results)
            returned += len(results)
            if kill_after is not None and returned >= kill_after:
                kill_after = None
                busy = [a for _, a, _ in inflight.values()]
                if busy:
                    ray.kill(busy[0], no_restart=True)
            submit(slot)

    def _need(self) -> dict[str, float]:
        """What one actor asks of a node."""
        need = {"CPU": float(self.options.threads_per_worker)}
        if self.options.gpus_per_worker:
            need["GPU"] = float(self.options.gpus_per_worker)
        return need

    def _check_feasible(self) -> None:
        """Refuse at once an actor that no node of the cluster could ever hold (Ray would keep
        it waiting, and the run with it, for ever)."""
        need = self._need()
        nodes = [node["Resources"] for node in self._ray.nodes() if node["Alive"]]
        if not any(all(resources.get(k, 0.0) >= v for k, v in need.items()) for resources in nodes):
            largest = max(nodes, key=lambda r: (r.get("CPU", 0.0), r.get("GPU", 0.0)), default={})
            short = "threads_per_worker" if not any(r.get("CPU", 0.0) >= need["CPU"] for r in nodes) else "gpus_per_worker"
            raise FieldError(short, f"a Ray actor needs {_resources(need)}, but no node of the cluster has that many "
                                    f"(the largest has {_resources(largest, need)}); lower {{name}}")
        self._feasible = True

    def _poll(self) -> float:
        return min(POLL_S, self.options.placement_timeout / 4)

    def _check_placed(self, actors: list) -> None:
        """Stop the run, in one line, once an actor has waited `--placement-timeout` to be placed
        on a node; an actor already placed (loading or working, however slowly) is not timed."""
        # the GCS's actor table (ray.util.state asks the dashboard, which a local cluster here runs without)
        from ray._private.state import actors as actor_table

        table, now = actor_table(), time.monotonic()
        waited = 0.0
        for actor in actors:
            key = actor._actor_id.hex()
            entry = table.get(key, {})
            if entry.get("State") in UNPLACED and not entry.get("Pid"):
                waited = max(waited, now - self._unplaced.setdefault(key, now))
            else:
                self._unplaced.pop(key, None)
        if waited >= self.options.placement_timeout:
            need, free, total = self._need(), self._ray.available_resources(), self._ray.cluster_resources()
            raise FieldError("placement_timeout", f"a Ray actor waited {waited:.0f} s for a node to offer {_resources(need)} "
                                                  f"(the cluster has {_resources(total, need)}, {_resources(free, need)} free: this run's other actors "
                                                  f"or other jobs hold them); free them, or lower {{workers}}, or raise {{name}}")

    def _kill_actors(self) -> None:
        """Free the actors' CPUs and GPUs (the next model's actors need them)."""
        for actor in self._actors:
            self._ray.kill(actor, no_restart=True)
        self._actors.clear()

    def close(self) -> None:
        """Stop any actors left, and the cluster if this executor started it."""
        self._kill_actors()
        if self._started:
            self._ray.shutdown()
            self._started = False


def _resources(resources: dict[str, float], kinds: dict[str, float] | None = None) -> str:
    """'2 CPUs and 1 GPU': the kinds of `kinds` (or of `resources`) that `resources` holds."""
    amounts = [(kind, resources.get(kind, 0.0)) for kind in (kinds or resources) if kind in ("CPU", "GPU")]
    return " and ".join(f"{n:g} {kind}{'' if n == 1 else 's'}" for kind, n in amounts)


def interleaved(costs: list[int]) -> list[int]:
    """Unit indices by cost: longest, shortest, second longest, second shortest, ... so every
    actor gets a mix of long and short work (ties keep plan order)."""
    by_cost = sorted(range(len(costs)), key=lambda i: -costs[i])
    out: list[int] = []
    lo, hi = 0, len(by_cost) - 1
    while lo <= hi:
        out.append(by_cost[lo])
        if lo != hi:
            out.append(by_cost[hi])
        lo, hi = lo + 1, hi - 1
    return out
