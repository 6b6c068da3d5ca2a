"""The line grammar (trtllm-ci.md section 3) on real lines of the bundled TensorRT-LLM data."""

from __future__ import annotations

import glob
from dataclasses import dataclass, field

import pytest
from tdb_helpers import DATA

from testdb.errors import Severity, SourceLoc
from testdb.grammar import DEFAULT_TIMEOUT_MINUTES, Entry, parse_line, split_node_id

LOC = SourceLoc("list.txt", 7)


@dataclass
class Case:
    line: str
    file: str | None  # NodeId parts of the first entry (None: not a node id)
    classes: tuple[str, ...] = ()
    function: str | None = None
    params: str | None = None
    kind: str = "nodeid"
    test: str | None = None  # the entry's text, when it differs from the node id
    marker: str | None = None
    reason: str | None = None
    timeout: int | None = None
    isolation: bool = False
    gpu: str | None = None
    comment: str | None = None
    waive: bool = False
    real: bool = True  # copied verbatim from data/trtllm (checked below)
    tests: tuple[str, ...] = field(default=())  # every entry, when a line holds several


CASES = [
    # ids with '/', '.', '-', '=' and ':' inside the parameters
    Case("accuracy/test_llm_api_pytorch.py::TestDeepSeekV3Lite::test_fp8_block_scales_4gpus"
         "[tp4-mtp_nextn=0-fp8kv=False-attention_dp=False-cuda_graph=False-"
         "overlap_scheduler=False-torch_compile=False]",
         "accuracy/test_llm_api_pytorch.py", ("TestDeepSeekV3Lite",), "test_fp8_block_scales_4gpus",
         "tp4-mtp_nextn=0-fp8kv=False-attention_dp=False-cuda_graph=False-"
         "overlap_scheduler=False-torch_compile=False"),
    Case("test_e2e.py::test_ptp_quickstart_advanced"
         "[Llama3.1-8B-NVFP4-nvfp4-quantized/Meta-Llama-3.1-8B]",
         "test_e2e.py", (), "test_ptp_quickstart_advanced",
         "Llama3.1-8B-NVFP4-nvfp4-quantized/Meta-Llama-3.1-8B"),
    Case("accuracy/test_disaggregated_serving.py::TestDeepSeekV3Lite::test_auto_dtype_with_helix"
         "[fifo_v2-cudagraph:with_padding-pp1dp2cp2-overlap_on] TIMEOUT (60)",
         "accuracy/test_disaggregated_serving.py", ("TestDeepSeekV3Lite",),
         "test_auto_dtype_with_helix", "fifo_v2-cudagraph:with_padding-pp1dp2cp2-overlap_on",
         timeout=60),
    Case("test_fmha.py::test_fmha", "test_fmha.py", (), "test_fmha", None),
    # TIMEOUT with and without the space, and TIMEOUT followed by ISOLATION
    Case("examples/visual_gen/test_visual_gen_multi_gpu.py::"
         "test_wan22_t2v_multinode_slurm_lpips_against_golden TIMEOUT (90)",
         "examples/visual_gen/test_visual_gen_multi_gpu.py", (),
         "test_wan22_t2v_multinode_slurm_lpips_against_golden", None, timeout=90),
    Case("perf/test_perf.py::test_perf[deepseek_r1_nvfp4-bench-pytorch-float4-maxbs:32-"
         "maxnt:32768-input_output_len:8192,1024-ep:1-tp:4-gpus:4] TIMEOUT(120)",
         "perf/test_perf.py", (), "test_perf", "deepseek_r1_nvfp4-bench-pytorch-float4-maxbs:32-"
         "maxnt:32768-input_output_len:8192,1024-ep:1-tp:4-gpus:4", timeout=120),
    Case("accuracy/test_llm_api_pytorch.py::TestDeepSeekV4Flash::test_mixed_breakable_cuda_graph "
         "TIMEOUT (120) ISOLATION",
         "accuracy/test_llm_api_pytorch.py", ("TestDeepSeekV4Flash",),
         "test_mixed_breakable_cuda_graph", None, timeout=120, isolation=True),
    Case("accuracy/test_llm_api_pytorch.py::TestDeepSeekV3Lite::test_nvfp4_4gpus[moe_backend="
         "TRTLLM-mtp_nextn=2-ep4-fp8kv=True-attention_dp=True-cuda_graph=True-"
         "overlap_scheduler=True-torch_compile=False] ISOLATION",
         "accuracy/test_llm_api_pytorch.py", ("TestDeepSeekV3Lite",), "test_nvfp4_4gpus",
         "moe_backend=TRTLLM-mtp_nextn=2-ep4-fp8kv=True-attention_dp=True-cuda_graph=True-"
         "overlap_scheduler=True-torch_compile=False", isolation=True),
    # comments: everything after the first '#'
    Case("test_e2e.py::test_trtllm_bench_request_rate_and_concurrency"
         "[enable_concurrency-enable_request_rate] # negative test",
         "test_e2e.py", (), "test_trtllm_bench_request_rate_and_concurrency",
         "enable_concurrency-enable_request_rate", comment="negative test"),
    Case("test_e2e.py::test_deepseek_r1_mtp_bench TIMEOUT(60) # Cover https://nvbugs/5670108",
         "test_e2e.py", (), "test_deepseek_r1_mtp_bench", None, timeout=60,
         comment="Cover https://nvbugs/5670108"),
    # unit-test selections keep -k / -m / --ignore intact
    Case('unittest/_torch/multi_gpu_modeling -k "deepseek"', None, kind="unittest",
         test='unittest/_torch/multi_gpu_modeling -k "deepseek"'),
    Case('unittest/llmapi/test_llm_multi_gpu.py -m "gpu2 and part0"', None, kind="unittest",
         test='unittest/llmapi/test_llm_multi_gpu.py -m "gpu2 and part0"'),
    Case("unittest/_torch/attention --ignore=unittest/_torch/attention/sparse/"
         "test_cute_dsl_fp8_paged_mqa_logits.py --ignore=unittest/_torch/attention/sparse/"
         "test_cute_dsl_fp4_paged_mqa_logits.py --ignore=unittest/_torch/attention/sparse/"
         "test_cute_dsl_gvr_topk_decode.py --ignore=unittest/_torch/attention/sparse/"
         "test_cute_dsl_gvr_topk_tiers.py", None, kind="unittest"),
    Case("unittest/_torch/thop/parallel TIMEOUT (90)", None, kind="unittest",
         test="unittest/_torch/thop/parallel", timeout=90),
    Case("unittest/executor/test_base_worker.py ISOLATION", None, kind="unittest",
         test="unittest/executor/test_base_worker.py", isolation=True),
    # waives: full:GPU/ prefixes, reasons, a reason holding a marker word
    Case("full:A10/unittest/kv_cache_manager_v2_tests/ SKIP (https://nvbugs/5841954)", None,
         kind="unittest", test="unittest/kv_cache_manager_v2_tests/", marker="SKIP",
         reason="https://nvbugs/5841954", gpu="A10", waive=True),
    Case("full:H100_PCIe/unittest/llmapi/test_llm_pytorch.py::"
         "test_llama_7b_multi_lora_evict_and_reload_lora_gpu_cache SKIP (https://nvbugs/5682551)",
         None, kind="unittest", marker="SKIP", reason="https://nvbugs/5682551", gpu="H100_PCIe",
         test="unittest/llmapi/test_llm_pytorch.py::"
              "test_llama_7b_multi_lora_evict_and_reload_lora_gpu_cache", waive=True),
    Case("full:B200/perf/test_perf.py::test_perf[flan_t5_base] SKIP (bert_attention_plugin does "
         "not support SM >= 100)", "perf/test_perf.py", (), "test_perf", "flan_t5_base",
         marker="SKIP", reason="bert_attention_plugin does not support SM >= 100", gpu="B200",
         waive=True),
    Case("perf/test_perf.py::test_perf[llama_v3.1_70b-cppmanager-exe-plugin_ifb-float16-"
         "input_output_len:512,200-quant:fp8-tp:4] SKIP (SKIP due to timeout of quantization)",
         "perf/test_perf.py", (), "test_perf", "llama_v3.1_70b-cppmanager-exe-plugin_ifb-float16-"
         "input_output_len:512,200-quant:fp8-tp:4", marker="SKIP",
         reason="SKIP due to timeout of quantization", waive=True),
    Case("accuracy/test_llm_api.py::TestMistralNemo12B::test_fp8 SKIP (https://nvbugs/5413197)",
         "accuracy/test_llm_api.py", ("TestMistralNemo12B",), "test_fp8", None, marker="SKIP",
         reason="https://nvbugs/5413197", waive=True),
    Case("perf/test_perf.py::test_perf[flan_t5_base-bench-float16-input_output_len:128,20] SKIP",
         "perf/test_perf.py", (), "test_perf", "flan_t5_base-bench-float16-input_output_len:128,20",
         marker="SKIP", waive=True),
    Case("perf/test_perf.py::test_perf[bart_large_cnn-plugin-float16-bs:8-input_output_len:60,20]"
         " SKIP # (https://nvidia.slack.com/archives/C059LSY62BT/p1704525727177449)",
         "perf/test_perf.py", (), "test_perf",
         "bart_large_cnn-plugin-float16-bs:8-input_output_len:60,20", marker="SKIP",
         comment="(https://nvidia.slack.com/archives/C059LSY62BT/p1704525727177449)", waive=True),
    # the waive line holding several space-separated unit-test paths
    Case("full:sm100/unittest/trt/attention/test_sage_attention.py unittest/llmapi/"
         "test_llm_download.py unittest/llmapi/test_llm_kv_cache_events.py unittest/trt/model/"
         "redrafter unittest/trt/model/test_phi.py unittest/trt/model/test_unet.py unittest/trt/"
         "python_plugin unittest/tools unittest/utils unittest/others SKIP (Disable for Blackwell)",
         None, kind="unittest", marker="SKIP", reason="Disable for Blackwell", gpu="sm100",
         waive=True, tests=("unittest/trt/attention/test_sage_attention.py",
                            "unittest/llmapi/test_llm_download.py",
                            "unittest/llmapi/test_llm_kv_cache_events.py",
                            "unittest/trt/model/redrafter", "unittest/trt/model/test_phi.py",
                            "unittest/trt/model/test_unet.py", "unittest/trt/python_plugin",
                            "unittest/tools", "unittest/utils", "unittest/others")),
    # not in the data, but allowed by the grammar: spaces, brackets, '::' and marker words
    # inside [...]; a reason holding parentheses
    Case("a/b.py::TestX::test_y[a b-c [d] e::f]", "a/b.py", ("TestX",), "test_y",
         "a b-c [d] e::f", real=False),
    Case("a.py::test_y[ISOLATION-SKIP] TIMEOUT (5)", "a.py", (), "test_y", "ISOLATION-SKIP",
         timeout=5, real=False),
    Case("a.py::A::B::test_c[x] SKIP (reason with (parens))", "a.py", ("A", "B"), "test_c", "x",
         marker="SKIP", reason="reason with (parens)", waive=True, real=False),
    Case("a.py::test_c XFAIL (flaky (see bug))", "a.py", (), "test_c", None, marker="XFAIL",
         reason="flaky (see bug)", real=False),
    Case("a.py::test_c UNSTABLE", "a.py", (), "test_c", None, marker="UNSTABLE", real=False),
    Case("full:GPU/a.py::test_c", "a.py", (), "test_c", None, gpu="GPU", real=False),
]


@pytest.fixture(scope="module")
def corpus_lines() -> set[str]:
    lines: set[str] = set()
    for path in glob.glob(str(DATA / "tests/integration/test_lists/**/*"), recursive=True):
        if path.endswith((".yml", ".txt")):
            with open(path, encoding="utf-8") as fh:
                lines.update(ln.strip().removeprefix("- ").strip() for ln in fh)
    return lines


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.line[:60])
def test_line_grammar(case: Case, corpus_lines: set[str]) -> None:
    if case.real:
        assert case.line in corpus_lines, "a 'real' case must be copied verbatim from data/trtllm"
    res = parse_line(case.line, LOC, waive=case.waive)
    assert [d for d in res.diagnostics if d.severity is Severity.ERROR] == []
    assert res.entries, "a test line gives at least one entry"
    e = res.entries[0]
    assert e.kind == case.kind
    assert e.loc == LOC
    assert e.marker == case.marker
    assert e.reason == case.reason
    assert e.timeout_minutes == case.timeout
    assert e.timeout == (case.timeout or DEFAULT_TIMEOUT_MINUTES)
    assert e.isolation is case.isolation
    assert e.gpu_prefix == case.gpu
    assert e.comment == case.comment
    if case.tests:
        assert tuple(x.test for x in res.entries) == case.tests
        assert all((x.marker, x.reason, x.gpu_prefix) == (e.marker, e.reason, e.gpu_prefix)
                   for x in res.entries)
    else:
        assert len(res.entries) == 1
    if case.file is None:
        assert e.node is None
        if case.test is not None:
            assert e.test == case.test
        elif not case.tests:
            assert e.test == case.line
    else:
        node = e.node
        assert node is not None
        assert (node.file, node.classes, node.function, node.params) == (
            case.file, case.classes, case.function, case.params)
        assert node.text == e.test
        assert e.ci_node_id == e.test


def test_unittest_selection_args_are_shell_split() -> None:
    e = parse_line('unittest/llmapi/test_llm_multi_gpu.py -m "gpu2 and part0"', LOC).entries[0]
    assert e.unittest_path == "unittest/llmapi/test_llm_multi_gpu.py"
    assert e.unittest_args == ("-m", "gpu2 and part0")
    assert e.ci_node_id == ('test_unittests.py::test_unittests_v2['
                            'unittest/llmapi/test_llm_multi_gpu.py -m "gpu2 and part0"]')
    bare = parse_line("unittest/_torch/thop/parallel", LOC).entries[0]
    assert bare.unittest_args == ()


@pytest.mark.parametrize("line", ["", "   ", "# only a comment", "  # indented comment"])
def test_blank_and_comment_lines_give_nothing(line: str) -> None:
    res = parse_line(line, LOC)
    assert res.entries == [] and res.diagnostics == []


@pytest.mark.parametrize("line", [
    "a.py::t TIMEOUT (ninety)", "a.py::t TIMEOUT", "a.py::t TIMEOUT (0)", "a.py::t TIMEOUT (-5)",
    "a.py::t TIMEOUT (1.5)",
])
def test_bad_timeout_is_an_error(line: str) -> None:
    res = parse_line(line, LOC)
    [d] = res.diagnostics
    assert d.severity is Severity.ERROR and d.rule == "bad-timeout" and d.loc == LOC


@pytest.mark.parametrize("line", ["% if gpu == 'h100':", "  %endif", "a.py::t[${param}]"])
def test_mako_lines_are_reported_not_dropped_silently(line: str) -> None:
    res = parse_line(line, LOC)
    assert res.entries == []
    [d] = res.diagnostics
    assert d.severity is Severity.ERROR and d.rule == "mako-line"


def test_skip_reason_without_parentheses_warns_and_keeps_the_reason() -> None:
    res = parse_line("a.py::t SKIP flaky on A10", LOC, waive=True)
    [d] = res.diagnostics
    assert d.severity is Severity.WARNING and d.rule == "reason-parens"
    assert res.entries[0].reason == "flaky on A10"


def test_waive_without_marker_is_read_as_skip() -> None:
    res = parse_line("a.py::t", LOC, waive=True)
    assert res.entries[0].marker == "SKIP"
    assert [d.rule for d in res.diagnostics] == ["waive-no-marker"]


def test_second_marker_is_ignored_with_a_warning() -> None:
    res = parse_line("a.py::t XFAIL (first) SKIP (second)", LOC)
    e = res.entries[0]
    assert (e.marker, e.reason) == ("XFAIL", "first")
    assert any(d.rule in ("marker-twice", "marker-trailing") for d in res.diagnostics)


def test_paths_and_prefixes_are_not_node_ids() -> None:
    for text in ("examples/test_x.py", "accuracy/test_llm_api_pytorch.py::"):
        e = parse_line(text, LOC).entries[0]
        assert e.kind == "path" and e.node is None
    res = parse_line("accuracy/test_a.py -k foo", LOC)
    assert res.entries[0].kind == "path"
    assert [d.rule for d in res.diagnostics] == ["not-node-id"]


@pytest.mark.parametrize("text, parts", [
    ("a.py::f", ("a.py", (), "f", None)),
    ("a.py::C::f[]", ("a.py", ("C",), "f", "")),
    ("d/a.py::C::D::f[p::q]", ("d/a.py", ("C", "D"), "f", "p::q")),
])
def test_split_node_id(text: str, parts: tuple[object, ...]) -> None:
    node = split_node_id(text)
    assert node is not None
    assert (node.file, node.classes, node.function, node.params) == parts
    assert node.text == text


@pytest.mark.parametrize("text", ["a.py", "a.py::", "::f", "a.py::f[x", "a.py::::f"])
def test_split_node_id_rejects(text: str) -> None:
    assert split_node_id(text) is None


def test_entries_are_frozen_records() -> None:
    e = parse_line("a.py::t", LOC).entries[0]
    assert isinstance(e, Entry)
    with pytest.raises(AttributeError):
        e.test = "b"  # type: ignore[misc]
