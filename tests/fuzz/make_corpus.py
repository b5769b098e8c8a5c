#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (corpus/<target>/) and nothing else.

Small valid inputs of every format each target reads, built with Python's
standard library only (struct, zipfile, json), so that the seeds are the
formats' own rules written independently of the readers under test.
Rerun after changing a target's input layout:

    /usr/bin/python3 tests/fuzz/make_corpus.py
"""
import io
import json
import math
import shutil
import struct
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


def npy(descr, shape, data, fortran=False, version=(1, 0)):
    """numpy's .npy: magic, version, header length, a padded dict literal, data (NEP 1)."""
    shape_text = "(" + "".join(f"{d}, " if len(shape) == 1 else f"{d}, " for d in shape).rstrip(", ")
    shape_text += ",)" if len(shape) == 1 else ")"
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape_text}, }}"
    length_format = "<H" if version[0] == 1 else "<I"
    prefix = 6 + 2 + struct.calcsize(length_format)
    padded = header + " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY" + bytes(version) + struct.pack(length_format, len(padded)) + padded.encode("latin1") + data


def floats(fmt, values):
    return struct.pack(fmt * len(values) if len(fmt) == 1 else fmt, *values)


NPY = {
    "f4_2x3": npy("<f4", (2, 3), struct.pack("<6f", 1, -2, 0.5, 0, 3e38, -1e-40)),
    "f8_fortran": npy("<f8", (2, 2), struct.pack("<4d", 1, 2, 3, 4), fortran=True),
    "f2_big": npy(">f2", (3,), bytes.fromhex("3c00 c000 7c00".replace(" ", ""))),
    "bf16_void": npy("<V2", (2,), bytes.fromhex("803f0040")),
    "u1": npy("|u1", (4,), bytes([1, 2, 3, 4])),
    "scalar": npy("<f4", (), struct.pack("<f", 7.0)),
    "v2": npy("<f4", (1,), struct.pack("<f", 1.0), version=(2, 0)),
    "v3": npy("<f8", (0, 4), b"", version=(3, 0)),
}


def zip_bytes(members, compression, zip64=False):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as z:
        for name, data in members:
            with z.open(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), "w", force_zip64=zip64) as f:
                f.write(data)
    raw = out.getvalue()
    return raw


def npz_members():
    return [("w.npy", NPY["f4_2x3"]), ("b.npy", NPY["f2_big"])]


NPZ = {
    "stored": zip_bytes(npz_members(), zipfile.ZIP_STORED),
    "deflated": zip_bytes(npz_members(), zipfile.ZIP_DEFLATED),
    "zip64": zip_bytes([("w.npy", NPY["f8_fortran"])], zipfile.ZIP_STORED, zip64=True),
    "mixed": zip_bytes([("w.npy", NPY["u1"]), ("notes.txt", b"hello")], zipfile.ZIP_DEFLATED),
}


def safetensors(tensors, metadata=None):
    """Hugging Face's layout: u64 header length, JSON header, data."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


SAFETENSORS = {
    "f32": safetensors([("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))]),
    "mixed": safetensors(
        [("a", "F16", [2], bytes.fromhex("3c00c000")), ("b", "BF16", [1, 2], bytes.fromhex("803f0040")),
         ("c", "F8_E4M3", [3], bytes([0x38, 0x7e, 0xff])), ("d", "I64", [1], struct.pack("<q", 5)),
         ("e", "F64", [], struct.pack("<d", 0.1))],
        {"format": "pt"}),
    "empty": safetensors([]),
}

JSON = [
    '{"step": 0, "loss": 2.5, "scale": 65536.0, "found_inf": false, "tags": ["a", "b"], "nested": {"x": null}}',
    '[1, -2.5e-3, 1e308, 18446744073709551615, -9223372036854775808, "\\u00e9\\ud83d\\ude00", true]',
    "[" * 60 + "]" * 60,
    '"just a string"',
]


def steps(n, offset=0.0, **extra):
    lines = []
    for s in range(n):
        record = {"step": s, "loss": 2.0 / (s + 1) + offset, "scale": 65536.0, "skipped": s == 2,
                  "underflow_rate": 0.001, "lost_update_rate": 0.01}
        record.update(extra)
        lines.append(json.dumps(record))
    return "\n".join(lines) + "\n"


def tensors(n):
    lines = []
    for s in range(n):
        for layer in ("fc1", "fc2"):
            lines.append(json.dumps({"step": s, "layer": layer, "tensor": "weight", "pass": "backward",
                                     "role": "weight_grad", "underflow_to_zero_rate": 0.01,
                                     "overflow_rate": 0.0, "headroom_log2": 3.5 if s else None, "norm": 1.5}))
    return "\n".join(lines) + "\n"


def config(seed):
    return {"model": "mlp", "data": "synthetic-digits", "recipe": "o2", "scaler": "torch", "backend": "emu",
            "steps": 4, "batch_size": 32, "seed": seed, "optimizer": "sgd"}


def summary(seed, accuracy=0.9):
    return json.dumps({"config": config(seed), "steps": 4, "skipped_steps": 0, "aborted": False,
                       "final_loss": 0.25,
                       "evaluation": {"test_accuracy": accuracy, "test_loss": 0.3, "test_size": 1000}})


NUL = "\0"

RUN_COMPARISON = {
    "full": NUL.join([steps(4), steps(4, 0.01), tensors(3), tensors(4), summary(1), summary(2)]),
    "steps_only": NUL.join([steps(3), steps(5, loss=None)]),
    "gan": NUL.join([steps(2, loss_g=1.0, loss_d=0.5), steps(2, loss_g=1.1, loss_d="nan")]),
}

ENSEMBLE = {
    "ensemble": NUL.join([json.dumps({"seeds": [1, 2], "config": config(1)}), summary(1), steps(4), summary(2, 0.91),
                          steps(4, 0.01)]) + NUL + "\x10",
    "run": NUL.join(["", summary(1), steps(4)]) + NUL + "\x33",
}

STEP_JSON = {
    "full": NUL.join(['{"step": 1, "scale": 65536.0, "found_inf": false, "skipped": false, "loss": 2.3}',
                      '{"step": 2, "scale": 32768.0, "found_inf": true, "skipped": true, "loss": null}',
                      "step-000010/grads.safetensors:fc1.weight"]),
    "minimal": "{}",
}


def histogram_line(step, role, first, counts):
    return json.dumps({"step": step, "layer": "fc1", "tensor": "weight_grad", "role": role, "zeros": 3, "nans": 0,
                       "infinities": 1, "below_range": 0, "above_range": 0, "first_exponent": first,
                       "counts": counts,
                       "thresholds": {"min_subnormal": 5.960464477539063e-08, "min_normal": 6.103515625e-05,
                                      "max_finite": 65504.0, "min_subnormal_exponent": -24,
                                      "min_normal_exponent": -14, "max_finite_exponent": 15}})


HISTOGRAMS = {
    "lines": "\n".join([histogram_line(0, "weight_grad", -20, [1, 0, 4, 2]),
                        histogram_line(0, "activation_grad", None, []),
                        histogram_line(1, "weight", 3, [5])]) + "\n",
}

DEEPSPEED = (
    "[2025-01-01 00:00:00,000] [INFO] [logging.py:128:log_dist] [Rank 0] step=0, skipped=0, lr=[0.001]\n"
    "[2025-01-01 00:00:01,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 65536, reducing to 32768\n"
    "[2025-01-01 00:00:01,000] [INFO] [logging.py:128:log_dist] [Rank 0] step=1, skipped=1, lr=[0.001]\n"
    "[2025-01-01 00:00:02,000] [INFO] [logging.py:128:log_dist] [Rank 0] step=2, skipped=1, lr=[0.001]\n")


def megatron_line(iteration, scale, skipped):
    return (f" [2025-01-01 00:00:00.000000] iteration {iteration:8d}/{100:8d} | consumed samples: {16 * iteration:12d} "
            f"| elapsed time per iteration (ms): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | "
            f"lm loss: 1.000000E+01 | loss scale: {scale} | grad norm: 1.000 | number of skipped iterations: "
            f"{skipped:3d} | number of nan iterations:   0 |\n")


# First byte: format (mod 6: auto, lines, csv, jsonl, deepspeed, megatron), strategy (div 6).
TRACE = {
    "lines": b"\x01" + b"# found_inf per step\n0\n0\n1\n0\ninf\n",
    "amax": b"\x07" + b"0.5\n12.25\nnan\n3\n",
    "csv": b"\x02" + b"step,found_inf,scale,amax,optimizer\n0,0,65536,1.5,adam\n1,true,65536,,adam\n2,0,32768,2,adam\n",
    "jsonl": b"\x03" + (steps(3, found_inf=False) + '{"step": 3, "found_inf": 1, "scale": 65536.0}\n').encode(),
    "deepspeed": b"\x04" + DEEPSPEED.encode(),
    "megatron": b"\x05" + (megatron_line(1, "4294967296.0", 1) + megatron_line(2, "2147483648.0", 1)
                           + megatron_line(3, "2147483648.0", 0)).encode(),
    "auto_deepspeed": b"\x18" + DEEPSPEED.encode(),
}

# Last byte: bit 0 baseline .json, bit 1 candidate .json, then options.
VALUE_FILE = {
    "csv": "seed,value\n1,95.2\n2,95.0\n3,nan\n" + NUL + "seed,value\n1,95.1\n2,94.8\n3,95.3\n" + NUL + "\x10",
    "stderr": '# a comment\r\nseed,value,stderr,replicates\r\n1,"26.5",0.3,50\r\n' + NUL
              + "value,seed,replicates,stderr\n27.1,1,50,0.4\n" + NUL + "\x04",
    "json": json.dumps([{"seed": 1, "value": 95.2}, {"seed": 2, "value": None}]).replace("null", "NaN") + NUL
            + json.dumps([{"seed": 1, "value": 95.0, "stderr": 0.1, "replicates": 10},
                          {"seed": 2, "value": 94.0}]) + NUL + "\x03",
    "curve": "seed,step,value\n1,0,2.0\n1,1,1.0\n2,0,2.1\n2,1,0.9\n" + NUL
             + "step,seed,value\n0,1,2.05\n1,1,1.02\n0,2,inf\n1,2,-Infinity\n" + NUL + "\x08",
}

TESTFLOAT = {
    "add": "add fp16 \x00\n87FF E850 E850 01\n3C00 3C00 4000 00\n0000 8000\n",
    "fma": "fma bf16 \x10\n3F80 3F80 3F80 4000 00\n7F80 0000 3F80 7FC0 10\n",
    "convert": "from-f32 fp8-e4m3 \x05\n3F800000 38 00\n7F800000\n",
    "to": "to-f64 e5m7 \x23\n1234\n",
    "sqrt": "sqrt tf32 \x06\n3F800\n",
    "from_format": "from-bf16 fp8-e5m2:saturate \x00\n3F80\n",
}

EVAL_DOT = {
    "volta": "volta fp16 fp16 - 0\n" + " ".join(["3C00"] * 8) + " 00000000\n",
    "hopper": "hopper fp8-e4m3 fp8-e5m2 - 0\n" + " ".join(["38"] * 32 + ["3C"] * 32) + " 3F800000 42000000\n\x01",
    "custom": "custom fp16 fp16 fp32 4 4 24 1 fp32-rz\n" + " ".join(["3C00"] * 8) + " 3F800000\n\x02",
}

CLI_STDIN = {
    "round": "round --format fp16 --rounding stochastic --seed 3\n1.5\n0x3f800000\n-inf\nnan\n6.1e-5\n",
    "eval": "eval --op add --format fp16 --check --json\n87FF E850 E850 01\n3C00 3C00 4000 00\n",
    "eval_dot": "eval --op dot --arch ampere --a-format bf16 --b-format bf16\n" + " ".join(["3F80"] * 16) + " 3F800000\n",
}

CLI_VALUES = {
    "format": b"\x00fp8-e4m3:saturate",
    "format_custom": b"\x00e5m7:ftz",
    "rounding": b"\x01stochastic",
    "scales": b"\x021,2^8,2^-16,65536",
    "recipe": b"\x03o2",
    "scaler": b"\x04torch.growth_interval=2000",
    "scheme": b"\x05mxfp8-e4m3",
    "key_values": b"\x06m=4,eps=1e-3,input=bf16",
    "policy": b"\x07input=fp16,accumulate=hopper,promotion=128,output=fp32",
    "preset": b"\x08sm90.wgmma.k32.f32.e4m3.e5m2",
    "seeds": b"\x091-3,7",
    "backend": b"\x0aemu",
    "trace_format": b"\x0bmegatron",
    "metric": b"\x0cfid",
    "operation": b"\x0dfrom-bf16 fp16",
    "architecture": b"\x0eampere",
}


def quantize_seeds():
    # Byte 0: file type (bits 0-1: npy, npz, safetensors), a name (bit 2), the scheme (the rest); byte 1: the axis.
    matrix = struct.pack("<64f", *[math.sin(i) * 2 ** (i % 9 - 4) for i in range(64)])
    return {
        "npy": bytes([0 | (0 << 3), 0xFF]) + npy("<f4", (2, 32), matrix),
        "npz_named": bytes([1 | 4 | (1 << 3), 0x01]) + zip_bytes([("w.npy", npy("<f4", (32, 2), matrix))],
                                                                  zipfile.ZIP_DEFLATED),
        "safetensors": bytes([2 | (2 << 3), 0x00]) + safetensors([("w", "F32", [16, 4], matrix)]),
        "safetensors_f16": bytes([2 | 4 | (3 << 3), 0xFF]) + safetensors(
            [("w", "F16", [2, 16], bytes.fromhex("3c00" * 32))]),
    }


def data_file_seeds():
    """Byte 0: 0 a .Z stream, 1 verse lines, 2 digits.csv.gz, 3 the KJV file, 4 MNIST's 0.json."""
    import gzip
    seeds = {
        "verses": b"\x01The King James Bible\nGe1:1 In the beginning God created the heaven and the earth.\n"
                  b"1Jo2:3 And hereby we do know that we know him.\nSSol1:1 The song of songs.\n",
        "mnist": b"\x04" + json.dumps({"data": [round(i / 783, 3) for i in range(784)] * 2}).encode(),
    }
    digits = Path("/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz")
    if digits.exists():
        lines = gzip.decompress(digits.read_bytes()).split(b"\n")[:20]
        seeds["digits"] = b"\x02" + gzip.compress(b"\n".join(lines) + b"\n", mtime=0)
    bible = Path("/usr/lib/bible.data")
    if bible.exists():
        raw = bible.read_bytes()
        first, second = struct.unpack(">2I", raw[92:100])
        window0 = raw[first:second]
        seeds["lzw_window"] = b"\x00" + raw[first - 3:first] + window0[:2048]
        # The file's layout with its first window only: header, one window, the table, the LZW header.
        head = raw[:84] + struct.pack(">2I", 65536, 1)
        start = len(head) + 8 + 3
        seeds["kjv_file"] = b"\x03" + head + struct.pack(">2I", start, start + len(window0)) + raw[first - 3:first] + window0
    return seeds


# report_page: a report's Markdown, NUL, its figure, NUL, a link target (the target's first comment).
WRITERS_FIGURE = ('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40" viewBox="0 0 120 40">'
                  '<title>a line chart</title><g font-family="sans-serif"><path d="M 10 30 L 50 10 L 110 20" '
                  'fill="none" stroke="#1f77b4" stroke-width="1.5"/><text x="60" y="38" font-size="9" '
                  'text-anchor="middle">step</text></g></svg>')
REPORT_PAGE = {
    "figure_and_links": "# Report\n\nText [a](other.md), [w](https://example.org/x), [bad](javascript:alert(1)).\n\n"
                        "![f](figure.svg)\n\0" + WRITERS_FIGURE + "\0https://example.org/a",
    "hostile": "# Hostile\n\n![f](figure.svg)\n\0<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\">"
               "<script>alert(2)</script><foreignObject><iframe src=\"x\"/></foreignObject></svg>"
               "<script>alert(3)</script>\0JaVaScRiPt:alert(1)",
    "gradient_use": "# G\n\n![g](figure.svg)\n\0<svg xmlns=\"http://www.w3.org/2000/svg\"><defs><linearGradient "
                    "id=\"l\"><stop offset=\"0\" stop-color=\"red\"/></linearGradient><rect id=\"r\" width=\"4\" "
                    "height=\"4\" fill=\"url(#l)\"/></defs><use href=\"#r\" x=\"5\"/></svg>\0#section",
}

# sweep_plan: the plan's JSON.
SWEEP_PLAN = {
    "documented": json.dumps({"train": {"model": "mlp", "steps": 4},
                              "axes": {"recipe": ["fp32", "o2"], "scaler": ["torch"], "seed": [1, 2, 3]},
                              "overrides": [{"match": {"recipe": "o2"}, "train": {"scaler-opt": ["init=1024"]}}],
                              "gate": {"baseline": {"recipe": "fp32"}, "metric": "accuracy", "margin": 1}}),
    "escape": json.dumps({"axes": {"../../victim2/x": [False], "/abs": ["../z"], "seed": "1-3"}}),
    "many_runs": json.dumps({"axes": dict({k: list(range(1, 11)) for k in "abcdef"}, seed=[1])}),
}

# scaler_state: the saved state's JSON, NUL, one byte per step (bit 0: found_inf).
SCALER_STATE = {
    "torch": json.dumps({"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
                         "_growth_tracker": 2}) + "\0" + "\0\0\1\0\0\0\0\1\1",
    "megatron": json.dumps({"scale": [4294967296.0], "growth_tracker": 999, "hysteresis_tracker": 1}) + "\0\1\1\1\0",
    "deepspeed": json.dumps({"cur_scale": 65536, "cur_iter": 10, "last_overflow_iter": 3, "cur_hysteresis": 2})
                 + "\0\1\0\1\1\1",
    "int_max": json.dumps({"_growth_tracker": 2147483647}) + "\0\0",
}


def fid_statistics_seeds():
    """.npz files of mu [d] and sigma [d, d] (float64 and float32), as pytorch-fid and clean-fid save them."""
    def stats(mu, sigma, fmt):
        d, descr = len(mu), "<f8" if fmt == "d" else "<f4"
        flat = [v for row in sigma for v in row]
        return [("mu.npy", npy(descr, (d,), struct.pack(f"<{d}{fmt}", *mu))),
                ("sigma.npy", npy(descr, (d, d), struct.pack(f"<{d * d}{fmt}", *flat)))]
    covariance = [[2.0, 0.5, 0.0], [0.5, 1.0, 0.25], [0.0, 0.25, 3.0]]
    return {
        "float64": zip_bytes(stats([0.5, -1.0, 2.0], covariance, "d"), zipfile.ZIP_STORED),
        "float32_deflated": zip_bytes(stats([0.0, 0.0, 1.0], covariance, "f"), zipfile.ZIP_DEFLATED),
        "singular": zip_bytes(stats([0.0, 0.0], [[1.0, 1.0], [1.0, 1.0]], "d"), zipfile.ZIP_STORED),
        "indefinite": zip_bytes(stats([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]], "d"), zipfile.ZIP_STORED),
    }


def write(target, seeds):
    folder = CORPUS / target
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    items = seeds.items() if isinstance(seeds, dict) else enumerate(seeds)
    for name, content in items:
        (folder / f"{name}").write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


def array_layout(kind, size_code, swapped, dims, buffer):
    """fuzz_array_intake's input: kind, item size code, byte order, dimensions (length, signed byte stride)."""
    head = bytes([kind, size_code, swapped, len(dims)])
    for n, stride in dims:
        head += bytes([n, stride & 0xFF])
    return head + buffer


F4 = struct.pack("<6f", 1.5, -2.25, 100, 3e-5, 0.0, -0.0)
ARRAY_INTAKE = {
    "f4_contiguous": array_layout(0, 2, 0, [(2, 12), (3, 4)], F4),
    "f4_big_endian": array_layout(0, 2, 1, [(6, 4)], struct.pack(">6f", 1.5, -2.25, 100, 3e-5, 1e38, -1e-40)),
    "f4_reversed": array_layout(0, 2, 0, [(6, -4)], F4),
    "f4_broadcast": array_layout(0, 2, 0, [(7, 0), (2, 4)], F4),
    "f2_strided": array_layout(0, 1, 0, [(3, 4)], bytes.fromhex("003c000000c00000007c0000")),
    "f2_big": array_layout(0, 1, 1, [(3, 2)], bytes.fromhex("3c00c0007c00")),
    "f8_fortran": array_layout(0, 3, 0, [(2, 8), (2, 16)], struct.pack("<4d", 1, 2, 3, 1e300)),
    "bf16_bits": array_layout(1, 1, 0, [(4, 2)], bytes.fromhex("803f0040807fc07f")),
    "e4m3_codes": array_layout(2, 0, 0, [(8, 1)], bytes([0x00, 0x01, 0x38, 0x7E, 0x7F, 0x80, 0xFE, 0xFF])),
    "e5m2_codes": array_layout(3, 0, 0, [(2, 1), (4, 2)], bytes(range(0x78, 0x80)) + bytes([0xFC, 0xFD, 0xFE, 0xFF])),
    "scalar": array_layout(0, 2, 0, [], struct.pack("<f", 7.0)),
    "empty": array_layout(0, 2, 0, [(0, 4), (5, 4)], b""),
}


def main():
    write("npy", NPY)
    write("npz", NPZ)
    write("zip", NPZ)
    write("safetensors", SAFETENSORS)
    write("json_text", JSON)
    write("run_comparison", RUN_COMPARISON)
    write("ensemble", ENSEMBLE)
    write("step_json", STEP_JSON)
    write("histograms", HISTOGRAMS)
    write("trace", TRACE)
    write("value_file", VALUE_FILE)
    write("testfloat", TESTFLOAT)
    write("eval_dot", EVAL_DOT)
    write("cli_stdin", CLI_STDIN)
    write("cli_values", CLI_VALUES)
    write("quantize", quantize_seeds())
    write("data_files", data_file_seeds())
    write("report_page", REPORT_PAGE)
    write("sweep_plan", SWEEP_PLAN)
    write("scaler_state", SCALER_STATE)
    write("fid_statistics", fid_statistics_seeds())
    write("array_intake", ARRAY_INTAKE)


if __name__ == "__main__":
    main()
