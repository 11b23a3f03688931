"""Engine wing: a minimal Qwen3 decoder in plain PyTorch ops, with a static KV cache and a graph-capturable
decode step; its inputs go through engine.inputs.check_decode_inputs."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from floorlab.core.numbers import instance, whole_number, with_attributes
from floorlab.core.shapes import Qwen3Shape, get_shape
from floorlab.engine.inputs import check_decode_inputs, check_limits, resolved_device


def init_random_(params, *, seed: int, device) -> None:
    """Fill named parameters in place as the book's random models are made: norms 1, the rest N(0, 0.02)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in params:
            if name.endswith(("norm", "norm.weight", "layernorm.weight")):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=gen)


def _weight(*size: int, device, dtype) -> nn.Parameter:
    return nn.Parameter(torch.empty(size, device=device, dtype=dtype), requires_grad=False)


class Qwen3Layer(nn.Module):
    """One decoder layer's weights, q|k|v and gate|up fused into single matrices."""

    def __init__(self, shape: Qwen3Shape, device, dtype):
        super().__init__()
        h, d, i = shape.hidden_size, shape.head_dim, shape.intermediate_size
        qkv_rows = (shape.num_heads + 2 * shape.num_kv_heads) * d
        kw = dict(device=device, dtype=dtype)
        self.input_norm = _weight(h, **kw)
        self.qkv = _weight(qkv_rows, h, **kw)
        self.q_norm = _weight(d, **kw)
        self.k_norm = _weight(d, **kw)
        self.o_proj = _weight(h, shape.num_heads * d, **kw)
        self.post_norm = _weight(h, **kw)
        self.gate_up = _weight(2 * i, h, **kw)
        self.down = _weight(h, i, **kw)


class Qwen3Decoder(nn.Module):
    """Qwen3 forward pass for greedy decode: prefill fills the cache, decode_step adds one token per row."""

    def __init__(self, shape: Qwen3Shape, *, max_batch: int = 16, max_context: int = 256,
                 device="cpu", dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        max_batch = whole_number(max_batch, "max_batch", hint="it counts the rows the cache holds")
        max_context = whole_number(max_context, "max_context", hint="it counts the cache slots per row")
        self.shape, self.max_batch, self.max_context = shape, max_batch, max_context
        self.device, self.dtype = torch.device(device), dtype
        self.input_device = resolved_device(device)  # where inputs must be, index included
        kw = dict(device=self.device, dtype=dtype)
        s = shape
        self.embed = _weight(s.vocab_size, s.hidden_size, **kw)
        self.layers = nn.ModuleList(Qwen3Layer(s, self.device, dtype) for _ in range(s.num_layers))
        self.final_norm = _weight(s.hidden_size, **kw)
        self.lm_head = None if s.tie_word_embeddings else _weight(s.vocab_size, s.hidden_size, **kw)
        cache_size = (s.num_layers, max_batch, s.num_kv_heads, max_context, s.head_dim)
        self.register_buffer("k_cache", torch.zeros(cache_size, **kw), persistent=False)
        self.register_buffer("v_cache", torch.zeros(cache_size, **kw), persistent=False)
        cos, sin_signed = _rope_tables(s.rope_theta, s.head_dim, max_context, self.device)
        self.register_buffer("rope_cos", cos.to(dtype), persistent=False)
        self.register_buffer("rope_sin_signed", sin_signed.to(dtype), persistent=False)
        self.register_buffer("context_index", torch.arange(max_context, device=self.device), persistent=False)
        self.register_buffer("row_index", torch.arange(max_batch, device=self.device), persistent=False)
        self.register_buffer("mask_zero", torch.zeros((), **kw), persistent=False)

    def _layer(self, i: int, x: torch.Tensor, cos: torch.Tensor,
               sin_signed: torch.Tensor, attend) -> None:
        """Run layer i on x [B, T, hidden] in place; attend(i, q, k, v) returns
        [B, T, heads * head_dim]."""
        s, w = self.shape, self.layers[i]
        batch, tokens = x.shape[:2]
        nq, nkv, d = s.num_heads, s.num_kv_heads, s.head_dim
        eps, rows = s.rms_norm_eps, batch * tokens
        h = F.rms_norm(x, (s.hidden_size,), w.input_norm, eps)
        qkv = F.linear(h, w.qkv).view(batch, tokens, nq + 2 * nkv, d)
        qk = F.rms_norm(qkv[:, :, : nq + nkv], (d,), None, eps)
        qk[:, :, :nq].mul_(w.q_norm)
        qk[:, :, nq:].mul_(w.k_norm)
        # RoPE: rotate_half(x) * sin == roll(x, d/2) * sin_signed
        qk_rot = (qk * cos).addcmul_(qk.roll(d // 2, dims=-1), sin_signed)
        q, k, v = qk_rot[:, :, :nq], qk_rot[:, :, nq:], qkv[:, :, nq + nkv:]
        attn = attend(i, q, k, v)
        x2d = x.view(rows, s.hidden_size)
        self.project_back(x2d, attn.reshape(rows, nq * d), w.o_proj)
        h = F.rms_norm(x, (s.hidden_size,), w.post_norm, eps)
        gate, up = F.linear(h, w.gate_up).chunk(2, -1)
        mlp = F.silu(gate).mul_(up).view(rows, s.intermediate_size)
        self.project_back(x2d, mlp, w.down)

    def project_back(self, x2d: torch.Tensor, inputs: torch.Tensor, weight: torch.Tensor) -> None:
        """Add inputs @ weight.T to the residual x2d in place (o_proj and down); the tensor-parallel
        decoder sums each rank's partial product first."""
        x2d.addmm_(inputs, weight.t())

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        h = F.rms_norm(x, (self.shape.hidden_size,), self.final_norm, self.shape.rms_norm_eps)
        return F.linear(h, self.head_weight())

    def head_weight(self) -> torch.Tensor:
        """The output head [vocab, hidden]: the input table when tied."""
        return self.embed if self.lm_head is None else self.lm_head

    def check_inputs(self, tokens: torch.Tensor, positions: torch.Tensor | None) -> int:
        """Return the batch B of a decode step (positions [B]) or a prompt (positions None); see check_decode_inputs."""
        return check_decode_inputs(tokens, positions, vocab_size=self.shape.vocab_size, device=self.input_device,
                                   max_batch=self.max_batch, max_context=self.max_context)

    @torch.inference_mode()
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, vocab] for tokens [B, T] at positions 0..T-1; writes cache rows 0..B-1."""
        self.check_inputs(tokens, None)
        batch, length = tokens.shape
        s = self.shape

        def attend(i, q, k, v):
            self.k_cache[i, :batch, :, :length] = k.transpose(1, 2)
            self.v_cache[i, :batch, :, :length] = v.transpose(1, 2)
            out = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                enable_gqa=s.num_heads != s.num_kv_heads)
            return out.transpose(1, 2)

        x = F.embedding(tokens, self.embed)
        cos = self.rope_cos[:length].view(1, length, 1, s.head_dim)
        sin_signed = self.rope_sin_signed[:length].view(1, length, 1, s.head_dim)
        for i in range(s.num_layers):
            self._layer(i, x, cos, sin_signed, attend)
        return self._logits(x)

    @torch.inference_mode()
    def decode_step(self, tokens: torch.Tensor,
                    positions: torch.Tensor) -> torch.Tensor:
        """Logits [B, vocab] for one token per row, each at its own position (any
        order); capturable in a CUDA graph: no host syncs, static buffers only."""
        batch = self.check_inputs(tokens, positions)
        s = self.shape
        nkv, d = s.num_kv_heads, s.head_dim
        group = s.num_heads // nkv
        rows = self.row_index[:batch]
        visible = self.context_index <= positions[:, None]
        mask = torch.where(visible, self.mask_zero, float("-inf"))
        mask = mask.view(batch, 1, 1, self.max_context)

        def attend(i, q, k, v):
            self.k_cache[i][rows, :, positions] = k[:, 0]
            self.v_cache[i][rows, :, positions] = v[:, 0]
            # one query token: the query heads that share a KV head
            # become that head's query rows
            k_all, v_all = self.k_cache[i, :batch], self.v_cache[i, :batch]
            out = F.scaled_dot_product_attention(
                q.view(batch, nkv, group, d), k_all, v_all, attn_mask=mask)
            return out.reshape(batch, 1, -1)

        x = F.embedding(tokens, self.embed).view(batch, 1, s.hidden_size)
        cos = self.rope_cos[positions].view(batch, 1, 1, d)
        sin_signed = self.rope_sin_signed[positions].view(batch, 1, 1, d)
        for i in range(s.num_layers):
            self._layer(i, x, cos, sin_signed, attend)
        return self._logits(x.view(batch, s.hidden_size))

    @torch.inference_mode()
    def generate(self, prompt: torch.Tensor, steps: int) -> torch.Tensor:
        """Greedy tokens [B, steps] after prompt [B, T]."""
        return greedy_tokens(self, prompt, steps)

    def cache_slots(self, rows: slice, position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views [num_layers, rows, kv_heads, head_dim] of the K and V cache rows `rows` hold at `position`."""
        return self.k_cache[:, rows, :, position], self.v_cache[:, rows, :, position]

    def reset_cache(self) -> None:
        """Zero the K and V caches in place (their addresses stay fixed for captured graphs)."""
        self.k_cache.zero_()
        self.v_cache.zero_()

    def load_state_dict_hf(self, hf_state: dict[str, torch.Tensor]) -> None:
        """Copy a transformers Qwen3ForCausalLM state dict into the fused layout, once every name and shape
        is checked and nothing the engine would not use is left over."""
        targets = self.hf_state_dict()
        if self.lm_head is None:
            del targets["lm_head.weight"]
        problems = [f"missing {name}" for name in targets if name not in hf_state]
        problems += [f"{name} has shape {tuple(hf_state[name].shape)}, expected {tuple(dst.shape)}"
                     for name, dst in targets.items() if name in hf_state and hf_state[name].shape != dst.shape]
        problems += _unused_tensors(hf_state, targets)
        if problems:
            shown = "; ".join(problems[:4]) + (" ..." if len(problems) > 4 else "")
            raise ValueError(
                f"the state dict does not fit shape {self.shape.name!r} ({len(problems)} problems: {shown}); "
                "pass a complete transformers Qwen3ForCausalLM state dict whose config matches the shape "
                "and that holds nothing else")
        with torch.no_grad():
            for name, dst in targets.items():
                dst.copy_(hf_state[name])

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """The weights under transformers Qwen3ForCausalLM names (views into this model's tensors)."""
        s = self.shape
        q_rows, kv_rows = s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
        out = {"model.embed_tokens.weight": self.embed, "model.norm.weight": self.final_norm,
               "lm_head.weight": self.head_weight()}
        for i, w in enumerate(self.layers):
            p = f"model.layers.{i}."
            q, k, v = w.qkv.split([q_rows, kv_rows, kv_rows])
            gate, up = w.gate_up.chunk(2)
            out.update({
                p + "input_layernorm.weight": w.input_norm, p + "post_attention_layernorm.weight": w.post_norm,
                p + "self_attn.q_proj.weight": q, p + "self_attn.k_proj.weight": k,
                p + "self_attn.v_proj.weight": v, p + "self_attn.o_proj.weight": w.o_proj,
                p + "self_attn.q_norm.weight": w.q_norm, p + "self_attn.k_norm.weight": w.k_norm,
                p + "mlp.gate_proj.weight": gate, p + "mlp.up_proj.weight": up, p + "mlp.down_proj.weight": w.down,
            })
        return out


def _unused_tensors(hf_state: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> list[str]:
    """A problem line for each tensor of hf_state the engine would not use (biases, stray names)."""
    problems = []
    for name in hf_state:
        if name in targets or name.endswith("rotary_emb.inv_freq"):  # recomputed, as transformers does
            continue
        embed = hf_state.get("model.embed_tokens.weight")
        if name == "lm_head.weight" and embed is not None:  # a tied model: the head is the table
            if not torch.equal(hf_state[name], embed):
                problems.append("lm_head.weight differs from model.embed_tokens.weight, but "
                                "tie_word_embeddings is true, so it would be ignored")
            continue
        problems.append(f"unused {name} (the engine has no place for it)")
    return problems


def _rope_tables(theta: float, head_dim: int, max_context: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and signed sin [max_context, head_dim] in float32, as transformers' Qwen3 rotary embedding computes them."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float, device=device) / head_dim))
    freqs = torch.arange(max_context, device=device).float()[:, None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    half = head_dim // 2
    sin = emb.sin()
    return emb.cos(), torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)


def build_model(preset_or_shape, *, device="cpu", dtype: torch.dtype = torch.bfloat16,
                max_batch: int = 16, max_context: int = 256, seed: int = 0) -> Qwen3Decoder:
    """A Qwen3Decoder with random weights (normal, std 0.02; norms 1) made on the device; "meta" allocates nothing."""
    if not instance(dtype, torch.dtype, "dtype", hint="pass a torch dtype, e.g. torch.bfloat16").is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype (weights are real numbers), got {dtype}; "
                         "pass torch.bfloat16, torch.float16 or torch.float32")
    seed = whole_number(seed, "seed", at_least=0, hint="any whole number >= 0 picks the random weights")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not a device torch knows ({err}); pass 'cpu', 'cuda' or "
                         "'cuda:0'") from None
    model = Qwen3Decoder(get_shape(preset_or_shape), max_batch=max_batch, max_context=max_context,
                         device=device, dtype=dtype)
    if model.device.type != "meta":
        init_random_(model.named_parameters(), seed=seed, device=model.device)
    return model


def with_context(model: Qwen3Decoder, max_context: int, *, max_batch: int = 1) -> Qwen3Decoder:
    """The same weights, shared and not copied, behind a fresh zeroed KV cache of max_context slots
    (the decode step's attention reads every slot, so timing it at a context needs a cache that long)."""
    twin = Qwen3Decoder(model.shape, max_batch=max_batch, max_context=max_context,
                        device=model.device, dtype=model.dtype)
    twin.load_state_dict(model.state_dict(keep_vars=True), assign=True)
    return twin


def prefill_random(model, batch: int, prompt_tokens: int, *, seed: int = 0):
    """Prefill a random prompt; returns (prompt [batch, prompt_tokens], next tokens [batch], their positions)."""
    with_attributes(model, "model", ("shape", "device", "max_batch", "max_context", "prefill"),
                    hint="pass a model from floorlab.build_model")
    prompt_tokens = whole_number(prompt_tokens, "prompt_tokens", hint="tokens per row")
    seed = whole_number(seed, "seed", at_least=0, hint="any whole number >= 0 picks the random prompt")
    # one slot more than the prompt: the next token's
    batch = check_limits(batch, prompt_tokens + 1, max_batch=model.max_batch, max_context=model.max_context)
    gen = torch.Generator(device=model.device).manual_seed(seed)
    prompt = torch.randint(0, model.shape.vocab_size, (batch, prompt_tokens), device=model.device, generator=gen)
    tokens = model.prefill(prompt)[:, -1].argmax(-1)
    positions = torch.full((batch,), prompt_tokens, device=model.device)
    return prompt, tokens, positions


def greedy_tokens(decoder, prompt: torch.Tensor, steps: int, *, decode_step=None) -> torch.Tensor:
    """Greedy tokens [B, steps] after prompt [B, T] from a decoder with prefill, decode_step (or the one
    given), check_inputs and its max_batch and max_context, which prompt and steps must fit."""
    batch = decoder.check_inputs(prompt, None)
    steps = whole_number(steps, "steps", hint="ask for at least one generated token")
    length = prompt.shape[1]
    check_limits(batch, length + steps, max_batch=decoder.max_batch, max_context=decoder.max_context)
    decode_step = decode_step or decoder.decode_step
    token = decoder.prefill(prompt)[:, -1].argmax(-1)
    out = [token]
    for step in range(1, steps):
        positions = torch.full((batch,), length + step - 1, device=prompt.device)
        token = decode_step(token, positions).argmax(-1)
        out.append(token)
    return torch.stack(out, dim=1)
