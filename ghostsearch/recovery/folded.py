"""``folded``: the Ghosted least-squares fit restricted to what the last kept block before each cut
can write, folded into that block's weights. The export is a plain checkpoint of the base family
(no hook, no operator file, no remote code), loadable by transformers, vLLM and llama.cpp alike.

For a cut [a, b) the target is Ghosted's: the dense state X_b entering block b. Block a-1 writes to
the residual stream twice, out = x + u + v: u its attention output, v its MLP output, each as the
module that writes it computes them. A map on a writer's output folds into that writer exactly:

* Llama, Mistral, Qwen2/3, Phi-3 (the writers are ``self_attn.o_proj`` and ``mlp.down_proj``): any
  C x C map T, folded as y T = z (T^T W)^T + bias T;
* Gemma-2/3 and OLMo2 (the writers are the post-norms ``post_attention_layernorm`` and
  ``post_feedforward_layernorm``): only a per-channel scale s (a norm's output cannot be mixed
  across channels by its own weights): (y g) s = y (g s), g the norm's gain, w or (1 + w) for
  Gemma's RMSNorm (told apart by running the norm with w = 0: y w gives 0, y (1 + w) does not).

Fit (least squares with Ghosted's relative ridge, which pulls each map towards the identity;
float64 Grams; dense calibration activations, every cut on its own):

1. both maps together toward X_b - out, the MLP output held at its dense value: rows [u | v]
   (matrices: one 2C x C system; scales: one 2 x 2 system per channel), of which the attention
   map A is kept;
2. the MLP map fitted again on what block a-1 then computes (its MLP reads the changed attention
   output): v' -> X_b - out', for the attention map I + t (A - I) at each step t of 0, 1/2, 1.
   Step 1 holds the MLP fixed, which it is not, and A has C x C more numbers to overfit with: on
   SmolLM2 (k = 4) the full step aligned the calibration states worse than step 0 (0.042 against
   0.033). So the step is
   chosen on calibration data the MLP map was not fitted on: every 4th micro-batch is held out,
   the MLP map fitted on the others, and the step whose held-out alignment is best is kept
   (``attention_step``, ``held_out_alignment`` in the report; with fewer than 4 micro-batches
   the full step, unjudged). The MLP map is then refitted on all of them, so it is the exact
   least-squares answer for the model that is exported, and the report's ``alignment_after``
   (||X_b - out_folded|| / ||X_b||, fitting data) is that model's. Step 0 on a Llama-like block
   is ReplaceMe's ``lstsq``; no evaluation data is read by any of it.

``Operators.mats[a]``: the two maps of cut [a, b) stacked, [2, C, C] (matrices) or [2, C] (scales),
attention first. Ghosted's unrestricted x <- x (I + M) also maps the block's input x and every
earlier block's writes; this one cannot, so it aligns less (docs/recovery.md measures what that
costs on held-out text).

A cut at block 0 has no kept block before it: refused in one line (``ghosted`` repairs it with a
hook). Documented alternative, not built: fold the operator into the input embedding, which
needs the tied embedding / LM head untied first.
"""

from __future__ import annotations

import contextlib
import math
from typing import cast

import torch
from torch import nn

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.stack import check_removed
from ghostsearch.recovery.base import Activations, Recovery, cuts, new_index
from ghostsearch.recovery.gram import GramLS, finite_rows
from ghostsearch.recovery.replaceme import POST_MLP_NORMS

NORM_WRITERS = ("post_attention_layernorm", "post_feedforward_layernorm")  # Gemma-2/3, OLMo2
LINEAR_WRITERS = ("self_attn.o_proj", "mlp.down_proj")  # Llama-like


def writer_names(block) -> tuple[str, str] | str:
    """The (attention, MLP) writers of ``block`` as dotted names, or why it has none to fold into."""
    if hasattr(block, "post_feedforward_layernorm"):
        if hasattr(block, "post_attention_layernorm"):
            return NORM_WRITERS
        return f"{type(block).__name__} has a post_feedforward_layernorm but no post_attention_layernorm"
    other = next((n for n in POST_MLP_NORMS if hasattr(block, n)), None)
    if other is not None:
        return f"{type(block).__name__}'s MLP output passes {other}, a norm this method does not know"
    for name in LINEAR_WRITERS:
        try:
            found = block.get_submodule(name)
        except AttributeError:
            found = None
        if not isinstance(found, nn.Linear):
            return f"{type(block).__name__} has no {name} Linear"
    return LINEAR_WRITERS


def writers(block) -> tuple[nn.Module, nn.Module]:
    names = writer_names(block)
    if isinstance(names, str):
        raise GhostsearchError(f"folded cannot fold into this block: {names}; use --method ghosted")
    return block.get_submodule(names[0]), block.get_submodule(names[1])


def map_output(y: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """A writer's output y through its map: y T (t a matrix) or y * s (t a vector), fp32, cast back."""
    x = y.float()
    t = t.to(device=y.device, dtype=torch.float32)
    return (x @ t if t.dim() == 2 else x * t).to(y.dtype)


def map_hook(t: torch.Tensor):
    return lambda module, args, out: map_output(out, t)


@contextlib.contextmanager
def hooked(block, maps):
    """Block's writers with their maps applied as forward hooks (the unfolded form); ``maps`` =
    (attention, MLP), each a tensor or None."""
    handles = [w.register_forward_hook(map_hook(t)) for w, t in zip(writers(block), maps) if t is not None]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def recording(module):
    """got[0]: the output of ``module`` at its last call (after any map hook registered before)."""
    got: list = [None]
    handle = module.register_forward_hook(lambda mod, args, out: got.__setitem__(0, out))
    try:
        yield got
    finally:
        handle.remove()


def gain_offset(norm: nn.Module) -> float:
    """1.0 where ``norm`` multiplies by (1 + weight) (Gemma's RMSNorm), 0.0 where by weight."""
    w = cast(torch.Tensor, norm.weight)
    probe = torch.randn(2, w.shape[-1], generator=torch.Generator().manual_seed(0)).to(w.device, w.dtype)
    saved = w.detach().clone()
    try:
        with torch.no_grad():
            w.zero_()
            y = norm(probe)
    finally:
        with torch.no_grad():
            w.copy_(saved)
    return 1.0 if float(y.abs().max()) > 0 else 0.0


@torch.no_grad()
def fold_into(writer: nn.Module, t: torch.Tensor) -> None:
    """Fold ``t`` (a C x C map or a C scale) into ``writer``'s weights: its output becomes y T / y * s."""
    w = cast(torch.Tensor, writer.weight)
    t64 = t.double().to(w.device)
    bias = cast("torch.Tensor | None", getattr(writer, "bias", None))
    if t.dim() == 2:
        if not isinstance(writer, nn.Linear):
            raise GhostsearchError(f"a C x C map folds into a Linear, not into {type(writer).__name__}")
        w.copy_((t64.T @ w.double()).to(w.dtype))
    else:
        off = gain_offset(writer)
        w.copy_(((w.double() + off) * t64 - off).to(w.dtype))
    if bias is not None:
        bias.copy_((bias.double() @ t64 if t.dim() == 2 else bias.double() * t64).to(bias.dtype))


class ScaleLS:
    """Per-channel least squares y_c ~ sum_k x_k,c d_k,c for k writers (a k x k system per channel)."""

    def __init__(self) -> None:
        self.xx: torch.Tensor | None = None  # [C, k, k]
        self.xy: torch.Tensor | None = None  # [C, k]
        self.yy, self.n, self.last_ridge = 0.0, 0, 0.0

    def update(self, xs: list[torch.Tensor], y: torch.Tensor) -> None:
        x = torch.stack(xs, -1)  # [n, C, k]
        xx, xy = torch.einsum("nci,ncj->cij", x, x), torch.einsum("nci,nc->ci", x, y)
        self.xx = xx if self.xx is None else self.xx + xx
        self.xy = xy if self.xy is None else self.xy + xy
        self.yy += float((y * y).sum())
        self.n += x.shape[0]

    def solve(self, ridge: float) -> torch.Tensor:
        """d [k, C] (ridge relative to the mean diagonal, as GramLS)."""
        if self.xx is None or self.xy is None or self.n == 0:
            raise GhostsearchError("no calibration tokens reached this cut; use a non-empty calibration set")
        k = self.xx.shape[-1]
        eye = torch.eye(k, dtype=self.xx.dtype, device=self.xx.device)
        scale = float(self.xx.diagonal(dim1=-2, dim2=-1).mean()) or 1.0
        lam = ridge
        while True:
            chol, info = torch.linalg.cholesky_ex(self.xx + lam * scale * eye)
            if int(info.max()) == 0:
                self.last_ridge = lam
                return torch.cholesky_solve(self.xy[..., None], chol)[..., 0].T
            if lam >= 1.0:
                raise GhostsearchError("the calibration activations cannot be fitted even with ridge 1; check them")
            lam = max(lam * 10, 1e-10)

    def residual(self, d: torch.Tensor) -> float:
        assert self.xx is not None and self.xy is not None
        dt = d.T.to(self.xx)  # [C, k]
        r = self.yy - 2 * float((dt * self.xy).sum()) + float(torch.einsum("ci,cij,cj->", dt, self.xx, dt))
        return max(r, 0.0)


LS = GramLS | ScaleLS
ATTENTION_STEPS = (0.0, 0.5, 1.0)  # the attention map tried as I + step * (A - I)
HOLD_EVERY = 4  # every 4th calibration micro-batch judges the step; the rest fit the MLP map for it


def new_ls(scales: bool) -> LS:
    return ScaleLS() if scales else GramLS()


def add_rows(ls: LS, xs: list[torch.Tensor], y: torch.Tensor) -> None:
    if isinstance(ls, ScaleLS):
        ls.update(xs, y)
    else:
        ls.update(torch.cat(xs, -1), y)


def merged(p: LS, q: LS) -> LS:
    """One system holding the rows of both (same kind)."""
    out = new_ls(isinstance(p, ScaleLS))
    for f in ("xx", "xy"):
        x, y = getattr(p, f), getattr(q, f)
        setattr(out, f, y if x is None else x if y is None else x + y)
    out.yy, out.n = p.yy + q.yy, p.n + q.n
    return out


class Folded(Recovery):
    name = "folded"
    variants = ("writers",)
    folds = True

    @classmethod
    def unsupported(cls, stack) -> str | None:
        why = next((w for w in map(writer_names, stack.blocks) if isinstance(w, str)), None)
        return None if why is None else f"it folds into the writers of the block before a cut, and {why}"

    @torch.no_grad()
    def fit(self, stack, removed, data: Activations):
        removed = check_removed(removed, stack.n_blocks)
        all_cuts = cuts(removed)
        if all_cuts and all_cuts[0][0] == 0:
            b = all_cuts[0][1]
            raise GhostsearchError(
                f"folded needs a kept block before the cut 0..{b - 1} to fold into; keep block 0 or use "
                "--method ghosted (a hook at the cut)"
            )
        mats, report = {}, []
        for a, b in all_cuts:
            mats[a], row = self.fit_cut(stack, data, a, b)
            report.append(row)
        return self.operators(removed, stack.n_blocks, mats, report)

    def rows(self, stack, data: Activations, a: int, b: int, attn_map: torch.Tensor | None = None):
        """Per micro-batch, float64 rows (u, v, X_b - out, X_b) of block a-1 (padding left out), its
        attention writer mapped by ``attn_map`` when given."""
        block = stack.blocks[a - 1]
        wa, wm = writers(block)
        with hooked(block, (attn_map, None)), recording(wa) as u, recording(wm) as v:
            for cap, w in data:
                out = stack.block(a - 1, cap.states[a - 1], cap)
                xb = finite_rows(cap.states[b].to(out.device), f"state at {b}", w)
                yield (
                    finite_rows(u[0], f"attention output of block {a - 1}", w),
                    finite_rows(v[0], f"MLP output of block {a - 1}", w),
                    xb - finite_rows(out, f"output of block {a - 1}", w),
                    xb,
                )

    def fit_cut(self, stack, data: Activations, a: int, b: int) -> tuple[torch.Tensor, dict]:
        scales = writer_names(stack.blocks[a - 1]) == NORM_WRITERS
        first, ref = new_ls(scales), 0.0
        for u, v, gap, xb in self.rows(stack, data, a, b):
            add_rows(first, [u, v], gap)
            ref += float((xb * xb).sum())
        d = self.solve(first)
        c = d.shape[-1]
        one = torch.ones_like(d[0]) if scales else torch.eye(c, dtype=d.dtype, device=d.device)
        step = d[0] if scales else d[:c]  # the attention map's departure from the identity
        held: dict[float, float] = {}
        best: tuple[float, float, LS, torch.Tensor] | None = None
        for alpha in ATTENTION_STEPS:
            attn = one + alpha * step
            fit, out = new_ls(scales), new_ls(scales)
            for i, (_, v, gap, _) in enumerate(self.rows(stack, data, a, b, attn_map=attn.float())):
                add_rows(out if i % HOLD_EVERY == HOLD_EVERY - 1 else fit, [v], gap)
            score = out.residual(self.solve(fit)) / (out.yy or 1.0) if out.n and fit.n else 0.0
            held[alpha] = math.sqrt(score)
            if best is None or score < best[0]:
                best = (score, alpha, merged(fit, out), attn)
            if not (out.n and fit.n):
                break  # fewer than HOLD_EVERY micro-batches: no held-out part, the full attention map
        assert best is not None
        _, alpha, second, attn = best
        dm = self.solve(second)
        mlp = one + (dm[0] if scales else dm)
        ref = ref or 1.0
        row = {
            "cut": [a, b],
            "tokens": first.n,
            "alignment_before": math.sqrt(first.yy / ref),
            "alignment_after": math.sqrt(second.residual(dm) / ref),
            "antisymmetric_share": None,  # maps on writers' outputs, not on the residual stream
            "antisymmetric_share_w": None,
            "ridge": second.last_ridge,
            "writers": list(writer_names(stack.blocks[a - 1])),
            "maps": "per-channel scales" if scales else "C x C matrices",
            "attention_step": alpha,
            "held_out_alignment": {str(k): v for k, v in held.items()},
        }
        return torch.stack([attn.to(mlp), mlp]).float().cpu(), row

    def solve(self, ls: LS) -> torch.Tensor:
        return ls.solve(self.ridge) if isinstance(ls, ScaleLS) else ls.solve(self.ridge, self.solver)

    @contextlib.contextmanager
    def patches(self, stack, ops):
        """Unpruned scoring: block a-1's writers mapped by hooks while the context is open (the
        folded model's computation), and an identity patch at each cut's start a so that a run
        starts at or before block a-1 (``stack.run_start``)."""
        with contextlib.ExitStack() as es:
            for a, t in ops.mats.items():
                es.enter_context(hooked(stack.blocks[a - 1], (t[0], t[1])))
            yield {a: (lambda h: h) for a in ops.mats}

    def apply(self, model, ops) -> list:
        """Fold the maps into the pruned model's weights (nothing is hooked)."""
        from ghostsearch.model.stack import Stack

        blocks = Stack(model).blocks
        for a, t in ops.mats.items():
            for writer, m in zip(writers(blocks[new_index(a - 1, ops.removed)]), t):
                fold_into(writer, m)
        return []

    def hook(self, model, ops) -> list:
        """The same maps as forward hooks on the pruned model's writers (the unfolded form, for
        checking the fold): returns the handles."""
        from ghostsearch.model.stack import Stack

        blocks, handles = Stack(model).blocks, []
        for a, t in ops.mats.items():
            for writer, m in zip(writers(blocks[new_index(a - 1, ops.removed)]), t):
                handles.append(writer.register_forward_hook(map_hook(m)))
        return handles
