"""Generate the malformed-input corpus in this folder (issue 14): ONNX models, chip files and
fusion-switch files that ascendsim must reject with an `AscendSimError` subclass whose
message names the offending item.

    python tests/data/bad/make_bad.py [OUT_DIR]     # default: this folder

Each file is listed in `manifest.json` with what it feeds (`onnx`: `ascendsim run FILE`,
`chip`: `--chip FILE`, `switch`: `--fusion-switch FILE`), the exception class expected and
the text the message must contain (the offending node, value, key or file). Output is
deterministic (no randomness; protobuf serialised deterministically), so a regenerated corpus
equals the committed one (tests/test_bad_inputs.py checks it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=17, name="bad") -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="make_bad")
    model.ir_version = 8
    return model


def _vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def _relu_model() -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                  [_vi("x", [2, 3])], [_vi("y", [2, 3])])


def _attr(name, value, kind):
    """An AttributeProto of an explicit type (make_node infers types from Python values)."""
    a = onnx.AttributeProto()
    a.name, a.type = name, kind
    if kind == onnx.AttributeProto.FLOAT:
        a.f = value
    elif kind == onnx.AttributeProto.STRING:
        a.s = value.encode()
    elif kind == onnx.AttributeProto.INTS:
        a.ints.extend(value)
    return a


def onnx_cases() -> dict[str, tuple[bytes, str, str]]:
    """file name -> (bytes, exception class, text the message must contain)."""
    cases: dict[str, tuple[bytes, str, str]] = {}

    def add(name, model, error, names):
        data = model if isinstance(model, bytes) else model.SerializeToString(deterministic=True)
        cases[name] = (data, error, names)

    good = _relu_model().SerializeToString(deterministic=True)
    add("truncated.onnx", good[: len(good) // 2], "GraphError", "truncated.onnx")
    add("corrupted.onnx", bytes(b ^ 0x5A for b in good), "GraphError", "corrupted.onnx")
    add("not_a_model.onnx", b"this is a text file, not a protobuf\n", "GraphError",
        "not_a_model.onnx")
    add("empty.onnx", b"", "GraphError", "empty.onnx")
    add("cycle.onnx", _model(
        [helper.make_node("Relu", ["b"], ["a"], name="first"),
         helper.make_node("Relu", ["a"], ["b"], name="second")],
        [_vi("x", [2])], [_vi("b", [2])]), "GraphError", "first")
    add("duplicate_node_names.onnx", _model(
        [helper.make_node("Relu", ["x"], ["a"], name="twin"),
         helper.make_node("Relu", ["a"], ["y"], name="twin")],
        [_vi("x", [2])], [_vi("y", [2])]), "GraphError", "twin")
    add("duplicate_value_names.onnx", _model(
        [helper.make_node("Relu", ["x"], ["y"], name="one"),
         helper.make_node("Neg", ["x"], ["y"], name="two")],
        [_vi("x", [2])], [_vi("y", [2])]), "GraphError", "'y'")
    add("missing_initializer.onnx", _model(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        [_vi("x", [2, 3])], [_vi("y", [2, 4])]), "GraphError", "'W'")
    softmax = helper.make_node("Softmax", ["x"], ["y"], name="soft")
    softmax.attribute.append(_attr("axis", 1.5, onnx.AttributeProto.FLOAT))
    add("float_axis_attribute.onnx", _model([softmax], [_vi("x", [2, 3])],
                                            [_vi("y", [2, 3])]), "GraphError", "axis")
    flatten = helper.make_node("Flatten", ["x"], ["y"], name="flat")
    flatten.attribute.append(_attr("axis", "one", onnx.AttributeProto.STRING))
    add("string_axis_attribute.onnx", _model([flatten], [_vi("x", [2, 3])],
                                             [_vi("y", [2, 3])]), "GraphError", "axis")
    shape = numpy_helper.from_array(np.array([4, 2], np.int64), "target")
    add("reshape_element_count.onnx", _model(
        [helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape")],
        [_vi("x", [2, 3])], [_vi("y", [4, 2])], [shape]), "GraphError", "reshape")
    add("negative_dim.onnx", _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [_vi("x", [2, -3])], [_vi("y", [2, 3])]), "GraphError", "'x'")
    add("huge_dims.onnx", _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [_vi("x", [2**40, 2**40], TensorProto.FLOAT16)],
        [_vi("y", [2**40, 2**40], TensorProto.FLOAT16)]), "GraphError", "'x'")
    add("unsupported_dtype.onnx", _model(
        [helper.make_node("Identity", ["x"], ["y"], name="id")],
        [_vi("x", [2], TensorProto.COMPLEX64)], [_vi("y", [2], TensorProto.COMPLEX64)]),
        "GraphError", "'x'")
    add("string_dtype.onnx", _model(
        [helper.make_node("Identity", ["x"], ["y"], name="id")],
        [_vi("x", [2], TensorProto.STRING)], [_vi("y", [2], TensorProto.STRING)]),
        "GraphError", "'x'")
    short = onnx.TensorProto()
    short.name, short.data_type = "W", F
    short.dims.extend([3, 4])
    short.raw_data = np.zeros(5, np.float32).tobytes()          # 20 bytes for 48
    add("initializer_raw_data_short.onnx", _model(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        [_vi("x", [2, 3])], [_vi("y", [2, 4])], [short]), "GraphError", "'W'")
    value = onnx.TensorProto()
    value.name, value.data_type = "v", F
    value.dims.extend([4])
    value.raw_data = b"\x00" * 6                                   # 6 bytes for 16
    const = helper.make_node("Constant", [], ["c"], name="const")
    const.attribute.append(helper.make_attribute("value", value))
    add("constant_raw_data_short.onnx", _model(
        [const, helper.make_node("Add", ["x", "c"], ["y"], name="add")],
        [_vi("x", [4])], [_vi("y", [4])]), "GraphError", "const")
    add("empty_output_name.onnx", _model(
        [helper.make_node("Relu", ["x"], [""], name="silent"),
         helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [_vi("x", [2])], [_vi("y", [2])]), "GraphError", "silent")
    add("no_outputs.onnx", _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], [_vi("x", [2])], []),
        "GraphError", "no outputs")
    add("opset_zero.onnx", _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [_vi("x", [2])], [_vi("y", [2])], opset=0), "GraphError", "opset 0")
    idx = numpy_helper.from_array(np.array([0, 7], np.int64), "idx")
    add("gather_index_out_of_range.onnx", _model(
        [helper.make_node("Gather", ["x", "idx"], ["y"], name="gather", axis=0)],
        [_vi("x", [5, 3])], [_vi("y", [2, 3])], [idx]), "GraphError", "idx")
    add("unknown_op.onnx", _model(
        [helper.make_node("FrobnicateV9", ["x"], ["y"], name="frob")],
        [_vi("x", [2])], [_vi("y", [2])]), "UnsupportedOpError", "FrobnicateV9")
    add("output_not_produced.onnx", _model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [_vi("x", [2])], [_vi("z", [2])]), "GraphError", "'z'")
    return cases


_CHIP = 'base = "ascend910"\n'


def chip_cases() -> dict[str, tuple[bytes, str, str]]:
    # a file without a base must give every figure (independent of the built-in files)
    partial = 'name = "partial"\ndescription = "no base"\nai_cores = 32\nub_bytes = 262144\n'
    cases = {
        "chip_missing_field.toml": (partial, "ConfigError", "missing key 'arch'"),
        "chip_negative_ub.toml": (_CHIP + "ub_bytes = -262144\n", "ConfigError", "ub_bytes"),
        "chip_zero_hbm.toml": (_CHIP + "hbm_bytes = 0\n", "ConfigError", "hbm_bytes"),
        "chip_absurd_ub.toml": (_CHIP + "ub_bytes = 1e40\n", "ConfigError", "ub_bytes"),
        "chip_fractional_cores.toml": (_CHIP + "ai_cores = 2.5\n", "ConfigError", "ai_cores"),
        "chip_string_clock.toml": (_CHIP + 'clock_hz = "fast"\n', "ConfigError", "clock_hz"),
        "chip_nan_clock.toml": (_CHIP + "clock_hz = nan\n", "ConfigError", "clock_hz"),
        "chip_inf_bandwidth.toml": (_CHIP + "hbm_bandwidth_bytes_per_s = inf\n", "ConfigError",
                                    "hbm_bandwidth_bytes_per_s"),
        "chip_negative_path.toml": (_CHIP + "[path_bytes_per_cycle]\ngm_ub = -64\n",
                                    "ConfigError", "gm_ub"),
        "chip_unknown_key.toml": (_CHIP + "ub_size = 262144\n", "ConfigError", "ub_size"),
        "chip_not_toml.toml": (_CHIP + "ub_bytes = = 3\n", "ConfigError", "chip_not_toml.toml"),
        "chip_duplicate_key.toml": (_CHIP + "ub_bytes = 262144\nub_bytes = 131072\n",
                                    "ConfigError", "chip_duplicate_key.toml"),
        "chip_bad_base.toml": ('base = "ascend9999"\n', "ConfigError", "ascend9999"),
    }
    out = {k: (v.encode("utf-8"), e, n) for k, (v, e, n) in cases.items()}
    out["chip_not_utf8.toml"] = (_CHIP.encode() + b"description = \"\xff\xfe\"\n",
                                 "ConfigError", "chip_not_utf8.toml")
    return out


def switch_cases() -> dict[str, tuple[bytes, str, str]]:
    def js(doc) -> bytes:
        return json.dumps(doc, indent=1).encode()

    cases = {
        "switch_number_value.json": (js({"Switch": {"GraphFusion": {"ALL": 1}}}),
                                     "ConfigError", "Switch.GraphFusion.ALL"),
        "switch_list_group.json": (js({"Switch": {"GraphFusion": ["ALL", "off"]}}),
                                   "ConfigError", "Switch.GraphFusion"),
        "switch_unknown_pass.json": (js({"Switch": {"UBFusion": {"NoSuchPass": "off"}}}),
                                     "ConfigError", "NoSuchPass"),
        "switch_unknown_group.json": (js({"Switch": {"MagicFusion": {"ALL": "off"}}}),
                                      "ConfigError", "MagicFusion"),
        "switch_not_object.json": (b"[1, 2, 3]\n", "ConfigError", "switch_not_object.json"),
        "switch_invalid_json.json": (b'{"Switch": {"GraphFusion": {"ALL": "off",}}}\n',
                                     "ConfigError", "switch_invalid_json.json"),
        "switch_duplicate_key.json": (
            b'{"Switch": {"GraphFusion": {"PowToMulFusionPass": "off",'
            b' "PowToMulFusionPass": "on"}}}\n', "ConfigError", "PowToMulFusionPass"),
        "switch_not_utf8.cfg": (b"PowToMulFusionPass:off\n\xff\xfeGeluFusionPass:off\n",
                                "ConfigError", "switch_not_utf8.cfg"),
        "switch_all_in_lines.cfg": (b"ALL:off\n", "ConfigError", "'ALL'"),
        "switch_duplicate_line.cfg": (b"PowToMulFusionPass:off\nPowToMulFusionPass:on\n",
                                      "ConfigError", "PowToMulFusionPass"),
        "switch_no_colon.cfg": (b"PowToMulFusionPass off\n", "ConfigError", "line 1"),
        "switch_bad_value.cfg": (b"PowToMulFusionPass:maybe\n", "ConfigError",
                                 "PowToMulFusionPass"),
    }
    return cases


def generate(out: Path) -> dict[str, dict[str, str]]:
    """Write every case into `out` and `manifest.json`; return the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict[str, str]] = {}
    for kind, cases in (("onnx", onnx_cases()), ("chip", chip_cases()),
                        ("switch", switch_cases())):
        for name, (data, error, names) in cases.items():
            (out / name).write_bytes(data)
            manifest[name] = {"kind": kind, "error": error, "names": names}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n",
                                       encoding="utf-8")
    return manifest


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    print(f"{len(generate(target))} malformed inputs written to {target}")
