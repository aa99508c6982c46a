"""`ctxeval serve`: ctxeval's own OpenAI-compatible scoring server (docs/serve.md).

A face over the backends' exact scorers (llama.cpp and hf): prompt log-probabilities with
exact full-vocabulary ranks, token-id prompts used verbatim, concurrent requests queued to one
model thread and batched into its passes. Imports FastAPI and uvicorn (the `server` extra).
"""
