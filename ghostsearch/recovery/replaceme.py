"""ReplaceMe (least-squares variant): a linear map T on the MLP output of the last kept block
before each cut, folded into that block's ``mlp.down_proj`` so nothing is added at inference.

For a cut [a, b): block a-1 computes out = mid + mlp(...), with mid the residual stream after
attention. T = argmin ||mlp T + mid - X_b||_F with X_b the dense state entering block b; solved
as T = I + W, W = argmin ||mlp W - (X_b - out)||_F (so the ridge pulls T towards the identity).
Folding: down_proj(z) T = z (T^T W_down)^T + bias T. Needs a block before the cut (a >= 1) whose
MLP output is added straight to the residual stream (Llama, Mistral, Qwen, Phi3, OLMo2 ...).
"""
from __future__ import annotations

import contextlib

import torch

from ghostsearch.errors import GhostsearchError
from ghostsearch.recovery.base import Activations, Recovery, cuts, new_index
from ghostsearch.stack import check_removed
from ghostsearch.recovery.ghosted import CutStats, cut_report
from ghostsearch.recovery.gram import finite_rows


def down_proj(block) -> torch.nn.Linear:
    mlp = getattr(block, "mlp", None)
    proj = getattr(mlp, "down_proj", None)
    if proj is None or any(hasattr(block, n) for n in ("post_feedforward_layernorm", "post_mlp_layernorm")):
        raise GhostsearchError(f"replaceme folds into mlp.down_proj added straight to the residual stream; "
                               f"{type(block).__name__} has no such MLP; use --method ghosted")
    return proj


@contextlib.contextmanager
def mlp_outputs(block):
    """Record the MLP output of ``block`` each time it runs: got[0]."""
    got: list = [None]
    handle = down_proj(block).register_forward_hook(lambda mod, args, out: got.__setitem__(0, out))
    try:
        yield got
    finally:
        handle.remove()


class ReplaceMe(Recovery):
    name = "replaceme"
    variants = ("lstsq",)
    folds = True

    @torch.no_grad()
    def fit(self, stack, removed, data: Activations):
        removed = check_removed(removed, stack.n_blocks)
        mats, report = {}, []
        for a, b in cuts(removed):
            if a == 0:
                raise GhostsearchError(f"replaceme needs a kept block before the cut {a}..{b - 1}; "
                                       "keep block 0 or use --method ghosted")
            st = CutStats()
            with mlp_outputs(stack.blocks[a - 1]) as got:
                for cap, w in data:
                    out = stack.block(a - 1, cap.states[a - 1], cap)
                    xb = finite_rows(cap.states[b], f"state at {b}", w)
                    st.ls.update(finite_rows(got[0], f"MLP output of block {a - 1}", w),
                                 xb - finite_rows(out, f"output of block {a - 1}", w))
                    st.ref += float((xb * xb).sum())
            wmat = st.ls.solve(self.ridge, self.solver)
            mats[a] = (torch.eye(wmat.shape[0], dtype=wmat.dtype, device=wmat.device) + wmat).float()
            report.append(cut_report(a, b, st, wmat) | {"antisymmetric_share": None})
        return self.operators(removed, stack.n_blocks, mats, report)

    @contextlib.contextmanager
    def patches(self, stack, ops):
        """Unpruned scoring: at boundary a add mlp (T - I) of block a-1 (the fold, as a patch)."""
        with contextlib.ExitStack() as es:
            out = {}
            for a, t in ops.mats.items():
                got = es.enter_context(mlp_outputs(stack.blocks[a - 1]))
                w = t.float() - torch.eye(t.shape[0], device=t.device)
                out[a] = lambda h, got=got, w=w: (h.float() + got[0].float() @ w.to(h.device)).to(h.dtype)
            yield out

    def apply(self, model, ops) -> list:
        from ghostsearch.stack import Stack

        blocks = Stack(model).blocks
        for a, t in ops.mats.items():
            proj = down_proj(blocks[new_index(a - 1, ops.removed)])
            t64 = t.double().to(proj.weight.device)
            with torch.no_grad():
                proj.weight.copy_((t64.T @ proj.weight.double()).to(proj.weight.dtype))
                if proj.bias is not None:
                    proj.bias.copy_((proj.bias.double() @ t64).to(proj.bias.dtype))
        return []
