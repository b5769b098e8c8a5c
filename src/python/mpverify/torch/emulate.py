"""emulate(): what fp16, bf16, fp8 or fp4 GEMMs would do to your own PyTorch model, on the CPU.

    model = mpverify.torch.emulate(model, "fp8")          # every Linear and Conv2d, in place
    loss = criterion(model(x), y); loss.backward()       # the same optimizer still works
    model.fc1.counters["fprop"]["x"]["underflow_to_zero"]

Each torch.nn.Linear and torch.nn.Conv2d becomes a module of the same class family whose three GEMMs,
named as Transformer Engine names them,

    fprop  y  = x W^T    A = x,  B = W,  K = the input features (a convolution: c*r*s of its patches)
    dgrad  dx = dy W     A = dy, B = W,  K = the output features
    wgrad  dW = dy^T x   A = dy, B = x,  K = the batch (a convolution: the batch's output positions)

round their operands to the recipe's formats (each GEMM its own copy, quantized along its own K), multiply
them under the recipe's accumulation and round the result to its output format. The parameters stay the
same nn.Parameter objects. A convolution runs the three GEMMs on its im2col patches (F.unfold), and dgrad's
patch gradients are added back onto dx by F.fold in fp32, as `mpverify train` does (src/nn/conv_lowering.h).

Recipes, their keys and what is not emulated: docs/emulate.md.
"""
import itertools

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ._emulated_gemm import Operand, counted, draw_stream, gemm, output
from ._emulation_recipe import PRESETS, RECIPE_KEYS, Recipe

__all__ = ["emulate", "emulated_matmul", "Recipe", "EmulatedLinear", "EmulatedConv2d", "PRESETS", "RECIPE_KEYS"]

# ---------------------------------------------------------------------------------------------------------
# The three GEMMs of a layer, on matrices (a convolution hands in a `lower` that gathers its patches)
# ---------------------------------------------------------------------------------------------------------


def _fprop(recipe, x, w2, lower):
    """y = x W^T for the layer's matrix x (after lower) and W (out x K); (y, counters)."""
    xa = Operand(x, recipe.spec("fprop", 0)[1]).gathered(lower)
    wb = Operand(w2, recipe.spec("fprop", 1)[1])
    parts = gemm(recipe, xa, wb, False, True)
    return parts[0], parts


def _dgrad(recipe, dy2, w2, stream):
    """dx's matrix = dy W (dy: rows x out, W: out x K); not yet rounded to the output format."""
    dya = Operand(dy2, recipe.spec("dgrad", 0)[1], stream)
    wb = Operand(w2, recipe.spec("dgrad", 1)[1])
    parts = gemm(recipe, dya, wb, False, False)
    return parts[0], parts


def _wgrad(recipe, dy2, x, lower, stream):
    """dW = dy^T x (dy: rows x out, x's matrix: rows x K, K = the rows); (dW, counters), dW rounded."""
    dya = Operand(dy2, recipe.spec("wgrad", 0)[1], stream)
    xb = Operand(x, recipe.spec("wgrad", 1)[1]).gathered(lower)
    parts = gemm(recipe, dya, xb, True, False)
    dw, output_counters = output(recipe, parts[0])
    return dw, counted(recipe.roles("wgrad"), parts, output_counters)


def _as_float(t):
    """A float32 CPU copy of t (or t itself), for the core."""
    return t.detach().to(device="cpu", dtype=torch.float32)


class _LinearGemms(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, module):
        recipe, out_features = module.recipe, weight.shape[0]
        x2 = _as_float(x).reshape(-1, x.shape[-1])
        c, parts = _fprop(recipe, x2, _as_float(weight), lambda v: v)
        if bias is not None:
            c = c + _as_float(bias)
        y, output_counters = output(recipe, c)
        module.counters["fprop"] = counted(recipe.roles("fprop"), parts, output_counters)
        ctx.save_for_backward(x, weight)
        ctx.module = module
        return y.reshape(*x.shape[:-1], out_features).to(device=x.device, dtype=x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        module, recipe = ctx.module, ctx.module.recipe
        step = module.next_backward_step()
        dy2 = _as_float(dy).reshape(-1, weight.shape[0]).contiguous()
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            c, parts = _dgrad(recipe, dy2, _as_float(weight), draw_stream(module.emulated_name, "dgrad", step))
            dx, output_counters = output(recipe, c)
            module.counters["dgrad"] = counted(recipe.roles("dgrad"), parts, output_counters)
            dx = dx.reshape(x.shape).to(device=x.device, dtype=x.dtype)
        if ctx.needs_input_grad[1]:
            x2 = _as_float(x).reshape(-1, x.shape[-1])
            dw, module.counters["wgrad"] = _wgrad(recipe, dy2, x2, lambda v: v,
                                                  draw_stream(module.emulated_name, "wgrad", step))
            dw = dw.to(device=weight.device, dtype=weight.dtype)
        if ctx.needs_input_grad[2]:
            db = dy2.sum(0).to(device=dy.device, dtype=dy.dtype)  # the bias gradient: dy in fp32, not a GEMM
        return dx, dw, db, None


class _Patches:
    """A convolution's im2col (x padded with zeros, then F.unfold): the GEMM's matrix of patches, one row per
    output position (n, p, q), K = c*r*s, and back (F.fold, then the padding cropped)."""

    def __init__(self, module, x_shape, pad):
        self.kernel, self.dilation, self.stride = module.kernel_size, module.dilation, module.stride
        self.pad = pad  # F.pad's (left, right, top, bottom)
        n, c, h, w = x_shape
        self.padded_hw = (h + pad[2] + pad[3], w + pad[0] + pad[1])
        self.out_hw = tuple((size - d * (k - 1) - 1) // s + 1 for size, d, k, s in
                            zip(self.padded_hw, self.dilation, self.kernel, self.stride))
        self.x_shape = x_shape

    def __call__(self, x):
        padded = F.pad(x, self.pad) if any(self.pad) else x
        cols = F.unfold(padded, self.kernel, dilation=self.dilation, stride=self.stride)  # n x crs x L
        return cols.transpose(1, 2).reshape(-1, cols.shape[1])

    def to_image(self, c2):
        """The GEMM's rows x k output (one row per output position) as n x k x P x Q."""
        n = self.x_shape[0]
        return c2.reshape(n, -1, c2.shape[1]).transpose(1, 2).reshape(n, c2.shape[1], *self.out_hw)

    def rows(self, dy):
        """dy (n x k x P x Q) as the GEMM's rows x k matrix."""
        return dy.reshape(dy.shape[0], dy.shape[1], -1).transpose(1, 2).reshape(-1, dy.shape[1])

    def fold(self, dcols):
        """dx from the patches' gradients (rows x crs): summed onto the padded image in fp32, then cropped."""
        n = self.x_shape[0]
        cols = dcols.reshape(n, -1, dcols.shape[1]).transpose(1, 2)
        dx = F.fold(cols, self.padded_hw, self.kernel, dilation=self.dilation, stride=self.stride)
        left, right, top, bottom = self.pad
        return dx[:, :, top:self.padded_hw[0] - bottom, left:self.padded_hw[1] - right]


class _Conv2dGemms(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, module, pad):
        recipe = module.recipe
        patches = _Patches(module, tuple(x.shape), pad)
        c, parts = _fprop(recipe, _as_float(x), _as_float(weight).reshape(weight.shape[0], -1), patches)
        y = patches.to_image(c)
        if bias is not None:
            y = y + _as_float(bias).reshape(1, -1, 1, 1)
        y, output_counters = output(recipe, y)
        module.counters["fprop"] = counted(recipe.roles("fprop"), parts, output_counters)
        ctx.save_for_backward(x, weight)
        ctx.module, ctx.patches = module, patches
        return y.to(device=x.device, dtype=x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        module, recipe, patches = ctx.module, ctx.module.recipe, ctx.patches
        step = module.next_backward_step()
        dy2 = patches.rows(_as_float(dy)).contiguous()
        w2 = _as_float(weight).reshape(weight.shape[0], -1)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            c, parts = _dgrad(recipe, dy2, w2, draw_stream(module.emulated_name, "dgrad", step))
            dx, output_counters = output(recipe, patches.fold(c))
            module.counters["dgrad"] = counted(recipe.roles("dgrad"), parts, output_counters)
            dx = dx.to(device=x.device, dtype=x.dtype)
        if ctx.needs_input_grad[1]:
            dw, module.counters["wgrad"] = _wgrad(recipe, dy2, _as_float(x), patches,
                                                  draw_stream(module.emulated_name, "wgrad", step))
            dw = dw.reshape(weight.shape).to(device=weight.device, dtype=weight.dtype)
        if ctx.needs_input_grad[2]:
            db = dy2.sum(0).to(device=dy.device, dtype=dy.dtype)
        return dx, dw, db, None, None


# ---------------------------------------------------------------------------------------------------------
# The modules and emulate()
# ---------------------------------------------------------------------------------------------------------


class _Emulated:
    """What the emulated modules share: the recipe, the layer's name, the counters of its last GEMMs."""

    def _adopt(self, original, recipe, name):
        torch.nn.Module.__init__(self)
        self.weight = original.weight  # the same Parameter objects: an optimizer made before keeps working
        self.register_parameter("bias", original.bias)
        self.recipe = recipe
        self.emulated_name = name
        # {"fprop": {...}, "dgrad": {...}, "wgrad": {...}}: per GEMM the counters of its operands (by role: x,
        # w, dy), of the accumulation (emulated ones only) and of the output rounding, from the last forward
        # and backward.
        self.counters = {}
        self._backward_steps = 0
        self.train(original.training)

    def next_backward_step(self):
        self._backward_steps += 1
        return self._backward_steps - 1

    def extra_repr(self):
        return f"{super().extra_repr()}, recipe={self.recipe.text!r}"


class EmulatedLinear(_Emulated, torch.nn.Linear):
    """A torch.nn.Linear whose fprop, dgrad and wgrad run under an emulation recipe (see emulate())."""

    def __init__(self, linear, recipe, name=""):
        self._adopt(linear, Recipe.parse(recipe), name)
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x):
        return _LinearGemms.apply(x, self.weight, self.bias, self)


class EmulatedConv2d(_Emulated, torch.nn.Conv2d):
    """A torch.nn.Conv2d (groups=1) whose three GEMMs run on its im2col patches under an emulation recipe."""

    _COPIED = ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "transposed",
               "output_padding", "groups", "padding_mode", "_reversed_padding_repeated_twice")

    def __init__(self, conv, recipe, name=""):
        if conv.groups != 1:
            raise ValueError(f"emulate: {name or 'the Conv2d'} has groups={conv.groups}; grouped convolutions are "
                             "not emulated (leave it out with exclude=)")
        self._adopt(conv, Recipe.parse(recipe), name)
        for attribute in self._COPIED:
            setattr(self, attribute, getattr(conv, attribute))

    def forward(self, x):
        unbatched = x.dim() == 3
        if unbatched:
            x = x.unsqueeze(0)
        pad = tuple(self._reversed_padding_repeated_twice)
        if self.padding_mode != "zeros":  # reflect, replicate, circular: torch pads, its autograd adds back
            x, pad = F.pad(x, pad, mode=self.padding_mode), (0, 0, 0, 0)
        y = _Conv2dGemms.apply(x, self.weight, self.bias, self, pad)
        return y.squeeze(0) if unbatched else y


_EMULATED = {torch.nn.Linear: EmulatedLinear, torch.nn.Conv2d: EmulatedConv2d}


def emulate(model, recipe, exclude=()):
    """Replaces every torch.nn.Linear and torch.nn.Conv2d of `model` (recursively, in place) by a module whose
    forward and backward GEMMs run under `recipe`, and returns the model.

    recipe: a preset (fp32, fp16, bf16, fp8, mxfp8, nvfp4, fp8-blockwise), "PRESET:KEY=VALUE,...", or a dict of
    RECIPE_KEYS (with "preset"); docs/emulate.md. A bad recipe raises ValueError naming the key or value and
    the valid ones. exclude: names of modules (as model.named_modules() gives them) to leave as they are, e.g.
    the output head, or a grouped convolution, which is not emulated. Modules are matched by exact type (a
    subclass may compute something else); an emulated module is given the new recipe. The parameters stay the
    same objects, so the optimizer, state_dict keys and parameter count do not change. When `model` is itself a
    Linear or Conv2d, the emulated module is returned (use the return value)."""
    recipe = Recipe.parse(recipe)
    names = {name for name, _ in model.named_modules()}
    missing = sorted(set(exclude) - names)
    if missing:
        raise ValueError(f"emulate: exclude names '{missing[0]}', which is not a module of the model")
    replaced = {}
    root = _emulated(model, recipe, "", replaced) if "" not in exclude else None
    if root is not None:
        return root
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            new = None if name in exclude else _emulated(child, recipe, name, replaced)
            if new is not None:
                setattr(parent, child_name, new)
    return model


def _emulated(module, recipe, name, replaced):
    """The emulated module for `module`, or None for a module that is not a matrix layer."""
    if isinstance(module, _Emulated):
        module.recipe = recipe
        return None
    if type(module) not in _EMULATED:
        return None
    if id(module) not in replaced:  # a layer used twice stays one layer
        replaced[id(module)] = _EMULATED[type(module)](module, recipe, name)
    return replaced[id(module)]


# ---------------------------------------------------------------------------------------------------------
# Matrix products a model calls itself (attention)
# ---------------------------------------------------------------------------------------------------------

_matmul_calls = itertools.count()
_recipes = {}


def emulated_matmul(a, b, recipe, counters=None, name="matmul"):
    """a @ b (a: ... x M x K, b: ... x K x N, batch dimensions broadcast) with its GEMMs under `recipe`.

    torch.matmul and bmm inside a model (attention's Q K^T and P V) have no module to swap: a model that wants
    them emulated calls this instead. Both operands take the recipe's `x` format (attention multiplies two
    activations), the backward's saved operands `wgrad_x`, the incoming gradient `dy`. A format's scale is
    taken over the whole operand; a block scheme quantizes each batch matrix along its K as a tensor of its own.
    counters: a dict that receives {"fprop", "dgrad", "wgrad"} as an emulated module's counters do, the
    operands by role (a, b, dy), counted over all batch matrices. name: the product's name in the stochastic
    draws' stream (dy_rounding=stochastic)."""
    key = repr(sorted(recipe.items())) if isinstance(recipe, dict) else recipe
    parsed = _recipes.get(key) if isinstance(key, str) else None
    if parsed is None:
        parsed = Recipe.parse(recipe)
        if isinstance(key, str):
            _recipes[key] = parsed
    return _MatmulGemms.apply(a, b, parsed, counters if counters is not None else {}, name)


class _MatmulGemms(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, recipe, counters, name):
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a3 = _as_float(a).expand(*batch, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
        b3 = _as_float(b).expand(*batch, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
        c, counters["fprop"] = _batched(recipe, ("a", "b"), ("x", "x"), a3, b3, False, False, 0)
        ctx.save_for_backward(a, b)
        ctx.recipe, ctx.counters, ctx.name, ctx.batch = recipe, counters, name, batch
        return c.reshape(*batch, *c.shape[-2:]).to(device=a.device, dtype=a.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        recipe, batch = ctx.recipe, ctx.batch
        stream = draw_stream(ctx.name, "matmul", next(_matmul_calls))
        dc3 = _as_float(dc).reshape(-1, *dc.shape[-2:]).contiguous()
        a3 = _as_float(a).expand(*batch, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
        b3 = _as_float(b).expand(*batch, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
        da = db = None
        if ctx.needs_input_grad[0]:  # da = dc b^T
            da, ctx.counters["dgrad"] = _batched(recipe, ("dy", "b"), ("dy", "wgrad_x"), dc3, b3, False, True, stream)
            da = da.reshape(*batch, *a.shape[-2:]).sum_to_size(a.shape).to(device=a.device, dtype=a.dtype)
        if ctx.needs_input_grad[1]:  # db = a^T dc, as (dc^T a)^T: the gradient is A, as in a layer's wgrad
            dbt, ctx.counters["wgrad"] = _batched(recipe, ("dy", "a"), ("dy", "wgrad_x"), dc3, a3, True, False, stream)
            db = dbt.transpose(-1, -2).reshape(*batch, *b.shape[-2:]).sum_to_size(b.shape)
            db = db.to(device=b.device, dtype=b.dtype)
        return da, db, None, None, None


def _batched(recipe, roles, keys, a3, b3, transpose_a, transpose_b, stream):
    """op(a_i) op(b_i) for each batch matrix i, rounded to the output format; (c, counters by operand role)."""
    operands = [Operand(t.contiguous(), recipe.operands[key], stream if key == "dy" else 0)
                for t, key in zip((a3, b3), keys)]
    results, counts = [], {}
    for i in range(a3.shape[0]):
        c, counts_a, counts_b, accumulate = gemm(recipe, *(op.gathered(lambda v: v[i]) for op in operands),
                                                 transpose_a, transpose_b)
        results.append(c)
        for role, op, part in zip(roles, operands, (counts_a, counts_b)):
            # A format rounds the whole operand once; a block scheme each matrix: its counts add up.
            counts[role] = _summed(counts.get(role), part) if op.spec.block else part
        counts["accumulate"] = _summed(counts.get("accumulate"), accumulate)
    c, counts["output"] = output(recipe, torch.stack(results))
    return c, {k: v for k, v in counts.items() if v is not None}


def _summed(total, part):
    """Counts added up over batch matrices (sqnr_db: the worst)."""
    if total is None or part is None:
        return dict(part) if total is None and part is not None else total
    out = dict(total)
    for k, v in part.items():
        out[k] = min(out[k], v) if k == "sqnr_db" else (out[k] + v if isinstance(v, int) else v)
    return out
