"""What a newcomer meets: figures and first lines name model, batch, chip and fusion; an op type
keeps its colour across panels; ops outside the legend are grey; the lane meaning is on the
figure; `ascendsim models` shows default sizes; a closed pipe ends quietly."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from matplotlib.colors import to_rgba

import ascendsim as asim
from ascendsim.report.timeline import LANE_KEY, OTHER, op_colors


def _legend_labels(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().texts]


def test_titles_name_model_batch_chip_and_fusion(tmp_path) -> None:
    res = asim.simulate(asim.models.resnet50(batch=2))
    assert res.label == "ResNet50, batch 2 on ascend910 (optimised and fused)"
    fig = res.plot_timeline(str(tmp_path / "t.png"))
    assert fig.axes[0].get_title().startswith(res.label)
    assert "MTE2 GM->L1/UB" in fig._supxlabel.get_text().replace("\n", " ")
    cmp = asim.compare(asim.models.conv_bn_relu(batch=2, cin=16, cout=16, h=8, w=8))
    assert cmp.table().title.startswith("ConvBnRelu, batch 2 on ascend910:")
    assert cmp.plot()._suptitle.get_text().startswith("ConvBnRelu, batch 2 on ascend910")


def test_op_type_has_one_colour_in_both_panels_and_the_rest_is_grey() -> None:
    cmp = asim.compare(asim.models.bert_encoder_layer(batch=1, seq_len=64, hidden=64, heads=2))
    a, b = cmp.unfused.trace, cmp.fused.trace
    colors = op_colors(a, b)
    assert colors.by == "type"
    # a type present in both traces is keyed the same way, so it gets one colour
    both = {t.op_type for t in a.tasks} & {t.op_type for t in b.tasks}
    assert both
    for ty in both:
        ka = {colors.key_of(t, 0) for t in a.tasks if t.op_type == ty}
        kb = {colors.key_of(t, 1) for t in b.tasks if t.op_type == ty}
        assert ka == kb == {ty}
    # only the longest types get distinct colours; anything else is grey, never a reused colour
    distinct = [c for c in colors.colors.values()]
    assert len({tuple(to_rgba(c)) for c in distinct}) == len(distinct)
    assert colors.color("NoSuchType") == OTHER
    fig = cmp.plot()
    labels = _legend_labels(fig)
    assert "as given" in labels and "optimised and fused" in labels
    assert set(labels) >= {"MatMul"}


def test_zoomed_view_colours_by_op_instance() -> None:
    res = asim.simulate(asim.models.conv_bn_relu(batch=1, cin=16, cout=16, h=8, w=8),
                        fusion=False)
    op = res.trace.tasks[0].op_name
    fig = res.plot_timeline(op=op)
    assert op in _legend_labels(fig)
    assert fig.axes[0].get_legend().get_title().get_text() == "op"


def test_lane_key_explains_every_core_pipe() -> None:
    for pipe in ("S scalar", "V vector", "M cube", "MTE1", "MTE2", "MTE3", "FIX"):
        assert pipe in LANE_KEY


def test_models_list_shows_default_sizes(capsys) -> None:
    from ascendsim.cli import main

    assert main(["models"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.startswith("resnet50_training_step"))
    assert "batch=256" in line and "image=224" in line


def test_closed_pipe_ends_quietly() -> None:
    code = ("import sys\n"
            "from ascendsim.cli import main\n"
            "sys.exit(main(['models']))\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()                  # like `| head -1`
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and "Broken pipe" not in err and "Traceback" not in err


def test_scalar_free_outputs_close_scale_aware() -> None:
    from ascendsim.report.compare import outputs_close

    y = np.linspace(-4, 4, 101).astype(np.float16)
    z = (y.astype(np.float32) + np.float32(0.0039)).astype(np.float16)   # ~1 ulp at |y| = 4
    assert outputs_close({"y": y}, {"y": z})[0]
    assert not outputs_close({"y": y}, {"y": (y.astype(np.float32) + 0.1).astype(np.float16)})[0]
