"""The hf output head and its scoring on CUDA, and the logic of both checked where CUDA is absent.

On CUDA a half-precision model's head is a half-precision GEMM with float32 output, scored by
one fused reduction after torch.topk, in blocks no larger than a bare forward's logits. The
sizing rule and the reduction (eagerly, on CPU tensors) are checked everywhere against
hand-computed values and a naive float64 softmax; the GEMM against a float64 reference within
the float32 accumulation bound of docs/numerics.md on the CPU where torch offers it, and on
CUDA when present (those tests are skipped elsewhere; docs/gpu.md records their device run).
"""

from __future__ import annotations

import numpy as np
import pytest

from ctxeval.backends.head_memory import BARE_BYTES_PER_LOGIT, CUDA_BYTES_PER_LOGIT, FREE_FRACTION, cuda_head_block_rows
from ctxeval.data.texts import load_text
from tests.hf_tiny import tiny_llama_dir
from tests.numeric_paths import assert_scores_match_reference, head_reference

torch = pytest.importorskip("torch")

from ctxeval.backends.head_gemm import OutputHead  # noqa: E402
from ctxeval.backends.logits import score_block  # noqa: E402
from ctxeval.backends.logits_torch import _row_reduction, _top_k, score_block_device  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
GIB = 2**30


def test_cuda_head_block_rows_by_hand():
    # Llama-3 head, bf16 hidden states: a row costs 128,256 * 8 + 4,096 * 2 = 1,034,240 bytes
    assert CUDA_BYTES_PER_LOGIT == 8 and BARE_BYTES_PER_LOGIT == 2 and FREE_FRACTION == 0.25
    # 8,192 tokens: a bare forward's bf16 logits are 8,192 * 128,256 * 2 = 2,101,346,304 bytes -> 2,031 rows
    assert cuda_head_block_rows(8192, 80 * GIB, 128256, 4096, 2, 8192) == 2101346304 // 1034240 == 2031
    assert cuda_head_block_rows(131072, 80 * GIB, 128256, 4096, 2, 8192) == 8192  # 32,509 by the rule: capped
    # little free memory: a quarter of 4 GiB is 1,073,741,824 bytes -> 1,038 rows
    assert cuda_head_block_rows(131072, 4 * GIB, 128256, 4096, 2, 8192) == 1073741824 // 1034240 == 1038
    assert cuda_head_block_rows(33, 80 * GIB, 128256, 4096, 2, 8192) == 33 * 128256 * 2 // 1034240 == 8
    assert cuda_head_block_rows(1, 80 * GIB, 128256, 4096, 2, 8192) == 1  # never below one row
    with pytest.raises(ValueError):
        cuda_head_block_rows(0, GIB, 128256, 4096, 2, 8192)


@pytest.mark.parametrize("vocab,hidden", [(128256, 4096), (262144, 640), (1024, 64), (151936, 3584)])
def test_a_cuda_head_block_never_holds_more_than_a_bare_forwards_logits(vocab, hidden):
    """For every forward length from 1 to 256K tokens, a block of more than one row costs at most
    the bare forward's half-precision logits of that length (the log-softmax it also holds is margin)."""
    per_row = vocab * CUDA_BYTES_PER_LOGIT + hidden * 2
    for tokens in np.unique(np.geomspace(1, 262144, 400).astype(int)):
        rows = cuda_head_block_rows(int(tokens), 1024 * GIB, vocab, hidden, 2, 8192)
        assert rows == 1 or rows * per_row <= tokens * vocab * BARE_BYTES_PER_LOGIT
        assert 1 <= rows <= 8192


def _tied_logits(rng, n: int, vocab: int) -> np.ndarray:
    logits = (rng.standard_normal((n, vocab)) * 3).astype(np.float32)
    logits[0, [10, 20, 30]] = logits[0].max() + 1  # a three-way tie for the top
    logits[1, [7, vocab - 1]] = np.sort(logits[1])[-5]  # a tie at the 5th value, one of them far beyond
    logits[2, :] = 0.5  # all tied
    logits[3, ::2] = logits[3].max()  # half the row tied at the top
    return logits


def test_row_reduction_against_float64_counts_and_sums():
    """The fused reduction's logic, eagerly on CPU tensors: the target's logit and both counts
    equal float64 counts exactly (the logits are float32 values, so comparisons are exact); the
    exp-sums per inverse temperature within float32 summation rounding."""
    rng = np.random.default_rng(7)
    logits = _tied_logits(rng, 24, 3000)
    targets = rng.integers(0, 3000, 24)
    targets[3] = 0
    kth = np.sort(logits, axis=1)[:, -5]
    row_max = logits.max(axis=1)
    inv = (1.0, 2.0, 0.5)
    target, n_above, n_ge, sums = _row_reduction(torch.from_numpy(logits), torch.from_numpy(targets), torch.from_numpy(row_max[:, None]), torch.from_numpy(kth[:, None]), inv)
    z = logits.astype(np.float64)
    t = z[np.arange(24), targets]
    np.testing.assert_array_equal(target.numpy(), logits[np.arange(24), targets])
    np.testing.assert_array_equal(n_above.numpy(), np.count_nonzero(z > t[:, None], axis=1))
    np.testing.assert_array_equal(n_ge.numpy(), np.count_nonzero(z >= kth[:, None], axis=1))
    want = np.stack([np.exp((z - row_max[:, None]) * s).sum(axis=1) for s in inv], axis=1)
    np.testing.assert_allclose(sums.numpy(), want, rtol=1e-5)
    assert n_above[3] == 0 and n_ge[2] == 3000  # ties count in the target's favour; all tied at the k-th


def test_row_reduction_traces_as_one_graph_dynamic_in_the_row_count():
    """What CUDA compiles: torch.compile traces the reduction into one graph, dynamic in the row
    count, so blocks of another size (a short last block) do not recompile, and the traced graph
    gives the eager results exactly (run here by torch.fx; the inductor kernels themselves are
    the CUDA tests' to check)."""
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    compiled = torch.compile(_row_reduction, dynamic=True, backend=backend)
    rng = np.random.default_rng(2)
    for n in (7, 13, 64):
        logits = torch.from_numpy(_tied_logits(rng, n, 2000))
        targets = torch.from_numpy(rng.integers(0, 2000, n))
        vals = torch.topk(logits, 5, dim=1).values
        args = (logits, targets, vals[:, :1], vals[:, -1:], (1.0, 0.5))
        with torch.inference_mode():
            got = compiled(*args)
        for a, b in zip(got, _row_reduction(*args)):
            assert torch.equal(a, b)
    assert len(graphs) == 1


def test_device_scorer_against_a_naive_float64_softmax():
    """score_block_device on CPU tensors (the CUDA code path but the compile) against a full
    float64 softmax of the same float32 logits: ranks and top-k ids exactly (ties by id),
    log-probabilities at T = 1, 0.5 and 2 within 1e-5."""
    rng = np.random.default_rng(11)
    logits = _tied_logits(rng, 32, 5000)
    targets = rng.integers(0, 5000, 32)
    targets[0], targets[3] = 20, 2
    z = logits.astype(np.float64)
    for top_k in (1, 5, 20):
        got = score_block_device(torch.from_numpy(logits), torch.from_numpy(targets), top_k, (0.5, 2.0))
        exact = assert_scores_match_reference(got, z, np.zeros_like(z), targets, (0.5, 2.0), logprob_atol=1e-5)
        assert exact[4:].all()  # the first four rows tie their targets on purpose
        np.testing.assert_array_equal(got.rank, 1 + np.count_nonzero(z > z[np.arange(32), targets][:, None], axis=1))
        order = np.lexsort((np.broadcast_to(np.arange(5000), z.shape), -z), axis=1)[:, :top_k]
        np.testing.assert_array_equal(got.topk_ids, order)  # ties included: value descending, id ascending
        np.testing.assert_array_equal(got.greedy_id, order[:, 0])
    assert list(got.topk_ids[0][:3]) == [10, 20, 30] and list(got.topk_ids[2][:5]) == [0, 1, 2, 3, 4]
    assert list(got.topk_ids[3][:5]) == [0, 2, 4, 6, 8] and got.rank[3] == 1


@pytest.mark.parametrize("vocab", [5000, 8192, 300])
def test_top_k_from_the_tiles_with_the_largest_maxima_has_torch_topks_values(vocab):
    """The tiled top-k against torch.topk: the same values, ids that point at them, no id twice;
    on rows of many ties (small integers), one row all tied, a row whose top lies in one tile,
    a row with -inf logits, a ragged last tile (5000 and 300 are not multiples of 256)."""
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((12, vocab)).astype(np.float32)
    logits[:4] = rng.integers(-3, 4, (4, vocab))
    logits[4] = 1.0
    logits[5, 256:300] = 9.0 + np.arange(44)
    logits[6, ::3] = -np.inf
    t = torch.from_numpy(logits)
    for k in (1, 2, 5, 20):
        vals, ids = _top_k(t, k)
        assert torch.equal(vals, torch.topk(t, k, dim=1).values)
        assert torch.equal(t.gather(1, ids), vals)
        assert all(len(set(row)) == k for row in ids.tolist())


def test_device_scorer_equals_numpy_scorer_on_tie_heavy_rows():
    """Rows of small integers tie at every value, at the k-th included: the device scorer (the
    tiled top-k and its tie resolution) gives the numpy scorer's ranks and top-k ids exactly."""
    rng = np.random.default_rng(9)
    logits = rng.integers(-4, 5, (20, 5000)).astype(np.float32)
    targets = rng.integers(0, 5000, 20)
    for top_k in (1, 5, 20):
        want = score_block(logits, targets, top_k, (2.0,))
        got = score_block_device(torch.from_numpy(logits), torch.from_numpy(targets), top_k, (2.0,))
        np.testing.assert_array_equal(got.rank, want.rank)
        np.testing.assert_array_equal(got.topk_ids, want.topk_ids)
        np.testing.assert_allclose(got.logprob, want.logprob, atol=1e-5)


def test_output_head_off_cuda_is_a_float32_copy():
    """On a CPU a bf16 head runs on a float32 copy of its weights, exactly as F.linear in float32."""
    lin = torch.nn.Linear(64, 300, bias=True, dtype=torch.bfloat16)
    head = OutputHead.of(lin, "cpu", softcap=None)
    assert not head.half_gemm and head.weight.dtype == torch.float32 and head.precision == "float32"
    assert (head.vocab_size, head.hidden_size) == (300, 64)
    hidden = torch.randn(5, 64, dtype=torch.bfloat16)
    want = torch.nn.functional.linear(hidden.float(), lin.weight.float(), lin.bias.float())
    assert torch.equal(head(hidden), want)
    capped = OutputHead.of(lin, "cpu", softcap=3.0)(hidden)
    assert torch.equal(capped, torch.tanh(want / 3.0) * 3.0)


# the CPU shapes are small (a float64 reference of the 8B head is slow on a CPU); on CUDA the
# Llama-3-8B head (hidden 4,096, vocabulary 128,256) over 256 rows (the numpy checks dominate)
SHAPES = {"cpu": (64, 1024, 8192), "cuda": (256, 4096, 128256)}
PRECISION = {"cpu": "float32", "cuda": "bfloat16 x bfloat16 -> float32 (float32 accumulation)"}


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_cuda)])
def test_bf16_head_within_the_float32_accumulation_bound(device):
    """A bf16 head over bf16 hidden rows, as each device runs it — on CUDA the bf16 GEMM with
    float32 output (no float32 copy of the head; torch has no CPU kernel for it), on a CPU the
    float32 copy: both multiply exactly and accumulate in float32, so every logit lies within
    d * eps_f32 * sum|h w| of the float64 product. Scored, log-probabilities within 1e-4 nats of
    the float64 softmax, ranks and top-k as in the reference wherever no other logit lies within
    the bounds. Half the targets are the greedy token, whose margin is wide enough that most of
    those ranks are checked exactly."""
    n, hidden_size, vocab = SHAPES[device]
    gen = torch.Generator().manual_seed(0)
    lin = torch.nn.Linear(hidden_size, vocab, bias=False, dtype=torch.bfloat16)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(vocab, hidden_size, generator=gen) / hidden_size**0.5)
    hidden = torch.randn(n, hidden_size, generator=gen).to(torch.bfloat16).to(device)
    head = OutputHead.of(lin.to(device), device, softcap=None)
    assert head.precision == PRECISION[device] and head.half_gemm == (device == "cuda")
    logits = head(hidden)
    assert logits.dtype == torch.float32
    ref, bound = head_reference(hidden, lin.weight.detach())
    assert bool(((logits.double() - ref).abs() <= bound).all())
    targets = torch.randint(0, vocab, (n,), generator=gen).to(device)
    targets[::2] = ref[::2].argmax(dim=1)
    scores = score_block_device(logits, targets, 20, (0.5, 2.0))
    exact = assert_scores_match_reference(scores, ref.cpu().numpy(), bound.cpu().numpy(), targets.cpu().numpy(), (0.5, 2.0))
    assert exact[::2].mean() >= 0.6


TEXT = load_text("demo").content


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=needs_cuda)])
def test_hf_scorer_in_bf16_scores_within_the_bound_of_its_hidden_states(tmp_path, device):
    """HFScorer in bf16 (on CUDA the head is the bf16 GEMM with float32 output): a window's scores
    match the float64 softmax of the same bf16 hidden states and head weights (the float32 bound).
    Measured on CPU (AMD EPYC): 97 % of the 511 ranks checked exactly."""
    from ctxeval.backends.hf import HFScorer

    path = tiny_llama_dir(tmp_path / "tiny", TEXT[:20000], max_positions=1024)
    scorer = HFScorer(path, "hf:tiny", device=device, dtype="bfloat16")
    assert scorer.info.details["precision"]["head_matmul"] == PRECISION[device]
    ids = np.asarray(scorer.tokenize(TEXT), dtype=np.int32)[:511]
    window = (np.concatenate([[scorer.info.bos_id], ids[:-1]]).astype(np.int32), np.arange(511), ids)
    scores = scorer.score(*window, 10, (0.5,))
    with torch.inference_mode():
        hidden = scorer._body(input_ids=torch.as_tensor(window[0][None], dtype=torch.long, device=device), use_cache=False).last_hidden_state[0]
        ref, bound = head_reference(hidden, scorer._model.get_output_embeddings().weight)
    exact = assert_scores_match_reference(scores, ref.cpu().numpy(), bound.cpu().numpy(), ids.astype(np.int64), (0.5,))
    assert exact.mean() >= 0.5


@needs_cuda
def test_hf_scorer_on_cuda_peaks_below_a_bare_forward(tmp_path):
    """A 128,256-token vocabulary over a 4,096-token window, in bf16 on CUDA: the peak memory of
    `score` (exact ranks, top-20) above what was allocated before it is at most that of a bare
    forward of the same window (logits, their log-softmax, the targets' gathered)."""
    from ctxeval.backends.hf import HFScorer

    path = tiny_llama_dir(tmp_path / "wide", TEXT[:20000], model_vocab=128256, max_positions=4096)
    scorer = HFScorer(path, "hf:wide", device="cuda", dtype="bfloat16")
    ids = np.resize(np.asarray(scorer.tokenize(TEXT[:60000]), dtype=np.int32), 4096)
    window = (np.concatenate([[scorer.info.bos_id], ids[:-1]]).astype(np.int32), np.arange(4096), ids)

    def peak(run) -> int:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        run()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    def bare():
        with torch.inference_mode():
            logits = scorer._model(input_ids=torch.as_tensor(window[0][None], dtype=torch.long, device="cuda")).logits
            torch.log_softmax(logits, dim=-1)[0].gather(1, torch.as_tensor(ids[:, None], dtype=torch.long, device="cuda")).sum().item()

    scorer.score(*window, 20, ())  # compiles the reduction; not measured
    ours, theirs = peak(lambda: scorer.score(*window, 20, ())), peak(bare)
    assert ours <= theirs, (ours / GIB, theirs / GIB)
