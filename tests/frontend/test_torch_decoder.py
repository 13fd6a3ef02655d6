"""A Llama-style decoder written in PyTorch op for op as `asim.models.decoder` builds it
(torch_models.DecoderMirror), imported with `from_torch`: the same graph, so the same simulated
time to the cycle, as exported and fused, on the 910 and the 910B.

(The Llama test model of torch_models.SmallLlama is the usual Hugging Face form instead: no KV
cache, separate gate and up projections, SDPA, a (batch, seq, hidden) residual stream; its
graph differs from the built-in decoder's, so only its values are checked against torch.)"""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")

from torch_models import DecoderMirror  # noqa: E402

import ascendsim as asim  # noqa: E402
from ascendsim.models.decoder import decoder_config  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")   # torch.export's own


@pytest.mark.parametrize("batch,seq,ctx", [(1, 16, 0), (2, 8, 8)])
def test_same_simulated_time_as_the_builtin_decoder(batch: int, seq: int, ctx: int) -> None:
    cfg = decoder_config(None)
    ref = asim.models.decoder(batch=batch, seq_len=seq, context_len=ctx, dtype="float16")
    module = DecoderMirror(cfg, batch, seq, ctx).half().eval()
    caches = [torch.zeros(batch, cfg.kv_heads, ctx + seq, cfg.head_dim, dtype=torch.float16)
              for _ in range(2 * cfg.layers)]
    graph = asim.from_torch(module, (torch.randint(0, cfg.vocab, (batch, seq)), *caches))
    assert Counter(n.op_type for n in graph.nodes) == Counter(n.op_type for n in ref.nodes)
    for chip in ("ascend910", "ascend910b"):
        for fusion in (False, True):
            want = asim.simulate(ref, chip=chip, fusion=fusion)
            got = asim.simulate(graph, chip=chip, fusion=fusion)
            assert got.cycles == want.cycles, (chip, fusion)
            assert [t.op_type for t in got.trace.tasks] == \
                [t.op_type for t in want.trace.tasks]
