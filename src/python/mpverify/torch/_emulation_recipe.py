"""Emulation recipes: which format or block scheme each GEMM operand takes, how the GEMM accumulates, and what
its result is rounded to (docs/emulate.md). A recipe is checked whole when it is parsed: every key, value,
format and pairing, and one tiny GEMM of each kind through the core, so that a recipe that cannot run is
refused before the model runs, with the key or value named and the valid ones listed.
"""
import torch

import mpverify
from mpverify import _core

from ._emulated_gemm import Format, Operand, Scheme, gemm

RECIPE_KEYS = {
    "x": "fprop's x (the layer input): a format or a block scheme",
    "w": "the weight W in fprop, and in dgrad unless dgrad_w is set",
    "dy": "the output gradient dy in dgrad and wgrad",
    "wgrad_x": "x as wgrad's operand (default: x's)",
    "dgrad_w": "W as dgrad's operand (default: w's)",
    "output": "the format every GEMM result is rounded to (after the bias, in fprop)",
    "accumulation": "fp32 (torch's matmul), fp32-sequential, fp16, tensor-core, an architecture, a tensor-core "
                    "preset, or a block-scaled model",
    "promotion": "with an architecture or preset: an fp32 promotion every N elements of K (0: none)",
    "scaling": "auto, current or none: per-tensor current scaling of the format operands",
    "scale_rule": "floor, ceil, even or rceil: the MX schemes' E8M0 scales",
    "w_tile": "16x16: nvfp4's 2-D weight tiles",
    "dy_rounding": "rne or stochastic: how dy is rounded into its format or scheme",
    "seed": "the seed of stochastic rounding",
}

_DEFAULTS = {"x": "fp32", "w": "fp32", "dy": "fp32", "wgrad_x": None, "dgrad_w": None, "output": "fp32",
             "accumulation": "fp32", "promotion": 0, "scaling": "auto", "scale_rule": None, "w_tile": None,
             "dy_rounding": "rne", "seed": 0}

# The presets; the fp8 casts saturate, as Transformer Engine's do (and `mpverify train --recipe fp8`).
PRESETS = {
    "fp32": {},
    "fp16": {"x": "fp16", "w": "fp16", "dy": "fp16"},
    "bf16": {"x": "bf16", "w": "bf16", "dy": "bf16"},
    "fp8": {"x": "fp8-e4m3:saturate", "w": "fp8-e4m3:saturate", "dy": "fp8-e5m2:saturate", "scaling": "current"},
    "mxfp8": {"x": "mxfp8-e4m3", "w": "mxfp8-e4m3", "dy": "mxfp8-e4m3"},
    "nvfp4": {"x": "nvfp4", "w": "nvfp4", "dy": "nvfp4", "w_tile": "16x16", "dy_rounding": "stochastic"},
    "fp8-blockwise": {"x": "fp8-tile1x128", "w": "fp8-block128x128", "dy": "fp8-tile1x128"},
}

BLOCK_MODELS = ("sm100.mxf8f6f4", "sm100.mxf4nvf4", "sm90.fp8-blockwise")
_EMULATOR_ACCUMULATIONS = {"fp32-sequential": "fp32", "fp16": "fp16", "tensor-core": "tensor-core"}
_CHOICES = {"scaling": ("auto", "current", "none"), "dy_rounding": ("rne", "stochastic"),
            "scale_rule": (None, "floor", "ceil", "even", "rceil"), "w_tile": (None, "16x16")}

# Each GEMM's operands: (A's role, A's recipe key), (B's role, B's recipe key).
GEMMS = {"fprop": (("x", "x"), ("w", "w")),
         "dgrad": (("dy", "dy"), ("w", "dgrad_w")),
         "wgrad": (("dy", "dy"), ("x", "wgrad_x"))}


class Recipe:
    """A recipe parsed and checked: each GEMM's operand formats or schemes, its accumulation and its output.

    Recipe.parse(recipe) takes what emulate() takes: a preset name, "PRESET:KEY=VALUE,...", "KEY=VALUE,...",
    a dict of keys (with "preset" for the starting point, fp32 without), or a Recipe."""

    def __init__(self, text, settings):
        self.text = text
        self.settings = settings
        self.operands = {key: _operand_spec(key, settings) for key in ("x", "w", "dy", "wgrad_x", "dgrad_w")}
        self.output = Format(_format_name("output", settings["output"]), False, "rne", 0)
        self.kind, self.accumulation = _accumulation(settings["accumulation"])
        self.promotion = settings["promotion"]
        _check_consistent(self)
        for gemm_name in GEMMS:
            _probe(self, gemm_name)

    @classmethod
    def parse(cls, recipe):
        if isinstance(recipe, Recipe):
            return recipe
        if isinstance(recipe, str):
            return cls(recipe, _settings(*_split_text(recipe)))
        if isinstance(recipe, dict):
            keys = dict(recipe)
            preset = keys.pop("preset", "fp32")
            return cls(repr(recipe), _settings(preset, keys))
        raise ValueError("recipe: expected a preset name, 'PRESET:KEY=VALUE,...' or a dict, not "
                         f"{type(recipe).__name__}")

    def spec(self, gemm_name, index):
        """(role, spec) of operand `index` (0: A, 1: B) of the GEMM fprop, dgrad or wgrad."""
        role, key = GEMMS[gemm_name][index]
        return role, self.operands[key]

    def roles(self, gemm_name):
        return tuple(role for role, _ in GEMMS[gemm_name])

    def __repr__(self):
        return f"Recipe({self.text!r})"


def _split_text(text):
    """'fp8:accumulation=hopper' -> ('fp8', {'accumulation': 'hopper'}); 'x=fp16,w=fp16' -> ('fp32', {...})."""
    head, _, tail = text.partition(":")
    if "=" in head:
        head, tail = "fp32", text
    keys = {}
    for item in filter(None, (s.strip() for s in tail.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"recipe '{text}': '{item}' is not KEY=VALUE")
        keys[key.strip()] = value.strip()
    return head.strip(), keys


def _settings(preset, keys):
    """Every key's value: the defaults, then the preset's, then the given ones; each checked."""
    if preset not in PRESETS:
        raise ValueError(f"recipe: unknown preset '{preset}' (presets: {', '.join(PRESETS)})")
    unknown = sorted(set(keys) - set(RECIPE_KEYS))
    if unknown:
        raise ValueError(f"recipe: unknown key '{unknown[0]}' (keys: {', '.join(RECIPE_KEYS)}, and preset)")
    settings = {**_DEFAULTS, **PRESETS[preset], **keys}
    for key in ("promotion", "seed"):
        settings[key] = _whole_number(key, settings[key])
    for key, allowed in _CHOICES.items():
        if settings[key] not in allowed:
            raise ValueError(f"recipe: {key}={settings[key]!r} (expected one of: "
                             f"{', '.join(str(a) for a in allowed if a is not None)})")
    return settings


def _whole_number(key, value):
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0 or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"recipe: {key}={value!r} is not a whole number >= 0")
    return number


def _format_name(key, name):
    """The name if mpverify.format_info takes it, else a ValueError naming the key and listing the choices."""
    try:
        mpverify.format_info(name)
        return name
    except (ValueError, RuntimeError, TypeError):
        schemes = "" if key == "output" else f"; block schemes: {', '.join(mpverify.block_schemes())}"
        raise ValueError(f"recipe: {key}={name!r} is not a format (formats: {', '.join(mpverify.format_names())}, "
                         f"or eXmY[:saturate|:ftz|...]{schemes})") from None


def _operand_spec(key, settings):
    """The Format or Scheme of one operand key; wgrad_x and dgrad_w default to x's and w's."""
    name = settings[key] or settings[{"wgrad_x": "x", "dgrad_w": "w"}.get(key, key)]
    rounding = settings["dy_rounding"] if key == "dy" else "rne"
    if name in mpverify.block_schemes():
        tile = settings["w_tile"] if key in ("w", "dgrad_w") else None
        return Scheme(name, tile, settings["scale_rule"], rounding, settings["seed"])
    info = mpverify.format_info(_format_name(key, name))
    # auto: the formats of 8 bits or fewer (fp8, fp6, fp4) need a scale to hold a tensor's range; fp16 and bf16
    # run unscaled, as the frameworks run them (a loss scale, if any, is the training loop's).
    scaled = {"auto": info["width"] <= 8, "current": True, "none": False}[settings["scaling"]]
    return Format(name, scaled, rounding, settings["seed"])


def _accumulation(name):
    """(kind, name): ("torch", "fp32"), ("emulator", the name _core.gemm takes) or ("block", a model)."""
    if name == "fp32":
        return "torch", name
    if name in _EMULATOR_ACCUMULATIONS:
        return "emulator", _EMULATOR_ACCUMULATIONS[name]
    if name in _core.mma_architectures() or name in _core.mma_presets():
        return "emulator", name
    if name in BLOCK_MODELS:
        return "block", name
    raise ValueError(f"recipe: unknown accumulation '{name}' (fp32, {', '.join(_EMULATOR_ACCUMULATIONS)}, an "
                     f"architecture: {', '.join(_core.mma_architectures())}, a tensor-core preset of "
                     f"`mpverify eval --op dot --list` such as sm90.wgmma.k16.f32.f16, or a block-scaled model: "
                     f"{', '.join(BLOCK_MODELS)})")


def _check_consistent(recipe):
    """The emulator's GEMM multiplies values of formats, the block-scaled models block schemes."""
    blocks = {key: spec.block for key, spec in recipe.operands.items()}
    if recipe.kind == "emulator" and any(blocks.values()):
        key = next(k for k, b in blocks.items() if b)
        raise ValueError(f"recipe: accumulation={recipe.accumulation} multiplies values of formats; {key} is the block "
                         f"scheme {recipe.operands[key].name} (use fp32 or a block-scaled model: "
                         f"{', '.join(BLOCK_MODELS)})")
    if recipe.kind == "block" and not all(blocks.values()):
        key = next(k for k, b in blocks.items() if not b)
        raise ValueError(f"recipe: accumulation={recipe.accumulation} takes block schemes; {key} is the format "
                         f"{recipe.operands[key].name}")
    if recipe.promotion and recipe.kind != "emulator":
        raise ValueError(f"recipe: promotion={recipe.promotion} needs an architecture or a tensor-core preset as the "
                         f"accumulation, not {recipe.settings['accumulation']}")


def _probe(recipe, gemm_name):
    """One tiny GEMM through the core: a pairing it cannot run (a preset for other formats, a block model for
    other schemes, a tile on a scheme without one) is refused here, naming the GEMM."""
    a = Operand(torch.zeros(2, 64), recipe.spec(gemm_name, 0)[1])
    b = Operand(torch.zeros(2, 64), recipe.spec(gemm_name, 1)[1])
    try:
        gemm(recipe, a, b, False, True)
    except (ValueError, RuntimeError) as e:
        names = [recipe.spec(gemm_name, i)[1].name for i in (0, 1)]
        raise ValueError(f"recipe: {gemm_name} ({names[0]} x {names[1]}, accumulation="
                         f"{recipe.settings['accumulation']}): {e}") from None
