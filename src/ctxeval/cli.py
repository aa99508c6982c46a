"""Command-line interface: parses flags, calls the API, prints tables. No logic of its own."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ctxeval import api
from ctxeval.config import DEFAULT_MODEL, DEFAULT_TOP_K, MetricConfig
from ctxeval.api import DEFAULT_CACHE, CorpusOptions, ExecutorOptions, OpenAIOptions, RunResult, dry_run_table
from ctxeval.errors import EXIT_INCOMPLETE, EXIT_USER_ERROR, IncompleteRun, UserError

app = typer.Typer(
    help="Measure how well language models use long contexts: perplexity, rank-based perplexity, context-length sweeps.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_LENGTHS_HELP = "Comma-separated context lengths in tokens."
CutoffOpt = Annotated[str, typer.Option("--cutoff", help="Rank cutoff l of the rank scores: a positive integer, or 'full' for the whole vocabulary (a rank an API read from a shorter top-k list is scored with l = that list's length).")]
AlphasOpt = Annotated[str, typer.Option("--alphas", help="Comma-separated alphas of the non-linear score e^(-alpha (r-1)).")]
ApproxKOpt = Annotated[int, typer.Option("--approx-k", help="k of the approximate perplexity (an API's top-k).")]
PenaltyOpt = Annotated[float, typer.Option("--penalty", help="Penalty subtracted from log p_k for tokens outside the top-k.")]
TopKOpt = Annotated[int, typer.Option("--top-k", help="How many top tokens (ids, logprobs) to store per target.")]
TempsOpt = Annotated[str, typer.Option("--temperatures", help="Comma-separated temperatures at which to also compute log-probabilities (1 is always included).")]
OutOpt = Annotated[Optional[Path], typer.Option("--out", help="Run directory. Default: runs/<command>-<run id>. Re-running the same command resumes it.")]
ThreadsOpt = Annotated[Optional[int], typer.Option("--threads", help="CPU threads for the model (default: all cores).")]
DeviceOpt = Annotated[Optional[str], typer.Option("--device", help="hf: models only: cpu (default), cuda or mps.")]
DtypeOpt = Annotated[Optional[str], typer.Option("--dtype", help="hf: models only: float32 (default), bfloat16, float16 or float64 (slow reference).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", help="No progress bar and no tables.")]
BaseUrlsOpt = Annotated[Optional[list[str]], typer.Option("--base-url", help="openai models: the server's base URL (default http://127.0.0.1:8000). Repeat for several servers of the same model: passes are dealt across them.")]
ApiKeyEnvOpt = Annotated[str, typer.Option("--api-key-env", help="openai models: environment variable holding the API key (never stored).")]
ApiModeOpt = Annotated[str, typer.Option("--api-mode", help="openai models: auto (probe), prompt (echo+logprobs), generate (completions, thesis reuse) or chat (chat completions, thesis reuse).")]
TokenizerOpt = Annotated[Optional[str], typer.Option("--tokenizer", help="openai models: a GGUF (gemma-3-270m or .gguf path) with the served model's vocabulary; default: the server's tokenize endpoint.")]
TopLogprobsOpt = Annotated[int, typer.Option("--top-logprobs", help="openai models: top-k log-probabilities to request (chat: at most 20).")]
GenTokensOpt = Annotated[Optional[int], typer.Option("--gen-tokens", help="openai generate/chat: tokens requested per request (reused while the sampled tokens equal the text). Default: n_c with --context-mode thesis, else 10.")]
ApiTempOpt = Annotated[float, typer.Option("--api-temperature", help="openai generate/chat: sampling temperature.")]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", help="openai models: requests in flight at once.")]
CacheOpt = Annotated[Optional[str], typer.Option("--cache", help="openai models: SQLite request cache ('none' to disable). Default ~/.cache/ctxeval/api-cache.sqlite.")]
EvaluatorOpt = Annotated[str, typer.Option("--model", help=f"Evaluator: {DEFAULT_MODEL} (embedded default), a .gguf path or hf:MODEL (not openai:, whose APIs return no log-probability for an answer's first token).")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the requests and tokens the run would send to API models, send nothing.")]
PriceInOpt = Annotated[Optional[float], typer.Option("--price-in", help="With --dry-run: price per 1M prompt tokens.")]
PriceOutOpt = Annotated[Optional[float], typer.Option("--price-out", help="With --dry-run: price per 1M completion tokens.")]
GlobOpt = Annotated[str, typer.Option("--glob", help="Corpus folders: files to read, matched recursively (document id: path below the folder).")]
TextFieldOpt = Annotated[str, typer.Option("--text-field", help="JSONL/Parquet corpora: the field holding each document's text.")]
IdFieldOpt = Annotated[Optional[str], typer.Option("--id-field", help="JSONL/Parquet corpora: the field holding each document's id (default: <file stem>:<row>).")]
MaxDocsOpt = Annotated[Optional[int], typer.Option("--max-docs", help="Use only the first N documents of the corpus.")]
SampleOpt = Annotated[Optional[int], typer.Option("--sample", help="Use a seeded random sample of N documents (after --max-docs; seed: --seed).")]
SkipBadOpt = Annotated[bool, typer.Option("--skip-bad", help="Skip bad documents (malformed line, missing field, empty, not UTF-8) and count them in the manifest, instead of stopping.")]
ExecutorOpt = Annotated[str, typer.Option("--executor", help="Where passes run: local (this process, default) or ray (Ray actors, each holding a loaded model; records are the same).")]
WorkersOpt = Annotated[int, typer.Option("--workers", help="--executor ray: actors per model.")]
AddressOpt = Annotated[Optional[str], typer.Option("--address", help="--executor ray: the cluster's address (default: RAY_ADDRESS, else start a local cluster on 127.0.0.1).")]
ThreadsPerWorkerOpt = Annotated[int, typer.Option("--threads-per-worker", help="--executor ray: CPU threads (and CPUs reserved) per actor.")]
GpusPerWorkerOpt = Annotated[float, typer.Option("--gpus-per-worker", help="--executor ray: GPUs reserved per actor (hf: models with --device cuda).")]


def _ints(value: str, flag: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{flag} expects comma-separated integers, got {value!r}") from None


def _floats(value: str, flag: str) -> list[float]:
    try:
        return [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{flag} expects comma-separated numbers, got {value!r}") from None


def _cache_path(value: Optional[str]) -> Optional[str]:
    if value is None:
        return str(DEFAULT_CACHE)
    return None if value.strip().lower() == "none" else value


def _openai_options(base_url: Optional[list[str]], api_key_env: str, concurrency: int, cache: Optional[str], **settings) -> OpenAIOptions:
    """The openai options of a command: the first --base-url reaches the model, the others
    (--base-url repeated) are servers of the same model that work is dealt across."""
    first, *others = base_url or [OpenAIOptions.base_url]
    return OpenAIOptions(first, api_key_env, concurrency=concurrency, cache=_cache_path(cache), fanout=tuple(others), **settings)


def _executor(kind: str, workers: int, address: Optional[str], threads_per_worker: int, gpus_per_worker: float) -> ExecutorOptions:
    return ExecutorOptions(kind, workers, address, threads_per_worker, gpus_per_worker)


def _metric_config(cutoff: str, alphas: str, approx_k: int, penalty: float) -> MetricConfig:
    if cutoff.strip().lower() == "full":
        cutoff_value = None
    else:
        try:
            cutoff_value = int(cutoff)
        except ValueError:
            raise UserError(f"--cutoff expects a positive integer or 'full', got {cutoff!r}") from None
    return MetricConfig(cutoff_value, tuple(_floats(alphas, "--alphas")), approx_k, penalty)


def _corpus_options(glob: str, text_field: str, id_field: Optional[str], max_docs: Optional[int], sample: Optional[int], seed: int, skip_bad: bool) -> CorpusOptions:
    return CorpusOptions(glob, text_field, id_field, max_docs, sample, seed, skip_bad)


def _report(result: RunResult, quiet: bool) -> None:
    if not quiet:
        typer.echo(result.tables)
    files = result.files()
    corpus = result.manifest.corpus or {}
    if corpus.get("skipped_documents") or corpus.get("bad_documents"):
        typer.echo(f"documents: {corpus['documents']} read, {corpus['bad_documents']} bad skipped, {corpus['skipped_documents']} skipped by the plan (see manifest.json)")
    typer.echo(f"records: {files['records']}  ({len(result.records)} tokens)")
    typer.echo(f"summary: {files['summary_json']}, {files['summary_csv']}, {files['tables']}")
    typer.echo(f"plot:    {files['plot']}")
    if "corpus_json" in files:
        typer.echo(f"corpus:  {files['corpus_json']}, {files['corpus_csv']} (all documents pooled; intervals resample documents)")


@app.command()
def sweep(
    texts: Annotated[Optional[list[str]], typer.Argument(help="UTF-8 text files, corpus folders, .jsonl/.json or .parquet corpora; 'demo' (the default) is the bundled Chesterton excerpt.")] = None,
    model: Annotated[Optional[list[str]], typer.Option("--model", help=f"Model: {DEFAULT_MODEL} (embedded default), a .gguf path, hf:{DEFAULT_MODEL} or hf:DIR. Repeat to sweep several models on the same starts.")] = None,
    lengths: Annotated[str, typer.Option("--lengths", help=_LENGTHS_HELP)] = "32,64,128,256,512,1024,2048,4096",
    n_compare: Annotated[int, typer.Option("--n-compare", help="n_c: consecutive targets scored per start.")] = 30,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random starts (and of --sample).")] = 0,
    repeats: Annotated[int, typer.Option("--repeats", help="Independent seeded starts per length.")] = 1,
    context_mode: Annotated[str, typer.Option("--context-mode", help="exact: every target sees exactly L tokens (one pass per target); approx: one pass of L+n_c tokens (contexts L..L+n_c-1); both: run both and report their mean |delta logprob|; thesis (openai generate/chat): the thesis's API schedule, each request sends exactly L tokens, reused generated steps see L+j.")] = "exact",
    exhaustive: Annotated[bool, typer.Option("--exhaustive/--non-exhaustive", help="--context-mode thesis: stop after n_c requests (exhaustive; comparisons may exceed n_c) or after n_c comparisons (default).")] = False,
    top_k: TopKOpt = DEFAULT_TOP_K,
    temperatures: TempsOpt = "1",
    cutoff: CutoffOpt = "20",
    alphas: AlphasOpt = "0.1,0.3",
    approx_k: ApproxKOpt = 20,
    penalty: PenaltyOpt = 3.0,
    out: OutOpt = None,
    threads: ThreadsOpt = None,
    device: DeviceOpt = None,
    dtype: DtypeOpt = None,
    quiet: QuietOpt = False,
    base_url: BaseUrlsOpt = None,
    api_key_env: ApiKeyEnvOpt = "OPENAI_API_KEY",
    api_mode: ApiModeOpt = "auto",
    tokenizer: TokenizerOpt = None,
    top_logprobs: TopLogprobsOpt = 20,
    gen_tokens: GenTokensOpt = None,
    api_temperature: ApiTempOpt = 1.0,
    concurrency: ConcurrencyOpt = 4,
    cache: CacheOpt = None,
    dry_run: DryRunOpt = False,
    price_in: PriceInOpt = None,
    price_out: PriceOutOpt = None,
    glob: GlobOpt = "*.txt",
    text_field: TextFieldOpt = "text",
    id_field: IdFieldOpt = None,
    max_docs: MaxDocsOpt = None,
    sample: SampleOpt = None,
    skip_bad: SkipBadOpt = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    address: AddressOpt = None,
    threads_per_worker: ThreadsPerWorkerOpt = 1,
    gpus_per_worker: GpusPerWorkerOpt = 0.0,
) -> None:
    """Rank-based perplexity over context lengths (the thesis protocol)."""
    metrics = _metric_config(cutoff, alphas, approx_k, penalty)
    result = api.sweep(
        texts=texts or ["demo"],
        models=model or [DEFAULT_MODEL],
        lengths=_ints(lengths, "--lengths"),
        n_compare=n_compare,
        seed=seed,
        repeats=repeats,
        context_mode=context_mode,
        top_k=top_k,
        temperatures=_floats(temperatures, "--temperatures"),
        metrics=metrics,
        out=out,
        progress=not quiet and not dry_run,
        n_threads=threads,
        device=device,
        dtype=dtype,
        openai=_openai_options(base_url, api_key_env, concurrency, cache, mode=api_mode, tokenizer=tokenizer, top_logprobs=top_logprobs, gen_tokens=gen_tokens, temperature=api_temperature),
        dry_run=dry_run,
        exhaustive=exhaustive,
        corpus=_corpus_options(glob, text_field, id_field, max_docs, sample, seed, skip_bad),
        executor=_executor(executor, workers, address, threads_per_worker, gpus_per_worker),
    )
    if dry_run:
        typer.echo(dry_run_table(result, price_in, price_out))
        return
    _report(result, quiet)


@app.command()
def score(
    texts: Annotated[list[str], typer.Argument(help="UTF-8 text files ('demo' for the bundled excerpt), corpus folders, .jsonl/.json or .parquet corpora.")],
    method: Annotated[str, typer.Option("--method", help="chunked: disjoint windows; sliding: window W moved by stride S, each token scored once; fixed: every target sees the W tokens before it (all of them while fewer than W exist; see --head).")] = "chunked",
    window: Annotated[int, typer.Option("--window", help="Window W (for fixed: the context length).")] = 1024,
    stride: Annotated[Optional[int], typer.Option("--stride", help="Stride S of --method sliding.")] = None,
    head: Annotated[Optional[str], typer.Option("--head", help="--method fixed only. full (default, paper 002): score the first W tokens with all their previous tokens, so fixed covers the same tokens as chunked; skip: leave them out, so every target sees exactly W tokens.")] = None,
    model: Annotated[str, typer.Option("--model", help=f"{DEFAULT_MODEL} (embedded default), a .gguf path, hf:{DEFAULT_MODEL} or hf:DIR.")] = DEFAULT_MODEL,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Score only the first N tokens of the text.")] = None,
    top_k: TopKOpt = DEFAULT_TOP_K,
    temperatures: TempsOpt = "1",
    cutoff: CutoffOpt = "20",
    alphas: AlphasOpt = "0.1,0.3",
    approx_k: ApproxKOpt = 20,
    penalty: PenaltyOpt = 3.0,
    out: OutOpt = None,
    threads: ThreadsOpt = None,
    device: DeviceOpt = None,
    dtype: DtypeOpt = None,
    quiet: QuietOpt = False,
    base_url: BaseUrlsOpt = None,
    api_key_env: ApiKeyEnvOpt = "OPENAI_API_KEY",
    api_mode: ApiModeOpt = "auto",
    tokenizer: TokenizerOpt = None,
    top_logprobs: TopLogprobsOpt = 20,
    gen_tokens: GenTokensOpt = None,
    api_temperature: ApiTempOpt = 1.0,
    concurrency: ConcurrencyOpt = 4,
    cache: CacheOpt = None,
    dry_run: DryRunOpt = False,
    price_in: PriceInOpt = None,
    price_out: PriceOutOpt = None,
    glob: GlobOpt = "*.txt",
    text_field: TextFieldOpt = "text",
    id_field: IdFieldOpt = None,
    max_docs: MaxDocsOpt = None,
    sample: SampleOpt = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --sample and of --noise-floor's windows.")] = 0,
    noise_floor: Annotated[Optional[str], typer.Option("--noise-floor", help="Re-score a seeded sample of the windows with the model on a second numeric path and compare token by token: model options added to the model ('?flash_attn=1', '?n_batch=7', '?threads=1') or a model spec on the same weights ('hf:gemma-3-270m'). Reports max |delta logprob|, rank changes, top-1 flips and the KL between the paths: the floor below which a difference is numerics, not the model.")] = None,
    noise_windows: Annotated[int, typer.Option("--noise-windows", help="Windows in --noise-floor's seeded sample (seed: --seed).")] = 8,
    skip_bad: SkipBadOpt = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    address: AddressOpt = None,
    threads_per_worker: ThreadsPerWorkerOpt = 1,
    gpus_per_worker: GpusPerWorkerOpt = 0.0,
) -> None:
    """Perplexity and rank scores of whole texts (every document of every input) with chunked, sliding or fixed windows."""
    metrics = _metric_config(cutoff, alphas, approx_k, penalty)
    result = api.score(
        texts,
        method=method,
        window=window,
        stride=stride,
        model=model,
        max_tokens=max_tokens,
        top_k=top_k,
        temperatures=_floats(temperatures, "--temperatures"),
        metrics=metrics,
        out=out,
        progress=not quiet and not dry_run,
        n_threads=threads,
        device=device,
        dtype=dtype,
        openai=_openai_options(base_url, api_key_env, concurrency, cache, mode=api_mode, tokenizer=tokenizer, top_logprobs=top_logprobs, gen_tokens=gen_tokens, temperature=api_temperature),
        dry_run=dry_run,
        head=head,
        corpus=_corpus_options(glob, text_field, id_field, max_docs, sample, seed, skip_bad),
        executor=_executor(executor, workers, address, threads_per_worker, gpus_per_worker),
        noise_floor=api.NoiseFloor(noise_floor, noise_windows, seed) if noise_floor is not None else None,
    )
    if dry_run:
        typer.echo(dry_run_table(result, price_in, price_out))
        return
    _report(result, quiet)
    if result.noise_floor is not None:
        typer.echo(api.floor_line(result.noise_floor))


@app.command()
def diff(
    ref: Annotated[str, typer.Argument(help=f"REF model: {DEFAULT_MODEL}, a .gguf path or hf:MODEL, with options as MODEL?key=value&... (docs/diff.md).")],
    cand: Annotated[str, typer.Argument(help="CAND model, same forms; e.g. gemma-3-270m?type_k=q8_0&type_v=q8_0&flash_attn=1 or a requantized .gguf.")],
    text: Annotated[list[str], typer.Argument(help="UTF-8 text files ('demo' for the bundled excerpt) or corpora: folders, .jsonl/.json or .parquet.")],
    window: Annotated[int, typer.Option("--window", help="Window W: tokens per pass (BOS not counted).")] = 512,
    stride: Annotated[Optional[int], typer.Option("--stride", help="Stride S < W: sliding windows, each token scored once (default: disjoint chunks).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Compare only the first N tokens of each document.")] = None,
    top_k: Annotated[int, typer.Option("--top-k", help="k of each model's recorded top-k (ids and log-probabilities, side by side in report.html's token card) and of their overlap.")] = 10,
    reverse_kl: Annotated[bool, typer.Option("--reverse-kl", help="Also record KL(P_cand || P_ref).")] = False,
    buckets: Annotated[Optional[str], typer.Option("--buckets", help="Comma-separated context-length bucket edges from 0 (default 0,512,1024,2048,... up to the window).")] = None,
    profile: Annotated[str, typer.Option("--profile", help="dev: gate only on --max-kl / --min-same-top; ci / release: also need at least 20 / 100 windows and 2000 / 20000 tokens. A failed gate exits with code 1.")] = "dev",
    max_kl: Annotated[Optional[float], typer.Option("--max-kl", help="Fail (exit 1) if the upper CI bound of the mean KL exceeds this (nats).")] = None,
    min_same_top: Annotated[Optional[float], typer.Option("--min-same-top", help="Fail (exit 1) if the lower CI bound of same-top-1 is below this percentage.")] = None,
    min_windows: Annotated[Optional[int], typer.Option("--min-windows", help="Override the profile's minimum windows.")] = None,
    min_tokens: Annotated[Optional[int], typer.Option("--min-tokens", help="Override the profile's minimum tokens.")] = None,
    replicates: Annotated[int, typer.Option("--replicates", help="Bootstrap replicates.")] = 2000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed (and --sample's and --noise-floor's).")] = 0,
    noise_floor: Annotated[Optional[str], typer.Option("--noise-floor", help="Re-score a seeded sample of the windows with REF on a second numeric path and compare token by token: model options added to the model ('?flash_attn=1', '?n_batch=7', '?threads=1') or a model spec on the same weights ('hf:gemma-3-270m'). Reports max |delta logprob|, rank changes, top-1 flips and the KL between the paths: the floor below which a difference is numerics, not the model.")] = None,
    noise_windows: Annotated[int, typer.Option("--noise-windows", help="Windows in --noise-floor's seeded sample (seed: --seed).")] = 8,
    block_rows: Annotated[int, typer.Option("--block-rows", help="Logit rows per block of each model (memory: 2 x rows x vocab floats).")] = 128,
    key_tokens: Annotated[Optional[Path], typer.Option("--key-tokens", help="A finished context-gain run over the same texts: also summarise over its evaluator's key tokens.")] = None,
    out: OutOpt = None,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    glob: GlobOpt = "*.txt",
    text_field: TextFieldOpt = "text",
    id_field: IdFieldOpt = None,
    max_docs: MaxDocsOpt = None,
    sample: SampleOpt = None,
    skip_bad: SkipBadOpt = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    address: AddressOpt = None,
    threads_per_worker: ThreadsPerWorkerOpt = 1,
) -> None:
    """How much CAND's next-token distributions differ from REF's on the same windows: KL, same-top-1, PPL ratio, by context position.

    Writes diff_records.parquet (one row per scored token), diff.json and diff.md (summaries) and report.html (tokens coloured by KL, both models' top-k per token, charts by context position) into the run directory."""
    result = api.diff(
        ref, cand, text, window=window, stride=stride, max_tokens=max_tokens, top_k=top_k, reverse=reverse_kl,
        buckets=_ints(buckets, "--buckets") if buckets else None, out=out, progress=not quiet, n_threads=threads,
        profile=profile, max_kl=max_kl, min_same_top=min_same_top, min_windows=min_windows, min_tokens=min_tokens,
        bootstrap=api.Bootstrap(replicates, seed), block_rows=block_rows, key_tokens=key_tokens,
        corpus=_corpus_options(glob, text_field, id_field, max_docs, sample, seed, skip_bad),
        executor=_executor(executor, workers, address, threads_per_worker, 0.0),
        noise_floor=api.NoiseFloor(noise_floor, noise_windows, seed) if noise_floor is not None else None,
    )
    if not quiet:
        typer.echo(result.markdown)
    files = result.files()
    typer.echo(f"records: {files['records']}; report: {files['report']}, {files['markdown']}, {files['html']}")
    if result.failures:
        for failure in result.failures:
            print(f"ctxeval: {profile} gate failed: {failure}", file=sys.stderr)
        raise typer.Exit(1)


@app.command()
def summary(
    run_dir: Annotated[Path, typer.Argument(help="A finished run directory.")],
    cutoff: Annotated[Optional[str], typer.Option("--cutoff", help="Override the run's rank cutoff (integer or 'full').")] = None,
    alphas: Annotated[Optional[str], typer.Option("--alphas", help="Override the run's alphas.")] = None,
    approx_k: Annotated[Optional[int], typer.Option("--approx-k", help="Override the run's approximate-PPL k.")] = None,
    penalty: Annotated[Optional[float], typer.Option("--penalty", help="Override the run's approximate-PPL penalty.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Also rewrite the run's summary files with these settings.")] = False,
    thesis: Annotated[bool, typer.Option("--thesis", help="Print only the thesis's tables: Table 1 (AVG), Table 2 and Appendix A's rows, whose \"PPL\" is the approximate perplexity (top-k, penalty); without it, also the exact PPL, TOP1 and BPB.")] = False,
) -> None:
    """Print a finished run's tables (thesis Table 1/2 and Appendix A shapes), recomputed from its
    records. "PPL (exact)" is the perplexity; "approx PPL (thesis, top-k, penalty p)" is what the
    thesis's tables call PPL."""
    stored = api.run_metrics(run_dir)
    metrics = _metric_config(
        cutoff if cutoff is not None else ("full" if stored.cutoff is None else str(stored.cutoff)),
        alphas if alphas is not None else ",".join(f"{a:g}" for a in stored.alphas),
        approx_k if approx_k is not None else stored.approx_k,
        penalty if penalty is not None else stored.penalty,
    )
    result = api.summary(run_dir, metrics=metrics, write=write, thesis=thesis)
    typer.echo(result.tables)


@app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="Run A (the baseline).")],
    run_b: Annotated[Path, typer.Argument(help="Run B (compared against A).")],
    out: Annotated[Path, typer.Option("--out", help="Directory for compare.json and compare.md.")] = Path("runs/compare"),
    replicates: Annotated[int, typer.Option("--replicates", help="Bootstrap replicates.")] = 2000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    cluster_by_text: Annotated[Optional[bool], typer.Option("--cluster-by-text/--no-cluster-by-text", help="Resample whole texts (documents) instead of windows. Default: by document when at least 3 documents are compared, by window otherwise (the reason is in the report).")] = None,
    resample: Annotated[str, typer.Option("--resample", help="Bootstrap scheme: windows (draw units uniformly, ratio of sums; default) or tokens (draw them with probability proportional to their tokens, plain mean of the drawn differences: paper 001's wording).")] = "windows",
    profile: Annotated[str, typer.Option("--profile", help="dev: report everything; ci / release: exit code 1 unless pairing is complete, A and B (preview and final arm) hold equal window counts, token counts agree, windows do not overlap, no window was excluded and each arm meets the minimum windows/tokens.")] = "dev",
    min_windows: Annotated[Optional[int], typer.Option("--min-windows", help="Override the profile's minimum compared windows per arm (ci 20, release 100; dev: recorded, not gated).")] = None,
    min_tokens: Annotated[Optional[int], typer.Option("--min-tokens", help="Override the profile's minimum compared tokens per arm (ci 2000, release 20000; dev: recorded, not gated).")] = None,
    max_ratio: Annotated[Optional[float], typer.Option("--max-ratio", help="Fail (exit 1) if the upper CI bound of the perplexity ratio B/A exceeds this.")] = None,
    model_a: Annotated[Optional[str], typer.Option("--model-a", help="Model of run A to use, if it holds several.")] = None,
    model_b: Annotated[Optional[str], typer.Option("--model-b", help="Model of run B to use, if it holds several.")] = None,
    context_mode_a: Annotated[Optional[str], typer.Option("--context-mode-a", help="Context mode of run A to use (exact/approx/window/capped).")] = None,
    context_mode_b: Annotated[Optional[str], typer.Option("--context-mode-b", help="Context mode of run B to use.")] = None,
    nan_windows: Annotated[str, typer.Option("--nan-windows", help="Windows with a NaN loss in either run (e.g. API targets outside the top-k): exclude (listed in the report; fails ci/release) or error.")] = "exclude",
) -> None:
    """Paired comparison of two runs over the same windows: perplexity ratio B/A with a BCa interval."""
    result = api.compare(run_a, run_b, out=out, replicates=replicates, seed=seed, cluster_by_text=cluster_by_text, profile=profile, min_windows=min_windows,
                         min_tokens=min_tokens, max_ratio=max_ratio, model_a=model_a, model_b=model_b, context_mode_a=context_mode_a,
                         context_mode_b=context_mode_b, nan_windows=nan_windows, resample=resample)
    typer.echo(result.markdown)
    typer.echo(f"report: {result.out / 'compare.json'}, {result.out / 'compare.md'}")
    if result.failures:
        for failure in result.failures:
            print(f"ctxeval: {profile} gate failed: {failure}", file=sys.stderr)
        raise typer.Exit(1)


@app.command()
def trends(
    run_dir: Annotated[Path, typer.Argument(help="A finished run directory.")],
    out: Annotated[Optional[Path], typer.Option("--out", help="Where to write trends.json/.md (default: the run directory).")] = None,
    outlier_sd: Annotated[float, typer.Option("--outlier-sd", help="Flag a window more than this many SDs from the mean of the other windows at its length.")] = 2.0,
) -> None:
    """Slope of every metric against context length (raw and log2) with SE, p-value and CI; spread across repeats."""
    _, _, markdown = api.trends(run_dir, out=out, outlier_sd=outlier_sd)
    typer.echo(markdown)


@app.command("context-gain")
def context_gain(
    texts: Annotated[list[str], typer.Argument(help="UTF-8 text files ('demo' for the bundled excerpt), corpus folders, .jsonl/.json or .parquet corpora.")],
    window: Annotated[int, typer.Option("--window", help="W: long context. Chunks of W tokens; each target sees every token before it in its chunk.")] = 2048,
    short: Annotated[int, typer.Option("--short", help="k: short context. Targets are re-scored with only about the last k tokens of their long context.")] = 128,
    short_stride: Annotated[Optional[int], typer.Option("--short-stride", help="Targets per short pass (default k/4): short contexts lie between k and k + stride - 1 tokens; 1 = exactly k (slowest).")] = None,
    model: Annotated[Optional[list[str]], typer.Option("--model", help=f"Model(s) to probe: {DEFAULT_MODEL} (embedded default) or a .gguf path. Repeat for several.")] = None,
    evaluator: Annotated[Optional[str], typer.Option("--evaluator", help="Model that picks the key tokens for LongPPL (default: the first --model); added to the run if not one of them. Key tokens reach other models as character spans.")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="LongPPL: a key token gains more than alpha nats from distant context (g = log p_long - log p_short > alpha).")] = 2.0,
    beta: Annotated[float, typer.Option("--beta", help="LongPPL: ... and the long context predicts it well (log p_long > beta).")] = -2.0,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Score only the first N tokens of each text.")] = None,
    block: Annotated[int, typer.Option("--block", help="Bootstrap unit: blocks of this many consecutive targets.")] = 256,
    replicates: Annotated[int, typer.Option("--replicates", help="Bootstrap replicates of the paired interval.")] = 2000,
    top_k: TopKOpt = DEFAULT_TOP_K,
    out: OutOpt = None,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    glob: GlobOpt = "*.txt",
    text_field: TextFieldOpt = "text",
    id_field: IdFieldOpt = None,
    max_docs: MaxDocsOpt = None,
    sample: SampleOpt = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --sample and of the bootstrap.")] = 0,
    skip_bad: SkipBadOpt = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    address: AddressOpt = None,
    threads_per_worker: ThreadsPerWorkerOpt = 1,
) -> None:
    """Does the model use distant context? Perplexity with the full context (chunked, window W) vs only
    the last k tokens, the per-token gain g = log p_long - log p_short with a paired BCa interval, gain
    by distance, and LongPPL: perplexity over key tokens (g > alpha and log p_long > beta; LongPPL's
    defaults alpha 2, beta -2), the tokens that need long context."""
    result = api.context_gain(
        texts, models=model or [DEFAULT_MODEL], window=window, short=short, short_stride=short_stride, evaluator=evaluator,
        alpha=alpha, beta=beta, max_tokens=max_tokens, top_k=top_k, block=block, replicates=replicates,
        seed=seed, out=out, progress=not quiet, n_threads=threads, executor=_executor(executor, workers, address, threads_per_worker, 0.0),
        corpus=_corpus_options(glob, text_field, id_field, max_docs, sample, seed, skip_bad),
    )
    if not quiet:
        typer.echo(result.markdown)
    files = result.files()
    typer.echo(f"summary: {files['summary']}, {files['report']}, plot: {files['plot']}")


@app.command()
def retrieval(
    variant: Annotated[str, typer.Option("--variant", help="cat: 'A person named <key> has a cat. His cat's name is <value>.' with 3 in-context examples (paper 002, A.2); register: LongChat's 'line <key>: REGISTER_CONTENT is <value>'.")] = "cat",
    lines: Annotated[str, typer.Option("--lines", help="Comma-separated numbers of record lines (about 25 tokens per cat line, 22 per register line with Gemma).")] = "20,50,100",
    tokens: Annotated[Optional[str], typer.Option("--tokens", help="Comma-separated prompt sizes in tokens (e.g. 1024,2048,4096), instead of --lines: each model gets the most lines that fit.")] = None,
    depths: Annotated[str, typer.Option("--depths", help="Comma-separated depths in [0, 1] of the queried line within the record.")] = "0,0.25,0.5,0.75,1",
    samples: Annotated[int, typer.Option("--samples", help="Seeded records per (lines, depth) cell.")] = 3,
    model: Annotated[Optional[list[str]], typer.Option("--model", help=f"Model(s): {DEFAULT_MODEL} (embedded default) or a .gguf path. Repeat for several.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the records.")] = 0,
    out: OutOpt = None,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    address: AddressOpt = None,
    threads_per_worker: ThreadsPerWorkerOpt = 1,
) -> None:
    """Line-retrieval test: accuracy of greedy exact match and mean rank of the right answer's first token,
    per (lines x depth), with heatmaps. Keys and values are made-up words and numbers, seen only in their line."""
    result = api.retrieval(
        variant=variant, lines=_ints(lines, "--lines"), depths=_floats(depths, "--depths"), samples=samples, models=model or [DEFAULT_MODEL], seed=seed, out=out,
        progress=not quiet, n_threads=threads, tokens=_ints(tokens, "--tokens") if tokens else None,
        executor=_executor(executor, workers, address, threads_per_worker, 0.0),
    )
    if not quiet:
        typer.echo(result.markdown)
    files = result.files()
    typer.echo(f"results: {files['results']}, cases: {files['cases']}, heatmap: {files['heatmap']}")


@app.command("probe-report")
def probe_report(
    runs: Annotated[list[Path], typer.Argument(help="Finished run directories: sweep/score, context-gain and retrieval runs, of one or more models.")],
    out: Annotated[Path, typer.Option("--out", help="Directory for probe_report.md/.json and probe_report.png.")] = Path("runs/probe-report"),
) -> None:
    """One report per model, side by side: perplexity and rank scores by context, context gain, LongPPL and
    retrieval accuracy/rank — does a lower perplexity come with better use of long context?"""
    markdown = api.probe_report(runs, out=out)
    typer.echo(markdown)
    typer.echo(f"report: {out / 'probe_report.md'}, {out / 'probe_report.json'}, plot: {out / 'probe_report.png'}")


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Finished run directories of any kind: sweep, score, context-gain, retrieval, compare outputs, pplqa/meta-eval.")],
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
    top_k_shown: Annotated[int, typer.Option("--top-k-shown", help="Top-k alternatives per token embedded for the hover card (at most the run's --top-k).")] = 10,
) -> None:
    """One offline, self-contained HTML report: run headers, headline numbers with intervals, charts and a
    per-token explorer (colour by logprob, rank bucket, probability vs top-1, context gain, key tokens, A−B)."""
    path = api.report(runs, out=out, top_k_shown=top_k_shown)
    typer.echo(f"report: {path} ({path.stat().st_size / 1e6:.2f} MB)")


@app.command()
def models() -> None:
    """List the models and backends usable here."""
    for entry in api.models():
        status = "available" if entry.available else "missing"
        typer.echo(f"{entry.name:<14} {entry.backend:<9} {status:<10} {entry.location}  — {entry.note}")


@app.command("leval")
def leval(
    predictions: Annotated[Path, typer.Option("--predictions", help="A prediction file or a folder of <model>/<task>.pred.jsonl (L-Eval layout).")],
    out: Annotated[Path, typer.Option("--out", help="Where to write scores.json and scores.md.")] = Path("runs/leval"),
    variant: Annotated[str, typer.Option("--variant", help="leval: L-Eval's F1 and rouge-score ROUGE; longbench: LongBench's (rouge package; jieba for Chinese with --tokenize unicode).")] = "leval",
    tokenize: Annotated[str, typer.Option("--tokenize", help="plain: every row by the variant's English tokenizer, as L-Eval's f1.py/rouge.py (reproduces its numbers); unicode: rows mainly in Chinese or another non-Latin script by characters/Unicode words (leval) or jieba (longbench).")] = "plain",
    quiet: QuietOpt = False,
) -> None:
    """L-Eval metrics of model answers: exact match (exam tasks), F1 or ROUGE-1/2/L, and ΔL."""
    report = api.leval(predictions, out=out, variant=variant, tokenize=tokenize, progress=not quiet)
    if not quiet:
        typer.echo(report.markdown)
    for note in report.notes:
        typer.echo(f"ctxeval: note: {note}", err=True)
    typer.echo(f"scores: {', '.join(str(f) for f in report.files)}")


@app.command("leval-corr")
def leval_corr(
    metrics: Annotated[list[str], typer.Argument(help="[LABEL=]PATH: a scores.json of `ctxeval leval` (or its folder), or a CSV/JSON model × metric table (e.g. judge win rates).")],
    human: Annotated[Path, typer.Option("--human", help="Human scores per model: CSV with a 'model' column, or JSON {model: score}.")],
    column: Annotated[Optional[str], typer.Option("--column", help="Score column of the human table when it has several.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Also write corr.json and corr.md here.")] = None,
) -> None:
    """Kendall τ-b between each metric's model ranking and the human ranking (L-Eval Figure 2)."""
    typer.echo(api.leval_corr(metrics, human, column=column, out=out).markdown)


@app.command()
def judge(
    predictions: Annotated[Path, typer.Argument(help="The judged model's L-Eval predictions (*.pred.jsonl: query, gt, <model>_pred).")],
    base_predictions: Annotated[Path, typer.Argument(help="The base model's predictions for the same questions.")],
    judge_model: Annotated[str, typer.Option("--judge-model", help="Judge as openai:MODEL (chat completions).")] = "openai:gpt-4",
    base_url: BaseUrlsOpt = None,
    api_key_env: ApiKeyEnvOpt = "OPENAI_API_KEY",
    concurrency: ConcurrencyOpt = 4,
    cache: CacheOpt = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Judge answer length (L-Eval: 2048).")] = 2048,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Judge only the first N paired questions.")] = None,
    questions: Annotated[str, typer.Option("--questions", help="Rows judged: auto (L-Eval's set for the judge: turbo for GPT-3.5, else gpt4), gpt4 (96 'LLM' rows), turbo (181 'LLM' and 'human' rows) or file (as L-Eval's llm_eval.py reads the file).")] = "auto",
    out: Annotated[Path, typer.Option("--out", help="Directory for judge.json, judge.md and the verdict records (a re-run resumes).")] = Path("runs/judge"),
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    address: AddressOpt = None,
) -> None:
    """Pairwise LLM judge (L-Eval's prompt, both answer orders): win rate of a model's answers over a base model's."""
    options = _openai_options(base_url, api_key_env, concurrency, cache)
    report = api.judge(predictions, base_predictions, judge_model=judge_model, openai=options, max_tokens=max_tokens, limit=limit, out=out, questions=questions, executor=_executor(executor, workers, address, 1, 0.0))
    typer.echo(report.markdown + f"report: {', '.join(str(f) for f in report.files)}")


@app.command("meta-eval")
def meta_eval(
    dataset: Annotated[str, typer.Option("--dataset", help="llmbar:NAME (e.g. llmbar:MT-Bench) or pandalm (from the folder CTXEVAL_SHARED_DATA names), or the path of an LLMBar, PandaLM or MT-Bench human-judgment file (.json, .jsonl, .parquet).")],
    methods: Annotated[str, typer.Option("--methods", help="Comma-separated: pplqa, gptscore, geval (integer 1-5), geval_weighted, pplqa+prompt, gptscore+prompt.")] = "pplqa,gptscore,geval,geval_weighted",
    out: OutOpt = None,
    model: EvaluatorOpt = DEFAULT_MODEL,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Only the first N items.")] = None,
    qa_scope: Annotated[str, typer.Option("--qa-scope", help="PPL(q+a) over all tokens, or over the answer tokens only.")] = "all",
    aspect: Annotated[str, typer.Option("--aspect", help="Aspect prompt for G-Eval and the +prompt variants.")] = "coherence",
    ties: Annotated[Optional[str], typer.Option("--ties", help="Human ties: drop, or keep as label 0 (a third class). Default: keep for MT-Bench human judgments (as the PPLqa paper's Table 3), drop for PandaLM.")] = None,
    replicates: Annotated[int, typer.Option("--replicates", help="Bootstrap replicates for the intervals.")] = 2000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    address: AddressOpt = None,
    threads_per_worker: ThreadsPerWorkerOpt = 1,
) -> None:
    """Which answer-quality method agrees with human pairwise labels (PPLqa paper, Table 3)."""
    report = api.meta_eval(dataset, methods=methods, out=out, model=model, limit=limit, qa_scope=qa_scope, aspect=aspect, ties=ties, replicates=replicates, seed=seed,
                           progress=not quiet, n_threads=threads,
                           executor=_executor(executor, workers, address, threads_per_worker, 0.0))
    if not quiet:
        typer.echo(report.markdown)


@app.command("pplqa")
def pplqa(
    answers: Annotated[str, typer.Argument(help="mt-bench (shared turn-1 answers of 6 models) or a JSONL file of {question_id, question, model, answer}.")] = "mt-bench",
    methods: Annotated[str, typer.Option("--methods", help="Comma-separated: pplqa, gptscore, geval (integer 1-5), geval_weighted.")] = "pplqa",
    out: OutOpt = None,
    model: EvaluatorOpt = DEFAULT_MODEL,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Only the first N questions.")] = None,
    qa_scope: Annotated[str, typer.Option("--qa-scope", help="PPL(q+a) over all tokens, or over the answer tokens only.")] = "all",
    aspect: Annotated[Optional[str], typer.Option("--aspect", help="Score inside this aspect prompt (the paper's 'with prompt' variant), e.g. coherence.")] = None,
    reference: Annotated[str, typer.Option("--reference", help="auto (MT-Bench: LLMBar human votes), none, or a CSV question_id,model,score.")] = "auto",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random-ranking baseline (Monte Carlo above 8 answers).")] = 0,
    tau: Annotated[str, typer.Option("--tau", help="Per-question Kendall tau: a (the paper's eq. 4; a constant ranking counts 0) or b (tau-b; constant rankings skipped).")] = "a",
    threads: ThreadsOpt = None,
    quiet: QuietOpt = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    address: AddressOpt = None,
    threads_per_worker: ThreadsPerWorkerOpt = 1,
) -> None:
    """PPLqa = |PPL(question + answer) - PPL(answer)| (lower is better); ranks each question's answers."""
    report = api.pplqa(answers, methods=methods, out=out, model=model, limit=limit, qa_scope=qa_scope, aspect=aspect, reference=reference, seed=seed,
                       progress=not quiet, n_threads=threads, tau=tau,
                       executor=_executor(executor, workers, address, threads_per_worker, 0.0))
    if not quiet:
        typer.echo(report.markdown)


@app.command()
def serve(
    model: Annotated[str, typer.Argument(help=f"{DEFAULT_MODEL} (embedded default), a .gguf path, hf:{DEFAULT_MODEL} or hf:DIR.")] = DEFAULT_MODEL,
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    host: Annotated[str, typer.Option("--host", help="Interface to listen on (0.0.0.0: every interface, for a fleet).")] = "127.0.0.1",
    n_ctx: Annotated[int, typer.Option("--n-ctx", help="Longest request in tokens (prompt + completion); longer ones are refused with 400.")] = 4096,
    threads: ThreadsOpt = None,
    device: DeviceOpt = None,
    dtype: DtypeOpt = None,
    served_name: Annotated[Optional[list[str]], typer.Option("--served-model-name", help="A name clients give as `model` (repeatable; default: the MODEL argument). Other names get 404.")] = None,
    string_bos: Annotated[str, typer.Option("--string-bos", help="What precedes a string prompt's tokens: model (BOS when the model's tokenizer adds one) or none. Token-id prompts are always used verbatim.")] = "model",
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="Environment variable holding an API key that every request must send (Authorization: Bearer KEY).")] = None,
    max_queue: Annotated[int, typer.Option("--max-queue", help="Requests that may wait for the model; one more is answered 429.")] = 64,
    max_body_bytes: Annotated[int, typer.Option("--max-body-bytes", help="Largest request body; a larger one is answered 413.")] = 8 << 20,
    max_logprobs: Annotated[int, typer.Option("--max-logprobs", help="Largest logprobs / prompt_logprobs / top_logprobs a request may ask for.")] = 20,
    batch_tokens: Annotated[int, typer.Option("--batch-tokens", help="Waiting requests scored together in one batch, up to this many tokens.")] = 8192,
    chat_template: Annotated[Optional[Path], typer.Option("--chat-template", help="Jinja chat template for /v1/chat/completions when the model has none (or to replace its own).")] = None,
) -> None:
    """Serve a model behind an OpenAI-compatible API scored by ctxeval's own exact scorers: prompt
    log-probabilities with exact ranks (echo, vLLM's prompt_logprobs), token-id prompts (lm-eval's
    local-completions); use it with --model openai:NAME --base-url (docs/serve.md)."""
    api.serve(
        model, host=host, port=port, served_names=tuple(served_name or ()), n_ctx=n_ctx, n_threads=threads, device=device,
        dtype=dtype, string_bos=string_bos, api_key_env=api_key_env, max_queue=max_queue, max_body_bytes=max_body_bytes,
        max_logprobs=max_logprobs, batch_tokens=batch_tokens, chat_template=chat_template,
    )


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2; a run whose work
    partly failed, one line and exit code 3 (re-running the same command retries that work)."""
    try:
        code = app(standalone_mode=False)
    except UserError as exc:
        _fail(str(exc))
    except IncompleteRun as exc:
        _fail(str(exc), EXIT_INCOMPLETE)
    except KeyboardInterrupt:
        _interrupted()
    except Exception as exc:
        # typer's (vendored) click usage errors: bad flags, missing arguments
        if type(exc).__name__ == "NoArgsIsHelpError":
            sys.exit(0)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            _fail(exc.format_message().replace("\n", " "))
        if type(exc).__name__ == "Abort":
            _interrupted()
        raise
    if code == 130:  # typer turns Ctrl-C into Exit(130)
        _interrupted()
    if isinstance(code, int) and code:
        sys.exit(code)


def _fail(message: str, code: int = EXIT_USER_ERROR) -> None:
    print(f"ctxeval: error: {message}", file=sys.stderr)
    sys.exit(code)


def _interrupted() -> None:
    print("ctxeval: interrupted; finished passes are saved — re-run the same command to resume", file=sys.stderr)
    sys.exit(130)


if __name__ == "__main__":
    main()
