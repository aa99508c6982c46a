"""The output head of an hf model: hidden rows -> float32 logits, the one place it is applied.

Ranks and top-k need float32 logits (bf16 logits tie everywhere). On a CPU (and MPS) a
half-precision model's head runs on a float32 copy of its weights. On CUDA that copy costs
2.1 GB for a 128,256 x 4,096 head and its float32 GEMM runs without tensor cores; instead the
head stays in the body's half precision and the GEMM writes float32 (`torch.mm(...,
out_dtype=torch.float32)`): a product of two bf16 (or fp16) numbers is exact in float32 and the
accumulation is float32 either way, so the logits are the float32 head's up to summation order
(docs/numerics.md bounds the difference), at tensor-core speed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class OutputHead:
    """The head's weights as the GEMM reads them, its bias and the final soft-cap (Gemma 2/3)."""

    weight: object  # torch.Tensor [vocab, hidden]
    bias: object | None  # torch.Tensor [vocab], float32 on the half-precision GEMM
    softcap: float | None
    half_gemm: bool  # half-precision operands, float32 output (CUDA only)

    @staticmethod
    def of(module, device_type: str, softcap: float | None) -> OutputHead:
        """The head of `module` (a model's `get_output_embeddings()`) on a `device_type` device."""
        import torch

        weight = module.weight.detach()
        bias = None if module.bias is None else module.bias.detach()
        half = weight.dtype in (torch.bfloat16, torch.float16)
        if half and device_type == "cuda":
            return OutputHead(weight, None if bias is None else bias.float(), softcap, half_gemm=True)
        dtype = torch.float32 if half else weight.dtype
        return OutputHead(weight.to(dtype), None if bias is None else bias.to(dtype), softcap, half_gemm=False)

    @property
    def vocab_size(self) -> int:
        return int(self.weight.shape[0])

    @property
    def hidden_size(self) -> int:
        return int(self.weight.shape[1])

    @property
    def precision(self) -> str:
        """What the manifest records as the head matmul's precision."""
        dtype = str(self.weight.dtype).removeprefix("torch.")
        return f"{dtype} x {dtype} -> float32 (float32 accumulation)" if self.half_gemm else dtype

    def __call__(self, hidden_rows):
        """float32 logits [rows, vocab] of hidden rows [rows, hidden]."""
        import torch

        if self.half_gemm:
            logits = torch.mm(hidden_rows.to(self.weight.dtype), self.weight.t(), out_dtype=torch.float32)
            if self.bias is not None:
                logits += self.bias
        else:
            logits = torch.nn.functional.linear(hidden_rows.to(self.weight.dtype), self.weight, self.bias)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits.float()
