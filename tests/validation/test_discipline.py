"""The discipline that keeps the validation figure a measure of generalisation (issue 22):
calibration and validation rows never share a source table; every row names its table."""

from __future__ import annotations

from collections import defaultdict

from ascendsim.validation.corpus import load_corpus


def test_every_row_names_its_source_table():
    missing = [r.id for r in load_corpus() if not r.source_table.strip()]
    assert not missing, f"rows without a source_table: {missing}"
    for r in load_corpus():
        repo, sep, rest = r.source_table.partition(":")
        assert sep and repo and rest, f"{r.id}: source_table is '<repo or site>:<path>#<table>'"
        # a path without revision: no commit hash or 'blob/<rev>' in it
        assert "/blob/" not in rest and "/tree/" not in rest, f"{r.id}: path has a revision"


#: tables that held both roles when the rule was written; emptied by the commit that turns
#: their rows' roles around and re-fits the chip figures fitted on them
KNOWN_SHARED = {
    "github.com/Huawei-Performance-Model/Ascend-910B:application_test/final_test/bert_128_32/"
    "aicore_intermediate_0_detail.csv",
    "github.com/Huawei-Performance-Model/Ascend-910B:application_test/final_test/"
    "resnet50_16_224_224/aicore_intermediate_0_detail.csv",
    "github.com/zzc0721/torch-performance-test-data:issues/109#详细性能数据",
    "github.com/cannmirror/pto-isa:demos/torch_jit/flash/README.md#Results (Batch = 1, Head "
    "Size = 128)",
}


def test_calibration_and_validation_rows_never_share_a_source_table():
    roles: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in load_corpus():
        roles[r.source_table][r.role].append(r.id)
    shared = {t: (v["calibration"][:3], v["validation"][:3]) for t, v in roles.items()
              if v.get("calibration") and v.get("validation") and t not in KNOWN_SHARED}
    assert not shared, f"tables holding both calibration and validation rows: {shared}"
